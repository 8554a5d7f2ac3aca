//! `daicho plan` (D4, D5): validated, saved in one transaction, replaced only when asked.

use serde_json::Value;

use crate::{Ledger, TaskJson};

const PARSER_PLAN: &str = r#"{"tasks": [
  {"id": "t1", "title": "write the grammar"},
  {"id": "t2", "title": "write the parser", "deps": ["t1"]},
  {"id": "t3", "title": "collect test inputs"},
  {"id": "t4", "title": "test the parser", "deps": ["t2", "t3"]},
  {"id": "t5", "title": "release notes", "deps": ["t4"], "not_before": "2099-01-01T09:00:00Z"}
]}"#;

fn plan(ledger: &Ledger, file: &str, extra: &[&str]) -> crate::Run {
    let mut args =
        vec!["plan", "--json", "--project", "parser", "--goal", "ship the parser feature", "--from", file];
    args.extend_from_slice(extra);
    ledger.run(&args)
}

/// D4, D5: a plan is saved with its deps; `not_before` holds a task back; the ready set starts
/// with the roots.
#[test]
fn d4_a_plan_is_saved_with_its_deps_in_one_go() {
    let ledger = Ledger::new();
    let file = ledger.file("plan.json", PARSER_PLAN);
    let saved: Value = plan(&ledger, &file, &[]).ok().json();
    assert_eq!(saved["source"], "plan:ship the parser feature");
    assert_eq!(saved["added"].as_array().unwrap().len(), 5);
    let tasks = ledger.tasks();
    let id = |title: &str| tasks.iter().find(|t| t.title == title).unwrap().id.clone();
    let test = tasks.iter().find(|t| t.title == "test the parser").unwrap();
    assert_eq!(test.deps, [id("write the parser"), id("collect test inputs")]);
    assert!(tasks.iter().all(|t| t.project == "parser"));
    let notes = tasks.iter().find(|t| t.title == "release notes").unwrap();
    assert_eq!(notes.not_before.as_deref(), Some("2099-01-01T09:00:00Z"));
    let ready: Value = ledger.run(&["ready", "--json"]).ok().json();
    let titles: Vec<&str> =
        ready["tasks"].as_array().unwrap().iter().map(|t| t["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["write the grammar", "collect test inputs"]);
}

/// D4: a cycle is refused and named; unknown deps and repeated ids are refused with the file
/// and line; nothing is saved.
#[test]
fn d4_a_bad_plan_is_refused_and_nothing_is_saved() {
    let ledger = Ledger::new();
    let cyclic = ledger.file(
        "cyclic.json",
        r#"[{"id": "a", "title": "A", "deps": ["c"]}, {"id": "b", "title": "B", "deps": ["a"]}, {"id": "c", "title": "C", "deps": ["b"]}]"#,
    );
    let run = plan(&ledger, &cyclic, &[]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("cycle"), "{}", run.stderr);
    let unknown = ledger.file(
        "unknown.json",
        "[\n{\"id\": \"a\", \"title\": \"A\"},\n{\"id\": \"b\", \"title\": \"B\", \"deps\": [\"zz\"]}\n]",
    );
    let run = plan(&ledger, &unknown, &[]);
    assert!(run.stderr.contains("unknown.json:3") && run.stderr.contains("'zz'"), "{}", run.stderr);
    let twice = ledger
        .file("twice.json", "[\n{\"id\": \"a\", \"title\": \"A\"},\n{\"id\": \"a\", \"title\": \"B\"}\n]");
    let run = plan(&ledger, &twice, &[]);
    assert!(
        run.stderr.contains("twice.json:3: id 'a' appears twice in this input: here and at line 2"),
        "{}",
        run.stderr
    );
    assert!(ledger.tasks().is_empty(), "nothing saved");
}

/// D4: a second plan for the same goal is refused without `--replace`; with it, the old plan's
/// open tasks are dropped (journaled), its finished ones kept, and the new plan added.
#[test]
fn d4_replanning_is_explicit_and_drops_only_open_tasks() {
    let ledger = Ledger::new();
    let file = ledger.file("plan.json", PARSER_PLAN);
    plan(&ledger, &file, &[]).ok();
    let first = ledger.tasks();
    let grammar = first.iter().find(|t| t.title == "write the grammar").unwrap().id.clone();
    ledger.run(&["set", &grammar, "--status", "done"]).ok();
    let smaller = ledger.file("v2.json", r#"[{"id": "p", "title": "write the parser"}, {"id": "q", "title": "test the parser", "deps": ["p"]}]"#);
    let refused = plan(&ledger, &smaller, &[]);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("already has a plan") && refused.stderr.contains("--replace"),
        "{}",
        refused.stderr
    );
    assert_eq!(ledger.tasks().len(), 5);

    let replaced: Value = plan(&ledger, &smaller, &["--replace"]).ok().json();
    assert_eq!(replaced["source"], "plan:ship the parser feature#2");
    assert_eq!(replaced["dropped"].as_array().unwrap().len(), 4);
    let tasks = ledger.tasks();
    assert_eq!(tasks.len(), 7, "rows are never deleted");
    let old = |title: &str| {
        tasks.iter().find(|t| t.title == title && t.source == "plan:ship the parser feature").unwrap()
    };
    assert_eq!(old("write the grammar").status, "done");
    assert_eq!(old("write the parser").status, "dropped");
    let log = ledger.run(&["log", &old("test the parser").id]).ok().stdout;
    assert!(log.contains("dropped"), "{log}");
    let new: Vec<&TaskJson> = tasks.iter().filter(|t| t.source == "plan:ship the parser feature#2").collect();
    assert_eq!(new.len(), 2);
    assert!(new.iter().all(|t| t.status == "pending"));
}

/// Plans `write the post` in project `blog` with a decomposer action that prints `output`.
fn decomposed(ledger: &Ledger, output: &str) -> crate::Run {
    let script = ledger.script("decompose.sh", &format!("cat > /dev/null\necho '{output}'\n"));
    ledger.file(
        "daicho.toml",
        format!("[[action]]\nname = \"decompose\"\nkind = \"command\"\ncommand = [\"{script}\"]\n"),
    );
    ledger.run(&["plan", "--json", "--project", "blog", "--goal", "write the post", "--action", "decompose"])
}

/// D4: the plan can come from a decomposer action's output.
#[test]
fn d4_a_decomposer_action_writes_the_plan() {
    let ledger = Ledger::new();
    let output =
        r#"{"tasks": [{"id": "x", "title": "outline"}, {"id": "y", "title": "draft", "deps": ["x"]}]}"#;
    let saved: Value = decomposed(&ledger, output).ok().json();
    assert_eq!(saved["added"].as_array().unwrap().len(), 2);
    let tasks = ledger.tasks();
    let draft = tasks.iter().find(|t| t.title == "draft").unwrap();
    assert_eq!(draft.deps, [tasks.iter().find(|t| t.title == "outline").unwrap().id.clone()]);
    assert_eq!(draft.project, "blog");
}

/// D4, S13: a decomposer is an agent: a plan it writes may not tick ▶ run, write a correction or
/// register a step as done or dropped (which would release the steps after it as if a person had
/// closed it); the plan is refused whole, naming the field, and nothing is saved.
#[test]
fn s13_a_decomposers_plan_cannot_carry_a_persons_fields() {
    let cases = [
        (
            r#"{"tasks": [{"title": "outline"}, {"title": "send it", "run": true}]}"#,
            "task #2: field 'run' is written only by a person",
        ),
        (
            r#"{"tasks": [{"id": "r", "title": "legal review", "status": "done"}, {"title": "publish", "deps": ["r"], "tags": ["ai"]}]}"#,
            "task #1: status 'done' or 'dropped' is set only by a person",
        ),
        (
            r#"{"tasks": [{"title": "outline", "status": "dropped"}]}"#,
            "task #1: status 'done' or 'dropped' is set only by a person",
        ),
        (
            r#"{"tasks": [{"title": "outline"}, {"title": "send it", "action": "mail", "by_person": ["action"]}]}"#,
            "task #2: field 'by_person' is written only by a person",
        ),
    ];
    for (output, refusal) in cases {
        let ledger = Ledger::new();
        let run = decomposed(&ledger, output);
        assert_eq!(run.code, 1, "{output}");
        assert!(run.stderr.contains(refusal), "{output}: {}", run.stderr);
        assert!(ledger.tasks().is_empty(), "{output}: nothing saved");
    }
}

/// V6: `daicho graph` draws a saved plan's goal as SVG, DOT and Mermaid from the same layout,
/// with `--json` the laid-out graph; a done task turns its edges green; `--out` picks the format
/// by extension; an unknown project is an error that names it.
#[test]
fn v6_graph_draws_a_plans_goal_as_svg_dot_and_mermaid() {
    let ledger = Ledger::new();
    let file = ledger.file("plan.json", PARSER_PLAN);
    plan(&ledger, &file, &[]).ok();
    ledger.run(&["add", "not in the plan", "-p", "parser"]).ok();
    let tasks = ledger.tasks();
    let id = |title: &str| tasks.iter().find(|t| t.title == title).unwrap().id.clone();
    ledger.run(&["set", &id("write the grammar"), "--status", "done"]).ok();
    let goal = ["--project", "parser", "--source", "plan:ship the parser feature"];

    let graph: Value = ledger.run(&[&["graph", "--json"][..], &goal[..]].concat()).ok().json();
    let nodes = graph["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 5, "only the plan's rows: {graph}");
    let state = |title: &str| {
        let n = nodes.iter().find(|n| n["title"] == title).unwrap();
        (n["state"].as_str().unwrap().to_owned(), n["layer"].as_u64().unwrap())
    };
    assert_eq!(state("write the grammar"), ("done".into(), 0));
    assert_eq!(state("write the parser"), ("ready".into(), 1));
    assert_eq!(state("collect test inputs"), ("ready".into(), 0));
    assert_eq!(state("test the parser"), ("pending".into(), 2));
    assert_eq!(state("release notes"), ("pending".into(), 3));
    assert_eq!(graph["edges"].as_array().unwrap().len(), 4);

    let svg = ledger.run(&[&["graph"][..], &goal[..]].concat()).ok().stdout;
    assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"), "{svg}");
    assert_eq!(svg.matches("<a href=").count(), 5);
    assert_eq!(svg.matches("class=\"edge met\"").count(), 1, "the edge out of the done task");
    let dot = ledger.run(&[&["graph", "--format", "dot"][..], &goal[..]].concat()).ok().stdout;
    let grammar = id("write the grammar");
    assert!(
        dot.contains(&format!("\"{grammar}\" -> \"{}\" [color=\"#2e7d32\"]", id("write the parser"))),
        "{dot}"
    );
    let mermaid = ledger.run(&[&["graph", "--format", "mermaid"][..], &goal[..]].concat()).ok().stdout;
    assert!(mermaid.starts_with("flowchart LR\n") && mermaid.contains("classDef done"), "{mermaid}");

    ledger.run(&[&["graph", "--out", "plan.mmd"][..], &goal[..]].concat()).ok();
    assert_eq!(std::fs::read_to_string(ledger.dir.path().join("plan.mmd")).unwrap(), mermaid);
    let all: Value = ledger.run(&["graph", "--json", "--project", "parser"]).ok().json();
    assert_eq!(all["nodes"].as_array().unwrap().len(), 6, "the whole project without --source");
    let missing = ledger.run(&["graph", "--project", "nope"]);
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.contains("the project 'nope' has no rows"), "{}", missing.stderr);
}

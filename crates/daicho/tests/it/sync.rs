//! `daicho sync`: configured sources of every kind, aggregation (M10), failures isolated (X4).

use serde_json::Value;

use crate::{Ledger, TaskJson};

fn inbox(n: usize) -> String {
    (0..n).map(|i| format!("{{\"title\": \"unanswered question {i}\"}}\n")).collect()
}

fn sync(ledger: &Ledger) -> Value {
    ledger.run(&["sync", "--json"]).ok().json()
}

/// M10, M6, M8: 376 unanswered items are one row saying 376; when the source drops to 120 the
/// same row says 120 and nothing is added; a second sync adds and patches nothing.
#[test]
fn m10_an_aggregated_source_is_one_row_whose_count_follows_the_source() {
    let ledger = Ledger::new();
    ledger.file(
        "daicho.toml",
        "[[source]]\nname = \"inbox\"\nkind = \"jsonl\"\npath = \"inbox.jsonl\"\nproject = \"support\"\n\
         aggregate = \"Get the unanswered questions answered\"\ndashboard = true\n",
    );
    ledger.file("inbox.jsonl", inbox(376));
    let first = sync(&ledger);
    assert_eq!(first["sources"][0]["read"], 376);
    assert_eq!(first["sources"][0]["added"], 1);
    let tasks = ledger.tasks();
    assert_eq!(tasks.len(), 1, "one row, not 376");
    let row = &tasks[0];
    assert!(row.refresh);
    assert_eq!(
        (row.title.as_str(), row.project.as_str()),
        ("Get the unanswered questions answered", "support")
    );
    assert!(row.body.starts_with("376 open items in inbox:\n- unanswered question 0"), "{}", row.body);
    assert!(row.evidence.ends_with("inbox.jsonl"), "{}", row.evidence);

    ledger.file("inbox.jsonl", inbox(120));
    let second = sync(&ledger);
    assert_eq!(
        (second["sources"][0]["added"].as_u64(), second["sources"][0]["updated"].as_u64()),
        (Some(0), Some(1))
    );
    let tasks = ledger.tasks();
    assert_eq!(tasks.len(), 1, "no row added");
    assert_eq!(tasks[0].id, row.id);
    assert!(tasks[0].body.starts_with("120 open items in inbox:"), "{}", tasks[0].body);

    let third = sync(&ledger);
    assert_eq!(
        (third["sources"][0]["added"].as_u64(), third["sources"][0]["updated"].as_u64()),
        (Some(0), Some(0))
    );
}

const CONFIG: &str = r#"
[[source]]
name = "plan"
kind = "markdown"
path = "tasks.md"
done_path = "tasks-done.md"
project = "PJ-03"

[[source]]
name = "seed"
kind = "json"
path = "seed.json"

[[source]]
name = "lines"
kind = "jsonl"
path = "lines.jsonl"
project = "ops"

[[source]]
name = "sheet"
kind = "csv"
path = "sheet.csv"

[[source]]
name = "findings"
kind = "command"
command = ["./findings.sh"]
project = "audit"
"#;

fn sources(ledger: &Ledger) {
    ledger.file("daicho.toml", CONFIG);
    ledger.file(
        "tasks.md",
        "- [ ] [T-500] 素材収集 | 分類:調査/記事 | 🤖\n- [ ] [T-501] 下書き生成 | 依存:T-500 | 担当:qiita-writer | 🤖\n",
    );
    ledger.file("tasks-done.md", "- [x] [T-499] 企画会議 | 案件:PJ-02\n");
    ledger.file(
        "seed.json",
        r#"{"tasks": [{"id": "t1", "title": "write the parser"}, {"id": "t2", "title": "test the parser", "deps": ["t1"]}]}"#,
    );
    ledger.file(
        "lines.jsonl",
        "{\"title\": \"rotate the keys\"}\n{\"title\": \"renew the certificate\", \"due\": \"2026-12-24\"}\n",
    );
    ledger.file("sheet.csv", "タスク,案件,担当\n見積もりを送る,営業,佐藤\n");
    ledger.script(
        "findings.sh",
        "echo '[{\"title\": \"unused index on run\", \"evidence\": \"pg_stat_user_indexes\"}]'\n",
    );
}

fn by_title<'a>(tasks: &'a [TaskJson], title: &str) -> &'a TaskJson {
    tasks.iter().find(|t| t.title == title).unwrap_or_else(|| panic!("no row '{title}'"))
}

/// X1: each kind reads a real file (a real child process for `command`), Japanese headers and
/// keys included; items take the source's name and project unless they name their own.
#[test]
fn x1_every_source_kind_is_pulled_with_its_name_and_project() {
    let ledger = Ledger::new();
    sources(&ledger);
    let report = sync(&ledger);
    assert_eq!(report["failed"], 0, "{report}");
    let added: Vec<(String, u64)> = report["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["source"].as_str().unwrap().to_owned(), s["added"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        added,
        [
            ("plan".into(), 3),
            ("seed".into(), 2),
            ("lines".into(), 2),
            ("sheet".into(), 1),
            ("findings".into(), 1)
        ]
    );
    let tasks = ledger.tasks();
    let draft = by_title(&tasks, "下書き生成");
    assert_eq!(
        (draft.id.as_str(), draft.project.as_str(), draft.source.as_str()),
        ("T-501", "PJ-03", "plan")
    );
    assert_eq!((draft.deps.clone(), draft.assignee.as_str()), (vec!["T-500".to_owned()], "qiita-writer"));
    assert!(draft.tags.contains(&"ai".to_owned()));
    let done = by_title(&tasks, "企画会議");
    assert_eq!((done.status.as_str(), done.project.as_str()), ("done", "PJ-02"));
    let test = by_title(&tasks, "test the parser");
    assert_eq!(test.deps, [by_title(&tasks, "write the parser").id.clone()]);
    assert_eq!(by_title(&tasks, "renew the certificate").project, "ops");
    let quote = by_title(&tasks, "見積もりを送る");
    assert_eq!(
        (quote.project.as_str(), quote.assignee.as_str(), quote.source.as_str()),
        ("営業", "佐藤", "sheet")
    );
    let finding = by_title(&tasks, "unused index on run");
    assert_eq!((finding.project.as_str(), finding.evidence.as_str()), ("audit", "pg_stat_user_indexes"));
    let again = sync(&ledger);
    let changed: u64 = again["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["added"].as_u64().unwrap() + s["updated"].as_u64().unwrap())
        .sum();
    assert_eq!(changed, 0, "M8: a second sync changes nothing: {again}");
}

/// X4: a malformed source is reported with its file, line and reason, its rows stay as they
/// were, and the other sources still sync; the exit code says something failed.
#[test]
fn x4_a_malformed_source_fails_alone_and_changes_none_of_its_rows() {
    let ledger = Ledger::new();
    sources(&ledger);
    sync(&ledger);
    let before = ledger.tasks();
    ledger.file("lines.jsonl", "{\"title\": \"rotate the keys\", \"body\": \"now\"}\n{\"title\": \"broken\n");
    ledger.file("sheet.csv", "タスク,案件,担当\n見積もりを送る,営業,佐藤\n請求書を送る,営業,鈴木\n");
    ledger.script("findings.sh", "echo 'database unreachable' >&2\nexit 3\n");
    let run = ledger.run(&["sync", "--json"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let report: Value = run.json();
    assert_eq!(report["failed"], 2);
    let lines = &report["sources"][2];
    assert_eq!(lines["source"], "lines");
    let error = lines["error"].as_str().unwrap();
    assert!(error.contains("lines.jsonl:2:"), "file and line: {error}");
    let findings = report["sources"][4]["error"].as_str().unwrap();
    assert!(
        findings.contains("<command findings>") && findings.contains("database unreachable"),
        "{findings}"
    );
    assert_eq!(report["sources"][3]["added"], 1, "the other sources still sync: {report}");
    let tasks = ledger.tasks();
    assert_eq!(by_title(&tasks, "rotate the keys").body, "", "the failed source's rows are unchanged");
    assert!(tasks.iter().all(|t| t.title != "broken"));
    assert_eq!(tasks.len(), before.len() + 1, "only the sheet's new row");
    for row in &before {
        let now = tasks.iter().find(|t| t.id == row.id).expect("never deleted");
        assert_eq!(now, row, "unchanged");
    }

    let unknown = ledger.run(&["sync", "--source", "nowhere"]);
    assert_eq!(unknown.code, 1);
    assert!(unknown.stderr.contains("no source named 'nowhere'"), "{}", unknown.stderr);
}

/// I6: a source with a mistake is refused with the file and line before anything is pulled.
#[test]
fn i6_a_bad_source_table_is_refused_with_its_line() {
    let ledger = Ledger::new();
    ledger.file("daicho.toml", "[[source]]\nname = \"a\"\nkind = \"json\"\npath = \"a.json\"\n\n[[source]]\nname = \"b\"\nkind = \"rss\"\n");
    let run = ledger.run(&["sync"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("daicho.toml:6") && run.stderr.contains("unknown source kind 'rss'"),
        "{}",
        run.stderr
    );
    assert!(ledger.tasks().is_empty());
}

/// R3, R4: ten projects' sources, at most 3 per sweep: four sweeps visit every project, each
/// reports what it left as truncated, and the cursor survives between processes.
#[test]
fn r3_the_sync_role_goes_round_robin_and_counts_what_it_leaves() {
    let ledger = Ledger::new();
    let mut config = String::new();
    for i in 0..10 {
        config.push_str(&format!(
            "[[source]]\nname = \"s{i}\"\nkind = \"jsonl\"\npath = \"s{i}.jsonl\"\nproject = \"p{i}\"\n\n"
        ));
        ledger.file(&format!("s{i}.jsonl"), format!("{{\"title\": \"work of p{i}\"}}\n"));
    }
    ledger.file("daicho.toml", config);
    let mut visited = Vec::new();
    for round in 0..4 {
        let report: Value = ledger.run(&["sweep", "--role", "sync", "--max", "3", "--json"]).ok().json();
        assert_eq!(report["truncated"], 7, "round {round}: {report}");
        let names: Vec<String> = report["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["source"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(names.len(), 3);
        visited.extend(names);
    }
    assert_eq!(visited[..4], ["s0", "s1", "s2", "s3"], "each sweep starts after the last one");
    let mut projects: Vec<String> = ledger.tasks().into_iter().map(|t| t.project).collect();
    projects.sort();
    projects.dedup();
    assert_eq!(projects.len(), 10, "every project visited: {projects:?}");
}

/// The quickstart as sweeps (R1): the plan is pulled, the chain T-1 … T-5 runs to done/review as
/// configured, and the publish step waits in the approval queue without running.
#[test]
fn quickstart_the_chain_runs_and_publish_waits_for_approval() {
    let ledger = Ledger::new();
    let config =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart/daicho.toml");
    let config = config.to_str().unwrap();
    let sweep = |role: &str| -> Value {
        let run = ledger
            .command(&["--config", config, "sweep", "--role", role, "--max", "10", "--json"])
            .env("STEP_SECONDS", "0")
            .output()
            .unwrap();
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        serde_json::from_slice(&run.stdout).unwrap()
    };
    assert_eq!(sweep("sync")["sources"][0]["added"], 6);
    let auto = sweep("auto");
    assert_eq!(auto["ran"].as_array().unwrap().len(), 5, "{auto}");
    assert_eq!(auto["queued"], serde_json::json!(["T-6"]));
    let status: Vec<(String, String)> = ledger.tasks().into_iter().map(|t| (t.id, t.status)).collect();
    let want = [
        ("T-1", "done"),
        ("T-2", "done"),
        ("T-3", "done"),
        ("T-4", "done"),
        ("T-5", "review"),
        ("T-6", "pending"),
    ];
    assert_eq!(status, want.map(|(a, b)| (a.to_owned(), b.to_owned())));
    let again = sweep("auto");
    assert!(again["ran"].as_array().unwrap().is_empty(), "publish never runs unapproved: {again}");
    let results: Vec<String> = ledger.tasks().into_iter().map(|t| t.result).collect();
    assert!(results[0].starts_with("finished T-1"), "{results:?}");
}

/// R2: two `serve` processes started together on one ledger: the role lease lets only one run
/// the slow sync; the other reports it skipped.
#[test]
fn r2_two_serves_never_run_the_same_role_at_once() {
    let ledger = Ledger::new();
    let slow = ledger.script("slow.sh", "echo start >> \"$LOG\"\nsleep 2\necho '[{\"title\": \"found\"}]'\n");
    ledger.file(
        "daicho.toml",
        format!("[[source]]\nname = \"slow\"\nkind = \"command\"\ncommand = [\"{slow}\"]\n\n[[schedule]]\nrole = \"sync\"\ncron = \"@daily\"\n"),
    );
    let serves: Vec<_> = (0..2)
        .map(|_| {
            ledger
                .command(&["serve", "--now", "--once", "--json"])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<String> = serves
        .into_iter()
        .map(|c| String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap())
        .collect();
    assert_eq!(ledger.log_lines().len(), 1, "the sync ran once: {outputs:?}");
    assert_eq!(
        outputs.iter().filter(|o| o.contains("another serve holds this role")).count(),
        1,
        "{outputs:?}"
    );
    assert_eq!(ledger.tasks().len(), 1);
}

/// I6: `daicho init` writes a commented example configuration once, never over an existing one;
/// the environment overrides its policy; a bad variable is named.
#[test]
fn i6_init_writes_a_commented_configuration_once() {
    let ledger = Ledger::uninitialized();
    let first: Value = ledger.run(&["init", "--json"]).ok().json();
    assert_eq!(first["config_created"], true);
    let path = ledger.dir.path().join("daicho.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("# [[source]]") && text.contains("# [[schedule]]"), "{text}");
    std::fs::write(&path, "[policy]\nlease = \"10m\"\n").unwrap();
    let second: Value = ledger.run(&["init", "--json"]).ok().json();
    assert_eq!((second["created"].as_bool(), second["config_created"].as_bool()), (Some(false), Some(false)));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "[policy]\nlease = \"10m\"\n", "never overwritten");
    let bad = ledger.command(&["sweep", "--role", "auto"]).env("DAICHO_LEASE", "soon").output().unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("DAICHO_LEASE"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// Progress: a bar on a terminal (a real pseudo-terminal from `script`), nothing on a pipe.
#[test]
fn progress_shows_on_a_terminal_and_never_on_a_pipe() {
    let ledger = Ledger::new();
    ledger.file("daicho.toml", "[[source]]\nname = \"inbox\"\nkind = \"jsonl\"\npath = \"inbox.jsonl\"\n");
    ledger.file("inbox.jsonl", inbox(3));
    let piped = ledger.run(&["sync"]).ok();
    assert!(piped.stderr.is_empty(), "nothing on a pipe: {:?}", piped.stderr);
    let line = format!("{} sync", env!("CARGO_BIN_EXE_daicho"));
    let out = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(ledger.dir.path())
        .env("LANG", "C")
        .env_remove("DAICHO_DB")
        .env_remove("DAICHO_CONFIG")
        .output()
        .expect("script (util-linux) runs a command on a pseudo-terminal");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0/1 sources: inbox"), "a bar on a terminal: {text:?}");
    assert!(text.contains("inbox: 3 read, 0 added"), "{text:?}");
}

/// X4 for each file kind: a malformed file gives its file and line, and the source's rows from
/// the last good sync stay as they were.
#[test]
fn x4_every_file_kind_names_the_bad_line_and_keeps_its_rows() {
    let ledger = Ledger::new();
    sources(&ledger);
    sync(&ledger);
    let before = ledger.tasks();
    let cases = [
        (
            "plan",
            "tasks.md",
            "- [ ] [T-500] 素材収集 | 分類:調査/記事 | 🤖\n- [?] [T-501] 下書き生成\n",
            "tasks.md:2",
        ),
        (
            "seed",
            "seed.json",
            "{\"tasks\": [\n{\"id\": \"t1\", \"title\": \"write the parser\"},\n{\"id\": ]}\n",
            "seed.json:3",
        ),
        ("sheet", "sheet.csv", "案件,担当\n営業,佐藤\n", "sheet.csv:1"),
    ];
    for (source, file, text, at) in cases {
        ledger.file(file, text);
        let run = ledger.run(&["sync", "--source", source, "--json"]);
        assert_eq!(run.code, 1, "{source}: {}", run.stderr);
        let report: Value = run.json();
        let error = report["sources"][0]["error"].as_str().unwrap_or_default().to_owned();
        assert!(error.contains(at), "{source}: expected {at} in {error}");
        assert_eq!(ledger.tasks(), before, "{source}: rows unchanged");
    }
}

/// X5: the issue's confirmation sheet (`id,question,status,回答期限`) pulled as people keep it:
/// only the unanswered and pending rows become tasks, titled by a template, due from their own
/// column; a second sync changes nothing; a row answered since is left alone, never deleted; a
/// JSON export addresses a nested field with a JSON Pointer.
#[test]
fn x5_a_sheet_with_its_own_columns_is_mapped_filtered_and_templated() {
    let ledger = Ledger::new();
    ledger.file(
        "daicho.toml",
        r#"
[[source]]
name = "questions"
kind = "csv"
path = "questions.csv"
project = "PJ-01"
fields = { id = "id", due = "回答期限" }
where = { status = ["未回答", "保留"] }
title = "{question} に回答をもらう"
body = "{id}: {question}"

[[source]]
name = "issues"
kind = "json"
path = "issues.json"
fields = { title = "/fields/summary", assignee = "/fields/assignee/name" }
where = { state = "open" }
"#,
    );
    ledger.file(
        "questions.csv",
        "\u{feff}id,question,status,回答期限,備考\r\nQ-1,仕様は確定か,未回答,2026-12-10,\r\nQ-2,納期は,回答済,,\r\nQ-3,予算は,保留,,要確認\r\n,,,,\r\n",
    );
    ledger.file(
        "issues.json",
        r#"[{"key": "P-1", "state": "open", "fields": {"summary": "Fix login", "assignee": {"name": "aki"}}},
            {"key": "P-2", "state": "closed", "fields": {"summary": "Old bug"}}]"#,
    );
    let first = sync(&ledger);
    assert_eq!(first["failed"], 0, "{first}");
    assert_eq!(
        (first["sources"][0]["read"].as_u64(), first["sources"][0]["added"].as_u64()),
        (Some(2), Some(2))
    );
    let tasks = ledger.tasks();
    let titles: Vec<&str> = tasks.iter().map(|t| t.title.as_str()).collect();
    assert_eq!(titles, ["仕様は確定か に回答をもらう", "予算は に回答をもらう", "Fix login"]);
    assert_eq!((tasks[0].body.as_str(), tasks[0].due.as_deref()), ("Q-1: 仕様は確定か", Some("2026-12-10")));
    assert_eq!((tasks[0].source.as_str(), tasks[0].project.as_str()), ("questions", "PJ-01"));
    assert_eq!((tasks[2].source.as_str(), tasks[2].assignee.as_str()), ("issues", "aki"));

    let again = sync(&ledger);
    assert_eq!(
        (again["sources"][0]["added"].as_u64(), again["sources"][0]["updated"].as_u64()),
        (Some(0), Some(0))
    );
    // Q-1 answered since: the sheet no longer lists it as a task; its row stays as it was.
    ledger.file(
        "questions.csv",
        "id,question,status,回答期限,備考\nQ-1,仕様は確定か,回答済,2026-12-10,\nQ-3,予算は,保留,,\n",
    );
    sync(&ledger);
    assert_eq!(ledger.tasks().len(), 3, "no row deleted");
}

/// X5: a mapping that names a ledger field that does not exist, or one only a person writes, is
/// refused with the configuration file, line and source before anything is pulled; a column the
/// sheet lacks fails that source (file, line, column), and the other sources still sync.
#[test]
fn x5_a_bad_mapping_is_a_configuration_error_naming_source_file_and_column() {
    let ledger = Ledger::new();
    for (fields, expect) in [
        ("{ titel = \"question\" }", "fields.titel: not a ledger field"),
        ("{ title = \"question\", correction = \"memo\" }", "only a person writes 'correction'"),
    ] {
        let config = format!(
            "\n[[source]]\nname = \"questions\"\nkind = \"csv\"\npath = \"q.csv\"\nfields = {fields}\n"
        );
        ledger.file("daicho.toml", config);
        let run = ledger.run(&["sync"]);
        assert_eq!(run.code, 1, "{}", run.stdout);
        assert!(
            run.stderr.contains("daicho.toml:2: source 'questions': ") && run.stderr.contains(expect),
            "{}",
            run.stderr
        );
    }
    ledger.file(
        "daicho.toml",
        "[[source]]\nname = \"questions\"\nkind = \"csv\"\npath = \"q.csv\"\ntitle = \"{question}\"\nwhere = { state = \"open\" }\n\n\
         [[source]]\nname = \"plan\"\nkind = \"markdown\"\npath = \"tasks.md\"\n",
    );
    ledger.file("q.csv", "id,question,status\n1,a,open\n");
    ledger.file("tasks.md", "- [ ] still synced\n");
    let run = ledger.run(&["sync", "--json"]);
    assert_eq!(run.code, 1);
    let report: Value = run.json();
    let error = report["sources"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.ends_with(
            "q.csv:1: column 'state' (where) is not in the header (its columns: id, question, status)"
        ),
        "{error}"
    );
    assert_eq!(report["sources"][1]["added"], 1, "{report}");
}

fn sheet_fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../daicho-engine/tests/fixtures").join(name)
}

/// X5: a spreadsheet source (xlsx and ods): the named sheet, its header below a merged title,
/// mapped and filtered like a CSV file; dates become due dates; a cell holding an error fails
/// that source naming the file, the sheet and the cell, and leaves the ledger as it was.
#[test]
fn x5_a_spreadsheet_source_is_pulled_through_its_mapping() {
    for kind in ["xlsx", "ods"] {
        let ledger = Ledger::new();
        let file = format!("questions.{kind}");
        std::fs::copy(sheet_fixture(&file), ledger.dir.path().join(&file)).unwrap();
        ledger.file(
            "daicho.toml",
            format!(
                "[[source]]\nname = \"questions\"\nkind = \"{kind}\"\npath = \"{file}\"\nsheet = \"確認事項\"\n\
                 header_row = 2\nfields = {{ id = \"id\", due = \"回答期限\" }}\nwhere = {{ status = [\"未回答\", \"保留\"] }}\n\
                 title = \"{{question}} に回答をもらう\"\n"
            ),
        );
        let report = sync(&ledger);
        assert_eq!(report["failed"], 0, "{kind}: {report}");
        let tasks = ledger.tasks();
        let rows: Vec<(&str, Option<&str>)> =
            tasks.iter().map(|t| (t.title.as_str(), t.due.as_deref())).collect();
        assert_eq!(
            rows,
            [
                ("仕様は確定か に回答をもらう", Some("2026-12-10")),
                ("予算は に回答をもらう", Some("2027-01-05"))
            ],
            "{kind}"
        );
        if kind == "xlsx" {
            ledger.file(
                "daicho.toml",
                format!(
                    "[[source]]\nname = \"broken\"\nkind = \"xlsx\"\npath = \"{file}\"\nsheet = \"壊れた\"\n"
                ),
            );
            let run = ledger.run(&["sync", "--json"]);
            assert_eq!(run.code, 1);
            let report: Value = run.json();
            let error = report["sources"][0]["error"].as_str().unwrap_or_default();
            assert!(
                error.ends_with("questions.xlsx!壊れた: C2: the cell holds an error value (#N/A)"),
                "{error}"
            );
            assert_eq!(ledger.tasks().len(), 2, "nothing written by the failed source");
        }
    }
}

/// A confirmation sheet as people keep one: Japanese headers, a due date per question, some
/// questions answered, blank rows at the end. `answered` of the `total` are answered.
struct Sheet {
    total: usize,
    answered: usize,
}

impl Sheet {
    const HEADER: [&str; 4] = ["番号", "質問", "状態", "回答期限"];

    fn rows(&self) -> impl Iterator<Item = (String, String, &'static str, (u16, u8, u8))> {
        let answered = self.answered;
        (0..self.total).map(move |i| {
            let state = if i < answered { "回答済" } else { "未回答" };
            (format!("Q-{i:03}"), format!("質問 {i} の仕様"), state, (2026, 12, (i % 28 + 1) as u8))
        })
    }

    fn csv(&self, path: &std::path::Path) {
        let mut text = format!("{}\r\n", Self::HEADER.join(","));
        for (id, question, state, (y, m, d)) in self.rows() {
            text.push_str(&format!("{id},{question},{state},{y}-{m:02}-{d:02}\r\n"));
        }
        text.push_str(",,,\r\n,,,\r\n");
        std::fs::write(path, text).unwrap();
    }

    fn xlsx(&self, path: &std::path::Path) {
        use rust_xlsxwriter::{ExcelDateTime, Format, Workbook};
        let mut book = Workbook::new();
        let sheet = book.add_worksheet();
        sheet.set_name("確認事項").unwrap();
        let date = Format::new().set_num_format("yyyy/mm/dd");
        for (col, name) in Self::HEADER.iter().enumerate() {
            sheet.write_string(0, col as u16, *name).unwrap();
        }
        let mut last = 0;
        for (i, (id, question, state, (y, m, d))) in self.rows().enumerate() {
            let row = i as u32 + 1;
            sheet.write_string(row, 0, id).unwrap();
            sheet.write_string(row, 1, question).unwrap();
            sheet.write_string(row, 2, state).unwrap();
            sheet
                .write_datetime_with_format(row, 3, ExcelDateTime::from_ymd(y, m, d).unwrap(), &date)
                .unwrap();
            last = row;
        }
        for row in last + 1..last + 6 {
            sheet.write_blank(row, 3, &date).unwrap(); // formatted, empty rows at the end
        }
        book.save(path).unwrap();
    }

    fn ods(&self, path: &std::path::Path) {
        use std::io::Write as _;
        let cell = |text: &str| {
            format!(
                "<table:table-cell office:value-type=\"string\"><text:p>{text}</text:p></table:table-cell>"
            )
        };
        let mut rows = format!("<table:table-row>{}</table:table-row>", Self::HEADER.map(cell).concat());
        for (id, question, state, (y, m, d)) in self.rows() {
            let date = format!("{y}-{m:02}-{d:02}");
            rows.push_str(&format!(
                "<table:table-row>{}{}{}<table:table-cell office:value-type=\"date\" office:date-value=\"{date}\"><text:p>{date}</text:p></table:table-cell></table:table-row>",
                cell(&id),
                cell(&question),
                cell(state)
            ));
        }
        rows.push_str("<table:table-row table:number-rows-repeated=\"5\"><table:table-cell table:number-columns-repeated=\"4\"/></table:table-row>");
        let content = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><office:document-content \
             xmlns:office=\"urn:oasis:names:tc:opendocument:xmlns:office:1.0\" \
             xmlns:table=\"urn:oasis:names:tc:opendocument:xmlns:table:1.0\" \
             xmlns:text=\"urn:oasis:names:tc:opendocument:xmlns:text:1.0\" office:version=\"1.2\">\
             <office:body><office:spreadsheet><table:table table:name=\"確認事項\">{rows}</table:table>\
             </office:spreadsheet></office:body></office:document-content>"
        );
        let manifest = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><manifest:manifest \
             xmlns:manifest=\"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0\" manifest:version=\"1.2\">\
             <manifest:file-entry manifest:full-path=\"/\" manifest:media-type=\"application/vnd.oasis.opendocument.spreadsheet\"/>\
             <manifest:file-entry manifest:full-path=\"content.xml\" manifest:media-type=\"text/xml\"/></manifest:manifest>";
        let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        let stored =
            zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        zip.start_file("mimetype", stored).unwrap();
        zip.write_all(b"application/vnd.oasis.opendocument.spreadsheet").unwrap();
        zip.start_file("META-INF/manifest.xml", zip::write::SimpleFileOptions::default()).unwrap();
        zip.write_all(manifest.as_bytes()).unwrap();
        zip.start_file("content.xml", zip::write::SimpleFileOptions::default()).unwrap();
        zip.write_all(content.as_bytes()).unwrap();
        zip.finish().unwrap();
    }

    fn write(&self, kind: &str, path: &std::path::Path) {
        match kind {
            "csv" => self.csv(path),
            "xlsx" => self.xlsx(path),
            _ => self.ods(path),
        }
    }
}

/// X5, M10, M6, F1: the issue's acceptance — a confirmation sheet of 376 unanswered and 100
/// answered questions (CSV, xlsx and ods; Japanese headers, dates, blank rows at the end) syncs
/// to one aggregate row saying 376; answering 256 more makes the same row say 120; two more
/// syncs change nothing; a person's correction on the row survives. Without `aggregate` the same
/// sheet gives one row per unanswered question, titled by the template.
#[test]
fn x5_m10_a_confirmation_sheet_in_three_formats_aggregates_and_follows_the_answers() {
    for kind in ["csv", "xlsx", "ods"] {
        let ledger = Ledger::new();
        let path = ledger.dir.path().join(format!("questions.{kind}"));
        let source = |aggregate: &str| {
            format!(
                "[[source]]\nname = \"questions\"\nkind = \"{kind}\"\npath = \"questions.{kind}\"\nproject = \"PJ-01\"\n\
                 fields = {{ id = \"番号\", due = \"回答期限\" }}\nwhere = {{ \"状態\" = \"未回答\" }}\n\
                 title = \"{{質問}} に回答をもらう\"\n{aggregate}"
            )
        };
        ledger.file("daicho.toml", source("aggregate = \"確認事項に回答をもらう\"\n"));
        Sheet { total: 476, answered: 100 }.write(kind, &path);
        let first = sync(&ledger);
        assert_eq!(
            (first["sources"][0]["read"].as_u64(), first["sources"][0]["added"].as_u64()),
            (Some(376), Some(1)),
            "{kind}: {first}"
        );
        let row = ledger.tasks().remove(0);
        assert!(
            row.body.starts_with("376 open items in questions:\n- 質問 100 の仕様 に回答をもらう"),
            "{kind}: {}",
            row.body
        );
        ledger.run(&["set", &row.id, "--correction", "先方に電話で確認"]).ok();

        Sheet { total: 476, answered: 356 }.write(kind, &path);
        let second = sync(&ledger);
        assert_eq!(
            (second["sources"][0]["added"].as_u64(), second["sources"][0]["updated"].as_u64()),
            (Some(0), Some(1)),
            "{kind}"
        );
        for _ in 0..2 {
            let again = sync(&ledger);
            assert_eq!(
                (again["sources"][0]["added"].as_u64(), again["sources"][0]["updated"].as_u64()),
                (Some(0), Some(0)),
                "{kind}"
            );
        }
        let tasks = ledger.tasks();
        assert_eq!(tasks.len(), 1, "{kind}: one row");
        assert!(tasks[0].body.starts_with("120 open items in questions:"), "{kind}: {}", tasks[0].body);
        assert_eq!(tasks[0].correction, "先方に電話で確認", "{kind}: the person's correction survives");

        let rows = Ledger::new();
        rows.file("daicho.toml", source(""));
        Sheet { total: 476, answered: 100 }.write(kind, &rows.dir.path().join(format!("questions.{kind}")));
        sync(&rows);
        let tasks = rows.tasks();
        assert_eq!(tasks.len(), 376, "{kind}: one row per unanswered question");
        assert_eq!(
            (tasks[0].title.as_str(), tasks[0].due.as_deref()),
            ("質問 100 の仕様 に回答をもらう", Some("2026-12-17")),
            "{kind}"
        );
    }
}

/// M10: an aggregate's title may carry `{count}`: the row is the same row as the count moves,
/// its title follows the count, and a title a person gave it stays.
#[test]
fn m10_an_aggregate_title_with_its_count_stays_one_row() {
    let ledger = Ledger::new();
    let path = ledger.dir.path().join("questions.csv");
    ledger.file(
        "daicho.toml",
        "[[source]]\nname = \"questions\"\nkind = \"csv\"\npath = \"questions.csv\"\ntitle = \"{質問}\"\n\
         where = { \"状態\" = \"未回答\" }\naggregate = \"確認事項 {count} 件に回答をもらう\"\n",
    );
    Sheet { total: 476, answered: 100 }.csv(&path);
    sync(&ledger);
    let row = ledger.tasks().remove(0);
    assert_eq!(row.title, "確認事項 376 件に回答をもらう");
    Sheet { total: 476, answered: 356 }.csv(&path);
    sync(&ledger);
    let tasks = ledger.tasks();
    assert_eq!((tasks.len(), tasks[0].id.as_str()), (1, row.id.as_str()), "the same row");
    assert_eq!(tasks[0].title, "確認事項 120 件に回答をもらう");
    assert_eq!(sync(&ledger)["sources"][0]["updated"], 0, "nothing changes while the count stands");
    ledger.run(&["set", &row.id, "--title", "先方に電話で確認する"]).ok();
    Sheet { total: 476, answered: 400 }.csv(&path);
    sync(&ledger);
    let tasks = ledger.tasks();
    assert_eq!(tasks[0].title, "先方に電話で確認する", "a person's title stays");
    assert!(tasks[0].body.starts_with("76 open items"), "{}", tasks[0].body);
}

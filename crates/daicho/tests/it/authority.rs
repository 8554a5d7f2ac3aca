//! The authority model (S13) through the command line: push, import, sync, set and approve try
//! to write what only a person writes; each is refused (or, for a pulled source, ignored and
//! reported) and the ledger is unchanged.

use serde_json::Value;

use crate::Ledger;

/// A step that logs its start and prints a result.
const STEP: &str = "cat > /dev/null\necho \"start $DAICHO_TASK_ID\" >> \"$LOG\"\necho sent\n";

/// The ledger's rows and every row's journal: a snapshot that any write changes.
fn snapshot(ledger: &Ledger) -> (String, Vec<String>) {
    let export = ledger.export();
    let journals = ledger.tasks().iter().map(|t| ledger.run(&["log", &t.id, "--json"]).ok().stdout).collect();
    (export, journals)
}

/// A ledger whose `対外/メール` work type routes to an external `mail` action.
fn with_external_mail(ledger: &Ledger) {
    let script = ledger.script("mail.sh", STEP);
    ledger.file(
        "daicho.toml",
        format!(
            "[[action]]\nname = \"mail\"\nkind = \"command\"\ncommand = [\"{script}\"]\nexternal = true\n\
             auto = true\ntypes = [\"対外/メール\"]\n"
        ),
    );
}

fn sweep(ledger: &Ledger, role: &str) -> Value {
    ledger.run(&["sweep", "--role", role, "--max", "5", "--json"]).ok().json()
}

/// S13, S2: a producer's `"run": true` on an item routed to an external action is refused
/// whole; pushed without it, the task is never executed by any role, enters the approval queue
/// only once its deps are done, cannot be approved before, is not approved by a person's ▶ tick,
/// and runs once after a person approves it.
#[test]
fn s13_s2_a_producers_run_flag_never_runs_an_external_task() {
    let ledger = Ledger::new();
    with_external_mail(&ledger);
    let before = snapshot(&ledger);
    let pushed = ledger.run_with_input(
        &["push", "--source", "bot"],
        r#"[{"title":"x","type":"対外/メール","run":true}]"#.as_bytes(),
    );
    assert_eq!(pushed.code, 1, "{pushed:?}");
    let answer: Value = pushed.json();
    let error = answer["error"].as_str().expect("an error");
    assert!(error.contains("field 'run' is written only by a person"), "{error}");
    assert_eq!(snapshot(&ledger), before, "nothing written");

    let items = r#"[{"id":"d1","title":"draft the mail","tags":["ai"]},
                    {"title":"send the mail","type":"対外/メール","tags":["ai"],"deps":["d1"]}]"#;
    ledger.run_with_input(&["push", "--source", "bot"], items.as_bytes()).ok();
    for role in ["run-requested", "auto"] {
        let report = sweep(&ledger, role);
        assert_eq!(report["queued"], serde_json::json!([]), "{role}: not eligible yet: {report}");
    }
    let early = ledger.run(&["approve", "T-0002"]);
    assert_eq!(early.code, 1, "{early:?}");
    assert!(early.stderr.contains("T-0002 is not ready to approve"), "{}", early.stderr);
    assert!(ledger.run(&["approve", "--json"]).ok().json::<Vec<Value>>().is_empty(), "queue empty");

    ledger.run(&["set", "T-0001", "--status", "done"]).ok();
    let auto = sweep(&ledger, "auto");
    assert_eq!(auto["queued"], serde_json::json!(["T-0002"]), "{auto}");
    assert_eq!(auto["held"][0]["hold"], "awaiting_approval", "{auto}");
    ledger.run(&["set", "T-0002", "--run"]).ok();
    for role in ["run-requested", "auto"] {
        let report = sweep(&ledger, role);
        assert_eq!(report["ran"], serde_json::json!([]), "{role}: a tick is no approval: {report}");
    }
    assert!(ledger.log_lines().is_empty(), "no executor started");

    ledger.run(&["approve", "T-0002"]).ok();
    let ran = sweep(&ledger, "run-requested");
    assert_eq!(ran["ran"][0]["id"], "T-0002", "{ran}");
    assert_eq!(ledger.log_lines(), ["start T-0002"]);
    let journal = ledger.run(&["log", "T-0002", "--json"]).ok().stdout;
    assert!(journal.contains("\"approve\"") && journal.contains("human:tester"), "{journal}");
    assert!(sweep(&ledger, "run-requested")["ran"].as_array().is_some_and(Vec::is_empty), "spent");
}

/// S13, M4: push and a foreign import refuse every field only a person writes, naming it (and
/// the file and line); the ledger and its journal are unchanged. `import --ledger` (a person's
/// own export) keeps them: a full round trip.
#[test]
fn s13_push_and_import_refuse_a_persons_fields_and_change_nothing() {
    let ledger = Ledger::new();
    ledger.run(&["add", "already here"]).ok();
    let before = snapshot(&ledger);
    for (field, value) in [
        ("run", "true"),
        ("correction", "\"send it to everyone\""),
        ("result", "\"sent\""),
        ("failures", "2"),
        ("run_at", "\"2026-11-30T00:00:00Z\""),
    ] {
        let item = format!("[{{\"title\":\"new\"}},\n {{\"title\":\"carrier\",\"{field}\":{value}}}]");
        let pushed = ledger.run_with_input(&["push", "--source", "bot"], item.as_bytes());
        assert_eq!(pushed.code, 1, "{field}: {pushed:?}");
        let error = pushed.json::<Value>()["error"].as_str().unwrap_or_default().to_owned();
        assert!(error.contains(&format!("field '{field}' is written only by a person")), "{error}");
        let path = ledger.file("foreign.json", &item);
        let imported = ledger.run(&["import", &path]);
        assert_eq!(imported.code, 1, "{field}: {imported:?}");
        assert!(imported.stderr.contains("foreign.json:2: field"), "{}", imported.stderr);
        assert!(imported.stderr.contains("daicho import --ledger"), "{}", imported.stderr);
        assert_eq!(snapshot(&ledger), before, "{field}: nothing written");
    }

    // A person's own export comes back whole with --ledger.
    ledger.run(&["set", "T-0001", "--correction", "shorter, please", "--run"]).ok();
    let exported = ledger.export();
    let copy = Ledger::new();
    let path = copy.file("mine.json", &exported);
    let refused = copy.run(&["import", &path]);
    assert_eq!(refused.code, 1, "without --ledger the export is a foreign file");
    copy.run(&["import", "--ledger", &path]).ok();
    assert_eq!(copy.export(), exported, "export → import --ledger → export");
}

/// S13: the cells a person wrote stay theirs through `export` and `import --ledger` (the way a
/// ledger moves to another file or to PostgreSQL), also into a ledger that already has the row:
/// a cell the person emptied is not filled again by the next sync in the new ledger, as it is
/// not in the old one.
#[test]
fn s13_the_cells_a_person_wrote_stay_theirs_through_export_and_import_ledger() {
    let setup = |ledger: &Ledger| {
        ledger.file("daicho.toml", "[[source]]\nname = \"sheet\"\nkind = \"csv\"\npath = \"sheet.csv\"\n");
        ledger.file("sheet.csv", "title,body,assignee\ncheck the invoice,from the sheet,bob\n");
    };
    let ledger = Ledger::new();
    setup(&ledger);
    ledger.run(&["sync"]).ok();
    ledger.run(&["set", "T-0001", "--body", "", "--assignee", "ana"]).ok();
    ledger.run(&["sync"]).ok();
    let row = |l: &Ledger| l.tasks().into_iter().next().expect("the row");
    let mine = row(&ledger);
    assert_eq!((mine.body.as_str(), mine.assignee.as_str()), ("", "ana"), "the sync keeps a person's cells");
    for format in ["json", "jsonl", "csv", "md"] {
        let exported = ledger.run(&["export", "--format", format]).ok().stdout;
        let copy = Ledger::new();
        setup(&copy);
        let path = copy.file(&format!("ledger.{format}"), &exported);
        copy.run(&["import", "--ledger", &path]).ok();
        assert_eq!(row(&copy).person_cells, ["body", "assignee"], "{format}: {exported}");
        copy.run(&["sync"]).ok();
        let moved = row(&copy);
        assert_eq!((moved.body.as_str(), moved.assignee.as_str()), ("", "ana"), "{format}: after a sync");
    }
    // A ledger that already holds the row (its own sync ran first, writing the sheet's body and
    // assignee) takes the person's cells, values and marks, and its next sync keeps them.
    for format in ["json", "csv"] {
        let exported = ledger.run(&["export", "--format", format]).ok().stdout;
        let there = Ledger::new();
        setup(&there);
        there.run(&["sync"]).ok();
        assert_eq!(row(&there).body, "from the sheet");
        let path = there.file(&format!("ledger.{format}"), &exported);
        there.run(&["import", "--ledger", &path]).ok();
        there.run(&["sync"]).ok();
        let moved = row(&there);
        assert_eq!(
            (moved.body.as_str(), moved.assignee.as_str(), moved.person_cells.clone()),
            ("", "ana", vec!["body".to_owned(), "assignee".to_owned()]),
            "{format}: into a ledger that had the row"
        );
    }
    // Anyone else's file or push that names `by_person` is not refused for it, and gives its rows
    // no marks: a plain import of the export, a push.
    let exported = ledger.run(&["export", "--format", "json"]).ok().stdout;
    let copy = Ledger::new();
    let path = copy.file("foreign.json", &exported);
    let said = copy.run(&["import", &path]).ok().stdout;
    assert!(said.contains("1 field(s) ignored (by_person") && said.contains("--ledger"), "{said}");
    assert_eq!(row(&copy).person_cells, Vec::<String>::new(), "a plain import is not a person's");
    let again: Value = copy.run(&["import", &path, "--json"]).ok().json();
    assert_eq!(again["ignored"][0]["field"], "by_person", "{again}");
    let pushed = br#"[{"title": "pushed", "by_person": ["body"]}]"#;
    copy.run_with_input(&["push", "--source", "bot"], pushed).ok();
    assert!(copy.tasks().iter().all(|t| t.person_cells.is_empty()), "{:?}", copy.tasks());
}

/// S13: a pulled source's person-only columns are ignored and reported, the rest syncs.
#[test]
fn s13_a_pulled_source_never_writes_a_correction_and_says_so() {
    let ledger = Ledger::new();
    ledger.file(
        "daicho.toml",
        "[[source]]\nname = \"sheet\"\nkind = \"csv\"\npath = \"sheet.csv\"\nproject = \"PJ-01\"\n",
    );
    ledger.file("sheet.csv", "title,correction,run\ncheck the invoice,pay it twice,true\n");
    let report: Value = ledger.run(&["sync", "--json"]).ok().json();
    let source = &report["sources"][0];
    assert_eq!(source["added"], 1, "{report}");
    let fields: Vec<&str> =
        source["ignored"].as_array().expect("ignored").iter().filter_map(|i| i["field"].as_str()).collect();
    assert_eq!(fields, ["run", "correction"], "{report}");
    assert_eq!(source["ignored"][0]["line"], 2);
    let row = &ledger.tasks()[0];
    assert_eq!((row.correction.as_str(), row.run), ("", false));
    let text = ledger.run(&["sync"]).ok().stdout;
    assert!(text.contains("field(s) ignored (correction, run: only a person writes them)"), "{text}");
}

/// S13, M1: an id in pushed, synced or imported items addresses a row only with its key, across
/// two sources and two projects; one id twice in one file is refused with both lines.
#[test]
fn s13_m1_an_id_never_reaches_another_sources_or_projects_row() {
    let ledger = Ledger::new();
    ledger.file(
        "daicho.toml",
        "[[source]]\nname = \"pj01\"\nkind = \"markdown\"\npath = \"pj01/plan.md\"\nproject = \"PJ-01\"\n\n\
         [[source]]\nname = \"pj02\"\nkind = \"markdown\"\npath = \"pj02/plan.md\"\nproject = \"PJ-02\"\n",
    );
    std::fs::create_dir_all(ledger.dir.path().join("pj01")).expect("dir");
    std::fs::create_dir_all(ledger.dir.path().join("pj02")).expect("dir");
    ledger.file(
        "pj01/plan.md",
        "- [ ] [T-0001] Write the draft\n- [ ] [T-0002] Review the draft | 依存:T-0001\n",
    );
    ledger.file("pj02/plan.md", "- [ ] [T-0001] Write the draft | 担当:writer | 🤖\n");
    let report: Value = ledger.run(&["sync", "--json"]).json();
    assert!(report["sources"][0]["error"].is_null(), "{report}");
    let error = report["sources"][1]["error"].as_str().expect("pj02 refused");
    assert!(error.contains("plan.md:1: names T-0001, which is another task of project PJ-01"), "{error}");
    assert!(error.contains("'pj01|writethedraft'") && error.contains("'pj02|writethedraft'"), "{error}");
    ledger.run(&["add", "Call the customer", "--project", "PJ-01"]).ok();
    let before = snapshot(&ledger);

    let hijack = r#"[{"id":"T-0003","tags":["ai"],"action":"publish","title":"x"}]"#;
    let pushed = ledger.run_with_input(&["push", "--source", "bot"], hijack.as_bytes());
    assert_eq!(pushed.code, 1);
    let error = pushed.json::<Value>()["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains("names T-0003, which is another task"), "{error}");
    let twice = ledger.file("twice.md", "- [ ] [T-0100] one\n\n- [ ] [T-100] two\n");
    let imported = ledger.run(&["import", &twice]);
    assert_eq!(imported.code, 1);
    assert!(
        imported.stderr.contains("twice.md:3: id 'T-100' appears twice in this input: here and at line 1"),
        "{}",
        imported.stderr
    );
    assert_eq!(snapshot(&ledger), before, "nothing written");
    let rows = ledger.tasks();
    assert!(rows.iter().all(|t| t.assignee.is_empty() && t.action.is_empty()), "no cell filled");
}

/// S13: `running` is a claim's alone; a person cannot set it by hand.
#[test]
fn s13_set_status_running_is_refused() {
    let ledger = Ledger::new();
    ledger.run(&["add", "a"]).ok();
    let before = snapshot(&ledger);
    let set = ledger.run(&["set", "T-0001", "--status", "running"]);
    assert_eq!(set.code, 1, "{set:?}");
    assert!(set.stderr.contains("`running` is set only by a claim"), "{}", set.stderr);
    assert_eq!(snapshot(&ledger), before);
}

/// S13, M5, M6: what a person writes with `daicho set` — a body of their own, an emptied action
/// (the row made manual), the `ai` tag taken off — stays theirs: a producer's push with
/// `refresh`, a configured source's sync and an import offering the old values again write
/// none of it (so no agent is routed to the row), while cells no person wrote are still filled.
#[test]
fn s13_m6_a_cell_a_person_wrote_or_emptied_stays_theirs_through_push_sync_and_import() {
    let ledger = Ledger::new();
    let offer = r#"[{"title":"fix the parser","body":"the bot's words","action":"claude","tags":["ai"]}]"#;
    ledger.run_with_input(&["push", "--source", "bot"], offer.as_bytes()).ok();
    ledger.run(&["set", "T-0001", "--body", "my own notes", "--action", "", "--untag", "ai"]).ok();
    let shown: crate::TaskJson = ledger.run(&["show", "T-0001", "--json"]).ok().json();
    assert_eq!(shown.person_cells, ["body", "action", "tags"]);
    let again = r#"[{"title":"fix the parser","body":"12 new reports","action":"claude","tags":["ai"],
                    "assignee":"bot-team","refresh":true}]"#;
    ledger.file("bot.json", again);
    ledger.file("daicho.toml", "[[source]]\nname = \"bot\"\nkind = \"json\"\npath = \"bot.json\"\n");
    let writes: [&[&str]; 3] =
        [&["push", "--source", "bot"], &["sync", "--json"], &["import", "--source", "bot", "bot.json"]];
    for args in writes {
        ledger.run_with_input(args, again.as_bytes()).ok();
        let row: crate::TaskJson = ledger.run(&["show", "T-0001", "--json"]).ok().json();
        assert_eq!(row.body, "my own notes", "{args:?}: a person's body is never refreshed");
        assert_eq!(row.action, "", "{args:?}: a row a person made manual stays manual");
        assert!(!row.tags.contains(&"ai".to_owned()), "{args:?}: the ai tag stays off: {:?}", row.tags);
        assert_eq!(row.assignee, "bot-team", "{args:?}: an empty cell no person wrote is filled");
    }
    let ready = ledger.run(&["ready", "--json"]).ok().json::<Value>();
    assert_eq!(ready["tasks"][0]["action"], "", "no agent is routed to it: {ready}");
    let text = ledger.run(&["show", "T-0001"]).ok().stdout;
    assert!(text.contains("by_person   body, action, tags"), "{text}");
    // Handed back, the body follows the source again; a cell no source has is a usage error.
    let bad = ledger.run(&["set", "T-0001", "--give-back", "colour", "--json"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    ledger.run(&["set", "T-0001", "--give-back", "body"]).ok();
    ledger.run_with_input(&["push", "--source", "bot"], again.as_bytes()).ok();
    let row: crate::TaskJson = ledger.run(&["show", "T-0001", "--json"]).ok().json();
    assert_eq!(
        (row.body.as_str(), row.person_cells.clone()),
        ("12 new reports", vec!["action".into(), "tags".into()])
    );
}

/// S13, M5, M6: a row a person adds by hand is theirs in every cell they wrote, and in its
/// action and tags even empty: a producer's push with `refresh` and an import offering the same
/// row overwrite none of it (its body and evidence stay the person's, and no agent is routed to
/// the manual task), while an empty cell the person did not write is filled as any row's (M5).
/// An `add` that meets a row already there fills its empty cells and makes none of them theirs.
#[test]
fn s13_m5_a_row_a_person_adds_is_theirs_where_they_wrote_and_stays_manual() {
    let ledger = Ledger::new();
    let add = ["add", "rotate the credentials", "--source", "ops", "--body", "by hand; call Ana first"];
    ledger.run(&[&add[..], &["--evidence", "incident-42"]].concat()).ok();
    let shown: crate::TaskJson = ledger.run(&["show", "T-0001", "--json"]).ok().json();
    assert_eq!(shown.person_cells, ["title", "body", "evidence", "action", "tags"]);
    let offer = r#"[{"title":"rotate the credentials","source":"ops","refresh":true,"body":"run the script now",
                    "evidence":"https://elsewhere.example","action":"agent","tags":["ai"],"assignee":"bot"}]"#;
    let offer_file = ledger.file("offer.json", offer);
    let writes: [&[&str]; 2] = [&["push", "--source", "bot"], &["import", "--source", "bot", &offer_file]];
    for args in writes {
        ledger.run_with_input(args, offer.as_bytes()).ok();
        let row: crate::TaskJson = ledger.run(&["show", "T-0001", "--json"]).ok().json();
        assert_eq!(
            (row.body.as_str(), row.evidence.as_str()),
            ("by hand; call Ana first", "incident-42"),
            "{args:?}"
        );
        assert_eq!(
            (row.action.as_str(), row.assignee.as_str()),
            ("", "bot"),
            "{args:?}: manual, assignee filled"
        );
        assert!(row.tags.is_empty(), "{args:?}: {:?}", row.tags);
    }
    let ready = ledger.run(&["ready", "--json"]).ok().json::<Value>();
    assert_eq!(ready["tasks"][0]["action"], "", "no agent is routed to it: {ready}");
    // A row that was there before the person's `add`: filled, not taken over.
    ledger.run_with_input(&["push", "--source", "bot"], br#"[{"title":"the bot's row"}]"#).ok();
    let added = ledger.run(&["add", "the bot's row", "--source", "bot", "--assignee", "ana", "--json"]).ok();
    assert_eq!(added.json::<Value>()["added"], false, "{}", added.stdout);
    let row: crate::TaskJson = ledger.run(&["show", "T-0002", "--json"]).ok().json();
    assert_eq!((row.assignee.as_str(), row.person_cells.len()), ("ana", 0));
}

/// S13: `daicho push` (a producer's channel, as an executor's output is) refuses an item born
/// `done`, naming the line, and writes nothing, and so does an `import` inside a run (an agent's);
/// a checklist a person keeps still imports its ticked lines as done (X3).
#[test]
fn s13_a_push_never_registers_closed_work_but_a_ticked_checklist_line_is_done() {
    let ledger = Ledger::new();
    let before = snapshot(&ledger);
    let items = "[{\"title\":\"open work\"},\n {\"title\":\"the review\",\"status\":\"done\"}]\n";
    let pushed = ledger.run_with_input(&["push", "--source", "bot", "--json"], items.as_bytes());
    assert_eq!(pushed.code, 1, "{pushed:?}");
    let error = pushed.json::<Value>()["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains(":2: status 'done' or 'dropped' is set only by a person"), "{error}");
    assert_eq!(snapshot(&ledger), before, "nothing written");
    let list = ledger.file("tasks.md", "- [x] [T-0001] the review\n- [ ] [T-0002] publish | 依存:T-0001\n");
    // Inside a run, `import` is the agent's push: the ticked line is refused, nothing written.
    let inside =
        ledger.command(&["import", &list]).env("DAICHO_TASK_ID", "T-0009").output().expect("daicho runs");
    let error = String::from_utf8_lossy(&inside.stderr);
    assert_eq!(inside.status.code(), Some(1), "{error}");
    assert!(error.contains(":1: status 'done' or 'dropped' is set only by a person"), "{error}");
    assert_eq!(snapshot(&ledger), before, "nothing written by the agent's import");
    ledger.run(&["import", &list]).ok();
    let statuses: Vec<String> = ledger.tasks().into_iter().map(|t| t.status).collect();
    assert_eq!(statuses, ["done", "pending"]);
}

/// S13: the server's tokens (`DAICHO_TOKEN`, `DAICHO_WORKER_TOKEN`) in daicho's environment never
/// reach a run: an agent cannot use the access token to act for a person over HTTP.
#[test]
fn s13_a_run_never_gets_the_servers_tokens() {
    let ledger = Ledger::new();
    let script = ledger.script(
        "env.sh",
        "cat > /dev/null\necho \"token=${DAICHO_TOKEN:-none} worker=${DAICHO_WORKER_TOKEN:-none} other=${OTHER:-none}\"\n",
    );
    ledger.file(
        "daicho.toml",
        format!("[[action]]\nname = \"env\"\nkind = \"command\"\ncommand = [\"{script}\"]\n"),
    );
    ledger.run(&["add", "show the environment", "--action", "env"]).ok();
    let out = ledger
        .command(&["run", "T-0001", "--json"])
        .env("DAICHO_TOKEN", "0123456789abcdef-person")
        .env("DAICHO_WORKER_TOKEN", "0123456789abcdef-worker")
        .env("OTHER", "kept")
        .output()
        .expect("daicho runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let result = &ledger.tasks()[0].result;
    assert_eq!(result.trim(), "token=none worker=none other=kept");
}

/// S13: an agent that runs `daicho` from inside its run (a coding agent using the shell it was
/// given) acts for no person: closing, ticking, correcting, approving, adding, pausing, running a
/// task as a person does (`daicho run`) and closing its own row are each refused, naming the run, and the ledger keeps nothing of them;
/// its run still ends as daicho records it, and `daicho push` (a producer's channel) still
/// registers what it found.
#[test]
fn s13_an_agent_running_daicho_inside_its_run_acts_for_no_person() {
    let ledger = Ledger::new();
    ledger.run(&["add", "ship the release"]).ok(); // T-0001: a person's row
    let tries = [
        "set T-0001 --status done",
        "set T-0001 --run",
        "set T-0001 --correction my-way",
        "set T-0001 --title shipped",
        "approve T-0001",
        "add sneaky",
        "pause",
        "run T-0001",
        "set T-0002 --status done",
    ];
    let agent = format!(
        "cat > /dev/null\nfor args in {}; do\n  \"$DAICHO_BIN\" $args > /dev/null 2>> \"$LOG.err\"\n  \
         echo \"$args -> $?\" >> \"$LOG\"\ndone\n\
         echo '[{{\"title\":\"found on the way\"}}]' | \"$DAICHO_BIN\" push --source agent > /dev/null\n\
         echo \"push -> $?\" >> \"$LOG\"\necho surveyed\n",
        tries.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(" ")
    );
    let script = ledger.script("agent.sh", &agent);
    ledger.file(
        "daicho.toml",
        format!("[[action]]\nname = \"agent\"\nkind = \"command\"\ncommand = [\"{script}\"]\nauto = true\n"),
    );
    let items = r#"[{"title":"survey the code","action":"agent","tags":["ai"]}]"#;
    ledger.run_with_input(&["push", "--source", "bot"], items.as_bytes()).ok(); // T-0002
    let persons_row = |ledger: &Ledger| ledger.run(&["log", "T-0001", "--json"]).ok().stdout;
    let before = persons_row(&ledger);

    ledger.run(&["run", "T-0002"]).ok();

    let mut expected: Vec<String> = tries.iter().map(|t| format!("{t} -> 1")).collect();
    expected.push("push -> 0".to_owned());
    assert_eq!(ledger.log_lines(), expected, "each person's act refused, the push made");
    let errors = std::fs::read_to_string(ledger.log_path().with_extension("log.err")).expect("the refusals");
    let refusal = "this daicho runs inside the run of T-0002 (DAICHO_TASK_ID is set), and an agent acts for no person (S13)";
    assert_eq!(errors.matches(refusal).count(), tries.len(), "{errors}");
    assert_eq!(persons_row(&ledger), before, "the person's row is untouched");
    let tasks = ledger.tasks();
    let titles: Vec<&str> = tasks.iter().map(|t| t.title.as_str()).collect();
    assert_eq!(
        titles,
        ["ship the release", "survey the code", "found on the way"],
        "nothing added as a person"
    );
    let run = tasks.iter().find(|t| t.id == "T-0002").expect("the agent's row");
    assert_eq!(
        (run.status.as_str(), run.result.as_str()),
        ("review", "surveyed"),
        "ended as daicho records it"
    );
    assert_eq!(sweep(&ledger, "run-requested")["paused"], Value::Null, "the kill switch stays off");
}

//! Commands, output formats and exit codes.

use std::io::Read as _;
use std::process::Stdio;

use serde::Deserialize;

use crate::{Ledger, ReadyJson, TaskJson, fixture, ids};

#[test]
fn x3_seed_004_import_gives_five_tasks_and_only_t500_is_ready() {
    let ledger = Ledger::new();
    ledger.run(&["import", &fixture("seed-004-tasks.md")]).ok();
    let tasks = ledger.tasks();
    assert_eq!(ids(&tasks), ["T-500", "T-501", "T-502", "T-503", "T-504"]);
    let deps: Vec<Vec<String>> = tasks.iter().map(|t| t.deps.clone()).collect();
    assert_eq!(
        deps,
        [vec![], vec!["T-500".to_owned()], vec!["T-501".into()], vec!["T-502".into()], vec!["T-503".into()]]
    );
    for task in &tasks[..4] {
        assert_eq!(task.tags, ["ai"], "{}", task.id);
    }
    assert_eq!(tasks[4].tags, ["external"]);
    assert!(tasks.iter().all(|t| t.project == "PJ-03" && t.status == "pending"));
    assert_eq!(tasks[3].work_type, "台帳");
    let ready: ReadyJson = ledger.run(&["ready", "--json"]).ok().json();
    assert_eq!((ready.total, ids(&ready.tasks)), (1, vec!["T-500"]));
}

#[test]
fn d1_ready_follows_completions_in_id_order() {
    let ledger = Ledger::new();
    ledger.run(&["import", &fixture("tasks.json")]).ok();
    let ready: ReadyJson = ledger.run(&["ready", "--json"]).ok().json();
    let titles: Vec<&str> = ready.tasks.iter().map(|t| t.title.as_str()).collect();
    assert_eq!(titles, ["パーサー実装", "テスト作成"], "t2 before t3, t1 already done");
    let t2 = &ready.tasks[0].id;
    ledger.run(&["set", t2, "--status", "完了"]).ok();
    let ready: ReadyJson = ledger.run(&["ready", "--json"]).ok().json();
    assert_eq!(ready.tasks.iter().map(|t| t.title.as_str()).collect::<Vec<_>>(), ["テスト作成"]);
    let human = ledger.run(&["ready"]).ok();
    assert!(human.stdout.contains("テスト作成") && human.stdout.contains("1 ready"), "{}", human.stdout);
}

#[test]
fn f1_set_writes_reads_back_and_prints_the_stored_values() {
    let ledger = Ledger::new();
    ledger.run(&["add", "draft the article", "--project", "PJ-03", "--tag", "ai"]).ok();
    let set = ledger
        .run(&[
            "set",
            "T-0001",
            "--status",
            "要確認",
            "--correction",
            "shorter, cite sources",
            "--run",
            "--json",
        ])
        .ok();
    let stored: TaskJson = set.json();
    assert_eq!(stored.status, "review");
    assert_eq!(stored.correction, "shorter, cite sources");
    assert!(stored.run);
    let shown: TaskJson = ledger.run(&["show", "T-0001", "--json"]).ok().json();
    assert_eq!(shown, stored, "set prints exactly what show reads back");
    let human = ledger.run(&["set", "T-0001", "--no-run"]).ok();
    assert!(human.stdout.contains("run         false"), "{}", human.stdout);

    let nothing = ledger.run(&["set", "T-0001"]);
    assert_eq!(nothing.code, 2, "no change asked is a usage error: {}", nothing.stderr);
    let nothing_json = ledger.run(&["set", "T-0001", "--json"]);
    assert_eq!(nothing_json.code, 2);
    assert!(
        nothing_json.json::<serde_json::Value>()["error"].as_str().unwrap().contains("nothing to change")
    );
    let cycle = ledger.run(&["add", "second", "--deps", "T-0001"]).ok();
    assert!(cycle.stdout.contains("added T-0002"), "{}", cycle.stdout);
    let refused = ledger.run(&["set", "T-0001", "--deps", "T-0002"]);
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("dependency cycle: T-0001 → T-0002 → T-0001"), "{}", refused.stderr);
}

#[test]
fn log_shows_every_change_with_its_actor() {
    let ledger = Ledger::new();
    ledger.run(&["add", "a task"]).ok();
    ledger.run(&["set", "T-0001", "--status", "done"]).ok();
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Entry {
        seq: i64,
        at: String,
        task: String,
        actor: String,
        kind: String,
        before: serde_json::Map<String, serde_json::Value>,
        after: serde_json::Map<String, serde_json::Value>,
    }
    let entries: Vec<Entry> = ledger.run(&["log", "T-0001", "--json"]).ok().json();
    assert_eq!(entries.len(), 2);
    assert!(entries[0].seq < entries[1].seq && !entries[0].at.is_empty());
    assert_eq!((entries[0].kind.as_str(), entries[0].actor.as_str()), ("add", "human:tester"));
    assert_eq!(entries[1].task, "T-0001");
    assert_eq!(
        (entries[1].before["status"].as_str(), entries[1].after["status"].as_str()),
        (Some("pending"), Some("done"))
    );
    let missing = ledger.run(&["log", "T-0099"]);
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.contains("no task T-0099"));
}

#[test]
fn x2_push_reports_counts_and_is_idempotent() {
    let ledger = Ledger::new();
    let input = br#"[{"title": "found: flaky test", "evidence": "ci log 42", "tags": ["ai"]}, {"title": "found: typo"}]"#;
    #[derive(Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Counts {
        added: usize,
        updated: usize,
        skipped: usize,
    }
    let first: Counts = ledger.run_with_input(&["push", "--source", "ci"], input).ok().json();
    assert_eq!(first, Counts { added: 2, updated: 0, skipped: 0 });
    let second: Counts = ledger.run_with_input(&["push", "--source", "ci"], input).ok().json();
    assert_eq!(second, Counts { added: 0, updated: 0, skipped: 2 }, "M8: the same push twice adds nothing");
    let tasks = ledger.tasks();
    assert_eq!(tasks[0].source, "ci");
    let log: Vec<serde_json::Value> = ledger.run(&["log", "T-0001", "--json"]).ok().json();
    assert_eq!(log[0]["actor"], "push:ci");

    let bad = ledger.run_with_input(&["push"], b"[{\"title\": ");
    assert_eq!(bad.code, 1);
    let error: serde_json::Value = bad.json();
    assert!(error["error"].as_str().unwrap().starts_with("<stdin>:1: invalid JSON"), "{error}");
}

#[test]
fn i1_exit_codes_help_and_missing_ledger() {
    let ledger = Ledger::uninitialized();
    let help = ledger.run(&["--help"]);
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("Exit codes: 0 ok, 1 error, 2 usage, 75 temporary"), "{}", help.stdout);
    for command in ["init", "add", "push", "ready", "list", "show", "set", "log", "import", "export"] {
        assert!(help.stdout.contains(command), "--help lists {command}");
        let sub = ledger.run(&[command, "--help"]);
        assert_eq!(sub.code, 0, "{command} --help");
        assert!(sub.stdout.contains("--json"), "{command} --help names --json");
    }
    assert_eq!(ledger.run(&["frobnicate"]).code, 2);
    let usage = ledger.run(&["list", "--json", "--limit", "many"]);
    assert_eq!(usage.code, 2);
    assert!(
        usage.json::<serde_json::Value>()["error"].as_str().unwrap().starts_with("usage:"),
        "{}",
        usage.stdout
    );
    assert_eq!(ledger.run(&["list", "--status"]).code, 2);
    let notes = ledger.file("notes.txt", "- [ ] a task\n");
    let unknown = ledger.run(&["import", &notes]);
    assert_eq!(unknown.code, 2, "a format that cannot be told is a usage error: {}", unknown.stderr);
    assert!(unknown.stderr.contains("pass --format md|json|jsonl|csv"), "{}", unknown.stderr);
    let missing = ledger.run(&["list"]);
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("no ledger at .daicho/ledger.db; run `daicho init` first"),
        "{}",
        missing.stderr
    );
    let json_error = ledger.run(&["list", "--json"]);
    let error: serde_json::Value = json_error.json();
    assert!(error["error"].as_str().unwrap().contains("no ledger"));
    let init: serde_json::Value = ledger.run(&["init", "--json"]).ok().json();
    assert_eq!(init["created"], true);
    let again: serde_json::Value = ledger.run(&["init", "--json"]).ok().json();
    assert_eq!(again["created"], false);
    assert_eq!(ledger.run(&["show", "not-an-id"]).code, 2, "a malformed id is a usage error");
}

/// I1: a bad argument value is a usage error (exit 2) whether clap or the command finds it (a
/// status name, a date that "" may also clear), and `--json` says which argument, which value
/// and why, as stderr does; nothing is written.
#[test]
fn i1_a_bad_argument_value_exits_2_and_its_json_error_says_what_is_wrong() {
    let ledger = Ledger::new();
    ledger.run(&["add", "a task"]).ok();
    let before = ledger.export();
    for (args, says) in [
        (&["list", "--status", "bogus"][..], "bogus"),
        (&["export", "--status", "bogus"], "bogus"),
        (&["set", "T-0001", "--due", "2026-13-01"], "2026-13-01"),
        (&["set", "T-0001", "--not-before", "yesterday"], "yesterday"),
        (&["set", "T-0001", "--deps", "T-0001,nonsense"], "nonsense"),
        (&["set", "T-0001", "--title", " "], "--title"),
        (&["set", "T-0001", "--status", "bogus"], "bogus"),
        (&["add", "another", "--due", "2026-02-30"], "2026-02-30"),
        (&["stats", "--since", "last tuesday"], "last tuesday"),
    ] {
        let run = ledger.run(&[args, &["--json"]].concat());
        assert_eq!(run.code, 2, "{args:?}: {} {}", run.stdout, run.stderr);
        let error: serde_json::Value = run.json();
        let message = error["error"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{args:?}: {message}");
    }
    assert_eq!(ledger.export(), before, "nothing written");
}

#[test]
fn i5_db_flag_and_environment_choose_the_ledger() {
    let ledger = Ledger::uninitialized();
    let other = ledger.dir.path().join("elsewhere/team.db");
    let other = other.to_string_lossy();
    ledger.run(&["--db", &other, "init"]).ok();
    ledger.run(&["--db", &other, "add", "kept apart"]).ok();
    let via_env = ledger.command(&["list", "--json"]).env("DAICHO_DB", &*other).output().unwrap();
    let tasks: Vec<TaskJson> = serde_json::from_slice(&via_env.stdout).unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(ledger.run(&["list"]).code, 1, "the default ledger was never created");
}

#[test]
fn list_filters_and_japanese_labels() {
    let ledger = Ledger::new();
    ledger.run(&["import", &fixture("tasks.json")]).ok();
    ledger.run(&["add", "other project", "--project", "PJ-09", "--tag", "heavy"]).ok();
    let count = |args: &[&str]| -> usize {
        let mut all = vec!["list", "--json"];
        all.extend_from_slice(args);
        ledger.run(&all).ok().json::<Vec<TaskJson>>().len()
    };
    assert_eq!(count(&["--project", "PJ-02"]), 5);
    assert_eq!(count(&["--status", "done"]), 1);
    assert_eq!(count(&["--status", "open"]), 5);
    assert_eq!(count(&["--status", "Open"]), 5, "shorthands ignore case");
    assert_eq!(count(&["--status", "未着手,完了"]), 6);
    assert_eq!(count(&["--source", "tasks"]), 5);
    assert_eq!(count(&["--tag", "heavy"]), 1);
    assert_eq!(count(&["--limit", "2"]), 2);
    let ja = ledger.command(&["list"]).env("DAICHO_LANG", "ja").output().unwrap();
    let text = String::from_utf8(ja.stdout).unwrap();
    assert!(text.contains("未着手") && text.contains("完了") && text.contains("状態"), "{text}");
}

#[test]
fn a_closed_stdout_exits_quietly() {
    let ledger = Ledger::new();
    let items: Vec<String> =
        (0..3000).map(|i| format!("{{\"title\": \"task number {i} with a long enough title\"}}")).collect();
    ledger.run_with_input(&["push"], format!("[{}]", items.join(",")).as_bytes()).ok();
    let mut child = ledger.command(&["list"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    assert!(output.stderr.is_empty(), "nothing on stderr: {}", String::from_utf8_lossy(&output.stderr));
}

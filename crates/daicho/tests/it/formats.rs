//! Import and export: every format round-trips, the done file resolves deps, re-import is a no-op.

use crate::{Ledger, fixture, ids};

/// A ledger with every kind of field filled in somewhere.
fn rich() -> Ledger {
    let ledger = Ledger::new();
    ledger.run(&["import", &fixture("tasks-done.md"), &fixture("tasks-open.md")]).ok();
    ledger.run(&["import", &fixture("seed-004-tasks.md")]).ok();
    ledger.run(&["import", &fixture("tasks.json")]).ok();
    ledger
        .run(&[
            "add",
            "multi | line, \"quoted\"",
            "--body",
            "line one\nline two, with | pipes \\ and \"quotes\"",
            "--evidence",
            "https://example.test/q?a=1|2",
            "--due",
            "2026-12-01",
            "--priority",
            "-3",
            "--not-before",
            "2026-12-01T09:00:00Z",
            "--action",
            "draft",
            "--tag",
            "ai,heavy,night",
            "--deps",
            "T-0001,T-500",
            "--assignee",
            "担当者",
            "--type",
            "制作/記事",
        ])
        .ok();
    ledger.run(&["set", "T-0003", "--status", "needs_human", "--correction", "ask the owner", "--run"]).ok();
    ledger.run(&["set", "T-501", "--status", "dropped"]).ok();
    ledger.run(&["set", "T-502", "--status", "review"]).ok();
    // Cells a person wrote (S13): the export carries them as `by_person`.
    ledger.run(&["set", "T-0002", "--assignee", "ana", "--body", "a person's words"]).ok();
    ledger
}

#[test]
fn x3_export_then_import_gives_back_the_same_ledger_in_every_format() {
    let original = rich();
    for (format, extension) in [("md", "md"), ("json", "json"), ("csv", "csv"), ("jsonl", "jsonl")] {
        let exported = original.run(&["export", "--format", format]).ok().stdout;
        let copy = Ledger::new();
        let path = copy.file(&format!("ledger.{extension}"), &exported);
        copy.run(&["import", "--ledger", &path]).ok();
        let again = copy.run(&["export", "--format", format]).ok().stdout;
        assert_eq!(again, exported, "{format}: export → import → export differs");
        // Every visible field survives, whichever format carried it.
        let strip = |tasks: Vec<crate::TaskJson>| {
            tasks
                .into_iter()
                .map(|mut t| {
                    t.created_at.clear();
                    t.updated_at.clear();
                    t
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(copy.tasks()), strip(original.tasks()), "{format}: rows differ");
        let marked = copy.tasks().into_iter().find(|t| t.id == "T-0002").expect("T-0002").person_cells;
        assert_eq!(marked, ["body", "assignee"], "{format}: the cells a person wrote stay theirs (S13)");
        let reimport = copy.run(&["import", "--ledger", &path, "--json"]).ok();
        let report: serde_json::Value = reimport.json();
        assert_eq!(
            (report["added"].as_u64(), report["updated"].as_u64()),
            (Some(0), Some(0)),
            "{format}: M8"
        );
    }
}

#[test]
fn x3_csv_with_japanese_headers_round_trips() {
    let original = rich();
    let exported = original.run(&["export", "--format", "csv", "--ja"]).ok().stdout;
    assert!(
        exported.starts_with("タスクID,状態,▶AI実行,タスク,内容,発生源,根拠,期限,担当,分類"),
        "{exported}"
    );
    assert!(exported.contains(",要人手,"));
    let copy = Ledger::new();
    copy.run(&["import", "--ledger", &copy.file("台帳.csv", &exported)]).ok();
    assert_eq!(copy.run(&["export", "--format", "csv", "--ja"]).ok().stdout, exported);
}

#[test]
fn x3_a_done_file_resolves_dependencies() {
    let ledger = Ledger::new();
    let run = ledger.run(&["import", &fixture("tasks-open.md"), &fixture("tasks-done.md")]).ok();
    assert!(run.stdout.contains("5 added"), "{}", run.stdout);
    let tasks = ledger.tasks();
    let done: Vec<&str> = tasks.iter().filter(|t| t.status == "done").map(|t| t.id.as_str()).collect();
    assert_eq!(done, ["T-0001", "T-0002"]);
    let ready: crate::ReadyJson = ledger.run(&["ready", "--json"]).ok().json();
    assert_eq!(ids(&ready.tasks), ["T-0003"], "T-0004 waits for T-0003; T-0001 and T-0002 are done");
}

#[test]
fn m3_m4_m5_reimport_never_overwrites_what_a_person_wrote() {
    let ledger = Ledger::new();
    let path = ledger.file("tasks.md", "- [ ] [T-0001] research | 担当:writer\n- [ ] [T-0002] draft\n");
    ledger.run(&["import", &path]).ok();
    ledger.run(&["set", "T-0001", "--assignee", "a person", "--correction", "use primary sources"]).ok();
    ledger.run(&["set", "T-0002", "--status", "done"]).ok();
    std::fs::write(
        &path,
        "- [ ] [T-0001] research | 担当:someone else | 期限:2026-12-31\n- [ ] [T-0002] draft | 担当:x\n- [ ] new one\n",
    )
    .unwrap();
    let report: serde_json::Value = ledger.run(&["import", &path, "--json"]).ok().json();
    assert_eq!(
        (report["added"].as_u64(), report["updated"].as_u64(), report["skipped"].as_u64()),
        (Some(1), Some(1), Some(1))
    );
    let tasks = ledger.tasks();
    assert_eq!(tasks[0].assignee, "a person", "M5: a value is never overwritten");
    assert_eq!(tasks[0].due.as_deref(), Some("2026-12-31"), "M5: an empty cell is filled");
    assert_eq!(tasks[0].correction, "use primary sources", "M4");
    assert_eq!(tasks[1].assignee, "", "M3: a done row is not touched");
    assert!(report["skips"][0]["reason"].as_str().unwrap().contains("done"));
}

#[test]
fn reimporting_one_file_or_a_renamed_row_adds_no_duplicate() {
    let ledger = Ledger::new();
    ledger.run(&["import", &fixture("tasks-open.md"), &fixture("tasks-done.md")]).ok();
    ledger.run(&["set", "T-0003", "--title", "テスト作成 v2"]).ok();
    // Alone, the done file's items get another default source (another key): their ids name
    // rows of another source, so the import is refused (S13); under their own source they match.
    let alone = ledger.run(&["import", &fixture("tasks-done.md")]);
    assert_eq!(alone.code, 1);
    assert!(alone.stderr.contains("names T-0001, which is another task"), "{}", alone.stderr);
    let report: serde_json::Value =
        ledger.run(&["import", &fixture("tasks-done.md"), "--source", "tasks-open", "--json"]).ok().json();
    assert_eq!(report["added"], 0, "{report}");
    let out = crate::path_in(&ledger, "ledger.json");
    ledger.run(&["export", "--out", out.to_str().unwrap()]).ok();
    let report: serde_json::Value = ledger.run(&["import", out.to_str().unwrap(), "--json"]).ok().json();
    assert_eq!((report["added"].as_u64(), report["updated"].as_u64()), (Some(0), Some(0)), "{report}");
    let tasks = ledger.tasks();
    assert_eq!(tasks.len(), 5);
    assert_eq!(tasks[2].title, "テスト作成 v2");
}

/// I1: an export is written a page of 10,000 rows at a time; across page boundaries every row
/// comes once, in id order, in every format, with a filter, to standard output and to a file.
#[test]
fn i1_an_export_in_pages_has_every_row_once() {
    let ledger = Ledger::new();
    let n = 20_003;
    let mut lines = String::new();
    for i in 1..=n {
        let status = if i % 3 == 0 { "done" } else { "pending" };
        lines.push_str(&format!("{{\"title\": \"row {i}\", \"status\": \"{status}\"}}\n"));
    }
    let path = ledger.file("rows.jsonl", &lines);
    ledger.run(&["import", &path]).ok();
    let exported = ledger.run(&["export", "--format", "jsonl"]).ok().stdout;
    let ids: Vec<u64> = exported
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_str().unwrap()[2..]
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(ids, (1..=n).collect::<Vec<u64>>(), "every row once, in id order");
    let done = ledger.run(&["export", "--format", "jsonl", "--status", "done"]).ok().stdout;
    assert_eq!(done.lines().count() as u64, n / 3);
    assert!(done.lines().all(|l| l.contains("\"status\":\"done\"")));
    for format in ["json", "csv", "md"] {
        let out = ledger.dir.path().join(format!("all.{format}"));
        let wrote: serde_json::Value =
            ledger.run(&["export", "--out", out.to_str().unwrap(), "--json"]).ok().json();
        assert_eq!(wrote["tasks"], n, "{format}");
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(text, ledger.run(&["export", "--format", format]).ok().stdout, "{format}: file = stdout");
        let copy = Ledger::new();
        copy.run(&["import", "--ledger", out.to_str().unwrap()]).ok();
        assert_eq!(copy.run(&["export", "--format", format]).ok().stdout, text, "{format}: round trip");
    }
}

/// M8: a re-import shows a person the first 100 skipped items and counts the rest; `--json`
/// lists every one.
#[test]
fn m8_a_large_re_import_lists_the_first_skips_and_counts_the_rest() {
    let ledger = Ledger::new();
    let lines: String = (1..=150).map(|i| format!("{{\"title\": \"row {i}\"}}\n")).collect();
    let path = ledger.file("rows.jsonl", &lines);
    ledger.run(&["import", &path]).ok();
    let again = ledger.run(&["import", &path]).ok().stdout;
    assert!(again.starts_with(&format!("imported {path}: 0 added, 0 updated, 150 skipped")), "{again}");
    assert_eq!(again.lines().filter(|l| l.starts_with("  skipped line ")).count(), 100, "{again}");
    assert!(again.contains("skipped line 100: T-0100 row 100: unchanged"), "{again}");
    assert!(!again.contains("row 101:"), "{again}");
    assert!(again.trim_end().ends_with("… and 50 more skipped (--json lists every one)"), "{again}");
    let json: serde_json::Value = ledger.run(&["import", &path, "--json"]).ok().json();
    assert_eq!(json["skips"].as_array().map(Vec::len), Some(150));
}

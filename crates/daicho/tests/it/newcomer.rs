//! X4, F2, I4 (issue 16, item 5): what a newcomer meets first — clear refusals instead of
//! silent surprises.

use crate::Ledger;

/// A 0-byte file named as the ledger is never made one by a command that is not `init`: read
/// commands and writes alike refuse it and leave it empty.
#[test]
fn x4_an_empty_file_is_not_taken_for_a_ledger() {
    let ledger = Ledger::uninitialized();
    let empty = ledger.file("empty.db", "");
    for args in [&["list"][..], &["ready"], &["doctor"], &["show", "T-0001"], &["add", "a task"]] {
        let mut full = vec!["--db", empty.as_str()];
        full.extend_from_slice(args);
        let run = ledger.run(&full);
        assert_eq!(run.code, 1, "{full:?}: {}", run.stdout);
        assert!(run.stderr.contains("is an empty file, not a ledger"), "{full:?}: {}", run.stderr);
        assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0, "{full:?} wrote into the file");
    }
    ledger.run(&["--db", &empty, "init"]).ok();
    ledger.run(&["--db", &empty, "list"]).ok();
}

/// X4, D3: a file that is not a ledger is never made one: another program's SQLite database (the
/// daicho schema was written into it beside its own tables) and a short file of text (SQLite
/// takes one under its header's size for an empty database, and overwrote it) are refused by
/// every command, `init` included, and left as they were, byte for byte.
#[test]
fn x4_a_database_of_something_else_or_a_short_file_is_not_made_a_ledger() {
    let ledger = Ledger::uninitialized();
    let other = ledger.dir.path().join("app.db");
    let made = std::process::Command::new("python3")
        .args(["-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('CREATE TABLE users (x)'); c.commit()"])
        .arg(&other)
        .status()
        .expect("python3 makes a database");
    assert!(made.success());
    let other = other.display().to_string();
    let bytes = std::fs::read(&other).expect("the other database");
    let short = ledger.file("short.db", "x");
    let tables = |db: &str| -> String {
        let out = std::process::Command::new("python3")
            .args(["-c", "import sqlite3, sys; print(sorted(r[0] for r in sqlite3.connect(sys.argv[1]).execute('SELECT name FROM sqlite_schema')))"])
            .arg(db)
            .output()
            .expect("python3 reads the database");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    for args in
        [&["add", "a task"][..], &["init"], &["pause"], &["ready"], &["list"], &["import", "tasks.md"]]
    {
        ledger.file("tasks.md", "- [ ] a task\n");
        for (db, says) in
            [(&other, "a SQLite database of something else"), (&short, "too short for a SQLite database")]
        {
            let mut full = vec!["--db", db.as_str()];
            full.extend_from_slice(args);
            let run = ledger.run(&full);
            assert_ne!(run.code, 0, "{full:?}: {}", run.stdout);
            let refused = run.stderr.contains(says)
                || (db == &short && run.stderr.contains("not a daicho ledger (no schema)"));
            assert!(refused, "{full:?}: {}", run.stderr);
        }
        assert_eq!(tables(&other), "['users']", "{args:?} wrote into the other program's database");
        // Not a byte of it changed, and it was not switched to WAL (which writes its header).
        assert!(
            std::fs::read(&other).expect("the other database") == bytes,
            "{args:?} changed the other database"
        );
        for file in [format!("{other}-wal"), format!("{other}-shm")] {
            assert!(!std::path::Path::new(&file).exists(), "{args:?} made {file}");
        }
        assert_eq!(std::fs::read_to_string(&short).expect("short"), "x", "{args:?} wrote into the file");
    }
}

/// F2: purging or restoring a source the ledger does not know says so and fails.
#[test]
fn f2_purge_and_restore_of_an_unknown_source_say_so() {
    let ledger = Ledger::new();
    ledger.run(&["add", "a task", "--source", "scan"]).ok();
    let purge = ledger.run(&["purge-source", "sacn"]);
    assert_eq!(purge.code, 1, "{}", purge.stdout);
    assert!(purge.stderr.contains("no row of the ledger has the source 'sacn'"), "{}", purge.stderr);
    let restore = ledger.run(&["restore", "scan"]);
    assert_eq!(restore.code, 1, "{}", restore.stdout);
    assert!(restore.stderr.contains("nothing of the source 'scan' is purged"), "{}", restore.stderr);
    ledger.run(&["purge-source", "scan"]).ok();
}

/// M5, S13: an import whose item offers other values for cells a row already has, or another
/// status, says that the row keeps its own, not that nothing changed.
#[test]
fn m5_an_import_skip_says_which_cells_the_row_keeps() {
    let ledger = Ledger::new();
    let first = ledger.file(
        "tasks.md",
        "- [ ] [T-0001] outline\n- [ ] [T-0002] draft | 依存:T-0001\n- [ ] [T-0003] review\n",
    );
    ledger.run(&["import", &first]).ok();
    let again = ledger.file(
        "tasks.md",
        "- [ ] [T-0001] outline\n- [ ] [T-0002] draft | 依存:T-0003\n- [ ] [T-0003] review\n",
    );
    let run = ledger.run(&["import", &again]).ok();
    assert!(run.stdout.contains("T-0002 draft: the row keeps its own deps"), "{}", run.stdout);
    assert!(!run.stdout.contains("T-0002 draft: unchanged"), "{}", run.stdout);
    // Another status is kept too, and said so: only a person or a run moves a row.
    let moved = ledger.file("moved.csv", "id,title,status,source\nT-0003,review,done,tasks\n");
    let run = ledger.run(&["import", &moved]).ok();
    let said = "T-0003 review: the row keeps its own status (only a person or a run moves a row)";
    assert!(run.stdout.contains(said), "{}", run.stdout);
    assert_eq!(ledger.tasks()[2].status, "pending");
}

/// DAICHO_LANG=ja: `view`, `log`, ready's reasons and the sweep, doctor, approve, stats and sync
/// messages speak Japanese; `show` aligns its Japanese labels by display width. JSON stays the
/// same in both languages.
#[test]
fn x4_daicho_lang_ja_covers_the_messages_people_read() {
    let ledger = Ledger::new();
    ledger.run(&["add", "仕様を確認する", "--project", "PJ-01", "--tag", "ai"]).ok();
    let ja = |args: &[&str]| {
        let output = ledger.command(args).env("DAICHO_LANG", "ja").output().unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned())
    };
    for (args, expect) in [
        (&["ready"][..], "停滞: 分類 '' も担当 '' も受け付ける実行先がありません"),
        (&["view"], "未着手"),
        (&["log", "T-0001"], "作成: 仕様を確認する"),
        (&["sweep", "--role", "auto"], "実行 0、保留 1、承認待ちへ 0、持ち越し: 0"),
        (&["doctor"], "実行可能ですが、停滞"),
        (&["approve"], "承認待ちはありません"),
        (&["stats"], "以降の実行はありません"),
        (&["sync"], "取り込み元がありません"),
    ] {
        let (_, stdout) = ja(args);
        assert!(stdout.contains(expect), "{args:?}: {stdout}");
    }
    let english = ledger.run(&["ready"]).ok();
    assert!(english.stdout.contains("stalled: no executor accepts type ''"), "{}", english.stdout);
    let (_, json) = ja(&["ready", "--json"]);
    assert_eq!(json, ledger.run(&["ready", "--json"]).ok().stdout, "JSON does not depend on the language");

    // `show`: every value starts at the same display column (a Japanese character is 2 wide).
    let (_, show) = ja(&["show", "T-0001"]);
    let mut starts = std::collections::BTreeSet::new();
    for line in show.lines().filter(|l| !l.starts_with(' ')) {
        let Some(label_end) = line.find("  ") else { continue };
        let value = line[label_end..].trim_start();
        if !value.is_empty() {
            starts.insert(unicode_width::UnicodeWidthStr::width(&line[..line.len() - value.len()]));
        }
    }
    assert!(!starts.is_empty(), "{show}");
    let widths = starts;
    assert_eq!(widths.len(), 1, "labels not aligned: {widths:?}\n{show}");
}

//! X4 (issue 16, outputs): what daicho writes never replaces what is not its own file, `--json`
//! means JSON on every command, logs carry no colour codes off a terminal, and a configuration
//! named on the command line is never silently ignored.

use crate::Ledger;

fn with_two_tasks() -> Ledger {
    let ledger = Ledger::new();
    ledger.run(&["add", "first", "--project", "PJ"]).ok();
    ledger.run(&["add", "second", "--project", "PJ", "--deps", "T-0001"]).ok();
    ledger
}

/// `export --out` and `view --out` write through a symbolic link (the link stays a link) and
/// into a FIFO (it stays a FIFO).
#[test]
fn x4_out_follows_a_symlink_and_writes_into_a_fifo() {
    use std::os::unix::fs::FileTypeExt as _;
    let ledger = with_two_tasks();
    let target = ledger.file("ledger.md", "old");
    let link = ledger.dir.path().join("latest.md");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    ledger.run(&["export", "--out", &link.to_string_lossy()]).ok();
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link stays");
    assert!(std::fs::read_to_string(&target).unwrap().contains("first"), "the target was written");

    let fifo = ledger.dir.path().join("view.pipe");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // Opened without blocking (O_NONBLOCK) first, so that a FIFO replaced instead of written
    // fails this test instead of hanging it.
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut reader = std::fs::OpenOptions::new().read(true).custom_flags(0o4000).open(&fifo).unwrap();
    ledger.run(&["view", "--format", "md", "--out", &fifo.to_string_lossy()]).ok();
    let mut got = String::new();
    let _ = reader.read_to_string(&mut got);
    assert!(got.contains("second"), "the view went through the pipe: {got:?}");
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO stays");
}

/// `--json` is honoured by `view` and `export`, and a format that contradicts it is refused.
#[test]
fn x4_view_and_export_honour_json() {
    let ledger = with_two_tasks();
    let view: serde_json::Value = ledger.run(&["view", "--json"]).ok().json();
    assert_eq!(view["rows"].as_array().map(Vec::len), Some(2), "{view}");
    let export: serde_json::Value = ledger.run(&["export", "--json"]).ok().json();
    assert!(export.to_string().contains("second"), "{export}");
    for args in [&["view", "--json", "--format", "md"][..], &["export", "--json", "--format", "csv"]] {
        let refused = ledger.run(args);
        assert_eq!(refused.code, 1, "{args:?}: {}", refused.stdout);
        assert!(refused.stderr.contains("--json"), "{args:?}: {}", refused.stderr);
        let error: serde_json::Value = refused.json();
        assert!(error["error"].is_string(), "{args:?}: {error}");
    }
}

/// Logs on a pipe carry no ANSI colour codes.
#[test]
fn x4_logs_off_a_terminal_have_no_colour() {
    let ledger = with_two_tasks();
    // The second item repeats the first one's key: it is skipped, and the skip is logged.
    let file = ledger.file("found.json", r#"[{"title": "dup"}, {"title": "dup"}]"#);
    let push = ledger.run(&["-v", "push", &file]).ok();
    assert!(push.stderr.contains("skipped"), "{}", push.stderr);
    assert!(!push.stderr.contains('\u{1b}'), "colour codes in: {:?}", push.stderr);
}

/// A configuration named with `--config` that is missing or broken is refused by every command,
/// also those that do not otherwise read it, before anything is written.
#[test]
fn x4_every_command_refuses_a_missing_or_broken_config() {
    let ledger = with_two_tasks();
    let broken = ledger.file("broken.toml", "[[action]]\nname = \"x\"\nkind = \"rocket\"\n");
    let tasks = ledger.file("more.md", "- [ ] third\n");
    for config in ["missing.toml", broken.as_str()] {
        for args in [&["list"][..], &["import", tasks.as_str()], &["show", "T-0001"], &["ready"]] {
            let mut full = vec!["--config", config];
            full.extend_from_slice(args);
            let run = ledger.run(&full);
            assert_eq!(run.code, 1, "{full:?} ran:\n{}", run.stdout);
            assert!(run.stderr.contains(config.rsplit('/').next().unwrap()), "{full:?}: {}", run.stderr);
        }
    }
    let list: Vec<serde_json::Value> = ledger.run(&["list", "--json"]).ok().json();
    assert_eq!(list.len(), 2, "nothing was imported");
}

/// A ledger in a read-only place (a read-only mount; a directory one may not write, when not
/// root) can still be listed, shown and exported, and nothing is created beside it; a command
/// that writes is refused there with an error, not a crash.
#[test]
fn x4_a_ledger_in_a_read_only_place_can_be_read() {
    let ledger = with_two_tasks();
    let dir = ledger.dir.path().join(".daicho");
    let before: std::collections::BTreeSet<_> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    let root = std::process::Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    let run = |args: &[&str]| {
        let mut command = if root {
            // As root, permissions do not stop a write: a read-only bind mount over the
            // directory, in a mount namespace of the command's own.
            let mut command = std::process::Command::new("unshare");
            let script = r#"mount --bind -o ro "$1" "$1" && shift && exec "$@""#;
            command.args(["-m", "sh", "-c", script, "sh"]).arg(&dir).arg(env!("CARGO_BIN_EXE_daicho"));
            command
        } else {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
            std::process::Command::new(env!("CARGO_BIN_EXE_daicho"))
        };
        let output = command
            .args(args)
            .current_dir(ledger.dir.path())
            .env_remove("DAICHO_DB")
            .env_remove("DAICHO_CONFIG")
            .output()
            .unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned(), output.stderr)
    };
    for args in
        [&["list", "--json"][..], &["show", "T-0002"], &["export", "--format", "json"], &["log", "T-0001"]]
    {
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, Some(0), "{args:?}: {}", String::from_utf8_lossy(&stderr));
        assert!(stdout.contains("T-000") || stdout.contains("created: first"), "{args:?}: {stdout}");
    }
    // The commands that only look: the ready set with its reasons, the health check, the
    // approval queue and its history, the counts, the cross view.
    let looks: [&[&str]; 6] = [
        &["ready", "--json"],
        &["doctor", "--json"],
        &["approve", "--json"],
        &["approve", "--history", "--json"],
        &["stats", "--json"],
        &["view", "--json"],
    ];
    for args in looks {
        let (code, stdout, stderr) = run(args);
        let answer: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
        // `doctor` exits 1 on a finding; an error is never the answer.
        assert!(answer.get("error").is_none(), "{args:?}: {code:?} {stdout}");
        assert!(matches!(code, Some(0 | 1)), "{args:?}: {code:?} {}", String::from_utf8_lossy(&stderr));
    }
    let (code, _, stderr) = run(&["add", "third"]);
    assert_eq!(code, Some(1), "a write in a read-only place is refused");
    assert!(
        String::from_utf8_lossy(&stderr).contains("daicho: error:"),
        "{}",
        String::from_utf8_lossy(&stderr)
    );
    let after: std::collections::BTreeSet<_> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(after, before, "nothing created or removed beside the ledger");
}

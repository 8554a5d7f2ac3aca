//! `daicho-bench fsyncs`: how many times each durable change of a one-shot command syncs to disk
//! on SQLite (issue 17: one per change is the floor), counted with strace (Debian package
//! strace) around the real `daicho` binary: `add`, `set`, `push` of one item, `run` of a task
//! (its claim and its end, with a trivial command action) and `worker --once` per task.

use std::path::Path;
use std::process::{Command, Stdio};

/// Counts the `fsync` and `fdatasync` calls of `daicho ARGS` (every process it starts included).
fn syncs(bin: &Path, dir: &Path, args: &[&str], input: Option<&str>) -> usize {
    let trace = dir.join("trace.txt");
    let mut command = Command::new("strace");
    command
        .args(["-f", "-e", "trace=fsync,fdatasync", "-o"])
        .arg(&trace)
        .arg(bin)
        .args(["--db", "ledger.db"])
        .args(args)
        .current_dir(dir)
        .env_remove("DAICHO_DB")
        .env_remove("DAICHO_CONFIG")
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let mut child = command.spawn().expect("strace runs (Debian package strace)");
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        use std::io::Write as _;
        stdin.write_all(text.as_bytes()).expect("stdin");
    }
    assert!(child.wait().expect("strace").success(), "daicho {args:?} failed");
    let lines = std::fs::read_to_string(&trace).expect("the trace");
    lines
        .lines()
        .filter(|l| l.contains("fsync(") || l.contains("fdatasync("))
        .filter(|l| !l.contains("= -1"))
        .count()
}

/// Prints the syncs per command next to the floor of one.
pub fn bench_fsyncs() {
    let bin = crate::daicho_bin();
    let dir = std::env::temp_dir().join(format!("daicho-bench-fsyncs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("daicho.toml"),
        "[[action]]\nname = \"quick\"\nkind = \"command\"\ncommand = [\"true\"]\nauto = true\non_success = \"done\"\n",
    )
    .expect("config");
    crate::run(&bin, &dir.join("ledger.db"), &["init", "--no-config"], None);
    let quick = ["--action", "quick", "--tag", "ai"];
    let add = syncs(&bin, &dir, &[&["add", "first"][..], &quick].concat(), None);
    let set = syncs(&bin, &dir, &["set", "T-0001", "--priority", "3"], None);
    let push = syncs(&bin, &dir, &["push"], Some(r#"[{"title": "pushed", "action": "quick"}]"#));
    let run = syncs(&bin, &dir, &["run", "T-0001"], None);
    let tasks = 20;
    for n in 0..tasks {
        crate::run(
            &bin,
            &dir.join("ledger.db"),
            &[&["add", &format!("task {n}")][..], &quick].concat(),
            None,
        );
    }
    let worker = syncs(&bin, &dir, &["worker", "--once"], None);
    println!("fsyncs: add {add}, set {set}, push of one item {push} (floor 1 each: the commit)");
    println!("fsyncs: run of one task {run} (claim and end: floor 2, one commit each)");
    println!(
        "fsyncs: worker --once over {tasks} tasks {worker}, {:.2} per task (floor 1: an end shares its commit with the next claim)",
        worker as f64 / tasks as f64
    );
    let _ = std::fs::remove_dir_all(&dir);
}

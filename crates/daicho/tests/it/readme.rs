//! The README's short tour runs as written from an empty directory (issue 16, item 5): every
//! line but the long-running `serve`, `mcp` and the PostgreSQL `worker`, each as its own shell
//! command, with the `daicho` under test first on PATH. Every id the tour names exists by then.

use std::path::Path;

/// The lines of the tour's shell block.
fn tour() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap();
    let section = &readme[readme.find("## A short tour").expect("a short tour in the README")..];
    let block = &section[section.find("```sh\n").expect("its shell block") + 6..];
    let block = &block[..block.find("```").expect("the block's end")];
    block.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect()
}

#[test]
fn x4_the_readme_tour_runs_as_written_from_an_empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_daicho")).parent().unwrap().to_owned();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let (mut ran, mut skipped) = (0, Vec::new());
    for line in tour() {
        let command = line.split("  #").next().unwrap_or_default();
        let words: Vec<&str> = command.split_whitespace().collect();
        if words.iter().any(|w| ["serve", "mcp", "worker"].contains(w)) {
            skipped.push(line.clone());
            continue;
        }
        let output = std::process::Command::new("sh")
            .args(["-c", &line])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("LANG", "C")
            .env("DAICHO_USER", "tour")
            .env_remove("DAICHO_DB")
            .env_remove("DAICHO_CONFIG")
            .env_remove("DAICHO_LANG")
            .env_remove("DAICHO_TASK_ID")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let (stdout, stderr) =
            (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        let code = output.status.code();
        // `run` says why a task cannot run and exits 1; `doctor` exits 1 when it finds something.
        let may_fail = words.iter().any(|w| ["run", "run-heavy", "doctor"].contains(w));
        assert!(
            code == Some(0) || (may_fail && code == Some(1)),
            "{line}\nexit {code:?}\n{stdout}\n{stderr}"
        );
        assert!(!stderr.contains("no task ") && !stderr.contains("error: usage"), "{line}\n{stderr}");
        ran += 1;
    }
    assert_eq!(skipped.len(), 3, "only serve, mcp and the PostgreSQL worker are skipped: {skipped:?}");
    assert!(ran >= 30, "the tour ran {ran} lines");
    let list = std::process::Command::new(env!("CARGO_BIN_EXE_daicho"))
        .args(["list", "--json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let tasks: Vec<serde_json::Value> = serde_json::from_slice(&list.stdout).unwrap();
    let titles: Vec<&str> = tasks.iter().filter_map(|t| t["title"].as_str()).collect();
    for title in [
        "parse the config",
        "outline the design",
        "draft the notes",
        "call the vendor",
        "write the release notes",
        "flaky test in ci",
    ] {
        assert!(titles.contains(&title), "{title} missing from {titles:?}");
    }
}

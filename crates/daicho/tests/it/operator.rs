//! Fitting the operator's tools (I7): shell completions and man pages generated from the
//! command-line grammar itself, and service units that systemd accepts.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Ledger;

/// Whether a tool a test needs is missing and the explicit opt-out variable is set; without the
/// variable a missing tool fails the test, saying how to install it.
fn missing(program: &str, package: &str, opt_out: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return false;
    }
    assert!(
        std::env::var_os(opt_out).is_some(),
        "{program} is missing: install Debian's {package} (`apt-get install {package}`), or set {opt_out}=1 to skip"
    );
    eprintln!("skipping: {program} is missing and {opt_out} is set");
    true
}

/// I7: `daicho completions bash` is a script bash loads, and completing `daicho sw` offers
/// `sweep`, completing `daicho sweep --role ` offers the roles; zsh, fish and PowerShell
/// scripts come out too; an unknown shell is a usage error.
#[test]
fn i7_bash_completion_loads_and_completes_subcommands_and_values() {
    let ledger = Ledger::uninitialized();
    let script = ledger.run(&["completions", "bash"]).ok().stdout;
    let file = ledger.file("daicho.bash", &script);
    let syntax = Command::new("bash").args(["-n", &file]).output().expect("bash");
    assert!(syntax.status.success(), "{}", String::from_utf8_lossy(&syntax.stderr));
    // Load it and ask for completions the way bash's programmable completion does.
    let complete = |line: &str| {
        let words: Vec<&str> = line.split(' ').collect();
        let probe = format!(
            "source {file}\nCOMP_WORDS=({words})\nCOMP_CWORD={cword}\nCOMP_LINE='{line}'\nCOMP_POINT={point}\n\
             _daicho daicho '{current}' '{previous}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
            words = words.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" "),
            cword = words.len() - 1,
            point = line.len(),
            current = words[words.len() - 1],
            previous = words[words.len() - 2],
        );
        let out = Command::new("bash").args(["-c", &probe]).output().expect("bash");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_owned).collect::<Vec<_>>()
    };
    assert_eq!(complete("daicho sw"), ["sweep"]);
    let all = complete("daicho ");
    for command in ["add", "ready", "serve", "worker", "completions", "man"] {
        assert!(all.iter().any(|c| c == command), "{command} in {all:?}");
    }
    assert_eq!(complete("daicho sweep --role "), ["run-requested", "auto", "sync", "view"]);
    for (shell, marker) in [
        ("zsh", "#compdef daicho"),
        ("fish", "complete -c daicho"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let script = ledger.run(&["completions", shell]).ok().stdout;
        assert!(script.contains(marker), "{shell}: {}", &script[..script.len().min(200)]);
    }
    let json: serde_json::Value = ledger.run(&["completions", "fish", "--json"]).ok().json();
    assert_eq!(json["shell"], "fish");
    assert!(json["script"].as_str().is_some_and(|s| s.contains("complete -c daicho")), "{json}");
    let wrong = ledger.run(&["completions", "tcsh"]);
    assert_eq!(wrong.code, 2, "{}", wrong.stderr);
}

/// I7: `daicho man` writes roff that `man -l` renders, naming the commands; `--out DIR`
/// writes one page per command.
#[test]
fn i7_man_writes_pages_that_man_renders() {
    let ledger = Ledger::uninitialized();
    let page = ledger.run(&["man"]).ok().stdout;
    assert!(page.starts_with(".ie \\n(.g .ds Aq") || page.contains(".TH daicho 1"), "{}", &page[..200]);
    let file = ledger.file("daicho.1", &page);
    if !missing("man", "man-db", "DAICHO_SKIP_MAN") {
        let out = Command::new("man")
            .args(["-l", &file])
            .env("MANPAGER", "cat")
            .env("COLUMNS", "100")
            .output()
            .expect("man");
        let text = String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        for words in ["NAME", "SYNOPSIS", "durable ledger", "sweep", "worker", "--db"] {
            assert!(text.contains(words), "{words} in\n{text}");
        }
    }
    let dir = ledger.dir.path().join("man1");
    let report: serde_json::Value =
        ledger.run(&["man", "--out", dir.to_str().expect("path"), "--json"]).ok().json();
    let written = report["written"].as_array().expect("written");
    assert!(written.len() > 20, "{report}");
    for name in ["daicho.1", "daicho-sweep.1", "daicho-worker.1"] {
        let page = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(page.contains(".TH"), "{name}");
    }
    let sweep = std::fs::read_to_string(dir.join("daicho-sweep.1")).expect("sweep page");
    assert!(sweep.contains("run\\-requested"), "the sweep page lists the roles");
}

/// The units of `examples/systemd`, with `ExecStart` pointing at this build of daicho (verify
/// checks that the program exists).
fn units_in(dir: &Path) -> Vec<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/systemd");
    let mut units = Vec::new();
    for entry in std::fs::read_dir(&source).expect("examples/systemd") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).expect("name").to_owned();
        if !(name.ends_with(".service") || name.ends_with(".timer")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("unit");
        let text = text.replace("/usr/local/bin/daicho", env!("CARGO_BIN_EXE_daicho"));
        std::fs::write(dir.join(&name), text).expect("copy");
        units.push(dir.join(name.replace("@.service", "@1.service")));
    }
    units.sort();
    units
}

/// I7: `systemd-analyze verify` accepts every service and timer unit of examples/systemd,
/// without a warning, and rejects a unit with a mistake in it (so the check is real). The serve
/// and worker units stop by SIGTERM to daicho alone (KillMode=mixed) with time for --grace.
#[test]
fn i7_the_service_units_verify() {
    if missing("systemd-analyze", "systemd", "DAICHO_SKIP_SYSTEMD") {
        return;
    }
    let ledger = Ledger::uninitialized();
    let dir = ledger.dir.path().join("units");
    std::fs::create_dir_all(&dir).expect("dir");
    let units = units_in(&dir);
    assert!(units.len() >= 7, "{units:?}");
    let verify = |units: &[PathBuf]| {
        let out =
            Command::new("systemd-analyze").arg("verify").args(units).output().expect("systemd-analyze");
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (ok, warnings) = verify(&units);
    assert!(ok && warnings.trim().is_empty(), "{warnings}");
    for unit in ["daicho-serve.service", "daicho-worker@.service", "daicho-sweep@.service"] {
        let text = std::fs::read_to_string(dir.join(unit)).expect("unit");
        for line in ["KillMode=mixed", "NoNewPrivileges=yes", "ProtectSystem=strict", "User=daicho"] {
            assert!(text.lines().any(|l| l == line), "{unit}: {line}");
        }
    }
    // A doctored unit is caught.
    let serve = dir.join("daicho-serve.service");
    let text = std::fs::read_to_string(&serve).expect("serve");
    std::fs::write(&serve, text.replace("Type=exec", "Type=exec\nRestartSecs=5")).expect("doctor");
    let (_, warnings) = verify(&[serve]);
    assert!(warnings.contains("RestartSecs"), "verify catches an unknown key: {warnings}");
}

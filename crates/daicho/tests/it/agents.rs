//! The coding-agent recipes of `examples/agents` (I7), each run by `daicho run` against a
//! stand-in program of the agent's name that records the argv, stdin and environment it got;
//! the test checks them against the CLI's documented flags. The local-model recipe runs against
//! a loopback server playing Ollama's OpenAI-compatible API.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::Ledger;

/// A CLI's documented command line: options that take a value (and the values allowed, when
/// the documentation lists them), options without one, and how many positional words.
struct Cli {
    name: &'static str,
    subcommand: Option<&'static str>,
    with_value: &'static [(&'static str, &'static [&'static str])],
    bare: &'static [&'static str],
    positional: usize,
    /// Where the prompt is: the value of this option, or the last positional word.
    prompt_option: Option<&'static str>,
}

const CLIS: [Cli; 4] = [
    // Claude Code CLI reference: `claude -p "query"`, --output-format text|json|stream-json,
    // --max-turns N, --permission-mode default|acceptEdits|bypassPermissions|plan, --model.
    Cli {
        name: "claude",
        subcommand: None,
        with_value: &[
            ("--output-format", &["text", "json", "stream-json"]),
            ("--max-turns", &[]),
            ("--permission-mode", &["default", "acceptEdits", "bypassPermissions", "plan"]),
            ("--model", &[]),
            ("--allowedTools", &[]),
            ("--append-system-prompt", &[]),
        ],
        bare: &["-p", "--print", "--verbose"],
        positional: 1,
        prompt_option: None,
    },
    // Codex non-interactive mode: `codex exec [options] "prompt"`, --sandbox
    // read-only|workspace-write|danger-full-access, --skip-git-repo-check, --ephemeral, -m/--model.
    Cli {
        name: "codex",
        subcommand: Some("exec"),
        with_value: &[
            ("--sandbox", &["read-only", "workspace-write", "danger-full-access"]),
            ("--model", &[]),
            ("-m", &[]),
            ("--output-last-message", &[]),
            ("-C", &[]),
        ],
        bare: &["--skip-git-repo-check", "--ephemeral", "--json"],
        positional: 1,
        prompt_option: None,
    },
    // Aider scripting: `aider --message "…"`, --yes-always, --auto-commits/--no-auto-commits,
    // --stream/--no-stream, --pretty/--no-pretty, --model.
    Cli {
        name: "aider",
        subcommand: None,
        with_value: &[("--message", &[]), ("--model", &[])],
        bare: &["--yes-always", "--no-auto-commits", "--no-stream", "--no-pretty"],
        positional: 0,
        prompt_option: Some("--message"),
    },
    // Gemini CLI headless mode: `gemini -p "…"`, --output-format text|json|stream-json,
    // --approval-mode default|auto_edit|yolo, -m/--model.
    Cli {
        name: "gemini",
        subcommand: None,
        with_value: &[
            ("-p", &[]),
            ("--prompt", &[]),
            ("--output-format", &["text", "json", "stream-json"]),
            ("--approval-mode", &["default", "auto_edit", "yolo"]),
            ("--model", &[]),
            ("-m", &[]),
        ],
        bare: &[],
        positional: 0,
        prompt_option: Some("-p"),
    },
];

/// Writes the stand-in for `name` into `bin`: it records what it got into `record` and answers
/// as the prompt asks, with a result and one found task.
fn stand_in(bin: &Path, name: &str, record: &Path) {
    let script = format!(
        "#!/bin/sh\nprintf '%s\\0' \"$@\" > '{dir}/{name}.argv'\ncat > '{dir}/{name}.stdin'\n\
         env | grep '^DAICHO_' | sort > '{dir}/{name}.env'\n\
         printf '%s\\n' '{{\"result\": \"done by {name}\", \"tasks\": [{{\"title\": \"found by {name}\"}}]}}'\n",
        dir = record.display()
    );
    let path = bin.join(name);
    std::fs::write(&path, script).expect("stand-in");
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
}

/// Checks an argv against the CLI's documented flags; returns the prompt.
fn check_argv(cli: &Cli, argv: &[String]) -> String {
    let mut words = argv.iter();
    if let Some(sub) = cli.subcommand {
        assert_eq!(words.next().map(String::as_str), Some(sub), "{}: {argv:?}", cli.name);
    }
    let (mut positional, mut prompt) = (Vec::new(), None);
    while let Some(word) = words.next() {
        if let Some((_, allowed)) = cli.with_value.iter().find(|(flag, _)| flag == word) {
            let value = words.next().unwrap_or_else(|| panic!("{}: {word} needs a value", cli.name));
            assert!(allowed.is_empty() || allowed.contains(&value.as_str()), "{}: {word} {value}", cli.name);
            if cli.prompt_option == Some(word.as_str()) {
                prompt = Some(value.clone());
            }
        } else if word.starts_with('-') {
            assert!(cli.bare.contains(&word.as_str()), "{}: {word} is not a documented option", cli.name);
        } else {
            positional.push(word.clone());
        }
    }
    assert_eq!(positional.len(), cli.positional, "{}: positional words {positional:?}", cli.name);
    prompt.or_else(|| positional.pop()).unwrap_or_else(|| panic!("{}: no prompt in {argv:?}", cli.name))
}

/// A ledger with the recipes of examples/agents copied in (daicho.toml and the scripts).
fn ledger_with_recipes() -> Ledger {
    let ledger = Ledger::new();
    let recipes = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/agents");
    for entry in std::fs::read_dir(&recipes).expect("examples/agents") {
        let path = entry.expect("entry").path();
        let target = ledger.dir.path().join(path.file_name().expect("name"));
        std::fs::copy(&path, &target).expect("copy");
    }
    ledger
}

/// I7: each coding-agent recipe passes the task, the person's correction and the idempotency
/// key, with only the flags its CLI documents and nothing on stdin; the agent's answer becomes
/// the result and the task it found is registered.
#[test]
fn i7_each_coding_agent_recipe_runs_its_cli_as_documented() {
    for cli in &CLIS {
        let ledger = ledger_with_recipes();
        let (bin, record) = (ledger.dir.path().join("bin"), ledger.dir.path().join("record"));
        std::fs::create_dir_all(&bin).expect("bin");
        std::fs::create_dir_all(&record).expect("record");
        stand_in(&bin, cli.name, &record);
        let work_type = format!("code/{}", cli.name);
        ledger.run(&["add", "Fix the parser", "--type", &work_type, "--body", "nested lists break"]).ok();
        ledger.run(&["set", "T-0001", "--correction", "Use the streaming API"]).ok();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let run = ledger.command(&["run", "T-0001", "--json"]).env("PATH", path).output().expect("run");
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(run.status.success(), "{}: {stdout}\n{}", cli.name, String::from_utf8_lossy(&run.stderr));

        let argv: Vec<String> = std::fs::read_to_string(record.join(format!("{}.argv", cli.name)))
            .expect("the stand-in ran")
            .split('\0')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect();
        let prompt = check_argv(cli, &argv);
        for part in [
            "T-0001",
            "Fix the parser",
            "nested lists break",
            "Use the streaming API",
            "T-0001:1",
            "\"tasks\"",
        ] {
            assert!(prompt.contains(part), "{}: {part} missing from the prompt:\n{prompt}", cli.name);
        }
        let stdin = std::fs::read_to_string(record.join(format!("{}.stdin", cli.name))).expect("stdin");
        assert_eq!(stdin, "", "{}: the agent's stdin is closed", cli.name);
        let env = std::fs::read_to_string(record.join(format!("{}.env", cli.name))).expect("env");
        assert!(env.contains("DAICHO_IDEMPOTENCY_KEY=T-0001:1"), "{}: {env}", cli.name);
        assert!(env.contains("DAICHO_CORRECTION=Use the streaming API"), "{}: {env}", cli.name);

        let row: Value = ledger.run(&["show", "T-0001", "--json"]).ok().json();
        assert_eq!(row["result"], format!("done by {}", cli.name), "{row}");
        assert_eq!(row["status"], "review");
        let found = ledger.run(&["list", "--json"]).ok().stdout;
        assert!(found.contains(&format!("found by {}", cli.name)), "{}: {found}", cli.name);
    }
}

/// I7: the local-model recipe (`kind = "llm"` at Ollama's OpenAI-compatible endpoint) sends the
/// task to the configured model and stores the answer; no API key is needed.
#[test]
fn i7_the_local_model_recipe_talks_to_an_openai_compatible_endpoint() {
    let ledger = ledger_with_recipes();
    let (url, server) = crate::engine::fake_llm(1);
    let config = std::fs::read_to_string(ledger.dir.path().join("daicho.toml")).expect("config");
    assert!(config.contains("http://127.0.0.1:11434/v1"), "the recipe points at Ollama's default address");
    ledger.file("daicho.toml", config.replace("http://127.0.0.1:11434/v1", &url));
    ledger.run(&["add", "Draft the release notes", "--type", "draft"]).ok();
    ledger.run(&["run", "T-0001"]).ok();
    let seen = server.join().expect("server");
    assert_eq!(seen[0].1["model"], "qwen2.5-coder:7b");
    assert!(seen[0].0.starts_with("POST /v1/chat/completions"), "{}", seen[0].0);
    let row: Value = ledger.run(&["show", "T-0001", "--json"]).ok().json();
    assert_eq!(row["result"], "drafted");
}

/// The scripts of the recipes are valid POSIX sh.
#[test]
fn i7_the_recipe_scripts_parse() {
    let recipes: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/agents");
    for name in ["prompt.sh", "claude.sh", "codex.sh", "aider.sh", "gemini.sh"] {
        let out = std::process::Command::new("sh").arg("-n").arg(recipes.join(name)).output().expect("sh");
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

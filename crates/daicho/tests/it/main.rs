//! Integration tests of the `daicho` binary: real processes on a real SQLite ledger file.

mod agents;
mod answers;
mod authority;
#[path = "../../../daicho-server/tests/it/chrome.rs"]
mod chrome;
mod claims;
mod cli;
mod doctor;
mod engine;
mod errors;
mod fault;
mod formats;
mod mcp;
mod newcomer;
mod operator;
mod outputs;
mod plan;
mod readme;
mod serve;
mod sync;
mod ui;
mod view;
mod writeback;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde::Deserialize;

/// A ledger in a temporary directory, and a way to run `daicho` on it.
#[derive(Debug)]
pub struct Ledger {
    pub dir: tempfile::TempDir,
    /// `--db` for every command (a PostgreSQL URL); the default `.daicho/ledger.db` otherwise.
    pub db: Option<String>,
}

/// What one run printed and how it exited.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(output: Output) -> Run {
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Asserts exit code 0 and returns self.
    #[track_caller]
    pub fn ok(self) -> Run {
        assert_eq!(self.code, 0, "expected success\nstdout: {}\nstderr: {}", self.stdout, self.stderr);
        self
    }

    /// Parses stdout as JSON.
    #[track_caller]
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> T {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not the JSON expected: {e}\n{}", self.stdout))
    }
}

impl Ledger {
    /// An initialized, empty ledger.
    #[allow(clippy::new_without_default, reason = "creating a ledger runs a process; no silent default")]
    pub fn new() -> Ledger {
        let ledger = Ledger::uninitialized();
        ledger.run(&["init"]).ok();
        ledger
    }

    /// A directory without a ledger.
    pub fn uninitialized() -> Ledger {
        Ledger { dir: tempfile::tempdir().expect("a temporary directory"), db: None }
    }

    /// The command, run in the ledger's directory with its default `.daicho/ledger.db`.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_daicho"));
        if let Some(db) = &self.db {
            command.args(["--db", db]);
        }
        command
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("DAICHO_DB")
            .env_remove("DAICHO_LANG")
            .env("LANG", "C")
            .env("DAICHO_USER", "tester")
            .env_remove("DAICHO_CONFIG")
            .env_remove("DAICHO_CORRECTION")
            .env_remove("DAICHO_TASK_ID")
            .env_remove("DAICHO_TOKEN")
            .env_remove("DAICHO_BIND")
            .env("LOG", self.dir.path().join("executors.log"))
            .env("DAICHO_BIN", env!("CARGO_BIN_EXE_daicho"))
            .stdin(Stdio::null());
        command
    }

    /// Runs `daicho ARGS`.
    pub fn run(&self, args: &[&str]) -> Run {
        Run::from(self.command(args).output().expect("daicho runs"))
    }

    /// Runs `daicho ARGS` as [`Ledger::command`] would, under `strace -f -y -e trace=SYSCALLS`
    /// (Debian package strace; `-y` names each file descriptor's path); returns what it printed
    /// and the lines of the trace.
    pub fn traced(&self, syscalls: &str, args: &[&str]) -> (Output, Vec<String>) {
        let trace = self.dir.path().join("trace.txt");
        let output = self
            .traced_command(syscalls, &trace, args)
            .output()
            .expect("strace runs (Debian package strace)");
        let lines = std::fs::read_to_string(&trace).unwrap_or_default().lines().map(str::to_owned).collect();
        (output, lines)
    }

    /// The command of [`Ledger::traced`], writing its trace to `trace`, to spawn.
    pub fn traced_command(&self, syscalls: &str, trace: &std::path::Path, args: &[&str]) -> Command {
        let daicho = self.command(args);
        let env: Vec<_> =
            daicho.get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))).collect();
        let mut command = Command::new("strace");
        command
            .args(["-f", "-y", "-e", &format!("trace={syscalls}"), "-o"])
            .arg(trace)
            .arg(daicho.get_program())
            .args(daicho.get_args())
            .current_dir(self.dir.path())
            .envs(env)
            .env_remove("DAICHO_DB")
            .stdin(Stdio::null());
        command
    }

    /// Runs `daicho ARGS` with `input` on stdin. A command that does not read its stdin (`sync`,
    /// `import FILE`) may exit before the input is written: the broken pipe is not an error.
    pub fn run_with_input(&self, args: &[&str], input: &[u8]) -> Run {
        use std::io::Write as _;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("daicho starts");
        match child.stdin.take().expect("stdin").write_all(input) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("write stdin: {e}"),
            _ => {}
        }
        Run::from(child.wait_with_output().expect("daicho runs"))
    }

    /// Writes an executable script in the ledger's directory; returns its path.
    pub fn script(&self, name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt as _;
        let path = self.file(name, format!("#!/bin/sh\n{body}"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    /// The executors' side-effect log (the `LOG` variable every test script appends to).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("executors.log")
    }

    /// The lines of the executors' log (empty when no executor ever ran).
    pub fn log_lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.log_path()).unwrap_or_default().lines().map(str::to_owned).collect()
    }

    /// Writes a file in the ledger's directory; returns its path as a string.
    pub fn file(&self, name: &str, contents: impl AsRef<[u8]>) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents).expect("write a fixture");
        path.to_string_lossy().into_owned()
    }

    /// Every task, as `list --json` reports it.
    pub fn tasks(&self) -> Vec<TaskJson> {
        self.run(&["list", "--json"]).ok().json()
    }

    /// The ledger exported as JSON (a snapshot to compare).
    pub fn export(&self) -> String {
        self.run(&["export", "--format", "json"]).ok().stdout
    }
}

/// A fixture file of this crate's tests.
pub fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name).to_string_lossy().into_owned()
}

/// The JSON wire format of a task (`--json`). Unknown fields fail the test: a change to the
/// wire format must be made here too.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TaskJson {
    pub id: String,
    pub project: String,
    pub status: String,
    pub run: bool,
    pub title: String,
    pub body: String,
    pub source: String,
    pub evidence: String,
    pub due: Option<String>,
    pub assignee: String,
    #[serde(rename = "type")]
    pub work_type: String,
    pub priority: i64,
    pub not_before: Option<String>,
    pub action: String,
    pub result: String,
    pub run_at: Option<String>,
    pub correction: String,
    pub deps: Vec<String>,
    pub tags: Vec<String>,
    pub key: String,
    pub failures: u32,
    pub refresh: bool,
    pub attempt: u32,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub person_cells: Vec<String>,
}

/// The `ready --json` wire format.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadyJson {
    pub total: usize,
    pub tasks: Vec<TaskJson>,
    /// Why each listed row will or will not run (S7).
    pub why: Vec<serde_json::Value>,
}

/// The ids of tasks.
pub fn ids(tasks: &[TaskJson]) -> Vec<&str> {
    tasks.iter().map(|t| t.id.as_str()).collect()
}

/// The path of a file in a ledger's directory.
pub fn path_in(ledger: &Ledger, name: &str) -> PathBuf {
    ledger.dir.path().join(name)
}

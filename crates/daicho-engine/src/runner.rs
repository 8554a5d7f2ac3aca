//! The one way daicho runs a child process: a `command` executor (S11, S14) and a `command`
//! source (X1) both go through [`run`].
//!
//! A run is a unit of processes: the program starts in a process group of its own, under the
//! run supervisor when one is in use ([`crate::supervise`]), so that processes that leave the
//! group (`setsid`, double forks) are still found. Whatever way the run ends — the program
//! exits, the timeout passes, or the future is dropped (a lost lease, an operator's stop) —
//! every process of it is killed before [`run`] returns or the drop completes. Its output is
//! read up to a cap and the rest drained (so the child never blocks on a full pipe) and
//! counted.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// The environment variable that names the task a run's executor runs for: a daicho that finds
/// it runs inside a run, started by an agent, and acts for no person (S13).
pub const TASK_VAR: &str = "DAICHO_TASK_ID";

/// The environment variables that describe one run of a task. A run gets them from its
/// [`Spec`] only, never from daicho's own environment (C3: a correction cannot be inherited).
pub const RUN_VARS: [&str; 5] =
    [TASK_VAR, "DAICHO_CORRECTION", "DAICHO_IDEMPOTENCY_KEY", "DAICHO_ATTEMPT", "DAICHO_ACTION"];

/// The server's credentials (`daicho serve --token`, `--worker-token`): a run never gets them
/// from daicho's environment, so an agent cannot use the access token to act for a person over
/// HTTP (S13).
pub const CREDENTIAL_VARS: [&str; 2] = ["DAICHO_TOKEN", "DAICHO_WORKER_TOKEN"];

/// How long the output pipes are waited for once every process of the run is gone: a process
/// that escaped an unsupervised run may hold them open.
const PIPE_GRACE: Duration = Duration::from_secs(5);

/// What to run.
#[derive(Clone, Debug)]
pub struct Spec<'a> {
    /// The program and its arguments (never interpolated: passed as they are).
    pub argv: &'a [String],
    /// The working directory (`None`: daicho's own).
    pub dir: Option<&'a Path>,
    /// Variables set for the run, on top of daicho's environment less [`RUN_VARS`].
    pub env: Vec<(&'static str, String)>,
    /// Written to the program's stdin, which is then closed.
    pub input: Vec<u8>,
    /// After this every process of the run is killed.
    pub timeout: Duration,
    /// The most of stdout kept; the rest is drained and counted.
    pub stdout_cap: usize,
    /// The most of stderr kept.
    pub stderr_cap: usize,
    /// Under the supervisor: how long it waits for a sign of life from daicho on the control
    /// pipe before it kills the run ([`crate::supervise`]); daicho sends one every quarter of it.
    pub alive_within: Option<Duration>,
    /// Where the supervisor keeps the run's own account of its end ([`crate::spool`]); only a
    /// supervised run keeps one.
    pub record_to: Option<RecordTo>,
}

/// Where a supervised run's supervisor writes the copy of its stdout (`BASE.out`) and how its
/// executor ended (`BASE.exit`, a [`crate::spool::RunExit`] naming `worker`).
#[derive(Clone, Debug)]
pub struct RecordTo {
    /// The path without its extension.
    pub base: std::path::PathBuf,
    /// The worker that holds the claim.
    pub worker: String,
}

/// What was read of an output stream: at most the cap, and how many bytes there were in all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Captured {
    /// The first bytes, up to the cap.
    pub kept: Vec<u8>,
    /// How many bytes the stream carried in all.
    pub total: usize,
}

impl Captured {
    /// Bytes that were read but not kept.
    pub fn cut(&self) -> usize {
        self.total.saturating_sub(self.kept.len())
    }

    /// The last `lines` non-empty lines, trimmed (for an error message).
    pub fn tail(&self, lines: usize) -> String {
        let text = String::from_utf8_lossy(&self.kept);
        let mut tail: Vec<&str> =
            text.lines().map(str::trim).filter(|l| !l.is_empty()).rev().take(lines).collect();
        tail.reverse();
        tail.join("\n")
    }
}

/// A run that ended by itself (the program exited, well or not).
#[derive(Debug)]
pub struct Exited {
    /// How the program ended.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: Captured,
    /// Its standard error.
    pub stderr: Captured,
}

impl Exited {
    /// `exit status N` or `killed by signal N`.
    pub fn how(&self) -> String {
        use std::os::unix::process::ExitStatusExt as _;
        match (self.status.code(), self.status.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            _ => "failed".to_owned(),
        }
    }

    /// `how`, then the last `lines` lines of stderr when there are any: the message of a
    /// failed run.
    pub fn failure(&self, lines: usize) -> String {
        let tail = self.stderr.tail(lines);
        if tail.is_empty() { self.how() } else { format!("{}: {tail}", self.how()) }
    }
}

/// Why a run has no exit status.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The argument list is empty.
    #[error("no command given")]
    NoCommand,
    /// The program (or the supervisor) could not be started.
    #[error("cannot start {program}: {source}")]
    Start {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// Waiting for the program failed.
    #[error("waiting for {program}: {source}")]
    Wait {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The timeout passed: every process of the run was killed.
    #[error("timed out after {0:?}; its process group was killed")]
    TimedOut(Duration),
}

/// Whether runs go through the supervisor ([`crate::supervise::use_supervisor`]).
pub fn supervised() -> bool {
    crate::supervise::supervisor().is_some()
}

/// Runs `spec` to its end (see the module docs): its exit status and output, or why there is
/// none. Every process of the run is gone when this returns, and when the future is dropped.
///
/// # Errors
///
/// [`RunError`]: nothing to run, a program that cannot start, a failed wait, a timeout.
pub async fn run(spec: Spec<'_>) -> Result<Exited, RunError> {
    let Some((program, args)) = spec.argv.split_first() else { return Err(RunError::NoCommand) };
    let (mut command, supervised) = command_for(program, args);
    for var in RUN_VARS.iter().chain(&crate::supervise::RECORD_VARS).chain(&CREDENTIAL_VARS) {
        command.env_remove(var);
    }
    if supervised && let Some(record) = &spec.record_to {
        let [base, worker] = crate::supervise::RECORD_VARS;
        command.env(base, &record.base).env(worker, &record.worker);
    }
    if let Some(ledger) = crate::supervise::ledger() {
        command.env(crate::supervise::LEDGER_VAR, ledger);
    }
    command
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = spec.dir.filter(|d| !d.as_os_str().is_empty()) {
        command.current_dir(dir);
    }
    let spawned = command.spawn();
    drop(command);
    let mut child = spawned.map_err(|source| RunError::Start { program: program.clone(), source })?;
    let pgid = child.id();
    let mut stdin = child.stdin.take();
    let mut control = None;
    if supervised && let Some(mut pipe) = stdin.take() {
        // The supervisor gets the input framed, and the pipe stays open as its control pipe
        // until the run is over (or daicho is gone).
        let (close, closed) = tokio::sync::oneshot::channel::<()>();
        control = Some(close);
        let framed = crate::supervise::frame_input(&spec.input, spec.alive_within);
        let alive_within = spec.alive_within;
        tokio::spawn(async move {
            let keep = async {
                let _ = pipe.write_all(&framed).await;
                let _ = pipe.flush().await;
                let Some(within) = alive_within else { return std::future::pending::<()>().await };
                loop {
                    tokio::time::sleep(within / 4).await;
                    if pipe.write_all(crate::supervise::ALIVE).await.is_err() {
                        return std::future::pending::<()>().await;
                    }
                }
            };
            tokio::select! {
                () = keep => {}
                _ = closed => {}
            }
            drop(pipe);
        });
    }
    // If this run is abandoned (the future dropped), every process of it goes too.
    let mut group = GroupGuard { pgid, control };
    let input = spec.input;
    let feed = async move {
        if let Some(stdin) = stdin.as_mut() {
            // A program that does not read its stdin closes the pipe: not an error.
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        }
        drop(stdin);
    };
    let stdout = child.stdout.take().map(|out| tokio::spawn(read_capped(out, spec.stdout_cap)));
    let stderr = child.stderr.take().map(|err| tokio::spawn(read_capped(err, spec.stderr_cap)));
    let waited = tokio::time::timeout(spec.timeout, async {
        feed.await;
        child.wait().await
    })
    .await;
    // Whatever happened, nothing of the run may outlive it: the group goes. (After a normal
    // exit the leader is reaped, but Linux hands out pids in sequence, so the number is not
    // reused in the microseconds before this.)
    group.kill();
    let status = match waited {
        Err(_) => {
            let _ = child.wait().await;
            return Err(RunError::TimedOut(spec.timeout));
        }
        Ok(Err(source)) => return Err(RunError::Wait { program: program.clone(), source }),
        Ok(Ok(status)) => status,
    };
    Ok(Exited { status, stdout: collect(stdout).await, stderr: collect(stderr).await })
}

/// The output a reader task gathered, waited for at most [`PIPE_GRACE`].
async fn collect(handle: Option<tokio::task::JoinHandle<Captured>>) -> Captured {
    let Some(mut handle) = handle else { return Captured::default() };
    match tokio::time::timeout(PIPE_GRACE, &mut handle).await {
        Ok(read) => read.unwrap_or_default(),
        Err(_) => {
            handle.abort();
            Captured::default()
        }
    }
}

/// Reads at most `cap` bytes and drains the rest, so the child never blocks on a full pipe.
async fn read_capped<R: AsyncRead + Unpin>(mut reader: R, cap: usize) -> Captured {
    let mut read = Captured::default();
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return read,
            Ok(n) => {
                let room = cap.saturating_sub(read.kept.len());
                read.kept.extend_from_slice(&buf[..n.min(room)]);
                read.total += n;
            }
        }
    }
}

/// Ends a run's processes when dropped, unless they were ended already: with the supervisor,
/// by closing its control pipe (it kills every descendant, escaped ones included); without it,
/// by killing the program's process group.
struct GroupGuard {
    pgid: Option<u32>,
    /// Dropping it closes the supervisor's control pipe.
    control: Option<tokio::sync::oneshot::Sender<()>>,
}

impl GroupGuard {
    fn kill(&mut self) {
        if self.control.take().is_none() {
            kill_group(self.pgid.take());
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

fn kill_group(pgid: Option<u32>) {
    if let Some(pid) = pgid.and_then(|p| i32::try_from(p).ok()).and_then(rustix::process::Pid::from_raw) {
        // The group may be gone already (ESRCH): nothing left to kill.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// The command that starts `program`: through the supervisor when one is in use, else directly
/// in a process group of its own. The second value says whether it is supervised.
fn command_for(program: &str, args: &[String]) -> (tokio::process::Command, bool) {
    match crate::supervise::supervisor() {
        Some(supervisor) => {
            let mut command = tokio::process::Command::new(supervisor);
            command
                .arg0("daicho")
                .arg(crate::supervise::SUBCOMMAND)
                .arg("--")
                .arg(program)
                .args(args)
                .process_group(0)
                // Never SIGKILL the supervisor: closing its control pipe makes it kill the run.
                .kill_on_drop(false);
            (command, true)
        }
        None => {
            let mut command = tokio::process::Command::new(program);
            command.args(args).process_group(0).kill_on_drop(true);
            (command, false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(script: &str) -> Vec<String> {
        ["sh", "-c", script].iter().map(|s| (*s).to_owned()).collect()
    }

    fn spec(argv: &[String], timeout: Duration) -> Spec<'_> {
        Spec {
            argv,
            dir: None,
            env: Vec::new(),
            alive_within: None,
            record_to: None,
            input: Vec::new(),
            timeout,
            stdout_cap: 1024,
            stderr_cap: 1024,
        }
    }

    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_owned))
            })
            .is_some_and(|state| state != "Z")
    }

    #[tokio::test]
    async fn s11_a_timeout_kills_the_grandchildren_too() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("sleep 60 & echo $! > {}; wait", pid_file.display());
        let argv = argv(&script);
        // The run returns at its timeout, not when the sleep would end.
        let ended =
            tokio::time::timeout(Duration::from_secs(30), run(spec(&argv, Duration::from_millis(500))))
                .await
                .expect("the run outlived its timeout by 30 s");
        assert!(matches!(ended, Err(RunError::TimedOut(_))), "{ended:?}");
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            !alive(pid)
        });
        assert!(gone, "the grandchild {pid} outlived the timeout");
    }

    #[tokio::test]
    async fn the_input_reaches_stdin_and_the_spec_env_is_set() {
        let argv = argv("printf '%s|' \"$DAICHO_ACTION\"; cat");
        let mut spec = spec(&argv, Duration::from_secs(20));
        spec.env.push(("DAICHO_ACTION", "act".to_owned()));
        spec.input = b"the task".to_vec();
        let ended = run(spec).await.unwrap();
        assert_eq!(String::from_utf8_lossy(&ended.stdout.kept), "act|the task");
    }

    #[tokio::test]
    async fn output_over_the_cap_is_drained_and_counted() {
        let argv = argv("head -c 5000 /dev/zero; echo oops >&2; exit 3");
        let ended = run(spec(&argv, Duration::from_secs(20))).await.unwrap();
        assert_eq!((ended.stdout.kept.len(), ended.stdout.total, ended.stdout.cut()), (1024, 5000, 3976));
        assert_eq!(ended.failure(5), "exit status 3: oops");
    }
}

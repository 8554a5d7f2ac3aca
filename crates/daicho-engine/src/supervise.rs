//! The run supervisor (S14): a small process between daicho and each `command` executor, so an
//! executor never outlives its claim.
//!
//! daicho starts `daicho __supervise -- PROGRAM ARGS…` in a process group of its own and
//! writes to its standard input the executor's input, framed as a decimal byte count on a line
//! and then the bytes; then it keeps that pipe open: it is the control pipe. The supervisor
//! makes itself a child subreaper (so processes that leave the executor's group, `setsid` and
//! double forks included, stay its descendants), starts the executor in a new process group
//! with the input on its stdin and daicho's stdout and stderr as its own, and then waits for
//! one of two things:
//!
//! - the executor ends: every process still left under the supervisor is killed, and the
//!   supervisor exits as the executor did (its exit code, or its signal);
//! - the control pipe reaches end of file — daicho closed it (a timeout, a lost or fenced lease,
//!   an operator's stop) or daicho is gone (SIGKILL, a crash, a kill of its whole process
//!   group): every descendant is killed at once and the supervisor exits 137;
//! - daicho falls silent: a run under a lease is framed with the longest daicho may stay silent
//!   (a third of the lease), and daicho writes a byte ([`ALIVE`]) on the pipe every quarter of
//!   that; when none comes in time — daicho is frozen (SIGSTOP, a hung machine) and cannot fence
//!   its run itself — the run is killed as above, before the lease can expire and another
//!   worker claim the task.
//!
//! When daicho names a place for it (`DAICHO_SUPERVISE_RECORD`, with the worker holding the
//! claim in `DAICHO_SUPERVISE_WORKER`), the supervisor also keeps the run's own account of its
//! end (S14, [`crate::spool`]): the executor's stdout goes through the supervisor, which passes
//! it on to daicho and copies it to `RECORD.out`; and when the executor ends by itself, once
//! its output is all copied, how it ended goes to `RECORD.exit`. Written by the process that
//! outlives daicho, that account lets the next daicho record a run whose own daicho was killed
//! between the executor's end and the spooled end, instead of counting it lost and running it
//! again.
//!
//! The supervisor is in a group of its own so that a Ctrl-C meant for daicho (which drains its
//! runs first) does not reach it, and a SIGKILL of daicho's group cannot take it down before it
//! has killed the executor. What it cannot survive is a SIGKILL of its own (an operator's
//! `kill -9` of every process): then the executor is reparented to the nearest subreaper.

use std::ffi::OsString;
use std::io::Write as _;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

/// What daicho writes on the control pipe as a sign of life.
pub const ALIVE: &[u8] = b".";

/// The hidden subcommand of the `daicho` binary that runs [`main`].
pub const SUBCOMMAND: &str = "__supervise";

static SUPERVISOR: OnceLock<PathBuf> = OnceLock::new();

static LEDGER: OnceLock<String> = OnceLock::new();

/// The environment variables by which daicho tells the supervisor where to keep the run's
/// account of its end, and the worker holding the claim (see the module docs). The executor
/// never sees them.
pub const RECORD_VARS: [&str; 2] = ["DAICHO_SUPERVISE_RECORD", "DAICHO_SUPERVISE_WORKER"];

/// How long the supervisor waits, after its executor and every process of the run ended, for
/// the run's stdout to be copied before it gives up keeping an account of the end (daicho
/// frozen with the pipe full).
const COPY_GRACE: Duration = Duration::from_secs(5);

/// The environment variable that names the ledger of a run (for [`kill_earlier_attempts`]).
pub const LEDGER_VAR: &str = "DAICHO_LEDGER";

/// Names the ledger this process runs tasks of (an absolute path, or a URL without its
/// password). Every run carries it in `DAICHO_LEDGER`, so that [`kill_earlier_attempts`] only
/// ever kills runs of the same ledger: two ledgers on one machine both have a `T-0001`.
pub fn use_ledger(name: String) {
    let _ = LEDGER.set(name);
}

/// The ledger this process runs tasks of, if named.
pub fn ledger() -> Option<&'static str> {
    LEDGER.get().map(String::as_str)
}

/// Makes every later `command` run go through the supervisor at `exe` (the `daicho` binary,
/// which answers [`SUBCOMMAND`]). Without it, runs are children of daicho itself: their process
/// group is killed on every end daicho sees, but not when daicho is killed.
pub fn use_supervisor(exe: PathBuf) {
    let _ = SUPERVISOR.set(exe);
}

/// The supervisor in use, if any.
pub fn supervisor() -> Option<&'static Path> {
    SUPERVISOR.get().map(PathBuf::as_path)
}

/// How often the supervisor looks at the executor and the control pipe when the kernel cannot
/// tell it the moment the executor ends (no `pidfd_open`, Linux before 5.3).
const TICK: Duration = Duration::from_millis(20);

/// The first call of the `daicho` binary. When this process was started as a supervisor
/// (`daicho __supervise -- PROGRAM ARGS…`) it runs it and returns its exit code. Otherwise it
/// makes every later command run go through this same binary as supervisor, through
/// `/proc/self/exe` where it exists so that an upgrade that replaced the file still starts the
/// running version, and returns `None`: no executor outlives its claim.
pub fn enter() -> Option<u8> {
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == SUBCOMMAND) {
        let argv: Vec<OsString> = args.skip_while(|a| a != "--").skip(1).collect();
        return Some(main(argv).clamp(0, 255) as u8);
    }
    let proc_exe = PathBuf::from("/proc/self/exe");
    match proc_exe.exists() {
        true => use_supervisor(proc_exe),
        false => use_supervisor(std::env::current_exe().ok()?),
    }
    None
}

/// Runs the supervisor: `argv` is the executor's program and arguments. Returns the exit code
/// when it does not end by the executor's signal.
pub fn main(argv: Vec<OsString>) -> i32 {
    let Some((program, args)) = argv.split_first() else {
        eprintln!("daicho supervise: no program given");
        return 2;
    };
    let stdin = std::io::stdin();
    let control = stdin.as_fd();
    let (input, alive_within) = match read_input(control) {
        Ok(read) => read,
        Err(e) => {
            eprintln!("daicho supervise: cannot read the executor's input: {e}");
            return 2;
        }
    };
    // Orphans of the run are reparented here, not to init, so they can be found and killed.
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    let record = Record::from_env();
    let mut command = std::process::Command::new(program);
    command.args(args).stdin(std::process::Stdio::piped()).process_group(0);
    for var in RECORD_VARS {
        command.env_remove(var);
    }
    if record.is_some() {
        command.stdout(std::process::Stdio::piped());
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("cannot start {}: {e}", program.to_string_lossy());
            return 127;
        }
    };
    drop(command);
    if let Some(mut pipe) = child.stdin.take() {
        // An executor that does not read its stdin closes the pipe: not an error.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&input);
        });
    }
    let copied = match (&record, child.stdout.take()) {
        (Some(record), Some(out)) => Some(record.copy(out)),
        _ => None,
    };
    let leader = Pid::from_raw(child.id() as i32).expect("a child's pid is positive");
    // The run's output belongs to the executor: the supervisor keeps no copy of the pipes (but
    // the one it passes the copied stdout on through), so daicho sees end of file when the
    // run's last process closes them.
    detach_stdio();
    // The executor's end wakes the wait at once (a process file descriptor is readable when the
    // process has ended), so a short run is not held up to a tick.
    let ended = rustix::process::pidfd_open(leader, rustix::process::PidfdFlags::empty()).ok();
    let mut heard = Instant::now();
    let status = loop {
        if let Some(status) = reap(leader) {
            break status;
        }
        let silent = alive_within.is_some_and(|within| heard.elapsed() > within);
        match wait_on(control, ended.as_ref().map(AsFd::as_fd)) {
            Control::Closed => {}
            Control::Heard => {
                heard = Instant::now();
                continue;
            }
            Control::Quiet if silent => {}
            Control::Quiet => continue,
        }
        // An executor that ended by itself in the same moment keeps its end.
        if let Some(status) = reap(leader) {
            break status;
        }
        kill_descendants();
        reap_all();
        // A run killed unfinished has no end to keep.
        if let Some(record) = &record {
            record.drop_copy();
        }
        return 137;
    };
    kill_descendants();
    reap_all();
    if let Some(record) = &record
        && !copied.is_some_and(|copied| record.keep_exit(status, &copied))
    {
        record.drop_copy();
    }
    if let Some(signal) = status.terminating_signal() {
        // End as the executor did, so daicho reports "killed by signal N".
        if let Some(signal) = Signal::from_named_raw(signal) {
            let _ = rustix::process::kill_process(rustix::process::getpid(), signal);
        }
        return 128 + signal;
    }
    status.exit_status().unwrap_or(1)
}

/// Where the supervisor keeps the run's account of its end ([`RECORD_VARS`]).
struct Record {
    base: PathBuf,
    worker: String,
}

impl Record {
    fn from_env() -> Option<Record> {
        let [base, worker] = RECORD_VARS.map(std::env::var_os);
        let worker = worker?.into_string().ok()?;
        Some(Record { base: PathBuf::from(base?), worker })
    }

    /// Passes the executor's stdout on to daicho's and copies it to `BASE.out` (up to
    /// [`crate::executor::READ_CAP`]), on a thread of its own; the receiver gets the bytes
    /// read once the pipe reached end of file with every one copied, and is disconnected at
    /// once when the copy could not be made (the output still reaches daicho).
    fn copy(&self, mut from: std::process::ChildStdout) -> std::sync::mpsc::Receiver<u64> {
        use std::io::Read as _;

        if let Some(dir) = self.base.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let copy = std::fs::File::create(self.base.with_extension("out"));
        let mut to_daicho = std::io::stdout().as_fd().try_clone_to_owned().ok().map(std::fs::File::from);
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut copy = copy.ok();
            let (mut buf, mut total, mut kept) = ([0u8; 8192], 0u64, 0usize);
            loop {
                let n = match from.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => return,
                };
                // daicho gone: the output is still read, so the executor is not stopped by it.
                if to_daicho.as_mut().is_some_and(|out| out.write_all(&buf[..n]).is_err()) {
                    to_daicho = None;
                }
                let room = n.min(crate::executor::READ_CAP.saturating_sub(kept));
                // A copy that cannot be written whole is no account of the run.
                if copy.as_mut().is_some_and(|file| file.write_all(&buf[..room]).is_err()) {
                    copy = None;
                }
                (total, kept) = (total + n as u64, kept + room);
            }
            drop(to_daicho);
            if copy.is_some() {
                let _ = done.send(total);
            }
        });
        finished
    }

    /// Writes how the executor ended (`BASE.exit`, whole or not at all) once its output is all
    /// copied; false (nothing written) when it is not copied within [`COPY_GRACE`] or cannot be
    /// written.
    fn keep_exit(
        &self,
        status: rustix::process::WaitStatus,
        copied: &std::sync::mpsc::Receiver<u64>,
    ) -> bool {
        let Ok(out_bytes) = copied.recv_timeout(COPY_GRACE) else { return false };
        let exit = crate::spool::RunExit { worker: self.worker.clone(), status: status.as_raw(), out_bytes };
        let Ok(bytes) = serde_json::to_vec(&exit) else { return false };
        let temp = self.base.with_extension(format!("exit.{}.tmp", std::process::id()));
        let kept = std::fs::write(&temp, bytes)
            .and_then(|()| std::fs::rename(&temp, self.base.with_extension("exit")));
        if kept.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        kept.is_ok()
    }

    /// Removes the copy of the output of a run whose end is not kept.
    fn drop_copy(&self) {
        let _ = std::fs::remove_file(self.base.with_extension("out"));
    }
}

/// Points the supervisor's own stdout and stderr at `/dev/null`.
fn detach_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = rustix::stdio::dup2_stdout(&null);
        let _ = rustix::stdio::dup2_stderr(&null);
    }
}

/// Reads the executor's input from the control pipe: a decimal byte count, optionally a space
/// and the milliseconds daicho may stay silent, a newline, the bytes.
fn read_input(control: BorrowedFd<'_>) -> std::io::Result<(Vec<u8>, Option<Duration>)> {
    let mut header = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match rustix::io::read(control, &mut byte) {
            Ok(0) => return Err(std::io::Error::other("the control pipe closed before the input")),
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) if header.len() < 40 => header.push(byte[0]),
            Ok(_) => return Err(std::io::Error::other("no input length")),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let header = std::str::from_utf8(&header).map_err(|_| std::io::Error::other("no input length"))?;
    let (len, within) = header.split_once(' ').map_or((header, None), |(l, w)| (l, Some(w)));
    let len: usize = len.parse().map_err(|_| std::io::Error::other("no input length"))?;
    let alive_within = match within {
        Some(ms) => Some(Duration::from_millis(
            ms.parse().map_err(|_| std::io::Error::other("no silence limit in milliseconds"))?,
        )),
        None => None,
    };
    let mut input = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        match rustix::io::read(control, &mut input[filled..]) {
            Ok(0) => return Err(std::io::Error::other("the control pipe closed inside the input")),
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok((input, alive_within))
}

/// The framing of the executor's input on the control pipe, for daicho's side, with the longest
/// daicho may stay silent on it afterwards (see the module docs).
pub fn frame_input(input: &[u8], alive_within: Option<Duration>) -> Vec<u8> {
    let header = match alive_within {
        Some(within) => format!("{} {}\n", input.len(), within.as_millis().max(1)),
        None => format!("{}\n", input.len()),
    };
    let mut framed = header.into_bytes();
    framed.extend_from_slice(input);
    framed
}

/// What the control pipe showed during one wait.
enum Control {
    /// Nothing: the executor ended, or a tick passed.
    Quiet,
    /// A sign of life from daicho.
    Heard,
    /// End of file (or a failure): daicho closed it, or is gone.
    Closed,
}

/// Waits for the control pipe, or for the executor's end when `ended` (its process file
/// descriptor) is given, for at most one tick.
fn wait_on(control: BorrowedFd<'_>, ended: Option<BorrowedFd<'_>>) -> Control {
    use rustix::event::{PollFd, PollFlags, Timespec};

    let tick = Timespec { tv_sec: 0, tv_nsec: TICK.as_nanos() as _ };
    let mut fds = vec![PollFd::new(&control, PollFlags::IN)];
    fds.extend(ended.as_ref().map(|fd| PollFd::new(fd, PollFlags::IN)));
    match rustix::event::poll(&mut fds, Some(&tick)) {
        Ok(0) => Control::Quiet,
        Ok(_) if fds[0].revents().is_empty() => Control::Quiet,
        Ok(_) => {
            let mut bytes = [0u8; 64];
            match rustix::io::read(control, &mut bytes) {
                Ok(n) if n > 0 => Control::Heard,
                Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => Control::Quiet,
                _ => Control::Closed,
            }
        }
        Err(rustix::io::Errno::INTR) => Control::Quiet,
        Err(_) => Control::Closed,
    }
}

/// Reaps every child that ended; returns the leader's status if it was among them.
fn reap(leader: Pid) -> Option<rustix::process::WaitStatus> {
    let mut found = None;
    while let Ok(Some((pid, status))) = rustix::process::wait(WaitOptions::NOHANG) {
        if pid == leader {
            found = Some(status);
        }
    }
    found
}

fn reap_all() {
    while let Ok(Some(_)) = rustix::process::wait(WaitOptions::NOHANG) {}
}

/// Kills every process below this one, until none is left (or two seconds passed): processes
/// that fork while being killed are found on the next round.
fn kill_descendants() {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let started = Instant::now();
    loop {
        let below = descendants(me);
        if below.is_empty() || started.elapsed() > Duration::from_secs(2) {
            return;
        }
        for pid in below {
            if let Some(pid) = Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
        }
        reap_all();
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Kills every process of this machine (that this user may see) running an earlier attempt of
/// `task` of `ledger`: one whose environment names the ledger (`DAICHO_LEDGER`), the task
/// (`DAICHO_TASK_ID`) and an attempt below `attempt` (`DAICHO_ATTEMPT`). Called before a new
/// attempt starts, so that no earlier one still runs here whatever became of its supervisor
/// (S14: a retry never overlaps). Returns how many processes were killed.
pub fn kill_earlier_attempts(ledger: &str, task: &str, attempt: u32) -> usize {
    let scan = scan_attempts(ledger, task, attempt, false);
    for pid in &scan.killed {
        tracing::warn!(task, attempt, pid, "killing a process of an earlier attempt");
    }
    scan.killed.len()
}

/// What one look at `/proc` for the processes of a task's attempts found ([`scan_attempts`]).
#[derive(Debug, Default)]
pub struct AttemptScan {
    /// The processes killed.
    pub killed: Vec<i32>,
    /// Supervisors of those attempts left alone (they are killing their runs themselves).
    pub spared: usize,
    /// Processes whose environment could not be read: any of them may be one of the attempts'.
    pub unreadable: usize,
}

/// Finds the processes of `task` of `ledger` whose attempt is below `attempt` (see
/// [`kill_earlier_attempts`]) and kills them, but with `spare_supervisors` their supervisors: a
/// supervisor whose control pipe closed kills every descendant of its run, those that cleared
/// their environment included, which only its parent chain finds; killed first, it would leave
/// them to init.
pub fn scan_attempts(ledger: &str, task: &str, attempt: u32, spare_supervisors: bool) -> AttemptScan {
    let me = std::process::id();
    let task_var = format!("DAICHO_TASK_ID={task}");
    let ledger_var = format!("{LEDGER_VAR}={ledger}");
    let mut scan = AttemptScan::default();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        scan.unreadable += 1;
        return scan;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        // Neither this process nor init (whose environment even root may not read in a VM or a
        // container) is a run's.
        if pid == me || pid == 1 {
            continue;
        }
        let environ = match std::fs::read(format!("/proc/{pid}/environ")) {
            Ok(environ) => environ,
            // Gone meanwhile.
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || e.raw_os_error() == Some(rustix::io::Errno::SRCH.raw_os_error()) =>
            {
                continue;
            }
            Err(_) => {
                scan.unreadable += 1;
                continue;
            }
        };
        let (mut ours, mut same_ledger, mut earlier) = (false, false, false);
        for var in environ.split(|b| *b == 0) {
            if var == task_var.as_bytes() {
                ours = true;
            } else if var == ledger_var.as_bytes() {
                same_ledger = true;
            } else if let Some(n) = var.strip_prefix(b"DAICHO_ATTEMPT=") {
                earlier = std::str::from_utf8(n)
                    .ok()
                    .and_then(|n| n.parse::<u32>().ok())
                    .is_some_and(|n| n < attempt);
            }
        }
        if !(ours && same_ledger && earlier) {
            continue;
        }
        let supervisor = || {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == SUBCOMMAND.as_bytes()))
        };
        if spare_supervisors && supervisor() {
            scan.spared += 1;
            continue;
        }
        if let Some(pid) = Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
            scan.killed.push(pid.as_raw_nonzero().get());
        }
    }
    scan
}

/// The living processes whose parent chain leads to `root` (zombies left out).
pub fn descendants(root: i32) -> Vec<i32> {
    let mut parent_of: Vec<(i32, i32)> = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if let Some((state, ppid)) = stat_of(pid)
            && state != 'Z'
        {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(parent_of.iter().filter(|(_, p)| *p == parent).map(|(pid, _)| *pid));
        i += 1;
    }
    found.remove(0);
    found
}

/// Whether process `pid` has exited: gone, or a zombie waiting to be reaped. A process killed
/// with SIGKILL drops its environment before it is done exiting, so a scan stops finding it a
/// moment before it has exited (S14).
pub fn has_exited(pid: i32) -> bool {
    stat_of(pid).is_none_or(|(state, _)| matches!(state, 'Z' | 'X'))
}

/// A process's state letter and parent pid, from `/proc/PID/stat`.
fn stat_of(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: read after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s14_descendants_are_found_through_the_parent_chain() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30; wait"])
            .spawn()
            .expect("sh starts");
        let root = child.id() as i32;
        let started = Instant::now();
        let mut below = Vec::new();
        while started.elapsed() < Duration::from_secs(5) {
            below = descendants(root);
            if below.len() >= 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(below.len(), 2, "the two sleeps: {below:?}");
        assert!(descendants(std::process::id() as i32).contains(&root));
        for pid in below {
            if let Some(pid) = Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

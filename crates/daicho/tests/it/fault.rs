//! One live execution per task (S14) under the faults an operator meets: SIGKILL of daicho's
//! whole process group, Ctrl-C, SIGTERM to a worker, an executor that escapes its group, a
//! store that cannot be written. Real processes, real signals, a real SQLite file.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Ledger;

/// An executor that logs its start, starts a grandchild that leaves its process group
/// (`setsid`) and logs when it ends, records both pids, then works for `$WORK` seconds and logs
/// its end.
const ESCAPING: &str = r#"cat > /dev/null
echo "start $DAICHO_TASK_ID $DAICHO_ATTEMPT" >> "$LOG"
echo $$ > "$LOG.$DAICHO_TASK_ID.$DAICHO_ATTEMPT.pid"
setsid sh -c 'echo $$ > "$LOG.$DAICHO_TASK_ID.$DAICHO_ATTEMPT.escaped"; sleep 40; echo "escaped-end $DAICHO_TASK_ID" >> "$LOG"' > /dev/null 2>&1 < /dev/null &
sleep "${WORK:-30}"
echo "end $DAICHO_TASK_ID $DAICHO_ATTEMPT" >> "$LOG"
if [ -n "$FOUND" ]; then
  printf '{"result": "result of %s", "tasks": [{"title": "%s"}]}\n' "$DAICHO_TASK_ID" "$FOUND"
else
  echo "result of $DAICHO_TASK_ID"
fi
"#;

fn config(ledger: &Ledger, lease: &str, timeout: &str) {
    let script = ledger.script("work.sh", ESCAPING);
    ledger.file(
        "daicho.toml",
        format!(
            "[policy]\nlease = \"{lease}\"\n\n[[action]]\nname = \"work\"\nkind = \"command\"\n\
             command = [\"{script}\"]\ntimeout = \"{timeout}\"\nauto = true\n"
        ),
    );
}

fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a process is gone (or a zombie waiting to be reaped).
fn gone(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
        .map_or(true, |s| s.rsplit(')').next().and_then(|r| r.split_whitespace().next()) == Some("Z"))
}

fn pid_of(ledger: &Ledger, name: &str) -> String {
    let path = ledger.dir.path().join(format!("executors.log.{name}"));
    wait_for(&format!("{name} to be written"), Duration::from_secs(10), || path.exists());
    std::fs::read_to_string(path).expect("pid")
}

/// `daicho ARGS` in a process group of its own, as a shell runs a job.
fn spawn(ledger: &Ledger, args: &[&str], envs: &[(&str, &str)]) -> Child {
    use std::os::unix::process::CommandExt as _;
    let mut command = ledger.command(args);
    command.envs(envs.iter().copied()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    command.spawn().expect("daicho starts")
}

fn signal_group(child: &Child, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, "--", &format!("-{}", child.id())])
        .status()
        .unwrap();
    assert!(status.success());
}

fn signal(child: &Child, signal: &str) {
    let status = std::process::Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
    assert!(status.success());
}

/// Another process holding the ledger's SQLite write lock (`BEGIN EXCLUSIVE`) until `seconds`
/// pass, or, with `None`, until its stdin closes. Returns once the lock is held.
fn hold_lock(ledger: &Ledger, seconds: Option<u32>) -> Child {
    let release = match seconds {
        Some(s) => format!("time.sleep({s})"),
        None => "sys.stdin.read()".to_owned(),
    };
    let mut holder = std::process::Command::new("python3")
        .args([
            "-c",
            &format!(
                "import sqlite3, sys, time\n\
                 c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)\n\
                 c.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\n{release}\nc.execute('COMMIT')\n"
            ),
        ])
        .arg(ledger.dir.path().join(".daicho/ledger.db"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 holds the lock");
    use std::io::BufRead as _;
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "locked");
    holder
}

/// A ledger with a `lease` whose T-0001 runs (30 s) under `daicho run` in a group of its own:
/// the ledger and that process, once the executor has started.
fn long_run(lease: &str) -> (Ledger, Child) {
    let ledger = Ledger::new();
    config(&ledger, lease, "60s");
    ledger.run(&["add", "long work", "--action", "work"]).ok();
    let run = spawn(&ledger, &["run", "T-0001"], &[]);
    pid_of(&ledger, "T-0001.1.pid");
    (ledger, run)
}

/// [`long_run`] with a 2 s lease: the ledger, that process, the executor's pid and its escaped
/// grandchild's pid.
fn long_run_with_an_escapee() -> (Ledger, Child, String, String) {
    let (ledger, run) = long_run("2s");
    let executor = pid_of(&ledger, "T-0001.1.pid");
    let escaped = pid_of(&ledger, "T-0001.1.escaped");
    (ledger, run, executor, escaped)
}

fn count(lines: &[String], prefix: &str) -> usize {
    lines.iter().filter(|l| l.starts_with(prefix)).count()
}

/// S14, S4: `kill -9` of daicho's whole process group while a 30 s executor runs: the executor
/// and the grandchild that left its group are gone within a second, and the retry after the
/// lease never overlaps them (neither ever logs its end).
#[test]
fn s14_kill_9_of_daicho_ends_its_executor_at_once_and_the_retry_never_overlaps() {
    let (ledger, mut run, executor, escaped) = long_run_with_an_escapee();
    signal_group(&run, "-KILL");
    run.wait().unwrap();
    let killed = Instant::now();
    wait_for("the executor and its escaped grandchild to be gone", Duration::from_secs(1), || {
        gone(&executor) && gone(&escaped)
    });
    assert!(killed.elapsed() < Duration::from_secs(1));
    // After the lease, the lost run is counted and the task runs again (briefly this time).
    std::thread::sleep(Duration::from_millis(2100));
    let retry = ledger.command(&["run", "T-0001", "--json"]).env("WORK", "0").output().unwrap();
    assert!(retry.status.success(), "{}", String::from_utf8_lossy(&retry.stderr));
    let lines = ledger.log_lines();
    assert_eq!(
        (count(&lines, "start T-0001 1"), count(&lines, "start T-0001 2"), count(&lines, "end T-0001 2")),
        (1, 1, 1),
        "{lines:?}"
    );
    assert_eq!(count(&lines, "end T-0001 1") + count(&lines, "escaped-end"), 0, "no overlap: {lines:?}");
    let task = &ledger.tasks()[0];
    assert_eq!((task.status.as_str(), task.failures), ("review", 1), "the lost run counted once");
}

/// S14: Ctrl-C (SIGINT to the foreground group, daicho's) of `daicho run`: nothing new starts,
/// the run may finish within `--grace`; past it the executor and its escaped grandchild are
/// killed and the claim is returned — pending, no failure, journaled `interrupted`.
#[test]
fn s14_ctrl_c_of_run_returns_the_claim_without_a_failure() {
    let ledger = Ledger::new();
    config(&ledger, "30s", "60s");
    ledger.run(&["add", "long work", "--action", "work"]).ok();
    let run = spawn(&ledger, &["run", "T-0001", "--grace", "1s", "--json"], &[]);
    let executor = pid_of(&ledger, "T-0001.1.pid");
    let escaped = pid_of(&ledger, "T-0001.1.escaped");
    signal_group(&run, "-INT");
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        (report["result"].as_str(), report["status"].as_str()),
        (Some("interrupted"), Some("pending"))
    );
    wait_for("the run's processes to be gone", Duration::from_secs(1), || gone(&executor) && gone(&escaped));
    let task = &ledger.tasks()[0];
    assert_eq!((task.status.as_str(), task.failures, task.lease_owner.as_deref()), ("pending", 0, None));
    let journal = ledger.run(&["log", "T-0001", "--json"]).ok().stdout;
    assert!(journal.contains("\"interrupted\""), "{journal}");
    assert_eq!(count(&ledger.log_lines(), "end T-0001"), 0);
}

/// S14: SIGTERM to a worker with four runs in flight: it claims nothing more, lets the four
/// finish and records them, counts no failure, and exits 0.
#[test]
fn s14_sigterm_to_a_worker_drains_its_runs() {
    let ledger = Ledger::new();
    config(&ledger, "30s", "60s");
    for i in 1..=6 {
        ledger.run(&["add", &format!("task {i}"), "--action", "work", "--tag", "ai"]).ok();
    }
    let worker =
        spawn(&ledger, &["worker", "--concurrency", "4", "--poll", "100ms", "--json"], &[("WORK", "2")]);
    wait_for("four runs to start", Duration::from_secs(20), || count(&ledger.log_lines(), "start ") == 4);
    signal(&worker, "-TERM");
    let out = worker.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let totals: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!((totals["ran"].as_u64(), totals["failed"].as_u64()), (Some(4), Some(0)), "{totals}");
    let lines = ledger.log_lines();
    assert_eq!((count(&lines, "start "), count(&lines, "end ")), (4, 4), "{lines:?}");
    let tasks = ledger.tasks();
    assert_eq!(tasks.iter().filter(|t| t.status == "review").count(), 4);
    assert_eq!(tasks.iter().filter(|t| t.status == "pending" && t.attempt == 0).count(), 2, "none claimed");
    assert!(tasks.iter().all(|t| t.failures == 0));
}

/// An executor that first logs `overlap` if any earlier attempt of its task (the executor, its
/// escaped grandchild, or a child started with an empty environment, which only the run's
/// supervisor can find) is still alive, then runs as [`ESCAPING`] does (for a second, from the
/// second attempt on).
const CHECKS_OVERLAP: &str = r#"[ "$DAICHO_ATTEMPT" -gt 1 ] && WORK=1
[ "$DAICHO_ATTEMPT" = 1 ] && env -i PIDFILE="$LOG.$DAICHO_TASK_ID.1.bare" sh -c 'echo $$ > "$PIDFILE"; exec sleep 40' &
for f in "$LOG.$DAICHO_TASK_ID".*.pid "$LOG.$DAICHO_TASK_ID".*.escaped "$LOG.$DAICHO_TASK_ID".*.bare; do
  [ -f "$f" ] || continue
  state=$(cut -d' ' -f3 "/proc/$(cat "$f")/stat" 2>/dev/null)
  if [ -n "$state" ] && [ "$state" != Z ]; then echo "overlap $f" >> "$LOG"; fi
done
"#;

/// S14: a person moves a running task back to `pending` (`daicho set`) while its 30 s executor
/// runs under a 10-minute lease (renewed every 200 s): the executor, its grandchild that left its
/// group and a child that cleared its environment are killed within seconds, and a second worker
/// polling for work runs the task again only once all are gone. The stopped run counts no failure and never logs its end.
#[test]
fn s14_a_person_moving_a_running_task_back_stops_its_run_before_anyone_runs_it_again() {
    let ledger = Ledger::new();
    config(&ledger, "10m", "60s");
    ledger.script("work.sh", &format!("{CHECKS_OVERLAP}{ESCAPING}"));
    ledger.run(&["add", "long work", "--action", "work", "--tag", "ai"]).ok();
    let first = spawn(&ledger, &["worker", "--poll", "100ms", "--json"], &[]);
    let executor = pid_of(&ledger, "T-0001.1.pid");
    let escaped = pid_of(&ledger, "T-0001.1.escaped");
    let bare = pid_of(&ledger, "T-0001.1.bare");
    let second = spawn(&ledger, &["worker", "--poll", "100ms", "--json"], &[]);
    std::thread::sleep(Duration::from_millis(500));
    let moved = Instant::now();
    ledger.run(&["set", "T-0001", "--status", "pending"]).ok();
    wait_for("the stopped run to be killed", Duration::from_secs(10), || {
        gone(&executor) && gone(&escaped) && gone(&bare)
    });
    let killed = moved.elapsed();
    wait_for("the task to run again", Duration::from_secs(20), || ledger.tasks()[0].status == "review");
    let mut stopped = 0;
    for worker in [first, second] {
        signal(&worker, "-TERM");
        let out = worker.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let totals: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(totals["failed"].as_u64(), Some(0), "{totals}");
        stopped += totals["stopped"].as_u64().expect("stopped");
    }
    assert_eq!(stopped, 1, "one run was stopped by the person");
    assert!(killed < Duration::from_secs(6), "killed {killed:?} after the move");
    let lines = ledger.log_lines();
    assert_eq!(count(&lines, "overlap"), 0, "{lines:?}");
    assert_eq!((count(&lines, "start T-0001 2"), count(&lines, "end T-0001 2")), (1, 1), "{lines:?}");
    assert_eq!(count(&lines, "end T-0001 1"), 0, "{lines:?}");
    let task = &ledger.tasks()[0];
    assert_eq!((task.attempt, task.failures), (2, 0));
}

/// S14: a run a person stopped is recorded (its fence cleared, so another machine may run the
/// task) only once every process of it is gone, even when its supervisor cannot kill them
/// (stopped with SIGSTOP): `daicho run` kills the executor and its escaped grandchild itself
/// before it records the end and exits.
#[test]
fn s14_a_stopped_run_is_recorded_only_once_its_processes_are_gone() {
    let (ledger, run, executor, escaped) = long_run_with_an_escapee();
    let stat =
        std::fs::read_to_string(format!("/proc/{}/stat", executor.trim())).expect("the executor's stat");
    let supervisor =
        stat.rsplit(')').next().and_then(|r| r.split_whitespace().nth(1)).expect("ppid").to_owned();
    let status = std::process::Command::new("kill").args(["-STOP", &supervisor]).status().unwrap();
    assert!(status.success());
    ledger.run(&["set", "T-0001", "--status", "pending"]).ok();
    let out = run.wait_with_output().unwrap();
    let (executor_gone, escaped_gone) = (gone(&executor), gone(&escaped));
    let _ = std::process::Command::new("kill").args(["-KILL", &supervisor]).status();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "not a success: {said}");
    assert!(said.contains("stopped, a person moved the task out of running"), "{said}");
    assert!(
        executor_gone && escaped_gone,
        "the run's processes outlived its record: {executor_gone} {escaped_gone}"
    );
    let task = &ledger.tasks()[0];
    assert_eq!((task.status.as_str(), task.lease_owner.as_deref(), task.failures), ("pending", None, 0));
}

/// S11, S14: a timeout is enforced although a grandchild left the group and holds stdout open;
/// the grandchild is killed with the run.
#[test]
fn s11_s14_a_timeout_kills_a_grandchild_that_left_the_group() {
    let ledger = Ledger::new();
    let script = ledger.script(
        "leak.sh",
        "cat > /dev/null\nsetsid sh -c 'echo $$ > \"$LOG.leaked\"; sleep 40' &\nsleep 40\n",
    );
    ledger.file(
        "daicho.toml",
        format!(
            "[[action]]\nname = \"leak\"\nkind = \"command\"\ncommand = [\"{script}\"]\ntimeout = \"1s\"\n"
        ),
    );
    ledger.run(&["add", "leaks", "--action", "leak"]).ok();
    let started = Instant::now();
    let run = ledger.run(&["run", "T-0001", "--json"]);
    let elapsed = started.elapsed();
    assert_eq!(run.json::<Value>()["result"], "timeout", "{}", run.stdout);
    assert!(elapsed < Duration::from_secs(20), "the timeout held: {elapsed:?}");
    let leaked = pid_of(&ledger, "leaked");
    wait_for("the escaped grandchild to be gone", Duration::from_secs(1), || gone(&leaked));
}

/// S14 self-fencing: while a lock holder keeps the SQLite ledger from being written, a worker
/// cannot renew its lease; it kills its run before the lease ends, so no later claim overlaps.
#[test]
fn s14_a_worker_that_cannot_renew_its_lease_kills_its_run_before_the_lease_ends() {
    let ledger = Ledger::new();
    config(&ledger, "3s", "60s");
    ledger.run(&["add", "long work", "--action", "work"]).ok();
    let run = spawn(&ledger, &["run", "T-0001", "--json"], &[]);
    let executor = pid_of(&ledger, "T-0001.1.pid");
    let mut holder = hold_lock(&ledger, Some(8));
    let locked = Instant::now();
    wait_for("the run to fence itself", Duration::from_secs(6), || gone(&executor));
    // The last lease was taken at most one heartbeat (1 s) before the lock: it ends at most 4 s
    // after the lock was taken, and the run was gone before that.
    assert!(locked.elapsed() < Duration::from_secs(4), "killed {:?} after the lock", locked.elapsed());
    holder.wait().unwrap();
    let out = run.wait_with_output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["result"], "lease_lost", "{report}");
    assert_eq!(count(&ledger.log_lines(), "end T-0001"), 0);
}

/// S14, F3: `daicho doctor` finds at once a `running` row whose owner, a daicho process of this
/// machine, is gone — before its lease expires — and its fix returns the row.
#[test]
fn s14_doctor_finds_a_run_whose_owner_is_gone_before_its_lease_ends() {
    let ledger = Ledger::new();
    config(&ledger, "10m", "60s");
    ledger.run(&["add", "long work", "--action", "work"]).ok();
    let before = ledger.run(&["doctor", "--json"]);
    assert_eq!(before.code, 0, "{}", before.stdout);
    let mut run = spawn(&ledger, &["run", "T-0001"], &[]);
    pid_of(&ledger, "T-0001.1.pid");
    let alive = ledger.run(&["doctor", "--json"]);
    assert_eq!(alive.code, 0, "a live owner is not stuck: {}", alive.stdout);
    signal_group(&run, "-KILL");
    run.wait().unwrap();
    let found = ledger.run(&["doctor", "--json"]);
    assert_eq!(found.code, 1);
    let report: Value = found.json();
    let finding = &report["findings"][0];
    assert_eq!(
        (finding["kind"].as_str(), finding["task"].as_str()),
        (Some("dead_owner"), Some("T-0001")),
        "{report}"
    );
    let fix = finding["fix"].as_str().unwrap();
    let command = fix.rsplit("return it now: daicho ").next().unwrap();
    let args: Vec<&str> = command.split_whitespace().collect();
    ledger.run(&args).ok();
    assert_eq!(ledger.run(&["doctor", "--json"]).code, 0, "the fix worked");
    returned_with_no_fence(&ledger);
}

/// S14, F3: a row a person moved out of `running`, whose run's daicho died before it stopped the
/// run, keeps the fence its move left for the lease's 10 minutes; doctor names it with its fix,
/// and the fix (the person's `set`, on this machine) kills what is left and clears the fence.
#[test]
fn f3_s14_doctor_finds_a_fence_whose_daicho_is_gone_and_its_fix_clears_it() {
    let (ledger, mut run) = long_run("10m");
    // Frozen, the run's daicho cannot see the move; then it dies before it has stopped the run.
    signal(&run, "-STOP");
    ledger.run(&["set", "T-0001", "--status", "pending"]).ok();
    let moved = &ledger.tasks()[0];
    assert_eq!((moved.status.as_str(), moved.lease_owner.is_some()), ("pending", true), "the fence stays");
    signal(&run, "-KILL");
    run.wait().unwrap();
    let found = ledger.run(&["doctor", "--json"]);
    assert_eq!(found.code, 1, "{}", found.stdout);
    let report: Value = found.json();
    let findings = report["findings"].as_array().expect("findings");
    let finding = findings.iter().find(|f| f["kind"] == "dead_owner").unwrap_or_else(|| panic!("{report}"));
    assert_eq!(finding["task"], "T-0001", "{report}");
    let fix = finding["fix"].as_str().unwrap();
    let command = fix.rsplit("clear it now: daicho ").next().unwrap();
    let args: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(args, ["set", "T-0001", "--status", "pending"], "{fix}");
    ledger.run(&args).ok();
    assert_eq!(ledger.run(&["doctor", "--json"]).code, 0, "the fix worked");
    returned_with_no_fence(&ledger);
}

/// S14: T-0001, whose daicho was killed while it ran, is back to `pending` with no fence left
/// for its lease's 10 minutes: its run is gone.
#[track_caller]
fn returned_with_no_fence(ledger: &Ledger) {
    let task = &ledger.tasks()[0];
    assert_eq!((task.status.as_str(), task.lease_owner.as_deref()), ("pending", None));
}

/// S14: a person's move over HTTP (`PATCH /api/v1/tasks/{id}`) of a run whose daicho is gone from
/// this machine does what `daicho set` does: what is left of the run here is killed and no fence
/// is left for the lease's 10 minutes.
#[test]
fn s14_a_persons_move_over_http_of_a_run_whose_daicho_is_gone_leaves_no_fence() {
    use std::io::{Read as _, Write as _};
    let (ledger, mut run) = long_run("10m");
    signal_group(&run, "-KILL");
    run.wait().unwrap();
    let port = crate::serve::free_port();
    let mut serve = spawn(&ledger, &["serve", "--bind", &format!("127.0.0.1:{port}")], &[]);
    let body = r#"{"status": "pending", "by": "hanako"}"#;
    let patch = || -> Option<String> {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        write!(
            stream,
            "PATCH /api/v1/tasks/T-0001 HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        Some(response)
    };
    let mut answer = None;
    wait_for("serve to answer", Duration::from_secs(20), || {
        answer = patch();
        answer.is_some()
    });
    signal(&serve, "-TERM");
    let _ = serve.wait();
    let answer = answer.unwrap();
    assert!(answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"), "{answer}");
    returned_with_no_fence(&ledger);
}

/// S14: a SQLite write lock held by another process for 20 s (twice the busy timeout) makes the
/// worker wait (backoff) and go on, not exit; every task completes once.
#[test]
fn s14_a_worker_waits_out_a_sqlite_lock_held_past_the_busy_timeout() {
    let ledger = Ledger::new();
    config(&ledger, "60s", "60s");
    for i in 1..=12 {
        ledger.run(&["add", &format!("task {i}"), "--action", "work", "--tag", "ai"]).ok();
    }
    let mut worker = spawn(
        &ledger,
        &["worker", "--concurrency", "2", "--poll", "100ms", "--once", "--json"],
        &[("WORK", "0.2")],
    );
    wait_for("a first run to end", Duration::from_secs(20), || count(&ledger.log_lines(), "end ") >= 1);
    let mut holder = hold_lock(&ledger, Some(20));
    let locked = Instant::now();
    while locked.elapsed() < Duration::from_secs(19) {
        assert!(worker.try_wait().unwrap().is_none(), "the worker exited while the ledger was locked");
        std::thread::sleep(Duration::from_millis(200));
    }
    holder.wait().unwrap();
    let out = worker.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("store unavailable"), "it waited, and said so");
    let tasks = ledger.tasks();
    assert!(tasks.iter().all(|t| t.status == "review" && t.failures == 0), "{tasks:?}");
    let lines = ledger.log_lines();
    assert_eq!((count(&lines, "start "), count(&lines, "end ")), (12, 12), "each ran once: {lines:?}");
}

/// S14, D3: a one-shot `daicho run` whose run ended while another process held the ledger's
/// write lock past the busy timeout waits for the lock, while the run's lease holds, and records
/// the end: exit 0, the task run once, no failure. It used to exit 75 at once, the end left to
/// be counted as a lost run and the task run again.
#[test]
fn s14_a_run_waits_out_a_lock_to_record_its_end() {
    let ledger = Ledger::new();
    config(&ledger, "10m", "60s");
    ledger.run(&["add", "short work", "--action", "work", "--tag", "ai"]).ok();
    let run = spawn(&ledger, &["run", "T-0001"], &[("WORK", "1")]);
    pid_of(&ledger, "T-0001.1.pid");
    let mut holder = hold_lock(&ledger, Some(14));
    let out = run.wait_with_output().unwrap();
    holder.wait().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("recording its end waits for the ledger"), "it waited, and said so: {stderr}");
    let task = &ledger.tasks()[0];
    assert_eq!((task.status.as_str(), task.failures, task.attempt), ("review", 0, 1), "{task:?}");
    let lines = ledger.log_lines();
    assert_eq!((count(&lines, "start "), count(&lines, "end ")), (1, 1), "it ran once: {lines:?}");
}

/// S14, D3, X2: a run that finished but whose end its daicho could not record (the ledger locked,
/// then the process killed) is recorded by the next daicho on this machine from the spool —
/// not counted as lost, not run again — and the task it found is pushed with it.
#[test]
fn s14_a_finished_but_unrecorded_run_is_recorded_not_rerun() {
    let ledger = Ledger::new();
    config(&ledger, "10m", "60s");
    ledger.run(&["add", "short work", "--action", "work", "--tag", "ai"]).ok();
    let run = spawn(&ledger, &["run", "T-0001"], &[("WORK", "1"), ("FOUND", "found on the way")]);
    pid_of(&ledger, "T-0001.1.pid");
    let mut holder = hold_lock(&ledger, None);
    wait_for("the run to end", Duration::from_secs(10), || count(&ledger.log_lines(), "end T-0001 1") == 1);
    let spool = ledger.dir.path().join(".daicho/ledger.db.spool");
    // The spool is synced (file and directory): under a loaded disk that can take seconds.
    // The end's file, renamed into place (not its temporary file, `.….tmp`).
    wait_for("the end to be spooled", Duration::from_secs(30), || spool.join("T-0001-1.json").exists());
    // daicho dies before it could record the end; then the lock goes.
    let mut run = run;
    signal_group(&run, "-KILL");
    run.wait().unwrap();
    drop(holder.stdin.take());
    holder.wait().unwrap();
    recorded_once_by_the_next_daicho(&ledger, "found on the way");
}

/// The run of T-0001 (attempt 1, which found the task `found`) ended, its daicho was killed
/// before it recorded the end: the next daicho's sweep records it from the spool — not counted
/// lost, not run again — pushes what it found once, and leaves the spool empty.
fn recorded_once_by_the_next_daicho(ledger: &Ledger, found: &str) {
    assert_eq!(ledger.tasks()[0].status, "running", "the end was not recorded");
    let report: Value = ledger.run(&["sweep", "--role", "auto", "--json"]).ok().json();
    assert_eq!(report["recovered"], 1, "{report}");
    assert_eq!(report["lost"], serde_json::json!([]), "not counted as lost");
    assert_eq!(report["ran"], serde_json::json!([]), "not run again");
    let task = &ledger.tasks()[0];
    assert_eq!(
        (task.status.as_str(), task.failures, task.attempt, task.result.as_str()),
        ("review", 0, 1, "result of T-0001")
    );
    assert_eq!(count(&ledger.log_lines(), "start T-0001"), 1);
    let pushed: Vec<_> = ledger.tasks().into_iter().filter(|t| t.title == found).collect();
    assert_eq!(pushed.len(), 1, "what the run found is pushed once: {pushed:?}");
    assert_eq!(spool_files(ledger), Vec::<String>::new(), "the spool is emptied");
}

/// The names of the files in the ledger's spool, sorted.
fn spool_files(ledger: &Ledger) -> Vec<String> {
    let spool = ledger.dir.path().join(".daicho/ledger.db.spool");
    let mut names: Vec<String> = std::fs::read_dir(spool)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// S14, X2: a run whose executor ended while its daicho was frozen (SIGSTOP), so that no end was
/// read or spooled, and whose daicho was then killed: the run's supervisor kept how it ended,
/// so the next daicho records the run from that account — not counted lost, not run again —
/// and pushes what it found; nothing is left in the spool.
#[test]
fn s14_a_run_that_ended_while_its_daicho_was_frozen_then_killed_is_recorded_not_rerun() {
    let ledger = Ledger::new();
    config(&ledger, "10m", "60s");
    ledger.run(&["add", "short work", "--action", "work", "--tag", "ai"]).ok();
    let mut run = spawn(&ledger, &["run", "T-0001"], &[("WORK", "1"), ("FOUND", "found while frozen")]);
    pid_of(&ledger, "T-0001.1.pid");
    // Frozen before the executor ends: daicho reads nothing of its output and spools nothing.
    signal(&run, "-STOP");
    wait_for("the run to end", Duration::from_secs(10), || count(&ledger.log_lines(), "end T-0001 1") == 1);
    let files = || spool_files(&ledger);
    wait_for("the supervisor to keep the run's end", Duration::from_secs(10), || {
        files().iter().any(|f| f.ends_with(".exit"))
    });
    let room = format!(".T-0001-1.{}.tmp", run.id());
    assert_eq!(
        files(),
        [room.as_str(), "T-0001-1.exit", "T-0001-1.out"],
        "no end spooled by the frozen daicho, only the room kept for it before the run"
    );
    signal_group(&run, "-KILL");
    run.wait().unwrap();
    recorded_once_by_the_next_daicho(&ledger, "found while frozen");
}

/// S14: a run its daicho recorded as usual leaves nothing of its supervisor's account behind.
#[test]
fn s14_a_recorded_run_leaves_no_account_in_the_spool() {
    let ledger = Ledger::new();
    config(&ledger, "10m", "60s");
    ledger.run(&["add", "short work", "--action", "work", "--tag", "ai"]).ok();
    let ran = ledger.command(&["run", "T-0001", "--json"]).env("WORK", "0").output().unwrap();
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    assert_eq!(ledger.tasks()[0].result, "result of T-0001", "the output still reaches daicho");
    assert_eq!(spool_files(&ledger), Vec::<String>::new());
}

/// S14: where the spool cannot be written (here a file stands in its place), the run's output
/// still reaches daicho through the supervisor and the run is recorded as usual.
#[test]
fn s14_a_spool_that_cannot_be_written_still_lets_the_output_through() {
    let ledger = Ledger::new();
    config(&ledger, "10m", "60s");
    ledger.run(&["add", "short work", "--action", "work", "--tag", "ai"]).ok();
    std::fs::write(ledger.dir.path().join(".daicho/ledger.db.spool"), "not a directory").unwrap();
    let ran = ledger.command(&["run", "T-0001", "--json"]).env("WORK", "0").output().unwrap();
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    let task = &ledger.tasks()[0];
    assert_eq!((task.status.as_str(), task.result.as_str()), ("review", "result of T-0001"));
}

/// S14: even when the supervisor itself is SIGKILLed with daicho (nothing left to clean up), the
/// next attempt of the task on this machine first kills every process of the earlier one, so
/// the retry never overlaps it.
#[test]
fn s14_a_retry_kills_what_is_left_of_an_earlier_attempt_first() {
    let (ledger, mut run, executor, escaped) = long_run_with_an_escapee();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", executor.trim())).unwrap();
    let supervisor: String = stat.rsplit(')').next().unwrap().split_whitespace().nth(1).unwrap().to_owned();
    std::process::Command::new("kill").args(["-KILL", &supervisor]).status().unwrap();
    signal_group(&run, "-KILL");
    run.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!gone(&executor) && !gone(&escaped), "orphaned, the earlier attempt still runs");
    std::thread::sleep(Duration::from_millis(2000));
    let retry = ledger.command(&["run", "T-0001", "--json"]).env("WORK", "0").output().unwrap();
    assert!(retry.status.success(), "{}", String::from_utf8_lossy(&retry.stderr));
    assert!(gone(&executor) && gone(&escaped), "the retry killed the earlier attempt first");
    let lines = ledger.log_lines();
    assert_eq!(count(&lines, "end T-0001 1") + count(&lines, "escaped-end"), 0, "no overlap: {lines:?}");
    assert_eq!(count(&lines, "end T-0001 2"), 1);
}

/// S14: the kill of an earlier attempt is scoped to its ledger: a second ledger on the machine
/// running its own T-0001 a second time leaves this ledger's T-0001 alone.
#[test]
fn s14_a_retry_never_touches_another_ledgers_task_of_the_same_id() {
    let first = Ledger::new();
    config(&first, "60s", "60s");
    first.run(&["add", "long work", "--action", "work"]).ok();
    let mut run = spawn(&first, &["run", "T-0001"], &[]);
    let executor = pid_of(&first, "T-0001.1.pid");
    let second = Ledger::new();
    config(&second, "60s", "60s");
    second.run(&["add", "other work", "--action", "work"]).ok();
    for _ in 0..2 {
        let ran = second.command(&["run", "T-0001"]).env("WORK", "0").output().unwrap();
        assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
        second.run(&["set", "T-0001", "--status", "pending"]).ok();
    }
    assert_eq!(second.tasks()[0].attempt, 2);
    assert!(!gone(&executor), "the first ledger's run goes on");
    signal_group(&run, "-KILL");
    run.wait().unwrap();
    wait_for("the first run to end with its daicho", Duration::from_secs(1), || gone(&executor));
}

/// S14: a worker whose binary file was replaced or deleted meanwhile (an upgrade) still runs its
/// tasks under the supervisor: the running binary starts it.
#[test]
fn s14_runs_go_on_after_the_binary_file_is_replaced() {
    let ledger = Ledger::new();
    config(&ledger, "60s", "60s");
    let copy = ledger.dir.path().join("daicho-old");
    std::fs::copy(env!("CARGO_BIN_EXE_daicho"), &copy).unwrap();
    let command = ledger.command(&["worker", "--poll", "100ms", "--json"]);
    let mut worker = std::process::Command::new(&copy);
    worker
        .args(command.get_args())
        .envs(command.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .current_dir(ledger.dir.path())
        .env("WORK", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let worker = worker.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::remove_file(&copy).unwrap();
    ledger.run(&["add", "after the upgrade", "--action", "work", "--tag", "ai"]).ok();
    wait_for("the task to run", Duration::from_secs(15), || count(&ledger.log_lines(), "end T-0001 1") == 1);
    signal(&worker, "-TERM");
    let out = worker.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(ledger.tasks()[0].status, "review");
}

/// S14: SIGTERM to `serve` in the middle of a round: the run under way finishes and is
/// recorded, no new run starts, and serve exits 0.
#[test]
fn s14_sigterm_to_serve_mid_round_starts_nothing_new() {
    let ledger = Ledger::new();
    config(&ledger, "60s", "60s");
    let mut toml = std::fs::read_to_string(ledger.dir.path().join("daicho.toml")).unwrap();
    toml.push_str("\n[[schedule]]\nrole = \"auto\"\ncron = \"* * * * *\"\nmax = 10\n");
    ledger.file("daicho.toml", toml);
    for i in 1..=6 {
        ledger.run(&["add", &format!("task {i}"), "--action", "work", "--tag", "ai"]).ok();
    }
    let serve = spawn(&ledger, &["serve", "--now", "--no-web"], &[("WORK", "1")]);
    wait_for("a first run to start", Duration::from_secs(20), || count(&ledger.log_lines(), "start ") == 1);
    signal(&serve, "-TERM");
    let out = serve.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = ledger.log_lines();
    assert_eq!((count(&lines, "start "), count(&lines, "end ")), (1, 1), "{lines:?}");
    let tasks = ledger.tasks();
    assert_eq!(tasks.iter().filter(|t| t.status == "review").count(), 1);
    assert_eq!(tasks.iter().filter(|t| t.status == "pending" && t.attempt == 0).count(), 5);
    assert!(tasks.iter().all(|t| t.failures == 0));
}

/// S14: a worker waiting for a database that is out of reach (connection refused) stops at the
/// operator's SIGTERM: opening the ledger again and again never installs a signal handler that
/// would swallow the stop.
#[test]
fn s14_a_worker_waiting_for_its_database_stops_at_sigterm() {
    let ledger = Ledger::uninitialized();
    // A port nothing listens on: every connection is refused, which is worth retrying.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let db = format!("postgres://postgres@127.0.0.1:{port}/none");
    let mut worker = spawn(&ledger, &["--db", &db, "worker", "--poll", "100ms"], &[]);
    std::thread::sleep(Duration::from_millis(700)); // a few attempts, with backoff
    assert!(worker.try_wait().unwrap().is_none(), "the worker keeps trying while the database is away");
    signal(&worker, "-TERM");
    let started = Instant::now();
    while worker.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stopped = worker.try_wait().unwrap().is_some();
    if !stopped {
        let _ = worker.kill();
        let _ = worker.wait();
    }
    assert!(stopped, "the worker went on retrying after SIGTERM");
}

/// The fsync and fdatasync calls of a trace.
fn syncs(calls: &[String]) -> Vec<&String> {
    calls.iter().filter(|l| l.contains("fsync(") || l.contains("fdatasync(")).collect()
}

/// I5 (issue 17): a one-shot change costs exactly the fsync of its commit: `add` and `set` do not
/// checkpoint the WAL into the database file and remove it when they close (three more fsyncs
/// each), nor sync the ledger's directory, whose entries are already there (SQLite did, once per
/// process). The sync is an fdatasync, as with a distribution's SQLite. Counted with strace.
#[test]
fn i5_add_and_set_sync_their_commit_once_and_do_not_checkpoint_on_close() {
    let ledger = Ledger::new();
    ledger.run(&["add", "first"]).ok();
    for args in [&["add", "second", "--deps", "T-0001"][..], &["set", "T-0001", "--status", "done"]] {
        let (output, calls) = ledger.traced("fsync,fdatasync", args);
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        let syncs = syncs(&calls);
        assert_eq!(syncs.len(), 1, "{args:?}: {} syncs:\n{calls:#?}", syncs.len());
        assert!(syncs[0].contains("ledger.db-wal"), "{args:?}: the commit syncs the WAL: {syncs:?}");
        // Its data only (SQLite built with HAVE_FDATASYNC): not the inode's times as well.
        assert!(syncs[0].contains("fdatasync("), "{args:?}: the commit syncs with fdatasync: {syncs:?}");
        assert!(
            ledger.dir.path().join(".daicho/ledger.db-wal").exists(),
            "{args:?}: the WAL was checkpointed away"
        );
    }
}

/// A configuration whose one automatic action runs `script`, for `--once` workers.
fn quick_action(ledger: &Ledger, script: &str) {
    let script = ledger.script("quick.sh", script);
    ledger.file(
        "daicho.toml",
        format!("[[action]]\nname = \"quick\"\nkind = \"command\"\ncommand = [\"{script}\"]\nauto = true\non_success = \"done\"\n"),
    );
    for n in 0..5 {
        ledger.run(&["add", &format!("quick {n}"), "--action", "quick", "--tag", "ai"]).ok();
    }
}

/// The parent pid of a process, from `/proc/PID/stat`.
fn parent_of(pid: &str) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).expect("the process lives");
    stat.rsplit(')').next().and_then(|r| r.split_whitespace().nth(1)).expect("a parent pid").to_owned()
}

/// S14, S4: `kill -9` of daicho and of its run supervisor both (what `pkill -9 daicho` does)
/// leaves the executor and its escaped grandchild running with no one to stop them; the daicho
/// that counts the lost run once the lease expires kills them on this machine.
#[test]
fn s14_counting_a_lost_run_kills_what_is_left_of_it_on_this_machine() {
    let (ledger, mut run, executor, escaped) = long_run_with_an_escapee();
    let supervisor = parent_of(&executor);
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &run.id().to_string(), supervisor.trim()])
        .status()
        .expect("kill");
    assert!(killed.success());
    run.wait().unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!gone(&executor) && !gone(&escaped), "the executor outlives daicho and its supervisor");
    let swept: Value = ledger.run(&["sweep", "--role", "auto", "--json"]).ok().json();
    assert_eq!(swept["lost"].as_array().map(Vec::len), Some(1), "{swept}");
    wait_for("the lost run's processes to be gone", Duration::from_secs(2), || {
        gone(&executor) && gone(&escaped)
    });
    assert_eq!(count(&ledger.log_lines(), "end "), 0, "the lost run never ended on its own");
}

/// S14: a frozen daicho (SIGSTOP) cannot fence its run itself, and its lease runs out; its run
/// supervisor hears no sign of life for a third of the lease and kills the executor and its
/// escaped grandchild, before the lease ends (the last renewal came at most a third of the
/// lease before the freeze).
#[test]
fn s14_the_supervisor_kills_the_run_of_a_frozen_daicho_before_its_lease_ends() {
    let (_ledger, mut run, executor, escaped) = long_run_with_an_escapee();
    signal(&run, "-STOP");
    let frozen = Instant::now();
    let lease_left = Duration::from_millis(1300); // 2 s lease, renewed every 2/3 s
    wait_for("the frozen run's processes to be gone", Duration::from_secs(3), || {
        gone(&executor) && gone(&escaped)
    });
    let took = frozen.elapsed();
    signal(&run, "-CONT");
    let _ = run.kill();
    run.wait().unwrap();
    assert!(took < lease_left, "killed {took:?} after the freeze, after the lease could have ended");
}

/// S3: a worker never retries a run that failed on its own: the claim that shares the commit of
/// the failure's end does not take the row it just put back to `pending`. Five failing tasks,
/// `worker --once`: each ran once and counts one failure (each ran twice, back to back).
#[test]
fn s3_a_worker_does_not_claim_again_the_run_that_just_failed() {
    let ledger = Ledger::new();
    quick_action(&ledger, "cat > /dev/null\necho \"ran $DAICHO_IDEMPOTENCY_KEY\" >> \"$LOG\"\nexit 1\n");
    ledger.run(&["worker", "--once", "--json"]);
    let mut runs = ledger.log_lines();
    runs.sort();
    let want: Vec<String> = (1..=5).map(|n| format!("ran T-000{n}:1")).collect();
    assert_eq!(runs, want, "one run each");
    for task in ledger.tasks() {
        assert_eq!((task.status.as_str(), task.failures, task.attempt), ("pending", 1, 1), "{}", task.id);
    }
}

/// A ledger whose quick tasks `worker --once` ran under strace for `syscalls`, each done: the
/// ledger and the calls traced.
fn quick_worker_traced(syscalls: &str) -> (Ledger, Vec<String>) {
    let ledger = Ledger::new();
    quick_action(&ledger, "cat > /dev/null\necho ok\n");
    let (output, calls) = ledger.traced(syscalls, &["worker", "--once", "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(ledger.tasks().iter().all(|t| t.status == "done"), "{:?}", ledger.tasks());
    (ledger, calls)
}

/// I5, S14: a worker's run costs the one fsync of its commit: its end goes to the spool (where a
/// crash of daicho leaves it for the next daicho) without syncing the file or the spool's
/// directory, and is removed once recorded.
#[test]
fn i5_s14_a_worker_syncs_each_run_once_and_spools_its_end_unsynced() {
    let (ledger, calls) = quick_worker_traced("fsync,fdatasync");
    let syncs = syncs(&calls);
    assert!(!syncs.iter().any(|l| l.contains(".spool")), "the spool is not synced:\n{syncs:#?}");
    // Five runs: the first claim, four ends each with the next claim, the last end; and at most
    // two commits of upkeep.
    assert!((6..=8).contains(&syncs.len()), "{} syncs for 5 runs:\n{syncs:#?}", syncs.len());
    let spool = ledger.dir.path().join(".daicho/ledger.db.spool");
    assert_eq!(std::fs::read_dir(&spool).map_or(0, |d| d.count()), 0, "recorded ends leave the spool");
}

/// I5: a worker does not look at the WAL file between its commits. A `stat` of it after each
/// commit (to see whether it grew large) made the next write's time stamp a fine-grained one
/// (Linux's multigrain time stamps), so every commit's `fdatasync` wrote the file's inode as well
/// as its pages: a second device write per claim. The WAL hook counts the log's frames instead.
#[test]
fn i5_a_worker_does_not_look_at_the_wal_between_its_commits() {
    let (_ledger, calls) = quick_worker_traced("stat,lstat,fstat,newfstatat,statx");
    let looks: Vec<&String> = calls.iter().filter(|l| l.contains("ledger.db-wal")).collect();
    // Five runs take six commits; opening the connection looks at the WAL four times (whether
    // it exists, and SQLite's own looks), the store's first commit once (another process may
    // have left it large), and no other commit looks again.
    assert!(looks.len() <= 5, "{} looks at the WAL over six commits:\n{looks:#?}", looks.len());
}

/// S14, D3: a run's end the ledger cannot record promptly (its write lock held by another
/// process for 3 s) is synced to disk in the spool, file and directory, before it is recorded,
/// so that it outlasts a loss of power during the outage.
#[test]
fn s14_an_end_the_ledger_does_not_record_promptly_is_synced_in_the_spool() {
    let ledger = Ledger::new();
    quick_action(&ledger, "cat > /dev/null\ntouch \"$LOG.started\"\nsleep 0.5\necho ok\n");
    for n in 1..5 {
        ledger.run(&["set", &format!("T-000{}", n + 1), "--status", "dropped"]).ok();
    }
    let trace = ledger.dir.path().join("trace.txt");
    let mut traced = ledger
        .traced_command("fsync,fdatasync", &trace, &["worker", "--once", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("strace runs (Debian package strace)");
    let started = ledger.dir.path().join("executors.log.started");
    wait_for("the run to start", Duration::from_secs(20), || started.exists());
    let db = ledger.dir.path().join(".daicho/ledger.db");
    let held = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); \
             c.execute('BEGIN IMMEDIATE'); time.sleep(3); c.execute('COMMIT')",
        ])
        .arg(&db)
        .status()
        .expect("python3 holds the write lock");
    assert!(held.success());
    let status = traced.wait().expect("the worker ends");
    assert!(status.success(), "the worker failed");
    let calls: Vec<String> =
        std::fs::read_to_string(&trace).expect("trace").lines().map(str::to_owned).collect();
    let syncs = syncs(&calls);
    let file = syncs.iter().position(|l| l.contains("ledger.db.spool/T-0001-1.json>"));
    let dir = syncs.iter().position(|l| l.contains("ledger.db.spool>"));
    let recorded = syncs.iter().rposition(|l| l.contains("ledger.db-wal"));
    assert!(
        matches!((file, dir, recorded), (Some(f), Some(d), Some(r)) if f < d && d < r),
        "the spooled end, then its directory, synced before the commit that records it:\n{syncs:#?}"
    );
    let task = &ledger.tasks()[0];
    assert_eq!((task.status.as_str(), task.attempt), ("done", 1));
}

/// I5, D3: the entries a commit depends on are durable before it is answered: `init` of a new
/// ledger, and the first change after another tool removed the WAL (a `sqlite3` shell that
/// checkpoints on close), sync the ledger's directory before the WAL's commit.
#[test]
fn i5_a_new_ledger_or_wal_syncs_its_directory_before_the_commit() {
    let ledger = Ledger::uninitialized();
    let dir = ledger.dir.path().join(".daicho");
    let dir_syncs = |calls: &[String]| {
        let name = format!("<{}>)", dir.display());
        syncs(calls).iter().filter(|l| l.contains(&name)).count()
    };
    let (output, calls) = ledger.traced("fsync,fdatasync", &["init"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(dir_syncs(&calls) >= 1, "init syncs the new ledger's directory:\n{calls:#?}");
    ledger.run(&["add", "first"]).ok();
    let db = dir.join("ledger.db");
    // Python's sqlite3 checkpoints on close and, as the last connection, removes the WAL.
    let closed = std::process::Command::new("python3")
        .args(["-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('SELECT count(*) FROM sqlite_schema').fetchall(); c.close()"])
        .arg(&db)
        .status()
        .expect("python3 opens the ledger");
    assert!(closed.success());
    assert!(!dir.join("ledger.db-wal").exists(), "the WAL is gone");
    let (output, calls) = ledger.traced("fsync,fdatasync", &["add", "second"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let syncs = syncs(&calls);
    let dir_at = syncs.iter().position(|l| l.contains(&format!("<{}>)", dir.display())));
    let wal_at = syncs.iter().position(|l| l.contains("ledger.db-wal"));
    assert!(
        matches!((dir_at, wal_at), (Some(d), Some(w)) if d < w),
        "the directory is synced before the commit in the new WAL:\n{calls:#?}"
    );
}

/// I5 (issue 17, item 1): a one-shot command that is synchronous at heart runs SQLite on its own
/// thread: `add`, `set`, `ready` and `show` start no thread (each started one of tokio's
/// blocking threads and handed every call to it), and still do their work.
#[test]
fn i5_one_shot_commands_start_no_thread() {
    let ledger = Ledger::new();
    ledger.run(&["add", "first", "--tag", "ai"]).ok();
    let commands: [&[&str]; 4] =
        [&["add", "second"], &["set", "T-0002", "--status", "done"], &["ready"], &["show", "T-0002"]];
    for args in commands {
        let (output, calls) = ledger.traced("clone,clone3", args);
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        let threads: Vec<&String> = calls.iter().filter(|l| l.contains("clone")).collect();
        assert!(threads.is_empty(), "{args:?} started threads: {threads:#?}");
    }
    assert!(ledger.run(&["show", "T-0002"]).ok().stdout.contains("done"));
    assert!(ledger.run(&["ready"]).ok().stdout.contains("first"));
}

/// I5 (issue 17, item 1): `ready` without any daily cap configured reads no time zone (jiff
/// walks /usr/share/zoneinfo to name the local zone) and counts no runs; with a cap it does.
#[test]
fn i5_ready_without_caps_reads_no_time_zone() {
    let ledger = Ledger::new();
    ledger.run(&["add", "a task", "--tag", "ai"]).ok();
    let zone_reads = |config: &str| {
        ledger.file("daicho.toml", config);
        let (output, calls) = ledger.traced("openat", &["ready"]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        calls.iter().filter(|l| l.contains("zoneinfo")).count()
    };
    assert_eq!(zone_reads(""), 0, "no cap: no time zone");
    if std::path::Path::new("/usr/share/zoneinfo").is_dir() {
        assert!(zone_reads("[policy]\ndaily_cap = 5\n") > 0, "a daily cap counts today's runs in local time");
    }
}

/// I3 (issue 17, item 1): after a large import the WAL is checkpointed and truncated, so the
/// next one-shot read does not rebuild the WAL's index by reading every frame of it (a 20,000
/// row import left a WAL that `show` read thousands of times before).
#[test]
fn i3_a_read_after_a_large_import_does_not_read_the_whole_wal() {
    let ledger = Ledger::new();
    let rows: Vec<String> = (0..20_000)
        .map(|n| format!("{{\"title\": \"row {n} of a large import\", \"project\": \"PJ\"}}"))
        .collect();
    ledger.file("rows.jsonl", rows.join("\n") + "\n");
    ledger.run(&["import", "rows.jsonl"]).ok();
    let wal = ledger.dir.path().join(".daicho/ledger.db-wal");
    let size = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert!(size <= 4 << 20, "the WAL is {size} bytes after the import");
    let (output, calls) = ledger.traced("pread64", &["show", "T-0001"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(calls.len() < 200, "{} reads for one row", calls.len());
}

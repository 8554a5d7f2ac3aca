//! The engine through the command line: real child processes, real SIGKILL, one SQLite ledger.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{Ledger, ReadyJson, TaskJson, fixture};

/// A step script: logs its start (with attempt and correction), then its end.
const STEP: &str = r#"cat > /dev/null
echo "start $DAICHO_TASK_ID $DAICHO_ATTEMPT [$DAICHO_CORRECTION]" >> "$LOG"
echo "done $DAICHO_TASK_ID $DAICHO_ATTEMPT" >> "$LOG"
echo "result of $DAICHO_TASK_ID"
"#;

fn config(ledger: &Ledger, extra: &str) {
    ledger.file("daicho.toml", extra);
}

/// Lines of the log starting with `word`, per task id.
fn count(lines: &[String], word: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for line in lines {
        let mut parts = line.split_whitespace();
        if parts.next() == Some(word)
            && let Some(id) = parts.next()
        {
            *counts.entry(id.to_owned()).or_insert(0) += 1;
        }
    }
    counts
}

fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn task<'a>(tasks: &'a [TaskJson], id: &str) -> &'a TaskJson {
    tasks.iter().find(|t| t.id == id).unwrap_or_else(|| panic!("no {id}"))
}

fn sweep(ledger: &Ledger, role: &str, max: &str) -> Value {
    ledger.run(&["sweep", "--role", role, "--max", max, "--json"]).ok().json()
}

fn kill_group_of(pid_file: &std::path::Path) {
    if let Ok(pid) = std::fs::read_to_string(pid_file) {
        let _ =
            std::process::Command::new("kill").args(["-KILL", "--", &format!("-{}", pid.trim())]).status();
        let _ = std::fs::remove_file(pid_file);
    }
}

#[test]
fn d3_seed_002_crash_while_t3_runs_resumes_without_redoing_completions() {
    seed_002_crash(&Ledger::new());
}

#[test]
fn d3_seed_002_crash_resume_on_postgres() {
    let Some(db) = PgDatabase::fresh("crash") else { return };
    let mut ledger = Ledger::uninitialized();
    ledger.db = Some(db.url.clone());
    ledger.run(&["init"]).ok();
    seed_002_crash(&ledger);
}

fn seed_002_crash(ledger: &Ledger) {
    // t3 is slow the first time: the crash lands while it runs.
    let script = ledger.script(
        "step.sh",
        r#"cat > /dev/null
echo "start $DAICHO_TASK_ID $DAICHO_ATTEMPT" >> "$LOG"
if [ "$DAICHO_TASK_ID" = "T-0003" ] && [ "$DAICHO_ATTEMPT" = "1" ]; then echo $$ > "$LOG.pid"; sleep 60; fi
echo "done $DAICHO_TASK_ID $DAICHO_ATTEMPT" >> "$LOG"
"#,
    );
    config(
        ledger,
        &format!(
            "[policy]\nlease = \"1s\"\n\n[[action]]\nname = \"work\"\nkind = \"command\"\ncommand = [\"{script}\"]\ntypes = [\"step\"]\nauto = true\non_success = \"done\"\n"
        ),
    );
    let plan = r#"{"goal": "ship the parser feature", "tasks": [
        {"id": "t1", "title": "t1 module skeleton", "type": "step", "tags": ["ai"]},
        {"id": "t2", "title": "t2 parser", "deps": ["t1"], "type": "step", "tags": ["ai"]},
        {"id": "t3", "title": "t3 tests", "deps": ["t1"], "type": "step", "tags": ["ai"]},
        {"id": "t4", "title": "t4 run the suite", "deps": ["t2", "t3"], "type": "step", "tags": ["ai"]},
        {"id": "t5", "title": "t5 release notes", "deps": ["t4"], "type": "step", "tags": ["ai"]}]}"#;
    ledger.run(&["import", &ledger.file("plan.json", plan)]).ok();

    let mut worker = ledger
        .command(&["sweep", "--role", "auto", "--max", "10"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid_file = ledger.dir.path().join("executors.log.pid");
    wait_for("t3 to start", Duration::from_secs(30), || pid_file.exists());
    worker.kill().expect("SIGKILL the daicho process");
    worker.wait().unwrap();
    kill_group_of(&pid_file);

    let tasks = ledger.tasks();
    assert_eq!(task(&tasks, "T-0001").status, "done");
    assert_eq!(task(&tasks, "T-0002").status, "done");
    assert_eq!(task(&tasks, "T-0003").status, "running", "the claim was persisted before the crash");

    std::thread::sleep(Duration::from_millis(1200));
    let report = sweep(ledger, "auto", "10");
    assert_eq!(report["lost"][0]["id"], "T-0003", "{report}");
    let lines = ledger.log_lines();
    let starts = count(&lines, "start");
    let dones = count(&lines, "done");
    assert_eq!(starts["T-0001"], 1, "{lines:?}");
    assert_eq!(starts["T-0002"], 1, "t1, t2 recorded done are never re-run");
    assert_eq!(starts["T-0003"], 2, "t3 started twice: interrupted, then retried");
    assert_eq!(dones.values().sum::<usize>(), 5, "5 completed executions in total: {lines:?}");
    let tasks = ledger.tasks();
    assert!(tasks.iter().all(|t| t.status == "done"), "{tasks:?}");
    assert_eq!(task(&tasks, "T-0003").failures, 1, "the interruption counts as one timeout failure");
    assert!(tasks.iter().filter(|t| t.id != "T-0003").all(|t| t.failures == 0));
}

#[test]
fn s1_the_executor_sees_its_row_running_with_run_cleared() {
    let ledger = Ledger::new();
    let script =
        ledger.script("peek.sh", "cat > /dev/null\n\"$DAICHO_BIN\" show \"$DAICHO_TASK_ID\" --json\n");
    config(&ledger, &format!("[[action]]\nname = \"peek\"\nkind = \"command\"\ncommand = [\"{script}\"]\n"));
    ledger.run(&["add", "look at yourself", "--action", "peek"]).ok();
    ledger.run(&["set", "T-0001", "--run"]).ok();
    let report = sweep(&ledger, "run-requested", "1");
    assert_eq!(report["ran"][0]["result"], "success", "{report}");
    let stored = &ledger.tasks()[0];
    let seen: Value = serde_json::from_str(&stored.result).expect("the executor printed the row");
    assert_eq!(
        (seen["status"].as_str(), seen["run"].as_bool(), seen["attempt"].as_u64()),
        (Some("running"), Some(false), Some(1))
    );
    assert!(seen["lease_owner"].as_str().is_some_and(|o| !o.is_empty()));
    assert_eq!(stored.status, "review", "on_success defaults to review");
    assert!(!stored.run);
}

#[test]
fn s2_external_never_runs_without_approval_and_is_queued_once() {
    let ledger = Ledger::new();
    let script = ledger.script("step.sh", STEP);
    config(
        &ledger,
        &format!(
            "[[action]]\nname = \"publish\"\nkind = \"command\"\ncommand = [\"{script}\"]\nexternal = true\nauto = true\n"
        ),
    );
    ledger.run(&["add", "post the article", "--action", "publish", "--tag", "ai"]).ok();
    let first = sweep(&ledger, "auto", "5");
    assert_eq!(first["held"][0]["hold"], "awaiting_approval", "{first}");
    assert_eq!(first["queued"], serde_json::json!(["T-0001"]));
    let second = sweep(&ledger, "auto", "5");
    assert_eq!(second["queued"], serde_json::json!([]), "the approval queue is idempotent");
    let requested = sweep(&ledger, "run-requested", "5");
    assert!(requested["ran"].as_array().unwrap().is_empty());
    let manual = ledger.run(&["run", "T-0001"]);
    assert_eq!(manual.code, 1);
    assert!(manual.stdout.contains("awaiting approval"), "{}", manual.stdout);
    assert!(ledger.log_lines().is_empty(), "no executor ever started");
    let queue: Vec<Value> = ledger.run(&["approve", "--json"]).ok().json();
    assert_eq!(queue.len(), 1);
    ledger.run(&["approve", "T-0001"]).ok();
    let approved = sweep(&ledger, "run-requested", "5");
    assert_eq!(approved["ran"][0]["result"], "success", "{approved}");
    assert_eq!(count(&ledger.log_lines(), "start")["T-0001"], 1);
}

/// S2: `daicho approve` lists what each queued run would do and who queued it, approves several
/// ids at once, rejects with one reason (the rows dropped, the reason kept), and `--history`
/// shows every decision; a blank reason writes nothing.
#[test]
fn s2_approve_shows_what_goes_out_and_decides_several_with_one_reason() {
    let ledger = Ledger::new();
    let script = ledger.script("step.sh", STEP);
    config(
        &ledger,
        &format!(
            "[[action]]\nname = \"publish\"\nkind = \"command\"\ncommand = [\"{script}\", \"--live\"]\nexternal = true\nauto = true\n"
        ),
    );
    for title in ["post the article", "mail the list", "order the banner", "tweet it"] {
        ledger.run(&["add", title, "--action", "publish", "--tag", "ai"]).ok();
    }
    assert_eq!(sweep(&ledger, "auto", "5")["queued"].as_array().unwrap().len(), 4);
    let queue: Vec<Value> = ledger.run(&["approve", "--json"]).ok().json();
    assert_eq!(queue.len(), 4);
    assert_eq!(queue[0]["queued_by"], "sweep:auto");
    assert_eq!(queue[0]["outbound"]["kind"], "command");
    assert_eq!(queue[0]["outbound"]["command"], serde_json::json!([script, "--live"]));
    let text = ledger.run(&["approve"]).ok().stdout;
    assert!(text.contains("[publish]") && text.contains("--live") && text.contains("sweep:auto"), "{text}");

    let both: Vec<Value> = ledger.run(&["approve", "T-0001", "T-0002", "--json"]).ok().json();
    assert!(both.iter().all(|t| t["run"] == true), "{both:?}");
    let blank = ledger.run(&["approve", "--reject", " ", "T-0003"]);
    assert_eq!(blank.code, 1);
    assert!(blank.stderr.contains("a rejection needs a reason"), "{}", blank.stderr);
    assert_eq!(ledger.tasks()[2].status, "pending");
    ledger.run(&["approve", "--reject", "not this quarter", "T-0003", "T-0004"]).ok();
    let tasks = ledger.tasks();
    for t in &tasks[2..] {
        assert_eq!((t.status.as_str(), t.correction.as_str()), ("dropped", "rejected: not this quarter"));
    }
    assert!(ledger.run(&["approve", "--json"]).ok().json::<Vec<Value>>().is_empty());
    let history: Vec<Value> = ledger.run(&["approve", "--history", "--json"]).ok().json();
    let decided: Vec<(&str, &str, &str)> = history
        .iter()
        .map(|d| (d["id"].as_str().unwrap(), d["decision"].as_str().unwrap(), d["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(decided.len(), 4);
    assert!(decided.contains(&("T-0004", "rejected", "not this quarter")), "{decided:?}");
    assert!(decided.contains(&("T-0001", "approved", "")), "{decided:?}");
    assert!(
        history.iter().all(
            |d| d["queued_by"] == "sweep:auto" && d["decided_by"].as_str().unwrap().starts_with("human:")
        )
    );
}

#[test]
fn s3_three_failures_park_the_task_and_nothing_retries_it() {
    let ledger = Ledger::new();
    let script = ledger.script(
        "fail.sh",
        "cat > /dev/null\necho \"start $DAICHO_TASK_ID $DAICHO_IDEMPOTENCY_KEY\" >> \"$LOG\"\necho boom >&2\nexit 3\n",
    );
    config(
        &ledger,
        &format!("[[action]]\nname = \"flaky\"\nkind = \"command\"\ncommand = [\"{script}\"]\nauto = true\n"),
    );
    ledger.run(&["add", "flaky job", "--action", "flaky", "--tag", "ai"]).ok();
    for round in 1..=3 {
        let report = sweep(&ledger, "auto", "5");
        assert_eq!(report["ran"].as_array().unwrap().len(), 1, "one run per sweep, no self-retry: {report}");
        assert_eq!(report["ran"][0]["error"], "exit status 3: boom");
        let want = if round < 3 { "pending" } else { "needs_human" };
        assert_eq!(report["ran"][0]["status"], want);
    }
    let report = sweep(&ledger, "auto", "5");
    assert!(report["ran"].as_array().unwrap().is_empty());
    let keys: Vec<String> =
        ledger.log_lines().iter().map(|l| l.split_whitespace().last().unwrap().to_owned()).collect();
    assert_eq!(keys, ["T-0001:1", "T-0001:2", "T-0001:3"], "S10: one idempotency key per attempt");
    assert_eq!(ledger.tasks()[0].failures, 3);
}

#[test]
fn s5_heavy_is_skipped_with_the_command_that_runs_it() {
    let ledger = Ledger::new();
    let script = ledger.script("step.sh", STEP);
    config(
        &ledger,
        &format!(
            "[[action]]\nname = \"pdf\"\nkind = \"command\"\ncommand = [\"{script}\"]\nheavy = true\nauto = true\n"
        ),
    );
    ledger.run(&["add", "render the report", "--action", "pdf", "--tag", "ai"]).ok();
    let report = sweep(&ledger, "auto", "5");
    assert_eq!(report["held"][0]["reason"], "heavy: run it with `daicho run-heavy T-0001`", "{report}");
    let run = ledger.run(&["run", "T-0001"]);
    assert_eq!(run.code, 1);
    assert!(ledger.log_lines().is_empty());
    let heavy = ledger.run(&["run-heavy", "T-0001", "--json"]).ok();
    let json: Value = heavy.json();
    assert_eq!(json["result"], "success");
    assert_eq!(ledger.log_lines().len(), 2, "one job per invocation");
}

#[test]
fn s7_s12_seed_004_runs_t500_to_t502_then_reports_t503_stalled() {
    let ledger = Ledger::new();
    let script = ledger.script("step.sh", STEP);
    config(
        &ledger,
        &format!(
            "[[action]]\nname = \"research\"\nkind = \"command\"\ncommand = [\"{script}\"]\ntypes = [\"調査/記事\"]\nauto = true\non_success = \"done\"\n\n\
             [[action]]\nname = \"writer\"\nkind = \"command\"\ncommand = [\"{script}\"]\ntypes = [\"制作/記事\"]\nauto = true\non_success = \"done\"\n"
        ),
    );
    ledger.run(&["import", &fixture("seed-004-tasks.md")]).ok();
    let mut ran = Vec::new();
    let mut last = Value::Null;
    for _ in 0..6 {
        last = sweep(&ledger, "auto", "2");
        let runs = last["ran"].as_array().unwrap();
        if runs.is_empty() {
            break;
        }
        ran.extend(runs.iter().map(|r| r["id"].as_str().unwrap().to_owned()));
    }
    assert_eq!(ran, ["T-500", "T-501", "T-502"]);
    assert_eq!(last["held"][0]["id"], "T-503", "{last}");
    assert_eq!(last["held"][0]["hold"], "stalled");
    assert_eq!(last["held"][0]["reason"], "stalled: no executor accepts type '台帳' or assignee 'secretary'");
    let human = ledger.run(&["sweep", "--role", "auto"]).ok();
    assert!(human.stdout.contains("held T-503") && human.stdout.contains("stalled"), "{}", human.stdout);
    let ready = ledger.run(&["ready"]).ok();
    assert!(ready.stdout.contains("stalled"), "ready says why: {}", ready.stdout);
}

#[test]
fn s8_s9_paused_or_idle_sweeps_start_no_process() {
    let ledger = Ledger::new();
    let script = ledger.script("step.sh", STEP);
    config(
        &ledger,
        &format!("[[action]]\nname = \"work\"\nkind = \"command\"\ncommand = [\"{script}\"]\nauto = true\n"),
    );
    // Cost gate: nothing eligible (no ai tag) → no process.
    ledger.run(&["add", "not for the AI", "--action", "work"]).ok();
    let idle = sweep(&ledger, "auto", "5");
    assert_eq!(idle["held"][0]["hold"], "no_ai_tag", "{idle}");
    assert!(ledger.log_lines().is_empty());
    ledger.run(&["set", "T-0001", "--tag", "ai"]).ok();
    ledger.run(&["pause", "--reason", "budget review"]).ok();
    let paused = sweep(&ledger, "auto", "5");
    assert_eq!(paused["paused"], "budget review");
    let manual = ledger.run(&["run", "T-0001"]);
    assert!(manual.stdout.contains("paused (budget review)"), "{}", manual.stdout);
    ledger.run(&["resume"]).ok();
    ledger.file("PAUSED", "maintenance window\n");
    assert_eq!(sweep(&ledger, "auto", "5")["paused"], "maintenance window");
    assert!(ledger.log_lines().is_empty(), "no process spawned while paused");
    std::fs::remove_file(ledger.dir.path().join("PAUSED")).unwrap();
    assert_eq!(sweep(&ledger, "auto", "5")["ran"][0]["result"], "success");
}

#[test]
fn s9_daily_caps_hold_further_runs() {
    let ledger = Ledger::new();
    let script = ledger.script("step.sh", STEP);
    config(
        &ledger,
        &format!(
            "[policy]\ndaily_cap = 3\n\n[[action]]\nname = \"work\"\nkind = \"command\"\ncommand = [\"{script}\"]\nauto = true\ndaily_cap = 2\n"
        ),
    );
    for title in ["a", "b", "c"] {
        ledger.run(&["add", title, "--action", "work", "--tag", "ai"]).ok();
    }
    let report = sweep(&ledger, "auto", "10");
    assert_eq!(report["ran"].as_array().unwrap().len(), 2, "{report}");
    assert_eq!(report["held"][0]["hold"], "action_cap");
    let stats: Vec<Value> = ledger.run(&["stats", "--json"]).ok().json();
    assert_eq!((stats[0]["action"].as_str(), stats[0]["runs"].as_u64()), (Some("work"), Some(2)));
}

#[test]
fn s11_a_timeout_kills_the_whole_process_group() {
    let ledger = Ledger::new();
    let script =
        ledger.script("hang.sh", "cat > /dev/null\nsleep 60 &\necho $! > \"$LOG.child\"\nsleep 60\n");
    config(
        &ledger,
        &format!(
            "[[action]]\nname = \"hang\"\nkind = \"command\"\ncommand = [\"{script}\"]\ntimeout = \"1s\"\n"
        ),
    );
    ledger.run(&["add", "never ends", "--action", "hang"]).ok();
    let started = Instant::now();
    let run = ledger.run(&["run", "T-0001", "--json"]);
    assert_eq!(run.code, 1);
    let json: Value = run.json();
    assert_eq!((json["result"].as_str(), json["status"].as_str()), (Some("timeout"), Some("pending")));
    assert!(started.elapsed() < Duration::from_secs(30));
    let child = std::fs::read_to_string(ledger.dir.path().join("executors.log.child")).unwrap();
    let proc = format!("/proc/{}", child.trim());
    wait_for("the grandchild to be gone", Duration::from_secs(5), || {
        std::fs::read_to_string(format!("{proc}/stat"))
            .map_or(true, |s| s.split_whitespace().nth(2) == Some("Z"))
    });
    assert_eq!(ledger.tasks()[0].failures, 1, "a timeout counts as a failure");
}

#[test]
fn c3_a_correction_reaches_only_its_own_run_even_when_that_run_fails() {
    let ledger = Ledger::new();
    // Corrected tasks fail in three ways: exit 1, a timeout, an abort (a crash).
    let script = ledger.script(
        "c.sh",
        r#"input=$(cat)
echo "start $DAICHO_TASK_ID [$DAICHO_CORRECTION] $(echo "$input" | grep -o '"correction":[^,}]*')" >> "$LOG"
case "$DAICHO_CORRECTION" in
  fail*) exit 1 ;;
  hang*) sleep 30 ;;
  crash*) kill -ABRT $$ ;;
esac
echo ok
"#,
    );
    config(
        &ledger,
        &format!(
            "[[action]]\nname = \"c\"\nkind = \"command\"\ncommand = [\"{script}\"]\nauto = true\ntimeout = \"1s\"\n"
        ),
    );
    for (title, correction) in
        [("a", "fail please"), ("b", ""), ("c", "hang please"), ("d", ""), ("e", "crash please"), ("f", "")]
    {
        ledger.run(&["add", title, "--action", "c", "--tag", "ai"]).ok();
        if !correction.is_empty() {
            let id = ledger.tasks().last().unwrap().id.clone();
            ledger.run(&["set", &id, "--correction", correction]).ok();
        }
    }
    let report = ledger
        .command(&["sweep", "--role", "auto", "--max", "10", "--json"])
        .env("DAICHO_CORRECTION", "leaked from the parent")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    let results: Vec<&str> =
        report["ran"].as_array().unwrap().iter().map(|r| r["result"].as_str().unwrap()).collect();
    assert_eq!(results, ["failure", "success", "timeout", "success", "failure", "success"], "{report}");
    let lines = ledger.log_lines();
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert!(
        lines[0].contains("[fail please]") && lines[0].contains("\"correction\":\"fail please\""),
        "{}",
        lines[0]
    );
    for uncorrected in [&lines[1], &lines[3], &lines[5]] {
        assert!(uncorrected.contains("[]") && uncorrected.contains("\"correction\":null"), "{uncorrected}");
    }
    assert!(lines[2].contains("[hang please]") && lines[4].contains("[crash please]"));
    assert!(report["ran"][4]["error"].as_str().unwrap().contains("signal 6"), "{report}");
}

#[test]
fn four_workers_on_one_ledger_run_each_of_500_tasks_once() {
    let ledger = Ledger::new();
    let script = ledger.script("once.sh", "cat > /dev/null\necho \"ran $DAICHO_TASK_ID\" >> \"$LOG\"\n");
    config(
        &ledger,
        &format!(
            "[[action]]\nname = \"once\"\nkind = \"command\"\ncommand = [\"{script}\"]\nauto = true\non_success = \"done\"\n"
        ),
    );
    let items: Vec<String> = (0..500)
        .map(|i| format!("{{\"title\": \"job {i}\", \"action\": \"once\", \"tags\": [\"ai\"]}}"))
        .collect();
    ledger.run_with_input(&["push"], format!("[{}]", items.join(",")).as_bytes()).ok();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            ledger
                .command(&["sweep", "--role", "auto", "--max", "1000"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for worker in workers {
        let out = worker.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let ran = count(&ledger.log_lines(), "ran");
    assert_eq!(ran.len(), 500, "every task ran");
    assert!(
        ran.values().all(|&n| n == 1),
        "each exactly once: {:?}",
        ran.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    let ready: ReadyJson = ledger.run(&["ready", "--json"]).ok().json();
    assert_eq!(ready.total, 0);
    assert!(ledger.tasks().iter().all(|t| t.status == "done" && t.attempt == 1));
}

#[test]
fn bad_configuration_is_refused_before_anything_runs() {
    let ledger = Ledger::new();
    ledger.run(&["add", "x", "--tag", "ai"]).ok();
    for (toml, expect) in [
        ("[[action]]\nname = \"a\"\nkind = \"shell\"\n", "daicho.toml:1: unknown action kind 'shell'"),
        (
            "[[action]]\nname = \"a\"\nkind = \"command\"\n",
            "daicho.toml:1: action 'a' (command) needs command",
        ),
        (
            "[[action]]\nname = \"a\"\nkind = \"llm\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\napi_key_env = \"DAICHO_TEST_NO_SUCH_KEY\"\n",
            "the API key variable DAICHO_TEST_NO_SUCH_KEY is not set",
        ),
    ] {
        config(&ledger, toml);
        let run = ledger.run(&["sweep", "--role", "auto"]);
        assert_eq!(run.code, 1, "{toml}");
        assert!(run.stderr.contains(expect), "{toml}: {}", run.stderr);
    }
    assert!(ledger.log_lines().is_empty());
}

/// A loopback HTTP server playing an OpenAI-compatible API: answers `n` requests, records them.
pub fn fake_llm(n: usize) -> (String, std::thread::JoinHandle<Vec<(String, Value)>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for stream in listener.incoming().take(n) {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                head.push_str(&line);
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            seen.push((head, serde_json::from_slice(&body).unwrap()));
            let reply = r#"{"choices":[{"message":{"role":"assistant","content":"drafted"}}],"usage":{"prompt_tokens":11,"completion_tokens":7}}"#;
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
            stream.write_all(response.as_bytes()).unwrap();
        }
        seen
    });
    (url, handle)
}

#[test]
fn c1_c3_the_llm_request_carries_the_correction_only_for_its_own_task() {
    let ledger = Ledger::new();
    let (url, server) = fake_llm(2);
    config(
        &ledger,
        &format!(
            "[[action]]\nname = \"draft\"\nkind = \"llm\"\nbase_url = \"{url}\"\nmodel = \"tiny\"\napi_key_env = \"DAICHO_TEST_KEY\"\nsystem = \"You write drafts.\"\nprompt = \"Draft: {{title}}\"\nauto = true\n"
        ),
    );
    ledger.run(&["add", "the corrected one", "--action", "draft", "--tag", "ai"]).ok();
    ledger.run(&["add", "the next one", "--action", "draft", "--tag", "ai"]).ok();
    ledger.run(&["set", "T-0001", "--correction", "Use bullet points."]).ok();
    let out = ledger
        .command(&["sweep", "--role", "auto", "--max", "5", "--json"])
        .env("DAICHO_TEST_KEY", "sk-test")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["ran"].as_array().unwrap().len(), 2, "{report}");
    let seen = server.join().unwrap();
    let user = |i: usize| {
        seen[i].1["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned()
    };
    assert!(
        user(0).starts_with("Draft: the corrected one\n\n## Additional correction from a person"),
        "{}",
        user(0)
    );
    assert!(user(0).contains("Use bullet points."));
    assert_eq!(user(1), "Draft: the next one", "no correction in the next task's request");
    assert_eq!(seen[0].1["messages"][0]["role"], "system");
    assert_eq!(seen[0].1["model"], "tiny");
    assert!(seen[0].0.to_ascii_lowercase().contains("authorization: bearer sk-test"), "{}", seen[0].0);
    assert!(seen[0].0.to_ascii_lowercase().contains("idempotency-key: t-0001:1"), "S10: {}", seen[0].0);
    let tasks = ledger.tasks();
    assert_eq!((tasks[0].result.as_str(), tasks[0].status.as_str()), ("drafted", "review"));
    let stats: Vec<Value> = ledger.run(&["stats", "--json"]).ok().json();
    assert_eq!(
        (stats[0]["tokens_in"].as_u64(), stats[0]["tokens_out"].as_u64()),
        (Some(22), Some(14)),
        "S9: tokens recorded"
    );
}

#[test]
fn d3_s4_a_worker_killed_20_times_never_redoes_a_recorded_completion() {
    let ledger = Ledger::new();
    let pids = logged_steps(&ledger, "0.07");
    // 20 kills may land on one task of a chain three times on a loaded machine; parking it (S3)
    // would block its dependents and say nothing of D3, so the cap is out of the kills' reach.
    let toml = std::fs::read_to_string(ledger.dir.path().join("daicho.toml")).unwrap();
    config(&ledger, &toml.replace("[policy]\n", "[policy]\nmax_failures = 25\n"));
    // A 50-task DAG: each waits for its predecessor (mostly) and for the task at half its index.
    let tasks: Vec<String> = (1..=50)
        .map(|i| {
            let mut deps = Vec::new();
            if i > 1 && i % 3 != 0 {
                deps.push(format!("\"n{}\"", i - 1));
            }
            if i > 3 {
                deps.push(format!("\"n{}\"", i / 2));
            }
            format!("{{\"id\": \"n{i}\", \"title\": \"node {i}\", \"action\": \"work\", \"tags\": [\"ai\"], \"deps\": [{}]}}", deps.join(","))
        })
        .collect();
    ledger.run(&["import", &ledger.file("dag.json", format!("[{}]", tasks.join(",")))]).ok();

    let kill_executors = || {
        for entry in std::fs::read_dir(&pids).unwrap().flatten() {
            kill_group_of(&entry.path());
        }
    };
    let mut seed = 7u64;
    for _ in 0..20 {
        let mut worker = ledger
            .command(&["sweep", "--role", "auto", "--max", "1000"])
            .env("PIDS", &pids)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        std::thread::sleep(Duration::from_millis(40 + (seed >> 33) % 260));
        worker.kill().unwrap();
        worker.wait().unwrap();
        kill_executors();
    }
    // Recovery: sweeps until nothing is left (lost runs are counted once their lease expires).
    for _ in 0..15 {
        std::thread::sleep(Duration::from_millis(1100));
        let out = ledger
            .command(&["sweep", "--role", "auto", "--max", "1000"])
            .env("PIDS", &pids)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        if ledger.tasks().iter().all(|t| t.status == "done" || t.status == "needs_human") {
            break;
        }
    }
    let tasks = ledger.tasks();
    assert!(
        tasks.iter().all(|t| t.status == "done" || t.status == "needs_human"),
        "every task done or parked: {tasks:?}"
    );
    let lost_runs = assert_each_completion_ran_once(&tasks, &ledger.log_lines());
    assert!((1..=20).contains(&lost_runs), "the kills hit runs, at most one each: {lost_runs}");
}

#[test]
fn s1_s4_heartbeats_keep_a_long_run_from_counting_as_lost() {
    let ledger = Ledger::new();
    let script = ledger.script("slow.sh", "cat > /dev/null\nsleep 5\necho finished\n");
    config(
        &ledger,
        &format!(
            "[policy]\nlease = \"2s\"\n\n[[action]]\nname = \"slow\"\nkind = \"command\"\ncommand = [\"{script}\"]\n"
        ),
    );
    ledger.run(&["add", "longer than its lease", "--action", "slow"]).ok();
    let runner = ledger.command(&["run", "T-0001", "--json"]).stdout(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(3200));
    let other = sweep(&ledger, "auto", "1");
    assert_eq!(other["lost"], serde_json::json!([]), "the lease was extended by heartbeats: {other}");
    let out = runner.wait_with_output().unwrap();
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["result"], "success", "{run}");
    let task = &ledger.tasks()[0];
    assert_eq!((task.failures, task.result.as_str()), (0, "finished"));
}

/// A fresh PostgreSQL database for one test, dropped afterwards; `None` with DAICHO_SKIP_PG=1.
pub(crate) struct PgDatabase {
    name: String,
    pub(crate) url: String,
}

fn pg_admin(sql: String) {
    let admin = std::env::var("DAICHO_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    pg_run(admin, sql);
}

/// Runs `sql` on the database at `url`.
fn pg_run(admin: String, sql: String) {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let (client, connection) =
                tokio_postgres::connect(&admin, tokio_postgres::NoTls).await.unwrap_or_else(|e| {
                    panic!("PostgreSQL at {admin} is not reachable ({e}); set DAICHO_SKIP_PG=1 to skip")
                });
            let task = tokio::spawn(connection);
            client.batch_execute(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            drop(client);
            let _ = task.await;
        });
    })
    .join()
    .unwrap();
}

impl PgDatabase {
    pub(crate) fn fresh(tag: &str) -> Option<PgDatabase> {
        if std::env::var("DAICHO_SKIP_PG").is_ok_and(|v| v == "1") {
            return None;
        }
        let name = format!("daicho_it_{tag}_{}", std::process::id());
        pg_admin(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
        pg_admin(format!("CREATE DATABASE {name}"));
        let base = std::env::var("DAICHO_TEST_PG")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
        let url = format!("{}/{name}", base.rsplit_once('/').map_or(base.as_str(), |(b, _)| b));
        Some(PgDatabase { name, url })
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        pg_admin(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
    }
}

/// I5 at full size: 3 `daicho worker` processes (4 slots each) and 2 sweepers on one PostgreSQL
/// ledger with a 2,000-task DAG; a worker is SIGKILLed every 2 s and restarted. At the end every
/// task is done or parked, no completion ran twice, and failures equal lost runs.
#[test]
fn i5_workers_and_sweepers_on_postgres_run_each_completion_once_despite_kills() {
    let Some(db) = PgDatabase::fresh("workers") else { return };
    let ledger = Ledger::uninitialized();
    let run = |args: &[&str]| {
        let mut all = vec!["--db", db.url.as_str()];
        all.extend_from_slice(args);
        ledger.run(&all)
    };
    run(&["init"]).ok();
    let pids = logged_steps(&ledger, "0.02");
    let n = 2_000;
    let tasks: Vec<String> = (1..=n)
        .map(|i| {
            let deps = if i > 50 { format!("\"n{}\", \"n{}\"", i - 50, i / 3) } else { String::new() };
            format!("{{\"id\": \"n{i}\", \"title\": \"node {i}\", \"action\": \"work\", \"tags\": [\"ai\"], \"deps\": [{deps}]}}")
        })
        .collect();
    run(&["import", &ledger.file("dag.json", format!("[{}]", tasks.join(",")))]).ok();

    let spawn = |args: &[&str]| {
        let mut all = vec!["--db", db.url.as_str()];
        all.extend_from_slice(args);
        ledger.command(&all).env("PIDS", &pids).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
    };
    let worker = ["worker", "--concurrency", "4", "--poll", "200ms"];
    let sweeper = ["sweep", "--role", "auto", "--max", "20"];
    let mut workers: Vec<_> = (0..3).map(|_| spawn(&worker)).collect();
    let mut sweepers: Vec<_> = (0..2).map(|_| spawn(&sweeper)).collect();
    let open = || -> usize {
        let tasks: Vec<TaskJson> = run(&["list", "--json", "--status", "open"]).ok().json();
        tasks.iter().filter(|t| t.status == "pending" || t.status == "running").count()
    };
    let (started, mut kills, mut last_kill) = (Instant::now(), 0u32, Instant::now());
    while open() > 0 && started.elapsed() < Duration::from_secs(240) {
        std::thread::sleep(Duration::from_millis(250));
        // Sweepers run one sweep and exit (as under cron); start the next at once.
        for s in &mut sweepers {
            if s.try_wait().unwrap().is_some() {
                *s = spawn(&sweeper);
            }
        }
        if last_kill.elapsed() >= Duration::from_secs(2) {
            let victim = kills as usize % workers.len();
            workers[victim].kill().unwrap();
            workers[victim].wait().unwrap();
            kills += 1;
            last_kill = Instant::now();
            // Its executors run on in their own process groups and finish unrecorded: the lost
            // runs are counted when their leases expire and the tasks run again.
            workers[victim] = spawn(&worker);
        }
    }
    for mut w in workers.into_iter().chain(sweepers.drain(..)) {
        let _ = w.kill();
        let _ = w.wait();
    }
    let tasks: Vec<TaskJson> = run(&["list", "--json"]).ok().json();
    assert_eq!(tasks.len(), n);
    let unfinished: Vec<&str> = tasks
        .iter()
        .filter(|t| t.status != "done" && t.status != "needs_human")
        .map(|t| t.id.as_str())
        .collect();
    assert!(unfinished.is_empty(), "every task done or parked after {kills} kills; left: {unfinished:?}");
    assert!(kills >= 3, "the workers were killed while they worked ({kills} kills)");
    let lost_runs = assert_each_completion_ran_once(&tasks, &ledger.log_lines());
    assert!(
        lost_runs <= kills * 4 + 20,
        "about one lost run per running slot of a killed worker: {lost_runs}"
    );
    eprintln!("{n} tasks, {kills} kills, {lost_runs} lost runs, {:?}", started.elapsed());
}

/// Writes a step script that logs its start and end (with the attempt) and keeps a pid file
/// while it runs, and a config whose one auto action runs it with a 1 s lease. Returns the pid
/// directory (the `PIDS` variable of the runs).
fn logged_steps(ledger: &Ledger, seconds: &str) -> std::path::PathBuf {
    let pids = ledger.dir.path().join("pids");
    std::fs::create_dir_all(&pids).unwrap();
    let script = ledger.script(
        "step.sh",
        &format!(
            "cat > /dev/null\necho $$ > \"$PIDS/$DAICHO_TASK_ID\"\necho \"start $DAICHO_TASK_ID $DAICHO_ATTEMPT\" >> \"$LOG\"\n\
             sleep {seconds}\necho \"done $DAICHO_TASK_ID $DAICHO_ATTEMPT\" >> \"$LOG\"\nrm -f \"$PIDS/$DAICHO_TASK_ID\"\n"
        ),
    );
    config(
        ledger,
        &format!(
            "[policy]\nlease = \"1s\"\n\n[[action]]\nname = \"work\"\nkind = \"command\"\ncommand = [\"{script}\"]\nauto = true\non_success = \"done\"\n"
        ),
    );
    pids
}

/// D3, S4 from the ledger and the executors' own log: every attempt that did not end a task was
/// a lost run counted as one failure; no run started after the one recorded done; and that one
/// executed exactly once. Returns the lost runs in all.
fn assert_each_completion_ran_once(tasks: &[TaskJson], lines: &[String]) -> u32 {
    let mut lost_runs = 0;
    for t in tasks {
        let final_attempt = if t.status == "done" { t.attempt - 1 } else { t.attempt };
        assert_eq!(t.failures, final_attempt, "{}: failures equal its lost runs", t.id);
        lost_runs += t.failures;
        let attempts: Vec<u32> = lines
            .iter()
            .filter_map(|l| {
                let mut p = l.split_whitespace();
                (p.next() == Some("start") && p.next() == Some(t.id.as_str()))
                    .then(|| p.next().unwrap().parse().unwrap())
            })
            .collect();
        assert!(attempts.iter().all(|&a| a <= t.attempt), "{}: ran after its completion: {attempts:?}", t.id);
        if t.status == "done" {
            assert_eq!(attempts.iter().filter(|&&a| a == t.attempt).count(), 1, "{}: {attempts:?}", t.id);
        }
    }
    lost_runs
}

#[test]
fn i5_an_idle_postgres_worker_is_woken_by_notify_before_its_poll() {
    let Some(db) = PgDatabase::fresh("notify") else { return };
    let mut ledger = Ledger::uninitialized();
    ledger.db = Some(db.url.clone());
    ledger.run(&["init"]).ok();
    let script = ledger.script("step.sh", STEP);
    config(
        &ledger,
        &format!("[[action]]\nname = \"work\"\nkind = \"command\"\ncommand = [\"{script}\"]\nauto = true\n"),
    );
    let mut worker = ledger
        .command(&["worker", "--poll", "120s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Let it find nothing and start listening.
    std::thread::sleep(Duration::from_secs(3));
    let pushed = Instant::now();
    ledger.run(&["add", "wake up", "--action", "work", "--tag", "ai"]).ok();
    wait_for("the worker to run the new task", Duration::from_secs(30), || !ledger.log_lines().is_empty());
    let waited = pushed.elapsed();
    worker.kill().unwrap();
    worker.wait().unwrap();
    assert!(waited < Duration::from_secs(30), "woken by LISTEN/NOTIFY, not by its 120 s poll: {waited:?}");
}

/// I5: `daicho init` on a PostgreSQL ledger of an older schema upgrades it and says it was there
/// already, not that it was created; a fresh database says created.
#[test]
fn i5_init_upgrades_an_older_postgres_ledger_without_calling_it_created() {
    let Some(db) = PgDatabase::fresh("upgrade") else { return };
    let mut ledger = Ledger::uninitialized();
    ledger.db = Some(db.url.clone());
    let first: Value =
        serde_json::from_str(&ledger.run(&["init", "--no-config", "--json"]).ok().stdout).unwrap();
    assert_eq!(first["created"], true, "{first}");
    // Back to schema 1, as an older daicho left it.
    let admin = db.url.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls).await.unwrap();
            let task = tokio::spawn(connection);
            client
                .batch_execute("DROP INDEX task_project_status; UPDATE daicho_schema SET version = 1")
                .await
                .unwrap();
            drop(client);
            let _ = task.await;
        });
    })
    .join()
    .unwrap();
    let again: Value =
        serde_json::from_str(&ledger.run(&["init", "--no-config", "--json"]).ok().stdout).unwrap();
    assert_eq!(again["created"], false, "{again}");
    ledger.run(&["add", "after the upgrade", "--project", "PJ-01"]).ok();
    assert_eq!(ledger.tasks().len(), 1);
}

/// S14, I5: PostgreSQL backends of the test database are terminated every 2 s for about 30 s
/// while two workers run a 640-task DAG: the workers stay up (they reconnect with backoff), every task
/// completes, and no completion ran twice.
#[test]
fn s14_postgres_workers_survive_backend_terminations() {
    let Some(db) = PgDatabase::fresh("terminate") else { return };
    let ledger = Ledger::uninitialized();
    let with_db = |args: &[&str]| {
        let mut all = vec!["--db", db.url.as_str()];
        all.extend_from_slice(args);
        all.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let run = |args: &[&str]| {
        let all = with_db(args);
        ledger.run(&all.iter().map(String::as_str).collect::<Vec<_>>())
    };
    run(&["init"]).ok();
    let pids = logged_steps(&ledger, "0.35");
    // A lease long enough to ride out a reconnection.
    let config = std::fs::read_to_string(ledger.dir.path().join("daicho.toml")).unwrap();
    ledger.file("daicho.toml", config.replace("lease = \"1s\"", "lease = \"10s\""));
    let n = 640;
    let tasks: Vec<String> = (1..=n)
        .map(|i| {
            let deps = if i > 8 { format!("\"n{}\"", i - 8) } else { String::new() };
            format!("{{\"id\": \"n{i}\", \"title\": \"node {i}\", \"action\": \"work\", \"tags\": [\"ai\"], \"deps\": [{deps}]}}")
        })
        .collect();
    run(&["import", &ledger.file("dag.json", format!("[{}]", tasks.join(",")))]).ok();
    let worker = with_db(&["worker", "--concurrency", "4", "--poll", "200ms"]);
    let spawn = || {
        ledger
            .command(&worker.iter().map(String::as_str).collect::<Vec<_>>())
            .env("PIDS", &pids)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut workers = [spawn(), spawn()];
    // A listing may itself be cut by a termination (exit 75): look again.
    let open = || -> usize {
        for _ in 0..20 {
            let listed = run(&["list", "--json", "--status", "open"]);
            if listed.code == 0 {
                return listed.json::<Vec<TaskJson>>().len();
            }
            assert_eq!(listed.code, 75, "a lost connection is temporary: {}", listed.stderr);
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the ledger could not be listed");
    };
    let (started, mut terminations) = (Instant::now(), 0);
    while open() > 0 && started.elapsed() < Duration::from_secs(120) {
        pg_admin(format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}' AND pid <> pg_backend_pid()",
            db.name
        ));
        terminations += 1;
        for w in &mut workers {
            if let Some(status) = w.try_wait().unwrap() {
                let mut err = String::new();
                use std::io::Read as _;
                let _ = w.stderr.take().unwrap().read_to_string(&mut err);
                panic!("a worker exited ({status}) after {terminations} terminations: {err}");
            }
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    for w in &mut workers {
        assert!(w.try_wait().unwrap().is_none(), "the workers stayed up");
        let _ = w.kill();
        let _ = w.wait();
    }
    assert!(terminations >= 10, "backends were terminated while the workers ran ({terminations})");
    let tasks: Vec<TaskJson> = run(&["list", "--json"]).ok().json();
    assert!(tasks.iter().all(|t| t.status == "done"), "every task done");
    assert_each_completion_ran_once(&tasks, &ledger.log_lines());
    eprintln!("{n} tasks, {terminations} terminations, {:?}", started.elapsed());
}

/// A PostgreSQL role for one test, dropped afterwards (after the databases it has rights in).
struct PgRole(String);

impl Drop for PgRole {
    fn drop(&mut self) {
        pg_admin(format!("DROP ROLE IF EXISTS {}", self.0));
    }
}

/// X4 (issue 16, item 4): read commands open a PostgreSQL ledger read-only — nothing migrated,
/// sessions `default_transaction_read_only` — so a role that may only `SELECT` can list, show
/// and export; a write through that role fails with an error and changes nothing.
#[test]
fn x4_a_select_only_role_reads_a_postgres_ledger() {
    let role = PgRole(format!("daicho_it_reader_{}", std::process::id()));
    let Some(db) = PgDatabase::fresh("readonly") else { return };
    let ledger = Ledger::uninitialized();
    let with = |url: &str, args: &[&str]| {
        let mut all = vec!["--db", url];
        all.extend_from_slice(args);
        ledger.run(&all)
    };
    with(&db.url, &["init"]).ok();
    with(&db.url, &["add", "read me", "--project", "PJ"]).ok();
    pg_admin(format!("DROP ROLE IF EXISTS {0}; CREATE ROLE {0} LOGIN", role.0));
    pg_run(
        db.url.clone(),
        format!(
            "GRANT USAGE ON SCHEMA public TO {0}; GRANT SELECT ON ALL TABLES IN SCHEMA public TO {0}",
            role.0
        ),
    );
    let reader = db.url.replacen("postgres://postgres@", &format!("postgres://{}@", role.0), 1);
    let list: Vec<serde_json::Value> = with(&reader, &["list", "--json"]).ok().json();
    assert_eq!(list.len(), 1);
    assert!(with(&reader, &["show", "T-0001"]).ok().stdout.contains("read me"));
    assert!(with(&reader, &["export", "--format", "json"]).ok().stdout.contains("read me"));
    let write = with(&reader, &["add", "not allowed"]);
    assert_eq!(write.code, 1, "{}", write.stdout);
    let list: Vec<serde_json::Value> = with(&db.url, &["list", "--json"]).ok().json();
    assert_eq!(list.len(), 1, "nothing written through the reader");
}

/// X2, S14: the push of a run's found tasks refused for now by the database (a serialization
/// failure, SQLSTATE 40001, raised by a trigger of the test's own database) while the run's end
/// and its note are written: the end stays in the spool and the next daicho pushes the tasks,
/// once; a temporary refusal is never taken for a final one.
#[test]
fn x2_s14_a_push_the_database_refused_for_now_is_made_by_the_next_daicho() {
    let Some(db) = PgDatabase::fresh("pushlater") else { return };
    let ledger = Ledger::uninitialized();
    let state = ledger.dir.path().join("state");
    let run = |args: &[&str]| {
        let mut all = vec!["--db", db.url.as_str()];
        all.extend_from_slice(args);
        crate::Run::from(ledger.command(&all).env("XDG_STATE_HOME", &state).output().expect("daicho runs"))
    };
    run(&["init"]).ok();
    let script = ledger.script(
        "found.sh",
        r#"cat > /dev/null; echo '{"result": "ok", "tasks": [{"title": "found later"}]}'"#,
    );
    ledger.file(
        "daicho.toml",
        format!("[[action]]\nname = \"work\"\nkind = \"command\"\ncommand = [\"{script}\"]\nauto = true\n"),
    );
    run(&["add", "the work", "--action", "work", "--tag", "ai"]).ok();
    pg_run(
        db.url.clone(),
        "CREATE FUNCTION refuse_for_now() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
         RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001'; END $$; \
         CREATE TRIGGER refuse_found BEFORE INSERT ON task FOR EACH ROW \
         WHEN (NEW.title = 'found later') EXECUTE FUNCTION refuse_for_now();"
            .to_owned(),
    );
    run(&["run", "T-0001", "--json"]).ok();
    let titles = |tasks: Vec<TaskJson>| tasks.into_iter().map(|t| t.title).collect::<Vec<_>>();
    let listed = || titles(run(&["list", "--json"]).ok().json());
    assert_eq!(listed(), ["the work"], "the push was refused");
    let task: TaskJson = run(&["show", "T-0001", "--json"]).ok().json();
    assert_eq!(task.status, "review", "the run's end is recorded whatever the push met");
    pg_run(db.url.clone(), "DROP TRIGGER refuse_found ON task".to_owned());
    let report: Value = run(&["sweep", "--role", "auto", "--json"]).ok().json();
    assert_eq!(report["ran"], serde_json::json!([]), "{report}");
    assert_eq!(listed(), ["the work", "found later"], "pushed by the next daicho, once");
    run(&["sweep", "--role", "auto", "--json"]).ok();
    assert_eq!(listed().len(), 2, "and not again");
}

//! S14 under a database blip at the worst moment: the connection is lost after PostgreSQL has
//! committed a transaction and before its reply reaches daicho. A loopback proxy between daicho
//! and the real server passes the protocol through and, for some COMMITs, drops the server's
//! `CommandComplete` and closes both sides: the commit holds, its answer never comes. The COMMITs
//! cut are those of transactions that ran the claim statement (the one that inserts a run
//! record), so a worker's cut commit holds a claim whenever a row was free, and the end of its
//! previous run with it.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::engine::PgDatabase;
use crate::{Ledger, TaskJson};

/// A test database of its own, a ledger directory, and an [`AnswerCutter`] in front of the
/// database's server (`every`, `most`, `outage` as there); with the ledger's URL through it.
fn behind_a_cutter(
    tag: &str,
    every: usize,
    most: usize,
    outage: Duration,
) -> Option<(PgDatabase, Ledger, AnswerCutter, String)> {
    let db = PgDatabase::fresh(tag)?;
    let cutter = AnswerCutter::start(&server_of(&db.url), every, most, outage);
    let url = through(&db.url, cutter.port);
    Some((db, Ledger::uninitialized(), cutter, url))
}

/// Creates the ledger in `db` (directly, not through the proxy) with `n` automatic tasks of the
/// action `work`: `job 1`, `job 2`, …
fn with_jobs(db: &PgDatabase, ledger: &Ledger, n: usize) {
    ledger.run(&["--db", &db.url, "init", "--no-config"]).ok();
    let items: Vec<String> = (1..=n)
        .map(|i| format!("{{\"title\": \"job {i}\", \"action\": \"work\", \"tags\": [\"ai\"]}}"))
        .collect();
    let file = ledger.file("jobs.json", format!("{{\"tasks\": [{}]}}", items.join(",")));
    ledger.run(&["--db", &db.url, "push", &file]).ok();
}

/// Passes PostgreSQL's protocol between clients and the server at `upstream`, and cuts the
/// answer of every `every`-th COMMIT of a transaction that claimed (up to `most` of them); after
/// each cut, the server stays out of reach for `outage` (new connections are closed at once).
struct AnswerCutter {
    port: u16,
    cut: Arc<AtomicUsize>,
}

/// The server `url` names (`host:port`), and `url` through a proxy on this machine's `port`.
fn server_of(url: &str) -> String {
    let rest = url.split_once('@').map_or(url, |(_, rest)| rest);
    let server = rest.split('/').next().expect("a server");
    if server.contains(':') { server.to_owned() } else { format!("{server}:5432") }
}

fn through(url: &str, port: u16) -> String {
    let (head, rest) = url.split_once('@').expect("a URL with a user");
    let database = rest.split_once('/').map_or("", |(_, database)| database);
    format!("{head}@127.0.0.1:{port}/{database}?sslmode=disable")
}

impl AnswerCutter {
    fn start(upstream: &str, every: usize, most: usize, outage: Duration) -> AnswerCutter {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().unwrap().port();
        let (commits, cut) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let armings = Arc::new(AtomicUsize::new(0));
        let (upstream, cut_here) = (upstream.to_owned(), Arc::clone(&cut));
        let down_until: Arc<Mutex<Option<Instant>>> = Arc::default();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                if down_until.lock().unwrap().is_some_and(|until| Instant::now() < until) {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else { return };
                // Each message is passed on at once, as the protocol's peers write it.
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                let plan = Plan {
                    commits: Arc::clone(&commits),
                    cut: Arc::clone(&cut_here),
                    armings: Arc::clone(&armings),
                    every,
                    most,
                    outage,
                    down_until: Arc::clone(&down_until),
                };
                plan.relay(client, server);
            }
        });
        AnswerCutter { port, cut }
    }

    fn cut(&self) -> usize {
        self.cut.load(Ordering::SeqCst)
    }
}

#[derive(Clone)]
struct Plan {
    commits: Arc<AtomicUsize>,
    cut: Arc<AtomicUsize>,
    /// COMMITs armed to be cut, across connections (at most `most`).
    armings: Arc<AtomicUsize>,
    every: usize,
    most: usize,
    outage: Duration,
    down_until: Arc<Mutex<Option<Instant>>>,
}

/// One protocol message: its type byte (none for the startup message) and its body.
fn message(from: &mut TcpStream, typed: bool) -> Option<(Option<u8>, Vec<u8>)> {
    let mut kind = [0u8; 1];
    if typed {
        from.read_exact(&mut kind).ok()?;
    }
    let mut len = [0u8; 4];
    from.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; (u32::from_be_bytes(len) as usize).checked_sub(4)?];
    from.read_exact(&mut body).ok()?;
    Some((typed.then_some(kind[0]), body))
}

fn send(to: &mut TcpStream, kind: Option<u8>, body: &[u8]) -> bool {
    let mut bytes = Vec::with_capacity(body.len() + 5);
    bytes.extend(kind);
    bytes.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    bytes.extend_from_slice(body);
    to.write_all(&bytes).is_ok()
}

impl Plan {
    fn relay(self, client: TcpStream, server: TcpStream) {
        let armed = Arc::new(AtomicBool::new(false));
        let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let (mut s_in, mut c_out) = (server, client);
        let (armed_up, plan) = (Arc::clone(&armed), self.clone());
        std::thread::spawn(move || {
            let (mut typed, mut claiming) = (false, false);
            // The prepared statements of this connection that claim: name → whether it claims.
            let mut claims: HashMap<Vec<u8>, bool> = HashMap::new();
            let cstr = |bytes: &[u8]| bytes.split(|&b| b == 0).next().unwrap_or_default().to_vec();
            while let Some((kind, body)) = message(&mut c_in, typed) {
                typed = true;
                match kind {
                    Some(b'P') => {
                        let name = cstr(&body);
                        let sql = String::from_utf8_lossy(&body[name.len() + 1..]).into_owned();
                        claims.insert(name, sql.contains("INSERT INTO run ("));
                    }
                    Some(b'B') => {
                        let portal = cstr(&body);
                        claiming |= claims.get(&cstr(&body[portal.len() + 1..])).copied().unwrap_or(false);
                    }
                    Some(b'Q') if body.starts_with(b"COMMIT\0") && std::mem::take(&mut claiming) => {
                        let n = plan.commits.fetch_add(1, Ordering::SeqCst) + 1;
                        let most = plan.most;
                        let arm = || {
                            plan.armings.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |a| {
                                (a < most).then_some(a + 1)
                            })
                        };
                        if n % plan.every == 0 && arm().is_ok() {
                            // Armed before the COMMIT leaves, so its answer cannot pass first.
                            armed_up.store(true, Ordering::SeqCst);
                        }
                    }
                    Some(b'Q') if body.starts_with(b"ROLLBACK\0") => claiming = false,
                    _ => {}
                }
                if !send(&mut s_out, kind, &body) {
                    break;
                }
            }
            let _ = s_out.shutdown(Shutdown::Both);
        });
        std::thread::spawn(move || {
            while let Some((kind, body)) = message(&mut s_in, true) {
                // A transaction that failed answers its COMMIT with ROLLBACK: nothing to cut.
                if kind == Some(b'C') && body.starts_with(b"ROLLBACK\0") {
                    armed.store(false, Ordering::SeqCst);
                }
                if kind == Some(b'C') && body.starts_with(b"COMMIT\0") && armed.load(Ordering::SeqCst) {
                    // Committed on the server; the answer is dropped with the connection.
                    self.cut.fetch_add(1, Ordering::SeqCst);
                    *self.down_until.lock().unwrap() = Some(Instant::now() + self.outage);
                    let _ = c_out.shutdown(Shutdown::Both);
                    let _ = s_in.shutdown(Shutdown::Both);
                    return;
                }
                if !send(&mut c_out, kind, &body) {
                    break;
                }
            }
            let _ = c_out.shutdown(Shutdown::Both);
        });
    }
}

/// S14, S4, X2: a worker on PostgreSQL whose COMMITs' answers are lost now and then (the
/// commit holds). A run's end whose answer was lost is the ledger's, and what the run found is
/// pushed; a claim whose answer was lost is run by its worker at once, not left `running` until
/// its lease runs out and counted a failure of a task that never ran. Every task ends done,
/// having run once, with no failure, well inside its lease.
#[test]
fn s14_a_commit_whose_answer_is_lost_loses_no_found_task_and_counts_no_failure() {
    lost_answers_under_a_worker(1);
}

/// The same with four slots: claims of several rows at once (`claim_many`), whose answer is
/// lost, are all run.
#[test]
fn s14_claims_of_several_slots_whose_answer_is_lost_are_run() {
    lost_answers_under_a_worker(4);
}

fn lost_answers_under_a_worker(slots: usize) {
    let Some((db, ledger, cutter, url)) = behind_a_cutter(&format!("answers_{slots}"), 3, 8, Duration::ZERO)
    else {
        return;
    };
    let run = |args: &[&str]| {
        let mut all = vec!["--db", url.as_str()];
        all.extend_from_slice(args);
        ledger.run(&all)
    };
    // A lease far longer than the test may take: a claim left to it would still be `running`.
    let script = ledger.script(
        "found.sh",
        "cat > /dev/null\necho \"start $DAICHO_TASK_ID $DAICHO_ATTEMPT\" >> \"$LOG\"\n\
         printf '{\"result\": \"ok\", \"tasks\": [{\"title\": \"found by %s\"}]}\\n' \"$DAICHO_TASK_ID\"\n",
    );
    ledger.file(
        "daicho.toml",
        format!(
            "[policy]\nlease = \"10m\"\n\n[[action]]\nname = \"work\"\nkind = \"command\"\n\
             command = [\"{script}\"]\nauto = true\non_success = \"done\"\n"
        ),
    );
    // Set up directly: only the worker's connections go through the proxy.
    let direct = |args: &[&str]| {
        let mut all = vec!["--db", db.url.as_str()];
        all.extend_from_slice(args);
        ledger.run(&all)
    };
    let n = 24;
    with_jobs(&db, &ledger, n);

    let started = Instant::now();
    let worker = run(&["worker", "--once", "--poll", "100ms", "--concurrency", &slots.to_string()]);
    let took = started.elapsed();
    assert_eq!(worker.code, 0, "{}", worker.stderr);
    assert!(worker.stderr.contains("a claim whose answer was lost went through"), "{}", worker.stderr);
    assert!(took < Duration::from_secs(120), "within the lease: {took:?}");

    let tasks: Vec<TaskJson> = direct(&["list", "--json"]).ok().json();
    let jobs: Vec<&TaskJson> = tasks.iter().filter(|t| t.title.starts_with("job ")).collect();
    assert_eq!(jobs.len(), n);
    for job in &jobs {
        assert_eq!((job.status.as_str(), job.failures), ("done", 0), "{}: {job:?}", job.id);
        let found = format!("found by {}", job.id);
        assert!(tasks.iter().any(|t| t.title == found), "{}: what its run found is in the ledger", job.id);
    }
    let lines = ledger.log_lines();
    for job in &jobs {
        let starts = lines.iter().filter(|l| l.split_whitespace().nth(1) == Some(job.id.as_str())).count();
        assert_eq!(starts, 1, "{} ran once: {lines:?}", job.id);
    }
    assert!(cutter.cut() >= 2, "answers were cut while the worker ran ({})", cutter.cut());
    eprintln!("{slots} slot(s): {n} tasks, {} answers cut, {took:?}", cutter.cut());
}

/// S14, S4 over the HTTP API: a remote worker's claim whose commit held while the answer from
/// PostgreSQL was lost is answered as claimed (the row is that worker's), not refused with the
/// row left `running` until its lease runs out and counted a failure of a task that never ran.
#[test]
fn s14_a_remote_claim_whose_answer_is_lost_is_answered_as_claimed() {
    let Some((db, ledger, cutter, through)) = behind_a_cutter("remote_answers", 2, 6, Duration::ZERO) else {
        return;
    };
    let direct = |args: &[&str]| {
        let mut all = vec!["--db", db.url.as_str()];
        all.extend_from_slice(args);
        ledger.run(&all)
    };
    ledger.file(
        "daicho.toml",
        "[policy]\nlease = \"10m\"\n\n[[action]]\nname = \"work\"\nkind = \"command\"\ncommand = [\"true\"]\n\
         auto = true\non_success = \"done\"\n",
    );
    let n = 12;
    with_jobs(&db, &ledger, n);

    let port = crate::serve::free_port();
    let mut serve = ledger
        .command(&["--db", &through, "serve", "--bind", &format!("127.0.0.1:{port}")])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let post = |path: &str, body: &str| -> Option<serde_json::Value> {
        crate::claims::http_post(port, path, body).and_then(|b| serde_json::from_str(&b).ok())
    };
    let (started, mut claims, mut refused) = (Instant::now(), 0, 0);
    loop {
        assert!(started.elapsed() < Duration::from_secs(60), "the remote worker finishes");
        let Some(answer) = post("/api/v1/claim", r#"{"worker": "remote-1"}"#) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        match answer["outcome"].as_str() {
            Some("claimed") => claims += 1,
            Some("nothing") => break,
            _ => {
                // A blip the server could not see through: the claim did not hold; ask again.
                refused += 1;
                continue;
            }
        }
        let (id, attempt) = (answer["task"]["id"].as_str().unwrap().to_owned(), answer["attempt"].clone());
        let body = serde_json::json!({"worker": "remote-1", "attempt": attempt, "result": "ok"}).to_string();
        // The same report again until it is answered (a lost answer is answered as the first).
        while post(&format!("/api/v1/tasks/{id}/complete"), &body)
            .is_none_or(|a| a["task"]["status"] != "done")
        {
            assert!(started.elapsed() < Duration::from_secs(60), "{id} is completed");
        }
    }
    let _ = std::process::Command::new("kill").args(["-TERM", &serve.id().to_string()]).status();
    let _ = serve.wait();
    assert!(cutter.cut() >= 3, "answers were cut while the worker claimed ({})", cutter.cut());
    let tasks: Vec<TaskJson> = direct(&["list", "--json"]).ok().json();
    for job in &tasks {
        assert_eq!((job.status.as_str(), job.failures, job.attempt), ("done", 0, 1), "{}: {job:?}", job.id);
    }
    assert_eq!(claims, n, "each task claimed once ({refused} claims refused)");
    eprintln!("{n} tasks, {} answers cut, {refused} claims refused", cutter.cut());
}

/// S14, S1: `daicho run` whose claim held while its answer was lost runs the task (its claim is
/// in the ledger), instead of failing with the row left `running` until its lease runs out.
#[test]
fn s14_a_run_whose_claims_answer_is_lost_still_runs_the_task() {
    let Some((db, ledger, cutter, through)) = behind_a_cutter("run_answers", 1, 1, Duration::ZERO) else {
        return;
    };
    ledger.file(
        "daicho.toml",
        "[policy]\nlease = \"10m\"\n\n[[action]]\nname = \"work\"\nkind = \"command\"\ncommand = [\"true\"]\n\
         on_success = \"done\"\n",
    );
    ledger.run(&["--db", &db.url, "init", "--no-config"]).ok();
    ledger.run(&["--db", &db.url, "add", "by hand", "--action", "work"]).ok();
    let ran = ledger.run(&["--db", &through, "run", "T-0001", "--json"]);
    assert_eq!(cutter.cut(), 1, "the claim's answer was cut");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let row: TaskJson = ledger.run(&["--db", &db.url, "show", "T-0001", "--json"]).ok().json();
    assert_eq!((row.status.as_str(), row.failures, row.attempt), ("done", 0, 1), "{row:?}");
}

/// S14, S4: a claim whose answer was lost, found only once the database is back after an outage
/// (2 s; the worker's backoff finds it about 3 s after its claim, when its 3 s lease has run out
/// and nobody has counted it lost), gets a whole lease before its run starts: the run (1 s) is
/// not stopped for a lease that is over, and the task ends done, once, with no failure.
#[test]
fn s14_a_claim_found_after_an_outage_gets_a_whole_lease_before_it_runs() {
    let Some((db, ledger, cutter, through)) = behind_a_cutter("answers_outage", 2, 1, Duration::from_secs(2))
    else {
        return;
    };
    let script = ledger.script(
        "slow.sh",
        "cat > /dev/null\necho \"start $DAICHO_TASK_ID $DAICHO_ATTEMPT\" >> \"$LOG\"\nsleep 1\necho done\n",
    );
    ledger.file(
        "daicho.toml",
        format!(
            "[policy]\nlease = \"3s\"\n\n[[action]]\nname = \"work\"\nkind = \"command\"\n\
             command = [\"{script}\"]\nauto = true\non_success = \"done\"\n"
        ),
    );
    ledger.run(&["--db", &db.url, "init", "--no-config"]).ok();
    for i in 1..=3 {
        ledger.run(&["--db", &db.url, "add", &format!("job {i}"), "--action", "work", "--tag", "ai"]).ok();
    }
    let worker = ledger.run(&["--db", &through, "worker", "--once", "--poll", "100ms"]);
    assert_eq!(worker.code, 0, "{}", worker.stderr);
    assert!(worker.stderr.contains("a claim whose answer was lost went through"), "{}", worker.stderr);
    assert_eq!(cutter.cut(), 1, "a claim's answer was cut");
    let tasks: Vec<TaskJson> = ledger.run(&["--db", &db.url, "list", "--json"]).ok().json();
    let lines = ledger.log_lines();
    for job in &tasks {
        assert_eq!((job.status.as_str(), job.failures, job.attempt), ("done", 0, 1), "{}: {lines:?}", job.id);
    }
    assert_eq!(lines.len(), 3, "each task ran once: {lines:?}");
}

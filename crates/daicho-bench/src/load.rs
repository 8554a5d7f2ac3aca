//! `load`: N concurrent HTTP clients against `daicho serve` on loopback for a fixed time (reads
//! and patches mixed), then a check that every acknowledged patch is in the journal. Prints
//! requests per second, p50/p99/max latency, errors and lost updates; exits 1 when either is
//! not 0.
//!
//! `DAICHO_BENCH_CLIENTS` (default 50), `DAICHO_BENCH_WORKERS` (remote workers claiming and
//! completing tasks over the API at the same time, default 0) and `DAICHO_BENCH_SECS` (default
//! 30) set the shape. With workers, every acknowledged completion must be in the ledger once.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use daicho_store::Store as _;

const PROJECTS: usize = 10;
const TASKS: usize = 1_000;

pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// What one client did.
#[derive(Default)]
struct ClientFigures {
    /// (task id, attempt) of every acknowledged completion (remote workers).
    completed: Vec<(String, u64)>,
    latencies: Vec<Duration>,
    errors: Vec<String>,
    /// (task id, correction written) of every acknowledged patch.
    patched: Vec<(String, String)>,
}

pub fn bench_load() {
    let clients = env_usize("DAICHO_BENCH_CLIENTS", 50);
    let workers = env_usize("DAICHO_BENCH_WORKERS", 0);
    let secs = env_usize("DAICHO_BENCH_SECS", 30);
    let bin = crate::daicho_bin();
    let dir = tempfile_dir();
    let db = dir.join("ledger.db");
    let tasks = dir.join("tasks.jsonl");
    let lines: Vec<String> = (0..TASKS)
        .map(|i| {
            serde_json::json!({ "title": format!("load task {i}"), "project": format!("PJ-{:02}", i % PROJECTS),
                                "tags": "ai", "action": "work" })
                .to_string()
        })
        .collect();
    std::fs::write(&tasks, lines.join("\n") + "\n").expect("write tasks");
    crate::run(&bin, &db, &["init", "--no-config"], None);
    // An automatic action for remote workers to claim (they do the work themselves).
    let config = dir.join("daicho.toml");
    std::fs::write(
        &config,
        "[[action]]\nname = \"work\"\nkind = \"command\"\ncommand = [\"true\"]\nauto = true\n",
    )
    .expect("write config");
    crate::run(&bin, &db, &["import", &tasks.display().to_string()], None);
    let (port, mut serve) = serve(&bin, &db, Some(&config), &dir);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let figures = runtime.block_on(drive(port, clients, workers, Duration::from_secs(secs as u64)));
    let _ = Command::new("kill").args(["-TERM", &serve.id().to_string()]).status();
    let _ = serve.wait();

    let mut latencies: Vec<Duration> = figures.iter().flat_map(|f| f.latencies.iter().copied()).collect();
    latencies.sort();
    let errors: Vec<&String> = figures.iter().flat_map(|f| f.errors.iter()).collect();
    let patched: Vec<&(String, String)> = figures.iter().flat_map(|f| f.patched.iter()).collect();
    let completed: Vec<&(String, u64)> = figures.iter().flat_map(|f| f.completed.iter()).collect();
    let (lost, (missing, doubled)) = runtime.block_on(async {
        let store = daicho_sqlite::SqliteStore::open(&db, daicho_sqlite::SqliteOptions::default())
            .await
            .expect("open");
        (lost_updates(&store, &patched).await, completions(&store, &completed).await)
    });
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    println!(
        "load: {clients} clients for {secs} s on loopback ({TASKS} tasks in {PROJECTS} projects, SQLite): \
         {} requests, {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; {} patches acknowledged, \
         errors {}, lost updates {lost}; {workers} remote workers: {} completions acknowledged, \
         {missing} missing from the ledger, {doubled} recorded twice",
        latencies.len(),
        latencies.len() as f64 / secs as f64,
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        patched.len(),
        errors.len(),
        completed.len(),
    );
    for e in errors.iter().take(5) {
        println!("  error: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    if !errors.is_empty() || lost > 0 || missing > 0 || doubled > 0 {
        std::process::exit(1);
    }
}

/// `daicho serve` on a free loopback port in `dir`, its output discarded; returns the port and
/// the process.
pub(crate) fn serve(
    bin: &std::path::Path,
    db: &std::path::Path,
    config: Option<&std::path::Path>,
    dir: &std::path::Path,
) -> (u16, std::process::Child) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
    let mut command = Command::new(bin);
    command.arg("--db").arg(db);
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    let child = command
        .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("daicho serve starts");
    (port, child)
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("daicho-bench-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

async fn drive(port: u16, clients: usize, workers: usize, duration: Duration) -> Vec<ClientFigures> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder().pool_max_idle_per_host(clients).build().expect("client");
    for _ in 0..200 {
        if http.get(format!("{base}/api/v1/tasks?limit=1")).send().await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ids: Vec<String> = (1..=TASKS).map(|n| format!("T-{n:04}")).collect();
    let ids = Arc::new(ids);
    let deadline = Instant::now() + duration;
    let mut handles = Vec::new();
    for c in 0..clients {
        let (http, base, ids) = (http.clone(), base.clone(), Arc::clone(&ids));
        handles.push(tokio::spawn(async move {
            let mut figures = ClientFigures::default();
            let mut n: usize = 0;
            while Instant::now() < deadline {
                let id = &ids[(c * 7919 + n * 104_729) % ids.len()];
                let started = Instant::now();
                // 7 reads to 3 patches.
                let (request, patch) = match n % 10 {
                    0 | 4 | 7 => {
                        let value = format!("load-c{c}-n{n}");
                        let body = serde_json::json!({ "correction": value, "by": format!("load{c}") });
                        (http.patch(format!("{base}/api/v1/tasks/{id}")).json(&body), Some(value))
                    }
                    1 | 5 => (
                        http.get(format!("{base}/api/v1/tasks?project=PJ-{:02}&limit=50", n % PROJECTS)),
                        None,
                    ),
                    2 => (http.get(format!("{base}/api/v1/ready?limit=20")), None),
                    _ => (http.get(format!("{base}/api/v1/tasks/{id}")), None),
                };
                match request.send().await {
                    Ok(response) if response.status().is_success() => {
                        let _ = response.bytes().await;
                        figures.latencies.push(started.elapsed());
                        if let Some(value) = patch {
                            figures.patched.push((id.clone(), value));
                        }
                    }
                    Ok(response) => figures.errors.push(format!("{} {}", response.status(), id)),
                    Err(e) => figures.errors.push(e.to_string()),
                }
                n += 1;
            }
            figures
        }));
    }
    for w in 0..workers {
        let (http, base) = (http.clone(), base.clone());
        handles.push(tokio::spawn(async move { remote_worker(http, base, w, deadline).await }));
    }
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.expect("client task"));
    }
    out
}

/// A remote worker: claim, then complete, until the deadline or the queue runs dry.
async fn remote_worker(http: reqwest::Client, base: String, w: usize, deadline: Instant) -> ClientFigures {
    let mut figures = ClientFigures::default();
    let worker = format!("bench-worker-{w}");
    while Instant::now() < deadline {
        let started = Instant::now();
        let claim = http
            .post(format!("{base}/api/v1/claim"))
            .json(&serde_json::json!({ "worker": worker }))
            .send()
            .await;
        let claim: serde_json::Value = match claim {
            Ok(r) if r.status().is_success() => r.json().await.unwrap_or_default(),
            Ok(r) => {
                figures.errors.push(format!("claim: {}", r.status()));
                continue;
            }
            Err(e) => {
                figures.errors.push(e.to_string());
                continue;
            }
        };
        figures.latencies.push(started.elapsed());
        if claim["outcome"] != "claimed" {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        let id = claim["task"]["id"].as_str().unwrap_or_default().to_owned();
        let attempt = claim["attempt"].as_u64().unwrap_or_default();
        let started = Instant::now();
        let body = serde_json::json!({ "worker": worker, "attempt": attempt, "result": format!("done by {worker}") });
        match http.post(format!("{base}/api/v1/tasks/{id}/complete")).json(&body).send().await {
            Ok(r) if r.status().is_success() => {
                let _ = r.bytes().await;
                figures.latencies.push(started.elapsed());
                figures.completed.push((id, attempt));
            }
            Ok(r) => figures.errors.push(format!("complete {id}: {}", r.status())),
            Err(e) => figures.errors.push(e.to_string()),
        }
    }
    figures
}

/// Acknowledged completions missing from the ledger (no successful run record for that
/// attempt), and tasks with more than one successful run.
async fn completions(store: &daicho_sqlite::SqliteStore, completed: &[&(String, u64)]) -> (usize, usize) {
    let mut missing = 0;
    let mut doubled = 0;
    let mut seen = std::collections::HashSet::new();
    for (id, attempt) in completed {
        if !seen.insert(id.clone()) {
            doubled += 1;
            continue;
        }
        let runs = store.runs(id.parse().expect("id")).await.expect("runs");
        let successes = runs.iter().filter(|r| r.outcome == "success").count();
        if !runs.iter().any(|r| u64::from(r.attempt) == *attempt && r.outcome == "success") {
            missing += 1;
        }
        doubled += successes.saturating_sub(1);
    }
    (missing, doubled)
}

/// Acknowledged patches whose value is not in the row's journal.
async fn lost_updates(store: &daicho_sqlite::SqliteStore, patched: &[&(String, String)]) -> usize {
    use std::collections::{HashMap, HashSet};

    let mut by_task: HashMap<&str, Vec<&str>> = HashMap::new();
    for (id, value) in patched {
        by_task.entry(id.as_str()).or_default().push(value.as_str());
    }
    let mut lost = 0;
    for (id, values) in by_task {
        let journal = store.journal(id.parse().expect("id")).await.expect("journal");
        let written: HashSet<&str> =
            journal.iter().filter_map(|e| e.after.get("correction").and_then(|v| v.as_str())).collect();
        lost += values.iter().filter(|v| !written.contains(*v)).count();
    }
    lost
}

//! `load`: N concurrent HTTP clients against `daicho serve` on loopback for a fixed time (reads
//! and patches mixed), then a check that every acknowledged patch is in the journal. Prints
//! requests per second, p50/p99/max latency, errors and lost updates; exits 1 when either is
//! not 0.
//!
//! `DAICHO_BENCH_CLIENTS` (default 50), `DAICHO_BENCH_WORKERS` (remote workers claiming and
//! completing tasks over the API at the same time, default 8) and `DAICHO_BENCH_SECS` (default
//! 30) set the shape. With workers, every acknowledged completion must be in the ledger once.
//! Latency is printed per kind of request (reads, patches, claims, completions; limit for
//! claims: p99 <= 100 ms). `DAICHO_BENCH_LOAD_BACKEND=postgres` runs the same against a
//! database of its own on the server of `DAICHO_BENCH_PG` (default the local one), dropped
//! afterwards; `both` runs SQLite, then PostgreSQL.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROJECTS: usize = 10;
/// Tasks the clients read and patch.
const TASKS: usize = 1_000;
/// Tasks queued for the remote workers besides (more than they finish in the run, so claims
/// find work to the end).
const QUEUED: usize = 30_000;

/// The kinds of request timed apart.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Patch,
    Claim,
    Complete,
}

const KINDS: [(Kind, &str); 4] = [
    (Kind::Read, "reads"),
    (Kind::Patch, "patches"),
    (Kind::Claim, "claims"),
    (Kind::Complete, "completions"),
];

pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// What one client did.
#[derive(Default)]
struct ClientFigures {
    /// (task id, attempt) of every acknowledged completion (remote workers).
    completed: Vec<(String, u64)>,
    latencies: Vec<(Kind, Duration)>,
    errors: Vec<String>,
    /// (task id, correction written) of every acknowledged patch.
    patched: Vec<(String, String)>,
}

pub fn bench_load() {
    match std::env::var("DAICHO_BENCH_LOAD_BACKEND").as_deref().unwrap_or("sqlite") {
        "sqlite" => load_on(Backend::Sqlite),
        "postgres" => load_on(Backend::Postgres),
        "both" => {
            load_on(Backend::Sqlite);
            load_on(Backend::Postgres);
        }
        other => {
            eprintln!("DAICHO_BENCH_LOAD_BACKEND: sqlite, postgres or both (got '{other}')");
            std::process::exit(2);
        }
    }
}

#[derive(Clone, Copy)]
enum Backend {
    Sqlite,
    Postgres,
}

fn load_on(backend: Backend) {
    let clients = env_usize("DAICHO_BENCH_CLIENTS", 50);
    let workers = env_usize("DAICHO_BENCH_WORKERS", 8);
    let secs = env_usize("DAICHO_BENCH_SECS", 30);
    let bin = crate::daicho_bin();
    let dir = tempfile_dir();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let (db, name, pg) = match backend {
        Backend::Sqlite => (dir.join("ledger.db").display().to_string(), "SQLite", None),
        Backend::Postgres => {
            let admin = std::env::var("DAICHO_BENCH_PG")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
            let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b).to_owned();
            let database = format!("daicho_bench_load_{}", std::process::id());
            runtime.block_on(admin_sql(&admin, &format!("CREATE DATABASE {database}")));
            (format!("{base}/{database}"), "PostgreSQL", Some((admin, database)))
        }
    };
    let tasks = dir.join("tasks.jsonl");
    let task = |i: usize, project: String, action: &str| {
        serde_json::json!({ "title": format!("load task {i}"), "project": project, "tags": "ai", "action": action })
            .to_string()
    };
    // The clients' tasks (T-0001…) first; the workers' queue after them.
    let lines: Vec<String> = (0..TASKS)
        .map(|i| task(i, format!("PJ-{:02}", i % PROJECTS), "work"))
        .chain((0..if workers > 0 { QUEUED } else { 0 }).map(|i| task(TASKS + i, "QUEUE".into(), "work")))
        .collect();
    std::fs::write(&tasks, lines.join("\n") + "\n").expect("write tasks");
    let db_path = std::path::Path::new(&db);
    crate::run(&bin, db_path, &["init", "--no-config"], None);
    // An automatic action for remote workers to claim (they do the work themselves).
    let config = dir.join("daicho.toml");
    std::fs::write(
        &config,
        "[[action]]\nname = \"work\"\nkind = \"command\"\ncommand = [\"true\"]\nauto = true\n",
    )
    .expect("write config");
    crate::run(&bin, db_path, &["import", &tasks.display().to_string()], None);
    if pg.is_some() {
        // The steady state, as autovacuum leaves a table after a bulk insert (within a minute):
        // the visibility map set, so counts over the ready index read the index alone.
        runtime.block_on(admin_sql(&db, "VACUUM ANALYZE task"));
    }
    let (port, mut serve) = serve(&bin, db_path, Some(&config), &dir);
    let figures = runtime.block_on(drive(port, clients, workers, Duration::from_secs(secs as u64)));
    let _ = Command::new("kill").args(["-TERM", &serve.id().to_string()]).status();
    let _ = serve.wait();

    let errors: Vec<&String> = figures.iter().flat_map(|f| f.errors.iter()).collect();
    let patched: Vec<&(String, String)> = figures.iter().flat_map(|f| f.patched.iter()).collect();
    let completed: Vec<&(String, u64)> = figures.iter().flat_map(|f| f.completed.iter()).collect();
    let (lost, (missing, doubled)) = runtime.block_on(async {
        match backend {
            Backend::Sqlite => {
                let store = daicho_sqlite::SqliteStore::open(&db, daicho_sqlite::SqliteOptions::default())
                    .await
                    .expect("open");
                (lost_updates(&store, &patched).await, completions(&store, &completed).await)
            }
            Backend::Postgres => {
                let store = daicho_postgres::PgStore::open(&db).await.expect("open");
                (lost_updates(&store, &patched).await, completions(&store, &completed).await)
            }
        }
    });
    let all: usize = figures.iter().map(|f| f.latencies.len()).sum();
    println!(
        "load [{name}]: {clients} clients and {workers} remote workers for {secs} s on loopback ({TASKS} tasks in \
         {PROJECTS} projects read and patched, {} queued for the workers): {all} requests, {:.0} req/s; \
         {} patches acknowledged, errors {}, lost updates {lost}; {} completions acknowledged, {missing} \
         missing from the ledger, {doubled} recorded twice",
        if workers > 0 { QUEUED } else { 0 },
        all as f64 / secs as f64,
        patched.len(),
        errors.len(),
        completed.len(),
    );
    for (kind, label) in KINDS {
        let mut times: Vec<Duration> = figures
            .iter()
            .flat_map(|f| f.latencies.iter())
            .filter(|(k, _)| *k == kind)
            .map(|(_, d)| *d)
            .collect();
        if times.is_empty() {
            continue;
        }
        times.sort();
        let pct =
            |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)].as_secs_f64() * 1e3;
        let limit = if kind == Kind::Claim { " (limit: p99 <= 100 ms)" } else { "" };
        println!(
            "load [{name}]:   {label}: {}, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms{limit}",
            times.len(),
            pct(0.50),
            pct(0.99),
            pct(1.0),
        );
    }
    for e in errors.iter().take(5) {
        println!("  error: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    if let Some((admin, database)) = pg {
        runtime.block_on(admin_sql(&admin, &format!("DROP DATABASE {database} WITH (FORCE)")));
    }
    if !errors.is_empty() || lost > 0 || missing > 0 || doubled > 0 {
        std::process::exit(1);
    }
}

/// Runs one statement on the database `url` names.
async fn admin_sql(url: &str, sql: &str) {
    let (client, connection) =
        tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("PostgreSQL reachable");
    tokio::spawn(connection);
    client.batch_execute(sql).await.expect(sql);
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
                let (request, patch, kind) = match n % 10 {
                    0 | 4 | 7 => {
                        let value = format!("load-c{c}-n{n}");
                        let body = serde_json::json!({ "correction": value, "by": format!("load{c}") });
                        (
                            http.patch(format!("{base}/api/v1/tasks/{id}")).json(&body),
                            Some(value),
                            Kind::Patch,
                        )
                    }
                    1 | 5 => (
                        http.get(format!("{base}/api/v1/tasks?project=PJ-{:02}&limit=50", n % PROJECTS)),
                        None,
                        Kind::Read,
                    ),
                    2 => (http.get(format!("{base}/api/v1/ready?limit=20")), None, Kind::Read),
                    _ => (http.get(format!("{base}/api/v1/tasks/{id}")), None, Kind::Read),
                };
                match request.send().await {
                    Ok(response) if response.status().is_success() => {
                        let _ = response.bytes().await;
                        figures.latencies.push((kind, started.elapsed()));
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
        figures.latencies.push((Kind::Claim, started.elapsed()));
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
                figures.latencies.push((Kind::Complete, started.elapsed()));
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
async fn completions(store: &impl daicho_store::Store, completed: &[&(String, u64)]) -> (usize, usize) {
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
async fn lost_updates(store: &impl daicho_store::Store, patched: &[&(String, String)]) -> usize {
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

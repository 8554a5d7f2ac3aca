//! Benchmarks of daicho that print figures (speed targets live here, not in timed tests).
//!
//! ```text
//! cargo build --release -p daicho -p daicho-bench
//! target/release/daicho-bench [merge|ledger|claims|postgres|sync|load|pages|fsyncs|all]
//! ```
//!
//! - `merge`: `merge_plan` with 1,000,000 existing rows and 100,000 incoming items (goal < 1 s);
//! - `claims`: claim → trivial in-process executor → finish on SQLite (`synchronous=FULL`), with 1
//!   and 4 workers claiming one task per commit, and a batching worker claiming and finishing up
//!   to 16 per commit; next to this machine's fsync rate (one durable commit each is the
//!   physical limit of unbatched work);
//! - `postgres`: the same claim figures on PostgreSQL with 1, 4 and 16 workers and 4 batching
//!   workers, next to the server's minimal commit rate, and `ready` latency at 100,000 tasks;
//! - `ledger`: a SQLite ledger of 100,000 tasks with ~200,000 dep edges, built by `daicho import`;
//!   then `daicho ready` as a whole process (goal < 50 ms) and `daicho push` of 100,000 new
//!   items into that ledger (goal < 5 s).
//!
//! - `sync`: `daicho sync` of a 100,000-item JSON Lines source into a SQLite ledger of 1,000,000
//!   rows, whole-process (goal < 10 s, peak memory < 500 MB, read with `/usr/bin/time`), then the
//!   same sync again (nothing to add or patch).
//!
//! - `load`: 50 concurrent HTTP clients and 8 remote workers for 30 s against `daicho serve` on
//!   loopback (reads and patches mixed; claims and completions): requests per second, p50/p99
//!   latency per kind of request (claims: p99 <= 100 ms), errors (= 0) and lost updates (= 0:
//!   every acknowledged patch is in the journal, every completion recorded once); on SQLite, or
//!   PostgreSQL with `DAICHO_BENCH_LOAD_BACKEND=postgres` (`both` for side by side).
//!
//! - `pages`: every web page (cross view, ledger with filters, sorts and a keyset page, graph,
//!   approvals, task, `/metrics`) on a 100,000-row project (`DAICHO_BENCH_PAGE_ROWS`), median and
//!   slowest of 10 loopback requests to `daicho serve` (goal < 100 ms each).
//!
//! - `fsyncs`: the fsync and fdatasync calls of `add`, `set`, `push`, `run` and `worker --once`
//!   per task on SQLite, counted with strace, next to the floor of one per commit.
//!
//! The `daicho` binary is looked for beside this one (`target/release/daicho`) unless
//! `DAICHO_BIN` names it.

mod fsyncs;
mod load;
mod pages;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use daicho_core::{Item, Task, TaskId, merge_plan};

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "all".to_owned());
    match which.as_str() {
        "merge" => bench_merge(),
        "ledger" => bench_ledger(),
        "claims" => bench_claims(),
        "postgres" => bench_postgres(),
        "sync" => bench_sync(),
        "load" => load::bench_load(),
        "pages" => pages::bench_pages(),
        "fsyncs" => fsyncs::bench_fsyncs(),
        "all" => {
            bench_merge();
            bench_ledger();
            bench_claims();
            bench_postgres();
            bench_sync();
            load::bench_load();
            pages::bench_pages();
            fsyncs::bench_fsyncs();
        }
        other => {
            eprintln!(
                "usage: daicho-bench [merge|ledger|claims|postgres|sync|load|pages|fsyncs|all] (got '{other}')"
            );
            std::process::exit(2);
        }
    }
}

/// A small deterministic generator (64-bit LCG), so every run builds the same data.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn bench_merge() {
    let now = jiff::Timestamp::from_second(1_800_000_000).expect("a valid instant");
    let existing_n = 1_000_000u64;
    let incoming_n = 100_000u64;
    let started = Instant::now();
    let existing: Vec<Task> = (1..=existing_n)
        .map(|i| {
            let mut t = Task::new(TaskId::new(i), &format!("既存タスク number {i}"), "sheet", now);
            t.body = if i % 3 == 0 { String::new() } else { format!("body {i}") };
            t
        })
        .collect();
    // Half the incoming items match existing rows (a third of those fill an empty body), half are new.
    let incoming: Vec<Item> = (0..incoming_n)
        .map(|j| {
            let title = if j % 2 == 0 {
                format!("既存タスク　NUMBER {}！", j * 7 + 1)
            } else {
                format!("new task {j}")
            };
            let mut item = Item::new(&title, "sheet");
            item.body = format!("incoming body {j}");
            item
        })
        .collect();
    println!("merge_plan: built {existing_n} rows and {incoming_n} items in {}", ms(started.elapsed()));
    let mut best = Duration::MAX;
    let mut counts = (0, 0, 0);
    for _ in 0..3 {
        let started = Instant::now();
        let plan = merge_plan(&existing, &incoming, now, existing_n + 1);
        best = best.min(started.elapsed());
        counts = (plan.add.len(), plan.patch.len(), plan.skip.len());
    }
    println!(
        "merge_plan: {existing_n} existing x {incoming_n} incoming: best of 3 = {} (goal < 1000 ms); add {}, patch {}, skip {}",
        ms(best),
        counts.0,
        counts.1,
        counts.2
    );
}

fn daicho_bin() -> PathBuf {
    if let Ok(bin) = std::env::var("DAICHO_BIN") {
        return PathBuf::from(bin);
    }
    let me = std::env::current_exe().expect("the bench binary's path");
    me.with_file_name(format!("daicho{}", std::env::consts::EXE_SUFFIX))
}

fn run(bin: &Path, db: &Path, args: &[&str], stdin: Option<&Path>) -> Duration {
    let mut command = Command::new(bin);
    command.arg("--db").arg(db).args(args).stdout(Stdio::null()).stderr(Stdio::inherit());
    // In the ledger's own directory: `init` writes its example daicho.toml there, never into
    // the directory the bench was started from.
    // (A PostgreSQL URL has no directory: the temp directory then.)
    match db.parent().filter(|d| !d.as_os_str().is_empty() && d.is_dir()) {
        Some(dir) => command.current_dir(dir),
        None => command.current_dir(std::env::temp_dir()),
    };
    if let Some(file) = stdin {
        command.stdin(std::fs::File::open(file).expect("the input file"));
    }
    let started = Instant::now();
    let status = command.status().expect("daicho runs");
    let took = started.elapsed();
    assert!(status.success(), "daicho {args:?} failed: {status}");
    took
}

fn median_of(times: &mut [Duration]) -> (Duration, Duration, Duration) {
    times.sort();
    (times[0], times[times.len() / 2], times[times.len() - 1])
}

fn bench_ledger() {
    let bin = daicho_bin();
    assert!(
        bin.exists(),
        "{} not found: cargo build --release -p daicho first, or set DAICHO_BIN",
        bin.display()
    );
    let dir = std::env::temp_dir().join(format!("daicho-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a bench directory");
    let db = dir.join("ledger.db");

    // 100,000 tasks, each waiting for up to two earlier ones nearby: ~200,000 edges, acyclic.
    let n = 100_000u64;
    let mut rng = Lcg(42);
    let mut tasks = Vec::with_capacity(n as usize);
    let mut edges = 0;
    for i in 1..=n {
        let mut deps = Vec::new();
        for _ in 0..2 {
            if i > 1 {
                let d = i - 1 - rng.below((i - 1).min(1000));
                if !deps.contains(&d) {
                    deps.push(d);
                }
            }
        }
        edges += deps.len();
        let status = if rng.below(100) < 60 { "done" } else { "pending" };
        tasks.push(serde_json::json!({
            "id": format!("T-{i:06}"),
            "title": format!("bench task {i}"),
            "project": format!("PJ-{:02}", i % 20),
            "status": status,
            "priority": rng.below(3),
            "deps": deps.iter().map(|d| format!("T-{d:06}")).collect::<Vec<_>>(),
        }));
    }
    let ledger_file = dir.join("ledger.json");
    std::fs::write(&ledger_file, serde_json::to_vec(&serde_json::json!({ "tasks": tasks })).expect("JSON"))
        .expect("write the ledger file");
    run(&bin, &db, &["init"], None);
    let import = run(&bin, &db, &["import", ledger_file.to_str().expect("a UTF-8 path")], None);
    println!("ledger: imported {n} tasks with {edges} dep edges in {}", ms(import));

    run(&bin, &db, &["ready"], None);
    let mut times: Vec<Duration> = (0..30).map(|_| run(&bin, &db, &["ready"], None)).collect();
    let (best, median, worst) = median_of(&mut times);
    println!(
        "ready: whole process on {n} tasks / {edges} edges: best {}, median {}, worst {} of 30 (goal < 50 ms)",
        ms(best),
        ms(median),
        ms(worst)
    );
    let mut times: Vec<Duration> = (0..10).map(|_| run(&bin, &db, &["ready", "--json"], None)).collect();
    println!("ready --json: median {} of 10", ms(median_of(&mut times).1));

    // `daicho push` of 100,000 new items into that ledger; half of them wait for existing tasks.
    let items: Vec<serde_json::Value> = (0..n)
        .map(|j| {
            let mut item =
                serde_json::json!({ "title": format!("pushed finding {j}"), "evidence": format!("scan #{j}") });
            if j % 2 == 0 {
                item["deps"] = serde_json::json!([format!("T-{:06}", 1 + rng.below(n))]);
            }
            item
        })
        .collect();
    let push_file = dir.join("push.json");
    std::fs::write(&push_file, serde_json::to_vec(&items).expect("JSON")).expect("write the push file");
    let (db_arg, push_arg) = (db.to_str().expect("a UTF-8 path"), push_file.to_str().expect("a UTF-8 path"));
    let push_args = ["--db", db_arg, "push", "--source", "scanner", push_arg];
    let rss =
        |mib: Option<f64>| mib.map_or_else(|| "n/a (no /usr/bin/time)".to_owned(), |m| format!("{m:.0} MiB"));
    let (push, peak) = timed(&bin, &dir, &push_args);
    println!(
        "push: {n} new items into a {n}-task ledger: {}, peak RSS {} (goals < 5000 ms; memory grows with \
         the batch's ranges, not its length: <= 200 MB at 200,000 items)",
        ms(push),
        rss(peak)
    );
    let (again, peak) = timed(&bin, &dir, &push_args);
    println!("push: the same {n} items again (all skipped, M8): {}, peak RSS {}", ms(again), rss(peak));
    let mut times: Vec<Duration> = (0..10).map(|_| run(&bin, &db, &["ready"], None)).collect();
    println!("ready: whole process on {} tasks: median {} of 10", 2 * n, ms(median_of(&mut times).1));
    let size = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
    println!("ledger file: {:.1} MiB", size as f64 / f64::from(1 << 20));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The smallest durable SQLite commit per second on this disk: one tiny row per
/// `BEGIN IMMEDIATE … COMMIT`, WAL, `synchronous=FULL` — the physical limit of one commit each.
/// Measured in the steady state of a stream of commits: once SQLite's automatic checkpoint
/// (1,000 frames) has run, the log starts again at the top of the WAL and a commit rewrites the
/// file in place. A probe on a new, growing WAL also writes the file's inode (its size) in
/// every sync, and so reported a limit nearly half the real one.
fn min_commit_rate(dir: &Path) -> f64 {
    let path = dir.join("commit-probe.db");
    // A probe of its own each time: the same empty start.
    for file in ["commit-probe.db", "commit-probe.db-wal", "commit-probe.db-shm"] {
        let _ = std::fs::remove_file(dir.join(file));
    }
    let conn = rusqlite::Connection::open(&path).expect("a probe ledger");
    let _: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).expect("WAL");
    conn.execute_batch("PRAGMA synchronous = FULL; CREATE TABLE t (x INTEGER)").expect("setup");
    for i in 0..1100 {
        conn.execute_batch(&format!("BEGIN IMMEDIATE; INSERT INTO t VALUES ({i}); COMMIT")).expect("commit");
    }
    let n = 1000;
    let started = Instant::now();
    for i in 0..n {
        conn.execute_batch(&format!("BEGIN IMMEDIATE; INSERT INTO t VALUES ({i}); COMMIT")).expect("commit");
    }
    f64::from(n) / started.elapsed().as_secs_f64()
}

/// Durable 4 KiB writes per second on this disk: `pwrite` + `fdatasync`, 1000 times, in place
/// in a file written and synced beforehand (as a WAL is rewritten once checkpointed; a growing
/// file's sync writes its inode too).
fn fsync_rate(dir: &Path) -> f64 {
    use std::os::unix::fs::FileExt as _;
    let path = dir.join("fsync.probe");
    let file = std::fs::File::create(&path).expect("a probe file");
    let block = [7u8; 4096];
    let n = 1000;
    for i in 0..n {
        file.write_all_at(&block, i * 4096).expect("write");
    }
    file.sync_all().expect("fsync");
    let started = Instant::now();
    for i in 0..n {
        file.write_all_at(&block, i * 4096).expect("write");
        file.sync_data().expect("fdatasync");
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&path);
    rate
}

/// Upserts `items` in commits of 10,000.
async fn seed_items<S: daicho_store::Store>(store: &S, items: Vec<daicho_core::Item>) {
    for chunk in items.chunks(10_000) {
        let batch = daicho_store::Batch {
            items: chunk.to_vec().into(),
            actor: daicho_core::Actor::System,
            now: jiff::Timestamp::now(),
            file: "bench".into(),
            unknown_deps: daicho_store::UnknownDeps::Refuse,
        };
        store.upsert(batch).await.expect("seed");
    }
}

/// Figures of one worker run.
struct WorkFigures {
    took: Duration,
    tasks: usize,
    /// Commits made by the workers: the stores' own count where they keep one (SQLite, where a
    /// claim and the ends recorded with it share a commit), else their claim and finish writes.
    commits: usize,
    /// CPU time of this process (every thread, user and system) during the run.
    cpu: Option<Duration>,
    /// CPU time of the whole machine during the run ([`machine_cpu`]).
    machine: Option<Duration>,
}

/// CPU time this process has used so far, all threads, user and system (`/proc/self/stat`,
/// in clock ticks of 1/100 s, the Linux default), or `None` off Linux.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// CPU time the whole machine spent busy (user, nice, system, interrupts; not idle, I/O wait or
/// time stolen by the host), every process together: on PostgreSQL, the server's share of a run
/// with the workers'.
fn machine_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> =
        stat.lines().next()?.split_whitespace().skip(1).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    let busy = fields.first()? + fields.get(1)? + fields.get(2)? + fields.get(5)? + fields.get(6)?;
    Some(Duration::from_millis(busy * 10))
}

/// Seeds `n` independent ready tasks (in commits of 10,000), then runs `workers` real worker
/// loops (`Engine::work_with`, the loop of `daicho worker`), each with `slots` runs at once and
/// a trivial in-process executor, until the queue is empty. `open` gives each worker its own
/// store, as a separate process would have; `commits` reads a store's own commit count, if any.
async fn work_run<S, F, Fut>(
    open: F,
    commits: fn(&S) -> Option<u64>,
    n: usize,
    workers: usize,
    slots: usize,
) -> WorkFigures
where
    S: daicho_store::Store + 'static,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = S>,
{
    use daicho_engine::executor::ExecOutcome;
    use daicho_engine::{Config, Engine, WorkOptions};
    use std::sync::Arc;

    let seed = open().await;
    let items: Vec<daicho_core::Item> = (0..n)
        .map(|i| {
            let mut item = daicho_core::Item::new(&format!("job {i}"), "bench");
            item.action = "noop".into();
            item.tags = daicho_core::Tags::parse_list("ai");
            item
        })
        .collect();
    seed_items(&seed, items).await;
    drop(seed);
    let config = Config::parse(
        "[policy]\nlease = \"5m\"\n\n[[action]]\nname = \"noop\"\nkind = \"command\"\ncommand = [\"true\"]\nauto = true\non_success = \"done\"\n",
        "bench.toml",
    )
    .expect("bench config");
    let (mut engines, mut stores) = (Vec::new(), Vec::new());
    for w in 0..workers {
        let store = Arc::new(open().await);
        stores.push(Arc::clone(&store));
        engines.push(Arc::new(Engine::new(store, config.clone(), None).with_worker(&format!("bench-{w}"))));
    }
    let before: Option<u64> = stores.iter().map(|s| commits(s)).sum();
    let (cpu_before, machine_before) = (process_cpu(), machine_cpu());
    let started = Instant::now();
    let mut handles = Vec::new();
    for engine in engines {
        handles.push(tokio::spawn(async move {
            let options = WorkOptions { slots, poll: Duration::from_millis(50), once: true };
            // The trivial executor: succeeds at once, in-process.
            let runner = |_ctx, _action| async {
                ExecOutcome::Success {
                    result: "ok".into(),
                    tasks: Vec::new(),
                    tokens: None,
                    push_error: None,
                }
            };
            engine.work_with(options, std::future::pending(), runner).await.expect("work")
        }));
    }
    let (mut tasks, mut writes) = (0, 0);
    for h in handles {
        let totals = h.await.expect("worker");
        tasks += totals.ran;
        writes += totals.claim_commits + totals.finish_commits;
    }
    let took = started.elapsed();
    let cpu = process_cpu().zip(cpu_before).map(|(after, before)| after.saturating_sub(before));
    let machine = machine_cpu().zip(machine_before).map(|(after, before)| after.saturating_sub(before));
    let after: Option<u64> = stores.iter().map(|s| commits(s)).sum();
    let commits = match (before, after) {
        (Some(before), Some(after)) => (after - before) as usize,
        _ => writes,
    };
    WorkFigures { took, tasks, commits, cpu, machine }
}

/// One line of claim figures. `syncs` is the number of durable flushes the server made (WAL
/// syncs on PostgreSQL), when known.
fn report_work(backend: &str, workers: usize, slots: usize, f: &WorkFigures, syncs: Option<i64>, fsync: f64) {
    let secs = f.took.as_secs_f64();
    let tasks_per_s = f.tasks as f64 / secs;
    let flushes = match syncs {
        Some(s) => format!(
            ", {s} WAL syncs = {:.0}/s ({:.1} tasks per sync)",
            s as f64 / secs,
            f.tasks as f64 / s.max(1) as f64
        ),
        None => String::new(),
    };
    let cpu = match f.cpu {
        Some(cpu) => format!(
            "; CPU {:.3} ms per task (goal <= 0.25 ms)",
            cpu.as_secs_f64() * 1000.0 / f.tasks.max(1) as f64
        ),
        None => String::new(),
    };
    let cpu = match f.machine {
        Some(all) => format!(
            "{cpu}, {:.3} ms on the whole machine",
            all.as_secs_f64() * 1000.0 / f.tasks.max(1) as f64
        ),
        None => cpu,
    };
    println!(
        "claims [{backend}]: {workers} worker(s) x {slots} slot(s): {} tasks in {} = {tasks_per_s:.0} tasks/s ({:.2}x the fsync rate); {} commits = {:.0} commits/s ({:.1} tasks per commit){flushes}{cpu}",
        f.tasks,
        ms(f.took),
        tasks_per_s / fsync,
        f.commits,
        f.commits as f64 / secs,
        f.tasks as f64 / f.commits.max(1) as f64,
    );
}

/// `ready` latency in-process on a ledger of `n` tasks: median of 30 calls (limit 50).
async fn ready_latency<S: daicho_store::Store>(store: &S, n: usize) -> Duration {
    let items: Vec<daicho_core::Item> = (0..n)
        .map(|i| {
            let mut item = daicho_core::Item::new(&format!("ready bench {i}"), "latency");
            item.priority = (i % 3) as i64;
            item
        })
        .collect();
    seed_items(store, items).await;
    let mut times: Vec<Duration> = Vec::new();
    for _ in 0..30 {
        let started = Instant::now();
        let set = store.ready(jiff::Timestamp::now(), 50).await.expect("ready");
        times.push(started.elapsed());
        assert_eq!(set.tasks.len(), 50);
    }
    median_of(&mut times).1
}

fn bench_claims() {
    use daicho_sqlite::{SqliteOptions, SqliteStore};

    let dir = std::env::temp_dir().join(format!("daicho-bench-claims-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a bench directory");
    let raw = fsync_rate(&dir);
    let limit = min_commit_rate(&dir);
    println!(
        "fsync: {raw:.0} durable 4 KiB writes/s on this disk; {limit:.0} minimal durable SQLite commits/s (WAL, FULL): the limit of one commit each"
    );
    // Two threads, as `daicho worker` has.
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let n = bench_n();
    for (workers, slots) in shapes() {
        let db = dir.join(format!("claims-{workers}-{slots}.db"));
        // One worker with one slot runs SQLite on its loop's thread, as `daicho worker` does with
        // one slot. Several workers here share one runtime (processes would not), so they keep
        // the hand-off to SQLite's thread and do not block one another.
        let inline = (workers, slots) == (1, 1);
        let figures = runtime.block_on(work_run(
            || async {
                SqliteStore::open(&db, SqliteOptions { inline, ..SqliteOptions::default() })
                    .await
                    .expect("open")
            },
            |s| Some(s.commits()),
            n,
            workers,
            slots,
        ));
        report_work("sqlite", workers, slots, &figures, None, raw);
        if (workers, slots) == (1, 1) {
            let secs = figures.took.as_secs_f64();
            let (tasks_per_s, commits_per_s) = (figures.tasks as f64 / secs, figures.commits as f64 / secs);
            // The minimal rate drifts on a shared machine (a probe is a fifth of a second): it is
            // measured again right after the run, and the run is set against both probes' mean.
            let again = min_commit_rate(&dir);
            println!(
                "claims [sqlite]: 1 x 1 makes {:.2}x the minimal durable commit rate in commits/s \
                 ({limit:.0} before the run, {again:.0} after it: {:.2}x and {:.2}x)",
                commits_per_s / ((limit + again) / 2.0),
                commits_per_s / limit,
                commits_per_s / again
            );
            huey_drain(n.min(20_000), &dir, tasks_per_s);
        }
    }
    let latency = runtime.block_on(async {
        let store = SqliteStore::open(dir.join("latency.db"), SqliteOptions::default()).await.expect("open");
        ready_latency(&store, 100_000).await
    });
    println!("ready [sqlite]: in-process on 100,000 ready tasks: median {} of 30", ms(latency));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The peer beside the unbatched figure: huey's durable drain rate on SQLite, one worker, on the
/// same disk in the same run (`scripts/peers/huey_drain.py`; needs `pip install huey==3.5.4`).
fn huey_drain(n: usize, dir: &Path, daicho_tasks_per_s: f64) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/peers/huey_drain.py");
    let out =
        Command::new("python3").arg(&script).arg(n.to_string()).arg(dir).stderr(Stdio::inherit()).output();
    let figures: Option<serde_json::Value> = out.ok().and_then(|o| serde_json::from_slice(&o.stdout).ok());
    match figures.as_ref().and_then(|f| Some((f["tasks_per_s"].as_f64()?, f["huey"].as_str()?))) {
        Some((rate, version)) => println!(
            "peer: huey {version} drains {n} tasks at {rate:.0} tasks/s (SQLite, WAL, fsync=True, one worker); \
             daicho 1 x 1 is {:.2}x that",
            daicho_tasks_per_s / rate
        ),
        None => println!(
            "peer: huey not measured: {}",
            figures.map_or("python3 did not run".into(), |f| f.to_string())
        ),
    }
}

/// The worker shapes measured: (workers, slots each). One slot each is unbatched work (one task
/// per commit); more slots let a worker batch its claims and its finishes.
/// `DAICHO_BENCH_SHAPES` (`1x1,1x16`) picks some.
const SHAPES: [(usize, usize); 6] = [(1, 1), (4, 1), (16, 1), (1, 16), (4, 4), (16, 16)];

/// Tasks per claim run: `DAICHO_BENCH_N`, default 20,000 (a deep queue).
fn bench_n() -> usize {
    std::env::var("DAICHO_BENCH_N").ok().and_then(|n| n.parse().ok()).unwrap_or(20_000)
}

fn shapes() -> Vec<(usize, usize)> {
    let picked = std::env::var("DAICHO_BENCH_SHAPES").unwrap_or_default();
    SHAPES
        .into_iter()
        .filter(|(w, s)| picked.is_empty() || picked.split(',').any(|p| p.trim() == format!("{w}x{s}")))
        .collect()
}

/// WAL syncs the server has made so far (`pg_stat_wal`, PostgreSQL 14+): its durable flushes.
async fn wal_syncs(client: &tokio_postgres::Client) -> i64 {
    client.query_one("SELECT wal_sync FROM pg_stat_wal", &[]).await.expect("pg_stat_wal").get(0)
}

/// The same figures on PostgreSQL (`DAICHO_BENCH_PG`, default the local server), each in a
/// database of its own, dropped afterwards.
fn bench_postgres() {
    use daicho_postgres::PgStore;

    let admin = std::env::var("DAICHO_BENCH_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b).to_owned();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls).await.expect("PostgreSQL reachable");
        tokio::spawn(connection);
        let limit = pg_min_commit_rate(&client, &base).await;
        println!("postgres: {limit:.0} minimal durable commits/s (one INSERT per transaction): the limit of one commit each");
        let n = bench_n();
        let raw = fsync_rate(&std::env::temp_dir());
        println!("fsync: {raw:.0} durable 4 KiB writes/s on this disk");
        for (workers, slots) in shapes() {
            let name = format!("daicho_bench_{}_{workers}_{slots}", std::process::id());
            client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("create");
            let url = format!("{base}/{name}");
            let before = wal_syncs(&client).await;
            let figures = work_run(|| async { PgStore::open(&url).await.expect("open") }, |_| None, n, workers, slots).await;
            // The seeding's syncs are few (2 commits); they are counted in, to err on the low side.
            let syncs = wal_syncs(&client).await - before;
            report_work("postgres", workers, slots, &figures, Some(syncs), raw);
            if (workers, slots) == (16, 1) {
                // Set against the minimal rate measured before the run and again right after it.
                let again = pg_min_commit_rate(&client, &base).await;
                let tasks_per_s = figures.tasks as f64 / figures.took.as_secs_f64();
                println!(
                    "claims [postgres]: 16 x 1 makes {:.2}x the server's minimal durable commit rate in tasks/s \
                     ({limit:.0} before the run, {again:.0} after it; goal >= 1)",
                    tasks_per_s / ((limit + again) / 2.0)
                );
            }
            client.batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)")).await.expect("drop");
        }
        let name = format!("daicho_bench_latency_{}", std::process::id());
        client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("create");
        let store = PgStore::open(&format!("{base}/{name}")).await.expect("open");
        let latency = ready_latency(&store, 100_000).await;
        println!("ready [postgres]: in-process on 100,000 ready tasks: median {} of 30", ms(latency));
        // The steady state once autovacuum has visited: the count is an index-only scan then.
        client.batch_execute("SELECT 1").await.expect("alive");
        let (c, conn) = tokio_postgres::connect(&format!("{base}/{name}"), tokio_postgres::NoTls).await.expect("connect");
        tokio::spawn(conn);
        c.batch_execute("VACUUM ANALYZE task").await.expect("vacuum");
        let mut times = Vec::new();
        for _ in 0..30 {
            let started = Instant::now();
            let set = daicho_store::Store::ready(&store, jiff::Timestamp::now(), 50).await.expect("ready");
            times.push(started.elapsed());
            assert_eq!(set.total, 100_000);
        }
        println!("ready [postgres]: the same after VACUUM (as autovacuum leaves it): median {} of 30", ms(median_of(&mut times).1));
        drop(c);
        drop(store);
        client.batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)")).await.expect("drop");
    });
}

/// The server's minimal durable commit rate: 1,000 one-row inserts, each its own transaction,
/// one after another on one connection, in a database of its own (dropped afterwards).
async fn pg_min_commit_rate(admin: &tokio_postgres::Client, base: &str) -> f64 {
    let probe = format!("daicho_bench_probe_{}", std::process::id());
    admin.batch_execute(&format!("CREATE DATABASE {probe}")).await.expect("create");
    let (c, conn) =
        tokio_postgres::connect(&format!("{base}/{probe}"), tokio_postgres::NoTls).await.expect("connect");
    let task = tokio::spawn(conn);
    c.batch_execute("CREATE TABLE t (x INT)").await.expect("table");
    let started = Instant::now();
    for i in 0..1000 {
        c.execute("INSERT INTO t VALUES ($1)", &[&i]).await.expect("commit");
    }
    let rate = 1000.0 / started.elapsed().as_secs_f64();
    drop(c);
    let _ = task.await;
    admin.batch_execute(&format!("DROP DATABASE {probe} WITH (FORCE)")).await.expect("drop");
    rate
}

/// Runs `daicho` under `/usr/bin/time` (when present): the wall time and the peak RSS in MiB.
fn timed(bin: &Path, dir: &Path, args: &[&str]) -> (Duration, Option<f64>) {
    let time = Path::new("/usr/bin/time");
    let report = dir.join("time.out");
    let mut command = if time.exists() {
        let mut c = Command::new(time);
        c.arg("-f").arg("%M").arg("-o").arg(&report).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    command.args(args).current_dir(dir).stdout(Stdio::null()).stderr(Stdio::inherit());
    let started = Instant::now();
    let status = command.status().expect("daicho runs");
    let took = started.elapsed();
    assert!(status.success(), "daicho {args:?} failed: {status}");
    let rss = std::fs::read_to_string(&report)
        .ok()
        .and_then(|t| t.trim().lines().last()?.trim().parse::<f64>().ok());
    (took, rss.map(|kib| kib / 1024.0))
}

fn bench_sync() {
    use std::io::Write as _;

    let bin = daicho_bin();
    let dir = std::env::temp_dir().join(format!("daicho-bench-sync-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a bench directory");
    let write_lines = |name: &str, n: usize, prefix: &str| {
        let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join(name)).expect("create"));
        for i in 0..n {
            writeln!(out, "{{\"title\": \"{prefix} item {i}\", \"body\": \"found by the nightly scan, case {i}\", \"project\": \"p{}\"}}", i % 50).expect("write");
        }
    };
    write_lines("ledger.jsonl", 1_000_000, "existing");
    write_lines("source.jsonl", 100_000, "incoming");
    std::fs::write(
        dir.join("daicho.toml"),
        "[[source]]\nname = \"scan\"\nkind = \"jsonl\"\npath = \"source.jsonl\"\n",
    )
    .expect("config");
    let db = dir.join("ledger.db");
    let db = db.to_str().expect("a UTF-8 path");
    let (took, _) = timed(&bin, &dir, &["--db", db, "init", "--no-config"]);
    let _ = took;
    let (took, rss) = timed(&bin, &dir, &["--db", db, "import", "ledger.jsonl"]);
    println!(
        "sync: built a 1,000,000-row ledger with daicho import in {} (peak {:.0} MiB)",
        ms(took),
        rss.unwrap_or(f64::NAN)
    );
    let (took, rss) = timed(&bin, &dir, &["--db", db, "sync"]);
    println!(
        "sync: 100,000 new items from a JSON Lines source into 1,000,000 rows: {} whole-process, peak {:.0} MiB (goal < 10 s, < 500 MB)",
        ms(took),
        rss.unwrap_or(f64::NAN)
    );
    let (took, rss) = timed(&bin, &dir, &["--db", db, "sync"]);
    println!(
        "sync: the same source again (adds 0, patches 0): {} whole-process, peak {:.0} MiB",
        ms(took),
        rss.unwrap_or(f64::NAN)
    );
    // A spreadsheet as people keep one (X5): Japanese headers, a date column, a status to
    // filter on, a title template; 100,000 rows, two of every three unanswered.
    write_sheet(&dir.join("questions.xlsx"), 100_000);
    std::fs::write(
        dir.join("daicho.toml"),
        "[[source]]\nname = \"questions\"\nkind = \"xlsx\"\npath = \"questions.xlsx\"\nsheet = \"確認事項\"\n\
         fields = { id = \"番号\", due = \"回答期限\" }\nwhere = { \"状態\" = [\"未回答\"] }\n\
         title = \"{質問} に回答をもらう\"\n",
    )
    .expect("config");
    let (took, rss) = timed(&bin, &dir, &["--db", db, "sync"]);
    println!(
        "sync: a 100,000-row xlsx sheet (66,667 unanswered) into 1,100,000 rows: {} whole-process, peak {:.0} MiB (goal < 500 MB)",
        ms(took),
        rss.unwrap_or(f64::NAN)
    );
    let (took, rss) = timed(&bin, &dir, &["--db", db, "sync"]);
    println!(
        "sync: the same sheet again: {} whole-process, peak {:.0} MiB",
        ms(took),
        rss.unwrap_or(f64::NAN)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes a confirmation sheet of `n` questions (番号, 質問, 状態, 回答期限).
fn write_sheet(path: &Path, n: u32) {
    use rust_xlsxwriter::{ExcelDateTime, Format, Workbook};

    let mut book = Workbook::new();
    let sheet = book.add_worksheet();
    sheet.set_name("確認事項").expect("a sheet name");
    let date = Format::new().set_num_format("yyyy/mm/dd");
    for (col, name) in ["番号", "質問", "状態", "回答期限"].into_iter().enumerate() {
        sheet.write_string(0, col as u16, name).expect("a header");
    }
    for i in 1..=n {
        let state = if i % 3 == 0 { "回答済" } else { "未回答" };
        let day = ExcelDateTime::from_ymd(2027, (i % 12 + 1) as u8, (i % 28 + 1) as u8).expect("a date");
        sheet.write_string(i, 0, format!("Q-{i}")).expect("a cell");
        sheet.write_string(i, 1, format!("項目 {i} の仕様は確定か")).expect("a cell");
        sheet.write_string(i, 2, state).expect("a cell");
        sheet.write_datetime_with_format(i, 3, day, &date).expect("a cell");
    }
    book.save(path).expect("the sheet is written");
}

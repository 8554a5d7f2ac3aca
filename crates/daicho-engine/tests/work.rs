//! The worker loop on a real SQLite ledger: batching, the kill switch, approvals, failures.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use daicho_core::{Actor, Item, Status, Tags};
use daicho_engine::executor::ExecOutcome;
use daicho_engine::{Config, Engine, WorkOptions};
use daicho_sqlite::{SqliteOptions, SqliteStore};
use daicho_store::{Batch, ListFilter, Store, UnknownDeps};

const CONFIG: &str = r#"
[[action]]
name = "work"
kind = "command"
command = ["true"]
auto = true
on_success = "done"

[[action]]
name = "publish"
kind = "command"
command = ["true"]
auto = true
external = true
"#;

async fn ledger(dir: &tempfile::TempDir) -> Arc<SqliteStore> {
    Arc::new(SqliteStore::open(dir.path().join("ledger.db"), SqliteOptions::default()).await.expect("open"))
}

fn item(title: &str, action: &str) -> Item {
    let mut item = Item::new(title, "test");
    item.action = action.into();
    item.tags = Tags::parse_list("ai");
    item
}

async fn push(store: &SqliteStore, items: Vec<Item>) {
    let batch = Batch {
        items: items.into(),
        actor: Actor::System,
        now: jiff::Timestamp::now(),
        file: "test".into(),
        unknown_deps: UnknownDeps::Refuse,
    };
    store.upsert(batch).await.expect("upsert");
}

fn options(slots: usize) -> WorkOptions {
    WorkOptions { slots, poll: Duration::from_millis(50), once: true }
}

fn succeed() -> ExecOutcome {
    ExecOutcome::Success { result: "ok".into(), tasks: Vec::new(), tokens: None, push_error: None }
}

/// I5: with free slots and a deep queue, claims and run ends are batched: many tasks per commit,
/// each task run once, dependents run after their deps within the same worker session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i5_a_worker_batches_claims_and_ends_and_runs_each_task_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ledger(&dir).await;
    let mut items: Vec<Item> = (0..64)
        .map(|i| {
            let mut job = item(&format!("job {i}"), "work");
            job.ref_id = Some(format!("j{i}"));
            job
        })
        .collect();
    let mut last = item("after all", "work");
    last.deps = (0..64).map(|i| format!("j{i}")).collect();
    items.push(last);
    push(&store, items).await;
    let engine =
        Arc::new(Engine::new(Arc::clone(&store), Config::parse(CONFIG, "t.toml").expect("config"), None));
    let runs = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&runs);
    let runner = move |ctx: daicho_engine::executor::RunContext, _action| {
        seen.lock().expect("lock").push(ctx.task.title.clone());
        async { succeed() }
    };
    let totals = engine.work_with(options(16), std::future::pending(), runner).await.expect("work");
    let titles = runs.lock().expect("lock").clone();
    assert_eq!(titles.len(), 65, "every task ran once");
    assert_eq!(titles.last().map(String::as_str), Some("after all"), "the dependent ran after its deps");
    assert_eq!(totals.ran, 65);
    assert!(
        totals.claim_commits <= 65 / 4 && totals.finish_commits <= 65 / 4,
        "at least 4 tasks per commit on average: {totals:?}"
    );
    let rows = store.list(ListFilter::default()).await.expect("list");
    assert!(
        rows.iter().all(|t| t.status == Status::Done && t.attempt == 1),
        "all done at their first attempt"
    );
}

/// I5, S1: with one slot, each run's end and the next claim go to the ledger together and share
/// one commit (one write of the store), so a task costs one commit, not two; each task still runs
/// once, and only after its claim is committed (its row reads `running` when the run starts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i5_s1_one_slot_records_each_end_with_the_next_claim_in_one_commit() {
    one_slot_one_commit(false).await;
}

/// I5, S1: the same with SQLite on the worker loop's own thread, as `daicho worker` runs it with
/// one slot: nothing to group writes behind, and still one commit per task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i5_s1_one_slot_on_its_own_thread_records_each_end_with_the_next_claim_in_one_commit() {
    one_slot_one_commit(true).await;
}

async fn one_slot_one_commit(inline: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = SqliteOptions { inline, ..SqliteOptions::default() };
    let store = Arc::new(SqliteStore::open(dir.path().join("ledger.db"), options).await.expect("open"));
    push(&store, (0..40).map(|i| item(&format!("job {i}"), "work")).collect()).await;
    let engine =
        Arc::new(Engine::new(Arc::clone(&store), Config::parse(CONFIG, "t.toml").expect("config"), None));
    let before = store.commits();
    let seen = Arc::clone(&store);
    let runner = move |ctx: daicho_engine::executor::RunContext, _action| {
        let store = Arc::clone(&seen);
        async move {
            let row = store.get(ctx.task.id).await.expect("read").expect("the row");
            assert_eq!(row.status, Status::Running, "S1: the claim is committed before the run");
            succeed()
        }
    };
    let options = WorkOptions { slots: 1, poll: Duration::from_secs(10), once: true };
    let totals = engine.work_with(options, std::future::pending(), runner).await.expect("work");
    assert_eq!(totals.ran, 40, "{totals:?}");
    let commits = store.commits() - before;
    assert!(commits <= 45, "{commits} commits for 40 tasks: an end and the next claim commit apart");
    let rows = store.list(ListFilter::default()).await.expect("list");
    assert!(rows.iter().all(|t| t.status == Status::Done && t.attempt == 1), "each ran once, done");
}

/// S14, S4: a run that ends while another process holds the ledger's write lock past the run's
/// lease is recorded as finished once the lock is gone, not counted lost by its own worker first
/// (which would throw the finished work away and run the task again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_an_end_held_up_by_a_lock_past_its_lease_is_recorded_not_counted_lost() {
    end_held_up_by_a_lock(false).await;
}

/// S14, S4: the same with SQLite on the worker loop's own thread (`daicho worker` with one slot):
/// a write that meets the lock waits for it on a blocking thread, and the end is still recorded,
/// not lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_an_end_held_up_by_a_lock_on_the_loop_thread_is_recorded_not_counted_lost() {
    end_held_up_by_a_lock(true).await;
}

async fn end_held_up_by_a_lock(inline: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ledger.db");
    let options =
        SqliteOptions { busy_timeout: Duration::from_millis(100), inline, ..SqliteOptions::default() };
    let store = Arc::new(SqliteStore::open(&path, options).await.expect("open"));
    push(&store, vec![item("ends under a lock", "work")]).await;
    let clock = Arc::new(daicho_engine::clock::ManualClock::new(jiff::Timestamp::now()));
    let config = format!("[policy]\nlease = \"10s\"\n{CONFIG}");
    let engine = Arc::new(
        Engine::new(Arc::clone(&store), Config::parse(&config, "t.toml").expect("config"), None)
            .with_clock(Arc::clone(&clock) as Arc<dyn daicho_engine::clock::Clock>),
    );
    let (started, go) = (Arc::new(tokio::sync::Notify::new()), Arc::new(tokio::sync::Notify::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let (signal, wait, counted) = (Arc::clone(&started), Arc::clone(&go), Arc::clone(&calls));
    let runner = move |_ctx, _action| {
        let (signal, wait) = (Arc::clone(&signal), Arc::clone(&wait));
        let first = counted.fetch_add(1, Ordering::SeqCst) == 0;
        async move {
            if first {
                signal.notify_one();
                wait.notified().await;
            }
            succeed()
        }
    };
    let worker = Arc::clone(&engine);
    let options = WorkOptions { slots: 1, poll: Duration::from_millis(50), once: true };
    let work = tokio::spawn(async move { worker.work_with(options, std::future::pending(), runner).await });
    started.notified().await;
    // Another process takes the write lock; the run ends under it and cannot be recorded.
    let lock = rusqlite::Connection::open(&path).expect("open");
    lock.execute_batch("BEGIN IMMEDIATE").expect("the write lock");
    go.notify_one();
    // Held past the worker's upkeep interval, while the run's lease runs out.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    clock.advance(jiff::SignedDuration::from_mins(1));
    lock.execute_batch("ROLLBACK").expect("unlock");
    let totals = work.await.expect("joined").expect("work");
    let rows = store.list(ListFilter::default()).await.expect("list");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the finished task ran once: {totals:?}");
    assert_eq!(totals.lost_counted, 0, "its own finished run was not counted lost: {totals:?}");
    assert!(rows.iter().all(|t| t.status == Status::Done && t.failures == 0), "recorded as done: {rows:?}");
}

/// S8, S2, S3: a paused ledger runs nothing; an external task is queued for approval, never run;
/// a failing run counts one failure per attempt and parks the task at the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_s3_s8_the_worker_keeps_the_safety_rules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ledger(&dir).await;
    push(&store, vec![item("flaky", "work"), item("tell the world", "publish")]).await;
    let engine =
        Arc::new(Engine::new(Arc::clone(&store), Config::parse(CONFIG, "t.toml").expect("config"), None));
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let failing = move |_ctx, _action| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { ExecOutcome::Failure { error: "boom".into(), timeout: false } }
    };

    store
        .set_paused(Some("maintenance".into()), Actor::Human("ana".into()), jiff::Timestamp::now())
        .await
        .expect("pause");
    let totals = engine.work_with(options(4), std::future::pending(), failing.clone()).await.expect("work");
    assert_eq!((totals.ran, calls.load(Ordering::SeqCst)), (0, 0), "paused: nothing runs");

    store.set_paused(None, Actor::Human("ana".into()), jiff::Timestamp::now()).await.expect("resume");
    let mut failed = Vec::new();
    for _ in 0..5 {
        let totals =
            engine.work_with(options(4), std::future::pending(), failing.clone()).await.expect("work");
        failed.push(totals.failed);
    }
    assert_eq!(failed, [1, 1, 1, 0, 0], "one failure per session (no self-retry), parked at the third");
    assert_eq!(calls.load(Ordering::SeqCst), 3, "the external task never ran");
    let rows = store.list(ListFilter::default()).await.expect("list");
    let flaky = rows.iter().find(|t| t.title == "flaky").expect("flaky");
    assert_eq!((flaky.status, flaky.failures), (Status::NeedsHuman, 3));
    let queue = store.approvals().await.expect("approvals");
    let publish = rows.iter().find(|t| t.title == "tell the world").expect("publish");
    assert_eq!(queue.iter().map(|q| q.id).collect::<Vec<_>>(), [publish.id], "queued once");
    assert!(queue[0].queued_by.starts_with("worker:"), "{queue:?}");
    assert_eq!(publish.status, Status::Pending);
}

/// The worker stops when asked; a run under way is abandoned (its lease will expire).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stops_when_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ledger(&dir).await;
    push(&store, vec![item("slow", "work")]).await;
    let engine =
        Arc::new(Engine::new(Arc::clone(&store), Config::parse(CONFIG, "t.toml").expect("config"), None));
    // Stopped once the run is under way: no wall-clock wait decides when.
    let started = Arc::new(tokio::sync::Notify::new());
    let slow = {
        let started = Arc::clone(&started);
        move |_ctx, _action| {
            let started = Arc::clone(&started);
            async move {
                started.notify_one();
                std::future::pending::<()>().await;
                succeed()
            }
        }
    };
    let stop = started.notified();
    let options = WorkOptions { slots: 1, poll: Duration::from_millis(50), once: false };
    let totals = tokio::time::timeout(Duration::from_secs(30), engine.work_with(options, stop, slow))
        .await
        .expect("stopped");
    assert_eq!(totals.expect("work").ran, 0);
    let rows = store.list(ListFilter::default()).await.expect("list");
    assert_eq!(rows[0].status, Status::Running, "the abandoned run is left to its lease");
}

/// R4: a sweep past its time budget starts nothing more and counts what it left as truncated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r4_a_sweep_past_its_budget_counts_the_rest_as_truncated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ledger(&dir).await;
    push(&store, (0..4).map(|i| item(&format!("job {i}"), "work")).collect()).await;
    let engine = Engine::new(Arc::clone(&store), Config::parse(CONFIG, "t.toml").expect("config"), None);
    let past = std::time::Instant::now();
    let report = engine.sweep_within(daicho_engine::Role::Auto, 10, Some(past)).await.expect("sweep");
    assert_eq!((report.ran.len(), report.truncated), (0, 4), "nothing started, all counted");
    let rows = store.list(ListFilter::default()).await.expect("list");
    assert!(rows.iter().all(|t| t.status == Status::Pending && t.attempt == 0));
}

/// A busy worker (a deep queue, every slot always refilled) still stops when asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_worker_stops_when_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ledger(&dir).await;
    push(&store, (0..5_000).map(|i| item(&format!("job {i}"), "work")).collect()).await;
    let engine =
        Arc::new(Engine::new(Arc::clone(&store), Config::parse(CONFIG, "t.toml").expect("config"), None));
    // Stopped after its 100th run has started: busy by then, whatever the machine's speed.
    let (runs, hundredth) =
        (Arc::new(std::sync::atomic::AtomicUsize::new(0)), Arc::new(tokio::sync::Notify::new()));
    let quick = {
        let (runs, hundredth) = (Arc::clone(&runs), Arc::clone(&hundredth));
        move |_ctx, _action| {
            if runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == 100 {
                hundredth.notify_one();
            }
            async { succeed() }
        }
    };
    let options = WorkOptions { slots: 2, poll: Duration::from_secs(60), once: false };
    let stop = hundredth.notified();
    let totals = tokio::time::timeout(Duration::from_secs(30), engine.work_with(options, stop, quick))
        .await
        .expect("stopped while busy")
        .expect("work");
    assert!(totals.ran > 0 && totals.ran < 5_000, "it was busy and stopped early: {totals:?}");
}

/// A run that panics ends its worker with an error that says so, with one slot (the run polled
/// by the loop's own task) as with several (each run a task of its own); nothing is recorded for
/// it, so its lease runs out and it is counted lost (S4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_panics_ends_the_worker_with_an_error() {
    for slots in [1, 2] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ledger(&dir).await;
        push(&store, vec![item("panics", "work")]).await;
        let config = Config::parse(CONFIG, "t.toml").expect("config");
        let engine = Arc::new(Engine::new(Arc::clone(&store), config, None));
        let runner = |_ctx, _action| async {
            if std::hint::black_box(true) {
                panic!("the executor broke");
            }
            succeed()
        };
        let worked = engine.work_with(options(slots), std::future::pending(), runner).await;
        let error = worked.expect_err("a panicked run ends the worker").to_string();
        assert!(error.contains("a run panicked: the executor broke"), "{slots} slot(s): {error}");
        let rows = store.list(ListFilter::default()).await.expect("list");
        assert_eq!(rows[0].status, Status::Running, "{slots} slot(s): nothing recorded: {rows:?}");
    }
}

/// S14: a run whose lease passed by the wall clock while the monotonic clock stood still (the
/// machine was suspended, the VM paused) is stopped as soon as its worker wakes, not up to a
/// third of the lease later, when its next renewal was due: the fence is read again by the
/// engine's clock at least every second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_a_run_whose_lease_passed_while_the_machine_slept_is_stopped_at_once() {
    struct Flag(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ledger(&dir).await;
    push(&store, vec![item("runs across a suspend", "work")]).await;
    let clock = Arc::new(daicho_engine::clock::ManualClock::new(jiff::Timestamp::now()));
    // The default lease: 30 minutes, renewed every 10.
    let engine = Arc::new(
        Engine::new(Arc::clone(&store), Config::parse(CONFIG, "t.toml").expect("config"), None)
            .with_clock(Arc::clone(&clock) as Arc<dyn daicho_engine::clock::Clock>),
    );
    let started = Arc::new(tokio::sync::Notify::new());
    let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (signal, flag) = (Arc::clone(&started), Arc::clone(&stopped));
    let runner = move |_ctx, _action| {
        let (signal, flag) = (Arc::clone(&signal), Flag(Arc::clone(&flag)));
        async move {
            let _stopped_when_dropped = flag;
            signal.notify_one();
            std::future::pending::<ExecOutcome>().await
        }
    };
    let worker = Arc::clone(&engine);
    let work =
        tokio::spawn(async move { worker.work_with(options(1), std::future::pending(), runner).await });
    started.notified().await;
    // The worker is waiting to renew the lease (it checked the fence as the run started) ...
    tokio::time::sleep(Duration::from_millis(300)).await;
    // ... when the machine sleeps past the lease: the wall clock moves on, tokio's clock does not.
    clock.advance(jiff::SignedDuration::from_mins(31));
    let woke = std::time::Instant::now();
    while !stopped.load(Ordering::SeqCst) {
        assert!(
            woke.elapsed() < Duration::from_secs(10),
            "the run was not stopped within seconds of the wake"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(woke.elapsed() < Duration::from_secs(5), "stopped {:?} after the wake", woke.elapsed());
    work.abort();
    let row = store.list(ListFilter::default()).await.expect("list").remove(0);
    assert_ne!(row.status, Status::Done, "its end was not recorded");
}

//! Integration tests of the PostgreSQL backend: the store contract suite on a real server.
//!
//! The server is `DAICHO_TEST_PG` (default `postgres://postgres@127.0.0.1:5432/postgres`). Each
//! test creates a database with a unique name and drops it afterwards. Without a reachable
//! server the tests fail, unless `DAICHO_SKIP_PG=1` says to skip them (CI never sets it).

use std::sync::atomic::{AtomicUsize, Ordering};

use daicho_postgres::PgStore;
use daicho_store::contract::Backend;

fn admin_url() -> String {
    std::env::var("DAICHO_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

fn skip() -> bool {
    std::env::var("DAICHO_SKIP_PG").is_ok_and(|v| v == "1")
}

/// A database of its own on the test server, dropped when the backend is dropped.
struct PgBackend {
    name: String,
    url: Option<String>,
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn with_database(url: &str, name: &str) -> String {
    let base = url.rsplit_once('/').map_or(url, |(base, _)| base);
    format!("{base}/{name}")
}

fn admin(sql: String) {
    // Runs on a thread of its own: also usable from Drop inside a tokio runtime.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let (client, connection) =
                tokio_postgres::connect(&admin_url(), tokio_postgres::NoTls).await.unwrap_or_else(|e| {
                    panic!(
                        "PostgreSQL at {} is not reachable ({e}); set DAICHO_SKIP_PG=1 to skip",
                        admin_url()
                    )
                });
            let task = tokio::spawn(connection);
            client.batch_execute(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            drop(client);
            let _ = task.await;
        });
    })
    .join()
    .expect("admin thread");
}

impl PgBackend {
    fn fresh() -> PgBackend {
        let name = format!("daicho_test_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        if skip() {
            return PgBackend { name, url: None };
        }
        admin(format!("CREATE DATABASE {name}"));
        PgBackend { url: Some(with_database(&admin_url(), &name)), name }
    }
}

impl Drop for PgBackend {
    fn drop(&mut self) {
        if self.url.is_some() {
            admin(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

impl Backend for PgBackend {
    type Store = PgStore;

    async fn open(&self) -> PgStore {
        let url = self.url.as_deref().expect("skipped backends are never opened");
        PgStore::open(url).await.expect("open the ledger")
    }
}

macro_rules! pg_contract_tests {
    () => {
        daicho_store::store_contract_tests!({
            let backend = PgBackend::fresh();
            if backend.url.is_none() {
                eprintln!("DAICHO_SKIP_PG=1: skipped");
                return;
            }
            backend
        });
    };
}

pg_contract_tests!();

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_processes_starting_together_migrate_once() {
    let backend = PgBackend::fresh();
    let Some(url) = backend.url.clone() else { return };
    let mut handles = Vec::new();
    for _ in 0..8 {
        let url = url.clone();
        handles.push(tokio::spawn(async move { PgStore::open_reporting(&url).await.expect("open").1 }));
    }
    let mut applied = Vec::new();
    for h in handles {
        applied.push(h.await.expect("task"));
    }
    assert_eq!(applied.iter().filter(|&&n| n > 0).count(), 1, "exactly one migrated: {applied:?}");
}

/// X4: a database of another program (its own tables, no daicho schema) is never made a ledger:
/// refused, and nothing is created in it.
#[tokio::test]
async fn x4_a_database_of_something_else_is_not_made_a_ledger() {
    let backend = PgBackend::fresh();
    let Some(url) = backend.url.clone() else { return };
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    let task = tokio::spawn(connection);
    client.batch_execute("CREATE TABLE invoices (n INT)").await.expect("another program's table");
    let err = PgStore::open(&url).await.expect_err("refused");
    assert!(err.to_string().contains("a PostgreSQL database of something else"), "{err}");
    let tables: Vec<String> = client
        .query("SELECT tablename::TEXT FROM pg_tables WHERE schemaname = 'public' ORDER BY 1", &[])
        .await
        .expect("tables")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(tables, ["invoices"], "nothing created in it");
    drop(client);
    let _ = task.await;
}

#[test]
fn passwords_never_appear_in_messages() {
    assert_eq!(
        daicho_postgres::redact("postgres://daicho:s3cret@db:5432/ledger"),
        "postgres://daicho:***@db:5432/ledger"
    );
    assert_eq!(daicho_postgres::redact("postgres://daicho@db/ledger"), "postgres://daicho@db/ledger");
}

/// S14: errors say what the server said (a missing database, a wrong user), and a server that
/// cannot be reached is a temporary error, not a hang.
#[tokio::test]
async fn s14_errors_carry_the_servers_message_and_unreachable_is_temporary() {
    if skip() {
        return;
    }
    let missing = with_database(&admin_url(), &format!("daicho_missing_{}", std::process::id()));
    let err = PgStore::open(&missing).await.expect_err("no such database");
    let text = err.to_string();
    assert!(text.contains("3D000") && text.contains("does not exist"), "{text}");
    assert!(!err.is_retryable(), "a missing database is not temporary: {text}");
    let wrong_user = admin_url().replacen("postgres@", "daicho_no_such_role@", 1);
    let err = PgStore::open(&wrong_user).await.expect_err("no such role");
    assert!(err.to_string().contains("28000") || err.to_string().contains("28P01"), "{err}");
    let closed = "postgres://postgres@127.0.0.1:9/postgres?connect_timeout=2";
    let err = PgStore::open(closed).await.expect_err("nothing listens on port 9");
    assert!(err.is_retryable(), "an unreachable server is temporary: {err}");
    assert!(
        err.to_string().starts_with("database unavailable (temporary; try again): cannot connect"),
        "{err}"
    );
    let with_password = "postgres://postgres:s3cret@127.0.0.1:9/postgres?connect_timeout=2";
    let err = PgStore::open(with_password).await.expect_err("unreachable");
    assert!(!err.to_string().contains("s3cret"), "{err}");
}

/// The model-based test of the ledger (`daicho_store::model`), on PostgreSQL: a fresh database
/// per seed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_based_walks_keep_every_ledger_invariant() {
    if skip() {
        return;
    }
    daicho_store::model::model_based_walks_keep_every_ledger_invariant(16, PgBackend::fresh).await;
}

/// F2: an old-form purge entry (written before the record was versioned and before newer `Task`
/// fields) is restored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f2_an_old_purge_entry_is_restored() {
    use daicho_store::Store;
    use daicho_store::contract::{OLD_PURGE_ENTRY, f2_an_old_purge_entry_is_restored, old_purge_setup};
    let backend = PgBackend::fresh();
    let Some(url) = backend.url.clone() else { return };
    let store = backend.open().await;
    store.upsert(old_purge_setup()).await.expect("setup");
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    let task = tokio::spawn(connection);
    client
        .execute(
            "INSERT INTO journal (at, task, task_id, actor, kind, before, after) \
             VALUES (0, 42, 'T-0042', 'human:ana', 'purge', $1, '{}')",
            &[&OLD_PURGE_ENTRY],
        )
        .await
        .expect("an old entry");
    drop(client);
    let _ = task.await;
    f2_an_old_purge_entry_is_restored(&store).await;
}

/// I3: a ledger of schema version 5 (before the ready count was kept) is counted once when it is
/// upgraded (the contract's walks check that writes keep it counted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i3_an_upgraded_ledger_counts_its_ready_rows_once_and_keeps_them_counted() {
    use daicho_store::Store as _;

    let backend = PgBackend::fresh();
    let Some(url) = backend.url.clone() else { return };
    let store = PgStore::open(&url).await.expect("open");
    let later = jiff::Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_hours(1);
    let batch = daicho_store::contract::thirty_rows_some_waiting(later);
    store.upsert(batch).await.expect("upsert");
    drop(store);
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    let task = tokio::spawn(connection);
    client
        .batch_execute(
            "DROP TRIGGER ready_count_insert ON task; DROP TRIGGER ready_count_update ON task; \
             DROP TRIGGER ready_count_delete ON task; DROP FUNCTION daicho_ready_count(); \
             DROP INDEX task_not_due; DROP TABLE ready_count; UPDATE daicho_schema SET version = 5;",
        )
        .await
        .expect("back to schema 5");
    let store = PgStore::open(&url).await.expect("open and upgrade");
    let at = jiff::Timestamp::UNIX_EPOCH;
    let set = store.ready(at, 100).await.expect("ready");
    assert_eq!((set.total, set.tasks.len()), (16, 16), "20 without deps, 4 of them not due");
    assert_eq!(store.ready(later, 100).await.expect("ready").total, 20, "the four are due an hour later");
    let shards: i64 = client.query_one("SELECT count(*) FROM ready_count", &[]).await.expect("shards").get(0);
    assert_eq!(shards, 64);
    drop(client);
    let _ = task.await;
}

/// S9, I3: a ledger of schema version 7 (PostgreSQL's numbering; before runs were counted per
/// action) counts its run
/// history once when it is upgraded, and keeps it counted after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_i3_an_upgraded_ledger_counts_its_runs_once_and_keeps_them_counted() {
    let back = "DROP TABLE run_count; DROP INDEX run_running; UPDATE daicho_schema SET version = 7;";
    let Some(all) = stats_after_an_upgrade(back, "7").await else { return };
    assert_eq!(all.iter().map(|s| s.runs).sum::<u64>(), 4, "{all:?}");
}

/// S9, I3, I5: a ledger of schema version 8 (runs counted by triggers, the runs under way among
/// them) is counted afresh from its run records when it is upgraded: whatever its counts said,
/// they end equal to a pass over the runs, with the run under way counted as running once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_i3_i5_a_ledger_whose_runs_triggers_counted_is_counted_afresh_on_upgrade() {
    let back = "UPDATE run_count SET runs = runs + 1000, running = 7; DROP INDEX run_running; \
                UPDATE daicho_schema SET version = 8;";
    let Some(all) = stats_after_an_upgrade(back, "8").await else { return };
    let totals = all.iter().fold((0, 0), |(runs, running), s| (runs + s.runs, running + s.running));
    assert_eq!(totals, (4, 1), "{all:?}");
}

/// S14, S9: a ledger of schema version 9, where a person's move of a running row left the run's
/// record `running` for good, is upgraded with that record closed as interrupted and counted as
/// ended; a run under way stays running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_s9_an_upgraded_ledger_closes_the_run_records_a_persons_move_left_running() {
    let backend = PgBackend::fresh();
    let Some(url) = backend.url.clone() else { return };
    let store = PgStore::open(&url).await.expect("open");
    daicho_store::contract::some_runs(&store, "before").await;
    daicho_store::contract::some_runs(&store, "live").await;
    drop(store);
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    let task = tokio::spawn(connection);
    let num = daicho_store::contract::LEFT_RUNNING.num();
    client
        .batch_execute(&format!(
            "UPDATE task SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL WHERE num = {num}; \
             UPDATE daicho_schema SET version = 9;"
        ))
        .await
        .expect("back to schema 9");
    let store = PgStore::open(&url).await.expect("open and upgrade");
    daicho_store::contract::check_a_left_running_record_is_closed(&store).await;
    drop(client);
    let _ = task.await;
}

/// Runs some runs in a fresh ledger, takes it back to an older schema with `back`, opens it (which
/// upgrades it) and returns its stats since the first run; checks that the kept counts equal a
/// pass over the runs then and after more runs. `None` without PostgreSQL (opted out).
async fn stats_after_an_upgrade(back: &str, version: &str) -> Option<Vec<daicho_store::ActionStats>> {
    let backend = PgBackend::fresh();
    let url = backend.url.clone()?;
    let store = PgStore::open(&url).await.expect("open");
    daicho_store::contract::some_runs(&store, "before").await;
    drop(store);
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    let task = tokio::spawn(connection);
    client.batch_execute(back).await.unwrap_or_else(|e| panic!("back to schema {version}: {e}"));
    let store = PgStore::open(&url).await.expect("open and upgrade");
    daicho_store::contract::check_stats_agree(&store, "the upgrade").await;
    let all = daicho_store::Store::stats(&store, jiff::Timestamp::UNIX_EPOCH).await.expect("stats");
    daicho_store::contract::some_runs(&store, "after").await;
    daicho_store::contract::check_stats_agree(&store, "runs after the upgrade").await;
    drop(client);
    let _ = task.await;
    Some(all)
}

/// I3, I5: a run end finds its run record by its key, never by reading the run table through: in
/// a fresh ledger the table grows with every claim, faster than autovacuum analyzes it, and a
/// join planned from its stale size read every record at every run end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i3_i5_a_run_end_reads_its_run_record_by_key_in_a_fresh_ledger() {
    use std::time::{Duration, Instant};

    let backend = PgBackend::fresh();
    let Some(url) = backend.url.clone() else { return };
    let store = PgStore::open(&url).await.expect("open");
    let n = 300;
    daicho_store::contract::runs_one_by_one(&store, n).await;
    // The store's sessions end, and with them their statistics are reported.
    drop(store);
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    let task = tokio::spawn(connection);
    let started = Instant::now();
    let (scans, updates) = loop {
        let row = client
            .query_one("SELECT seq_scan, n_tup_upd FROM pg_stat_user_tables WHERE relname = 'run'", &[])
            .await
            .expect("statistics");
        let (scans, updates): (i64, i64) = (row.get(0), row.get(1));
        if updates >= n as i64 || started.elapsed() > Duration::from_secs(30) {
            break (scans, updates);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(updates, n as i64, "every run end updated its record (statistics reported)");
    assert!(scans < 10, "{scans} scans of the whole run table for {n} run ends");
    drop(client);
    let _ = task.await;
}

/// I5: a run end tells idle workers (LISTEN/NOTIFY) only when it makes work ready. PostgreSQL
/// serializes the commits of every transaction that notifies, so a notice on every end kept
/// concurrent workers' commits from sharing WAL flushes; a worker that was not told still finds
/// the work at its next poll, so a missing notice costs latency and a needless one throughput.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i5_a_run_end_wakes_idle_workers_only_when_it_makes_work_ready() {
    use daicho_store::Store as _;
    use std::time::{Duration, Instant};

    let backend = PgBackend::fresh();
    if backend.url.is_none() {
        return;
    }
    let (store, idle) = (backend.open().await, backend.open().await);
    let ends = daicho_store::contract::i5_run_ends_and_whether_they_make_work_ready(&store).await;
    // The first wait starts the idle store's listener; nothing is pending for it.
    idle.wait_for_work(Duration::from_millis(100)).await;
    for (what, end, wakes) in ends {
        let wait = Duration::from_secs(if wakes { 20 } else { 2 });
        let started = Instant::now();
        let ((), recorded) = tokio::join!(idle.wait_for_work(wait), async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            store.finish(end).await
        });
        recorded.expect("finish");
        let waited = started.elapsed();
        if wakes {
            assert!(waited < Duration::from_secs(10), "{what}: the idle worker was not woken ({waited:?})");
        } else {
            assert!(waited >= Duration::from_millis(1900), "{what}: the idle worker was woken ({waited:?})");
        }
    }
}

/// I5, S1: a look reads the head with its rows locked, passing over rows another look holds, so
/// concurrent workers read different rows and none loses the row its pick asked for (a lost
/// claim was a turn and a commit for nothing: with 16 workers, over a third of all turns).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i5_s1_a_look_passes_over_the_rows_another_look_holds() {
    use daicho_core::policy::{ActionSpec, ClaimScope, Gate};
    use daicho_core::{Actor, Item, Tags, TaskId};
    use daicho_store::{Batch, ClaimOutcome, Store as _, UnknownDeps};
    use std::sync::{Arc, Mutex};

    let backend = PgBackend::fresh();
    let Some(url) = backend.url.clone() else { return };
    let store = backend.open().await;
    let now = jiff::Timestamp::from_second(1_800_000_000).expect("instant");
    let items: Vec<Item> = (0..3)
        .map(|i| {
            let mut it = Item::new(&format!("held {i}"), "pg");
            it.action = "act".into();
            it.tags = Tags::parse_list("ai");
            it
        })
        .collect();
    let actor = Actor::Push("pg".into());
    let batch =
        Batch { items: items.into(), actor, now, file: "pg".into(), unknown_deps: UnknownDeps::Refuse };
    let ids = store.upsert(batch).await.expect("upsert").added;
    assert_eq!(ids.len(), 3);
    // Another look holds the first row in run order, its transaction still open.
    let (mut client, connection) =
        tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    let task = tokio::spawn(connection);
    let held = client.transaction().await.expect("begin");
    let first: i64 = held
        .query_one("SELECT num FROM task ORDER BY priority DESC, num LIMIT 1 FOR UPDATE", &[])
        .await
        .expect("lock")
        .get(0);
    assert_eq!(TaskId::new(first as u64), ids[0]);
    let specs = [ActionSpec { name: "act".into(), auto: true, ..ActionSpec::default() }];
    let scope = ClaimScope::worker(&Gate { actions: &specs, ..Gate::default() }, None, None);
    let shown = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&shown);
    let pick = Box::new(move |window: &[daicho_core::Task]| {
        seen.lock().expect("seen").extend(window.iter().map(|t| t.id));
        window.iter().map(|t| claim_request(t.id, now)).collect()
    });
    // A window of one row, as a one-slot worker reads it.
    let next = store.claim_next(now, scope, 1, 100, pick).await.expect("claim_next").expect("a look");
    match next.outcome {
        ClaimOutcome::Claimed(task) => assert_eq!(task.id, ids[1], "the next row in run order"),
        other => panic!("the row behind the held one is claimed, not {other:?}"),
    }
    assert_eq!(shown.lock().expect("seen").clone(), [ids[1]], "the held row is not shown to the pick");
    held.rollback().await.expect("rollback");
    drop(client);
    let _ = task.await;
}

/// I5, D1: a run end takes the write lock (shared) before it reads or writes its row: while a
/// write that changes deps holds it exclusively (an upsert, an edit: here another session, with
/// the key of daicho's write lock), the end waits on it, and it records the end once the lock is
/// let go. (Whether other rows wait on the ended one is read under that lock and must hold until
/// the end commits.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i5_d1_a_run_end_waits_for_a_write_that_holds_the_write_lock() {
    use daicho_core::{Item, Status};
    use daicho_store::{ClaimOutcome, Store as _};
    use std::time::Duration;

    let backend = PgBackend::fresh();
    let Some(url) = backend.url.clone() else { return };
    let store = std::sync::Arc::new(backend.open().await);
    let now = jiff::Timestamp::from_second(1_800_000_000).expect("instant");
    let batch = pushed(vec![Item::new("ends under the lock", "pg")], now);
    let id = store.upsert(batch).await.expect("upsert").added[0];
    let ClaimOutcome::Claimed(task) = store.claim(claim_request(id, now)).await.expect("claim") else {
        panic!("claimed")
    };
    let (mut client, connection) =
        tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    let conn = tokio::spawn(connection);
    let writer = client.transaction().await.expect("begin");
    writer.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK]).await.expect("the write lock");
    let ending = std::sync::Arc::clone(&store);
    let end = tokio::spawn(async move { ending.finish(done(&task, now)).await });
    // The end is seen waiting for the advisory lock, and still unfinished.
    wait_until_one(&writer, WAITING_FOR_THE_WRITE_LOCK, &end, "the run end", "the write lock").await;
    let row: String = writer.query_one("SELECT status FROM task", &[]).await.expect("status").get(0);
    assert_eq!(row, "running", "nothing of the end is written while it waits");
    writer.commit().await.expect("let go");
    let ended =
        tokio::time::timeout(Duration::from_secs(20), end).await.expect("the end goes on").expect("task");
    assert_eq!(ended.expect("finish").status, Status::Done);
    drop(client);
    let _ = conn.await;
}

/// D1, I5: a run end that waits for the write lock sees what the write that held it committed:
/// here a dependent added to the running row (as an edit of deps does, under the write lock), which
/// the end must release. Once through `finish` (a transaction begun before the lock is asked
/// for), once through a one-slot turn whose end is of a row its look claimed (planned on the row
/// as claimed, its BEGIN asking for the lock). An end whose snapshot was taken before its wait
/// would find nobody waiting on its row and leave the dependent blocked for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_i5_a_run_end_that_waited_for_the_write_lock_releases_a_dependent_added_meanwhile() {
    use daicho_core::policy::{ActionSpec, ClaimScope, Gate};
    use daicho_core::{Item, Tags, Task};
    use daicho_store::{ClaimOutcome, Pick, Store as _};

    let backend = PgBackend::fresh();
    let Some(url) = backend.url.clone() else { return };
    let store = std::sync::Arc::new(backend.open().await);
    let now = jiff::Timestamp::from_second(1_800_000_000).expect("instant");
    let items: Vec<Item> = ["a", "b", "c", "d"]
        .iter()
        .map(|t| {
            let mut item = Item::new(t, "pg");
            item.action = "act".into();
            item.tags = Tags::parse_list("ai");
            item
        })
        .collect();
    let batch = pushed(items, now);
    let ids = store.upsert(batch).await.expect("upsert").added;
    let specs = [ActionSpec { name: "act".into(), auto: true, ..ActionSpec::default() }];
    let scope = ClaimScope::worker(&Gate { actions: &specs, ..Gate::default() }, None, None);
    let pick = move || -> Pick {
        Box::new(move |head: &[Task]| head.iter().map(|t| claim_request(t.id, now)).collect())
    };
    let finish = |task: &Task| done(task, now);
    let (mut client, connection) =
        tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    let conn = tokio::spawn(connection);
    // `dependent` gets `running` as a dep from a writer holding the write lock, while the end
    // (spawned by `end` once the writer holds it) waits for it; the end goes on once the writer
    // commits.
    let mut add_dep_while_it_waits =
        async |running: &Task, dependent: daicho_core::TaskId, end: &dyn Fn() -> _| {
            let writer = client.transaction().await.expect("begin");
            writer.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK]).await.expect("the write lock");
            let end: tokio::task::JoinHandle<Result<Option<daicho_core::TaskId>, daicho_store::StoreError>> =
                end();
            wait_until_one(&writer, WAITING_FOR_THE_WRITE_LOCK, &end, "the run end", "the write lock").await;
            let (task, dep) = (dependent.num() as i64, running.id.num() as i64);
            writer
                .execute("INSERT INTO task_dep (task, dep) VALUES ($1, $2)", &[&task, &dep])
                .await
                .expect("the edge");
            writer
                .execute(
                    "UPDATE task SET unmet_deps = unmet_deps + 1, deps = $2 WHERE num = $1",
                    &[&task, &running.id.to_string()],
                )
                .await
                .expect("the dep");
            writer.commit().await.expect("let go");
            tokio::time::timeout(std::time::Duration::from_secs(20), end)
                .await
                .expect("the end goes on")
                .expect("task")
        };

    // Through `finish`: a claimed, b gets it as a dep while a's end waits; a's end releases b.
    let ClaimOutcome::Claimed(a) = store.claim(claim_request(ids[0], now)).await.expect("claim") else {
        panic!("a claimed")
    };
    let end = || {
        let (ending, finish) = (std::sync::Arc::clone(&store), finish(&a));
        tokio::spawn(async move { ending.finish(finish).await.map(|_| None) })
    };
    add_dep_while_it_waits(&a, ids[1], &end).await.expect("a's end");
    let ready = store.ready(now, 10).await.expect("ready");
    assert!(ready.tasks.iter().any(|t| t.id == ids[1]), "b, released by a's end: {:?}", ready.tasks);

    // Through a one-slot turn: b claimed by a turn's look, c gets it as a dep while the next
    // turn's end of b waits; that end releases c, and the turn claims it (ahead of d).
    let next = store.claim_next(now, scope.clone(), 1, 1, pick()).await.expect("a turn");
    let b = match next.map(|n| n.outcome) {
        Some(ClaimOutcome::Claimed(task)) => *task,
        other => panic!("b claimed: {other:?}"),
    };
    assert_eq!(b.id, ids[1]);
    let end = || {
        let turning = std::sync::Arc::clone(&store);
        let (finishes, scope, pick) = (vec![finish(&b)], scope.clone(), pick());
        tokio::spawn(async move {
            let (ends, next) = turning.finish_and_claim_next(finishes, now, scope, 1, 1, pick).await;
            ends.expect("the end")[0].as_ref().expect("recorded");
            match next.expect("the claim").map(|n| n.outcome) {
                Some(ClaimOutcome::Claimed(task)) => Ok::<_, daicho_store::StoreError>(Some(task.id)),
                other => panic!("a claim: {other:?}"),
            }
        })
    };
    let claimed = add_dep_while_it_waits(&b, ids[2], &end).await.expect("b's end");
    assert_eq!(claimed, Some(ids[2]), "c, released by b's end, ahead of d");
    drop(client);
    let _ = conn.await;
}

/// S14, I5: a worker's turn dropped while its writes wait (a timeout, a worker stopping) is never
/// committed afterwards: its connection, perhaps still inside the transaction with the writes
/// queued, is not handed to the next caller, whose BEGIN would then be a no-op and whose COMMIT
/// would commit the abandoned end. Here the turn's end waits on the row lock of a dependent it
/// releases, held by another session; the turn is dropped, the lock let go, the store used again,
/// and the row is still the running claim, which its worker can then end once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_i5_a_turn_dropped_while_it_waits_is_never_committed_by_the_next_caller() {
    use daicho_core::policy::{ActionSpec, ClaimScope, FailurePolicy, Gate};
    use daicho_core::{Item, Status};
    use daicho_store::{ClaimOutcome, Finish, RunEnd, Store as _};

    let backend = PgBackend::fresh();
    let Some(url) = backend.url.clone() else { return };
    let store = std::sync::Arc::new(backend.open().await);
    let now = jiff::Timestamp::from_second(1_800_000_000).expect("instant");
    let mut first = Item::new("ends, then is dropped", "pg");
    first.ref_id = Some("a".into());
    let mut waiting = Item::new("waits for the first", "pg");
    waiting.deps = vec!["a".into()];
    let batch = pushed(vec![first, waiting], now);
    let added = store.upsert(batch).await.expect("upsert").added;
    let (a, dependent) = (added[0], added[1]);
    let ClaimOutcome::Claimed(task) = store.claim(claim_request(a, now)).await.expect("claim") else {
        panic!("claimed")
    };
    let finish = Finish {
        id: a,
        attempt: task.attempt,
        worker: "w".into(),
        now,
        end: RunEnd::Success { result: "ok".into(), status: Status::Done, tokens_in: None, tokens_out: None },
        policy: FailurePolicy::default(),
    };
    // Another session holds the dependent's row, which the end's release of it must lock.
    let (mut client, connection) =
        tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    let conn = tokio::spawn(connection);
    let holder = client.transaction().await.expect("begin");
    holder
        .execute("SELECT 1 FROM task WHERE num = $1 FOR UPDATE", &[&(dependent.num() as i64)])
        .await
        .expect("hold the dependent");
    let turning = std::sync::Arc::clone(&store);
    let ending = finish.clone();
    let turn = tokio::spawn(async move {
        let specs = [ActionSpec { name: "act".into(), auto: true, ..ActionSpec::default() }];
        let scope = ClaimScope::worker(&Gate { actions: &specs, ..Gate::default() }, None, None);
        let pick = Box::new(move |window: &[daicho_core::Task]| {
            window.iter().map(|t| claim_request(t.id, now)).collect()
        });
        turning.finish_and_claim_next(vec![ending], now, scope, 1, 100, pick).await
    });
    // The turn is seen waiting for the row lock, its end written but not committed; it is dropped.
    let blocked = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'";
    wait_until_one(&holder, blocked, &turn, "the turn", "the row lock").await;
    turn.abort();
    assert!(turn.await.expect_err("dropped").is_cancelled());
    holder.commit().await.expect("let go");
    // The store used again, on the connections its pool hands out.
    for _ in 0..3 {
        let row = store.get(a).await.expect("get").expect("the row");
        assert_eq!(row.status, Status::Running, "the dropped turn's end was not committed");
        store.heartbeat(a, task.attempt, "w", now).await.expect("the claim is still the worker's");
    }
    let entries = store.journal(a).await.expect("journal");
    assert!(
        entries.iter().all(|e| e.kind != daicho_store::JournalKind::Finish),
        "no end of the dropped turn in the journal: {entries:?}"
    );
    let ended = store.finish(finish).await.expect("the end is recorded once");
    assert_eq!(ended.status, Status::Done);
    drop(client);
    let _ = conn.await;
}

/// Waits until `count` (run by `watcher`, a session of the test's own database: CI shares the
/// server) counts one session waiting, while `task` (`who`) must not finish first; fails after
/// 20 s. `lock` names what it waits for.
async fn wait_until_one<T>(
    watcher: &tokio_postgres::Transaction<'_>,
    count: &str,
    task: &tokio::task::JoinHandle<T>,
    who: &str,
    lock: &str,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let waiting: i64 = watcher.query_one(count, &[]).await.expect("the count of waiting sessions").get(0);
        if waiting == 1 {
            return;
        }
        assert!(!task.is_finished(), "{who} went ahead of {lock}");
        assert!(std::time::Instant::now() < deadline, "{who} was never seen waiting for {lock}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// `items` pushed by source `pg` at `now`.
fn pushed(items: Vec<daicho_core::Item>, now: jiff::Timestamp) -> daicho_store::Batch {
    daicho_store::Batch {
        items: items.into(),
        actor: daicho_core::Actor::Push("pg".into()),
        now,
        file: "pg".into(),
        unknown_deps: daicho_store::UnknownDeps::Refuse,
    }
}

/// Worker `w`'s end of `task`'s run at `now`: a success, `done`.
fn done(task: &daicho_core::Task, now: jiff::Timestamp) -> daicho_store::Finish {
    daicho_store::Finish {
        id: task.id,
        attempt: task.attempt,
        worker: "w".into(),
        now,
        end: daicho_store::RunEnd::Success {
            result: "ok".into(),
            status: daicho_core::Status::Done,
            tokens_in: None,
            tokens_out: None,
        },
        policy: daicho_core::policy::FailurePolicy::default(),
    }
}

/// The sessions of this database waiting for the write lock (shared): an end, here.
const WAITING_FOR_THE_WRITE_LOCK: &str = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
     AND NOT granted AND mode = 'ShareLock' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())";

/// daicho's write lock: "daicho" in ASCII, then 1.
const WRITE_LOCK: i64 = 0x6461_6963_686f_0001;

/// Worker `w`'s request for `id` under action `act`, with a 30-minute lease.
fn claim_request(id: daicho_core::TaskId, now: jiff::Timestamp) -> daicho_store::ClaimRequest {
    daicho_store::ClaimRequest {
        id,
        worker: "w".into(),
        action: "act".into(),
        now,
        lease: jiff::SignedDuration::from_mins(30),
        require_run: false,
        require_approval: false,
    }
}

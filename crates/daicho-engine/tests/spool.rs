//! The run-end spool on a real SQLite ledger (S14, X2): what a run found outlives the daicho
//! that ran it, whether it died before recording the run's end or between that and the push.

use std::sync::Arc;

use daicho_core::{Actor, Item, Status, Tags};
use daicho_engine::remote::{ClaimFilter, NextClaim};
use daicho_engine::spool::{Spool, SpooledEnd, SpooledOutcome};
use daicho_engine::{Config, Engine};
use daicho_sqlite::{SqliteOptions, SqliteStore};
use daicho_store::{Batch, Finish, ListFilter, RunEnd, Store, UnknownDeps};

const CONFIG: &str = r#"
[[action]]
name = "work"
kind = "command"
command = ["true"]
auto = true
on_success = "done"
"#;

fn config() -> Config {
    Config::parse(CONFIG, "t.toml").expect("config")
}

/// A worker name of this machine whose process is gone.
fn dead_worker() -> String {
    let mut child = std::process::Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    child.wait().expect("wait");
    format!("{}:{pid}", daicho_engine::host_name())
}

/// A ledger with one task claimed by a worker that has died; its engine and spool.
async fn claimed_by_the_dead(
    dir: &tempfile::TempDir,
) -> (Arc<SqliteStore>, Arc<Engine<SqliteStore>>, Spool, String, daicho_core::Task) {
    claimed_by(dir, dead_worker()).await
}

/// A ledger with one task claimed by `worker`; its engine and spool.
async fn claimed_by(
    dir: &tempfile::TempDir,
    worker: String,
) -> (Arc<SqliteStore>, Arc<Engine<SqliteStore>>, Spool, String, daicho_core::Task) {
    let store = Arc::new(
        SqliteStore::open(dir.path().join("ledger.db"), SqliteOptions::default()).await.expect("open"),
    );
    let mut item = Item::new("survey the code", "test");
    item.action = "work".into();
    item.tags = Tags::parse_list("ai");
    let batch = Batch {
        items: vec![item].into(),
        actor: Actor::System,
        now: jiff::Timestamp::now(),
        file: "test".into(),
        unknown_deps: UnknownDeps::Refuse,
    };
    store.upsert(batch).await.expect("upsert");
    let spool = Spool::new(dir.path().join("spool"));
    let engine = Arc::new(Engine::new(Arc::clone(&store), config(), None).with_spool(spool.clone()));
    let filter = ClaimFilter { worker: worker.clone(), project: None, action: None };
    let NextClaim::Claimed(claim) = engine.claim_next(&filter).await.expect("claim") else {
        panic!("the task is claimed")
    };
    (store, engine, spool, worker, claim.task)
}

/// The end its run had, with one found task, as the dead worker spooled it.
fn spooled(task: &daicho_core::Task, worker: &str) -> SpooledEnd {
    SpooledEnd {
        task: task.id.to_string(),
        attempt: task.attempt,
        worker: worker.to_owned(),
        action: "work".into(),
        end: SpooledOutcome::Success {
            result: "surveyed".into(),
            status: Status::Done,
            tokens_in: None,
            tokens_out: None,
            found: vec![Item::new("fix the parser found on the way", "work")],
            push_error: None,
        },
    }
}

/// Records the spooled end in the ledger, as its worker's own record does.
async fn record(store: &SqliteStore, task: &daicho_core::Task, worker: &str) {
    let end = RunEnd::Success {
        result: "surveyed".into(),
        status: Status::Done,
        tokens_in: None,
        tokens_out: None,
    };
    let finish = Finish {
        id: task.id,
        attempt: task.attempt,
        worker: worker.to_owned(),
        now: jiff::Timestamp::now(),
        end,
        policy: config().policy.failures,
    };
    store.finish(finish).await.expect("recorded by its worker");
}

/// Makes the spooled end of `task`'s `attempt` look as if it had waited past `SYNC_AFTER`.
fn aged_past_sync_after(spool: &Spool, task: daicho_core::TaskId, attempt: u32) {
    let file = std::fs::File::options()
        .write(true)
        .open(spool.dir().join(format!("{task}-{attempt}.json")))
        .expect("the spooled end");
    file.set_modified(std::time::SystemTime::now() - daicho_engine::spool::SYNC_AFTER * 2)
        .expect("set its time");
}

async fn titles(store: &SqliteStore) -> Vec<String> {
    let mut titles: Vec<String> =
        store.list(ListFilter::default()).await.expect("list").into_iter().map(|t| t.title).collect();
    titles.sort();
    titles
}

/// S14, X2: a run that ended, was spooled and never recorded (its daicho died) is recorded by
/// the next daicho, and the tasks it found are pushed with it.
#[tokio::test]
async fn x2_s14_a_recovered_end_pushes_what_its_run_found() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, engine, spool, worker, task) = claimed_by_the_dead(&dir).await;
    spool.put(task.id, &spooled(&task, &worker)).expect("spool");

    assert_eq!(engine.recover_spooled().await.expect("recover"), 1);
    let row = store.get(task.id).await.expect("get").expect("row");
    assert_eq!((row.status, row.result.as_str()), (Status::Done, "surveyed"));
    assert_eq!(titles(&store).await, ["fix the parser found on the way", "survey the code"]);
    assert!(spool.list().0.is_empty(), "the spool is emptied once the push is made");
}

/// X2, S14: a daicho that recorded a run's end and died before pushing what the run found
/// leaves the push to the next daicho on the machine, which makes it once.
#[tokio::test]
async fn x2_s14_found_tasks_of_a_recorded_end_are_pushed_after_their_worker_died() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, engine, spool, worker, task) = claimed_by_the_dead(&dir).await;
    spool.put(task.id, &spooled(&task, &worker)).expect("spool");
    // The dead worker recorded the end; the push never came.
    record(&store, &task, &worker).await;
    assert_eq!(titles(&store).await, ["survey the code"]);

    assert_eq!(engine.recover_spooled().await.expect("recover"), 0, "the end was recorded already");
    assert_eq!(titles(&store).await, ["fix the parser found on the way", "survey the code"]);
    assert!(spool.list().0.is_empty());
    // A second copy of the same end (a push made twice) adds nothing twice.
    spool.put(task.id, &spooled(&task, &worker)).expect("spool again");
    engine.recover_spooled().await.expect("recover again");
    assert_eq!(titles(&store).await, ["fix the parser found on the way", "survey the code"]);
}

/// S14: an end no longer current (the row was given to a person since) is dropped with what its
/// run found: the ledger does not hold that run's end, so it pushes nothing for it.
#[tokio::test]
async fn s14_a_stale_spooled_end_pushes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, engine, spool, worker, task) = claimed_by_the_dead(&dir).await;
    spool.put(task.id, &spooled(&task, &worker)).expect("spool");
    // The lease was counted lost, and the task parked for a person meanwhile.
    let policy = config().policy.failures;
    let later = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(48);
    store.expire_leases(later, policy).await.expect("expire");
    assert_ne!(store.get(task.id).await.expect("get").expect("row").status, Status::Running);

    assert_eq!(engine.recover_spooled().await.expect("recover"), 0);
    assert_eq!(titles(&store).await, ["survey the code"], "nothing pushed for a stale end");
    assert!(spool.list().0.is_empty(), "the stale end is dropped");
}

/// X2: this engine's own end whose found tasks met a store fault after the end was recorded is
/// pushed by its next look at the spool; an own end not yet recorded is left to its record.
#[tokio::test]
async fn x2_a_workers_own_recorded_end_gets_its_push_and_an_unrecorded_one_is_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _, spool, worker, task) = claimed_by_the_dead(&dir).await;
    // The engine of the worker that claimed it, alive.
    let engine =
        Engine::new(Arc::clone(&store), config(), None).with_spool(spool.clone()).with_worker(&worker);
    spool.put(task.id, &spooled(&task, &worker)).expect("spool");
    assert_eq!(engine.recover_spooled().await.expect("recover"), 0);
    assert_eq!(
        store.get(task.id).await.expect("get").expect("row").status,
        Status::Running,
        "left to its record"
    );
    assert_eq!(spool.list().0.len(), 1, "kept until its record");
    assert_eq!(titles(&store).await, ["survey the code"]);

    record(&store, &task, &worker).await; // then the push met a fault
    assert_eq!(engine.recover_spooled().await.expect("recover"), 0);
    assert_eq!(titles(&store).await, ["fix the parser found on the way", "survey the code"]);
    assert!(spool.list().0.is_empty());
}

/// S14: a worker that is running looks at the spool on its upkeep, not only when it starts:
/// an end another daicho left there meanwhile (it died) is recorded, with what its run found,
/// long before that run's lease could run out and count the finished work lost.
#[tokio::test]
async fn s14_a_running_worker_records_an_end_left_in_the_spool_meanwhile() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _, spool, dead, task) = claimed_by_the_dead(&dir).await;
    let engine = Arc::new(Engine::new(Arc::clone(&store), config(), None).with_spool(spool.clone()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let options =
        daicho_engine::WorkOptions { slots: 1, poll: std::time::Duration::from_millis(50), once: false };
    let worker = tokio::spawn({
        let engine = Arc::clone(&engine);
        async move {
            let runner = |_, _| async { panic!("nothing is ready to run") };
            engine.work_with(options, async { stopped.await.unwrap_or(()) }, runner).await
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    spool.put(task.id, &spooled(&task, &dead)).expect("spooled by a daicho that then died");
    let started = std::time::Instant::now();
    while store.get(task.id).await.expect("get").expect("row").status != Status::Done {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "the end was not recorded");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(titles(&store).await, ["fix the parser found on the way", "survey the code"]);
    stop.send(()).expect("stop");
    let totals = worker.await.expect("joined").expect("work");
    assert_eq!(totals.recovered, 1);
}

/// A living daicho of this machine (a process whose command line names daicho), killed when
/// dropped.
struct Living(std::process::Child);

impl Drop for Living {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A task claimed by a living worker of this machine and that run's end in the spool, just
/// written: a look at the spool leaves it to its worker.
async fn young_end_of_a_living_worker(
    dir: &tempfile::TempDir,
) -> (Living, Arc<SqliteStore>, Arc<Engine<SqliteStore>>, Spool, daicho_core::Task) {
    let living = Living(
        std::process::Command::new("sh").args(["-c", "sleep 60", "daicho-worker"]).spawn().expect("spawn sh"),
    );
    let worker = format!("{}:{}", daicho_engine::host_name(), living.0.id());
    let (store, engine, spool, worker, task) = claimed_by(dir, worker).await;
    spool.put(task.id, &spooled(&task, &worker)).expect("spool");
    assert_eq!(engine.recover_spooled().await.expect("recover"), 0, "young: left to its worker");
    assert_eq!(store.get(task.id).await.expect("get").expect("row").status, Status::Running);
    (living, store, engine, spool, task)
}

/// S4, S14: a young end of a living worker whose lease ran out meanwhile (it ran out while the
/// ledger was locked, and the run ended just before the lock went) is recorded by the next look
/// at the spool, not left to the count of lost runs that follows it.
#[tokio::test]
async fn s14_a_young_end_whose_lease_ran_out_is_recorded_not_counted_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_living, store, _engine, spool, task) = young_end_of_a_living_worker(&dir).await;
    // Another daicho of this machine looks once the lease has run out, the end still young.
    let expires = task.lease.as_ref().expect("a lease").expires_at;
    let clock =
        Arc::new(daicho_engine::clock::ManualClock::new(expires + jiff::SignedDuration::from_secs(1)));
    let sweeper = Engine::new(Arc::clone(&store), config(), None)
        .with_spool(spool.clone())
        .with_clock(clock as Arc<dyn daicho_engine::clock::Clock>);
    assert!(!spool.overdue(task.id, task.attempt), "the end is young");
    let swept = sweeper.sweep(daicho_engine::Role::RunRequested, 0).await.expect("sweep");
    assert_eq!((swept.recovered, swept.lost.len()), (1, 0), "recorded, not counted lost: {swept:?}");
    let row = store.get(task.id).await.expect("get").expect("row");
    assert_eq!((row.status, row.failures, row.result.as_str()), (Status::Done, 0, "surveyed"));
}

/// S4, S14: an end a living worker spooled and could not record (the ledger was locked, say) is
/// left to it while young, and recorded by the next daicho that looks once it has waited past
/// `SYNC_AFTER`, so the lease running out meanwhile never counts the finished run lost.
#[tokio::test]
async fn s14_an_end_a_living_worker_could_not_record_is_recorded_by_the_next_look() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_living, store, engine, spool, task) = young_end_of_a_living_worker(&dir).await;
    aged_past_sync_after(&spool, task.id, task.attempt);
    assert_eq!(engine.recover_spooled().await.expect("recover"), 1, "overdue: recorded");
    let row = store.get(task.id).await.expect("get").expect("row");
    assert_eq!((row.status, row.result.as_str()), (Status::Done, "surveyed"));
    assert_eq!(titles(&store).await, ["fix the parser found on the way", "survey the code"]);
    assert!(spool.list().0.is_empty());
}

/// S4, S14: an end of this daicho's own name that it no longer holds to record (its record in a
/// sweep met a store fault and was given up; or an earlier process of the same name, a restarted
/// container's, spooled it and died) is not left for good: the next look at the spool records it
/// once it has waited past `SYNC_AFTER`, and a sweep once the lease has run out records it before
/// counting lost runs, so the finished run is never counted lost and run again.
#[tokio::test]
async fn s14_an_end_of_this_daichos_name_that_it_does_not_hold_is_recorded_not_counted_lost() {
    for overdue in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, engine, spool, worker, task) = claimed_by(&dir, daicho_engine::worker_name()).await;
        spool.put(task.id, &spooled(&task, &worker)).expect("spooled under this daicho's name");
        assert_eq!(engine.recover_spooled().await.expect("recover"), 0, "young: its record may be under way");
        let recovered = match overdue {
            true => {
                aged_past_sync_after(&spool, task.id, task.attempt);
                engine.recover_spooled().await.expect("recover")
            }
            false => {
                // The same daicho's next sweep, once the lease has run out.
                let expires = task.lease.as_ref().expect("a lease").expires_at;
                let clock =
                    daicho_engine::clock::ManualClock::new(expires + jiff::SignedDuration::from_secs(1));
                let sweeper = Engine::new(Arc::clone(&store), config(), None)
                    .with_spool(spool.clone())
                    .with_clock(Arc::new(clock) as Arc<dyn daicho_engine::clock::Clock>);
                let swept = sweeper.sweep(daicho_engine::Role::RunRequested, 0).await.expect("sweep");
                assert!(swept.lost.is_empty(), "not counted lost: {swept:?}");
                swept.recovered
            }
        };
        assert_eq!(recovered, 1, "recorded (overdue: {overdue})");
        let row = store.get(task.id).await.expect("get").expect("row");
        assert_eq!((row.status, row.failures, row.result.as_str()), (Status::Done, 0, "surveyed"));
        assert_eq!(titles(&store).await, ["fix the parser found on the way", "survey the code"]);
        assert!(spool.list().0.is_empty(), "the spooled copy is removed");
    }
}

/// A ledger (its writers waiting `busy` for a lock) with one task whose run touches `started`
/// and ends once `go` exists, this daicho's engine over it with a spool, and that task's run by
/// the engine (`daicho run`) under way; returns once the run has started, the ledger has been
/// locked by another connection and the run let end, and the run's end is spooled, that copy
/// aged past `SYNC_AFTER`.
async fn a_run_ending_under_a_lock(
    dir: &tempfile::TempDir,
    busy: std::time::Duration,
) -> (
    Arc<SqliteStore>,
    Arc<Engine<SqliteStore>>,
    Spool,
    daicho_core::TaskId,
    rusqlite::Connection,
    tokio::task::JoinHandle<Result<daicho_engine::RunOne, daicho_store::StoreError>>,
    tokio::sync::watch::Sender<daicho_engine::Stop>,
) {
    let path = dir.path().join("ledger.db");
    let options = SqliteOptions { busy_timeout: busy, ..SqliteOptions::default() };
    let store = Arc::new(SqliteStore::open(&path, options).await.expect("open"));
    let (started, go) = (dir.path().join("started"), dir.path().join("go"));
    let script =
        format!("touch '{}' && while [ ! -e '{}' ]; do sleep 0.01; done", started.display(), go.display());
    let config = CONFIG.replace(r#"command = ["true"]"#, &format!("command = [\"sh\", \"-c\", {script:?}]"));
    let mut item = Item::new("survey the code", "test");
    item.action = "work".into();
    item.tags = Tags::parse_list("ai");
    let now = jiff::Timestamp::now();
    let batch = Batch {
        items: vec![item].into(),
        actor: Actor::System,
        now,
        file: "test".into(),
        unknown_deps: UnknownDeps::Refuse,
    };
    store.upsert(batch).await.expect("upsert");
    let id = store.list(ListFilter::default()).await.expect("list")[0].id;
    let spool = Spool::new(dir.path().join("spool"));
    let config = Config::parse(&config, "t.toml").expect("config");
    let (stop, stopped) = daicho_engine::stop_control();
    let engine =
        Arc::new(Engine::new(Arc::clone(&store), config, None).with_spool(spool.clone()).with_stop(stopped));
    let run = tokio::spawn({
        let engine = Arc::clone(&engine);
        async move { engine.run_task(id, false).await }
    });
    let until = |what: &'static str, done: &dyn Fn() -> bool| {
        let started = std::time::Instant::now();
        while !done() {
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "{what}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    };
    until("the run started", &|| started.exists());
    let lock = rusqlite::Connection::open(&path).expect("open");
    lock.execute_batch("BEGIN IMMEDIATE").expect("the write lock");
    std::fs::write(&go, "").expect("let the run end");
    until("the run's end is spooled", &|| spool.list().0.len() == 1);
    aged_past_sync_after(&spool, id, 1);
    (store, engine, spool, id, lock, run, stop)
}

/// S14: an end this daicho holds to record itself is left to that record by a look at the
/// spool, also once it has waited past `SYNC_AFTER` (the ledger was locked meanwhile): the
/// record lands as the run's success, not as an end another look recorded first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_an_end_this_daicho_holds_is_left_to_its_own_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, engine, spool, id, lock, run, _stop) =
        a_run_ending_under_a_lock(&dir, std::time::Duration::from_secs(10)).await;
    assert_eq!(engine.recover_spooled().await.expect("recover"), 0, "held: left to its record");
    lock.execute_batch("ROLLBACK").expect("unlock");
    let daicho_engine::RunOne::Ran(report) = run.await.expect("joined").expect("run") else {
        panic!("the task ran")
    };
    assert_eq!(report.result, daicho_engine::RunResult::Success, "{report:?}");
    assert_eq!(store.get(id).await.expect("get").expect("row").status, Status::Done);
    assert!(spool.list().0.is_empty(), "the spooled copy is removed");
}

/// S4, S14: when this daicho gives up its own record of an end (`daicho run`, or a sweep of
/// `serve`, met the ledger locked past the busy timeout, and waited for it until the operator's
/// immediate stop or half a lease), it holds that end no more, and its next look at the spool
/// records it: the finished run is not left for the count of lost runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_an_end_whose_record_this_daicho_gave_up_is_recorded_by_its_next_look() {
    let dir = tempfile::tempdir().expect("tempdir");
    let busy = std::time::Duration::from_millis(200);
    let (store, engine, spool, id, lock, run, stop) = a_run_ending_under_a_lock(&dir, busy).await;
    // The record waits for the lock (half a lease); the operator's immediate stop ends the wait.
    tokio::time::sleep(busy * 3).await;
    assert!(!run.is_finished(), "the record waits for the lock");
    stop.send(daicho_engine::Stop::Now).expect("stop");
    let given_up = run.await.expect("joined").expect_err("the record met the lock past the busy timeout");
    assert!(given_up.is_retryable(), "{given_up}");
    assert!(
        given_up.to_string().contains("ran, but its end could not be recorded before the stop"),
        "{given_up}"
    );
    assert!(given_up.to_string().contains("it is spooled"), "{given_up}");
    lock.execute_batch("ROLLBACK").expect("unlock");
    assert_eq!(engine.recover_spooled().await.expect("recover"), 1, "recorded by the next look");
    let row = store.get(id).await.expect("get").expect("row");
    assert_eq!((row.status, row.failures), (Status::Done, 0));
    assert!(spool.list().0.is_empty(), "the spooled copy is removed");
}

/// S4, S14: a supervisor's account of how a run ended (`.exit` and `.out`), kept under this
/// daicho's own name by an earlier process of that name (a restarted container's `host:pid`)
/// that died before it spooled the end, is read by this daicho, which does not hold that run:
/// spooled, then recorded by the next look once overdue, never left for the count of lost runs.
#[tokio::test]
async fn s14_a_kept_run_exit_of_this_daichos_name_that_it_does_not_hold_is_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, engine, spool, worker, task) = claimed_by(&dir, daicho_engine::worker_name()).await;
    let base = spool.run_base(task.id, task.attempt);
    std::fs::create_dir_all(spool.dir()).expect("the spool");
    std::fs::write(base.with_extension("out"), "surveyed\n").expect("the output kept");
    let exit = daicho_engine::spool::RunExit { worker, status: 0, out_bytes: 9 };
    std::fs::write(base.with_extension("exit"), serde_json::to_string(&exit).expect("json"))
        .expect("the exit");
    assert_eq!(engine.recover_spooled().await.expect("recover"), 0, "spooled, young");
    assert!(spool.has_end(task.id, task.attempt), "the account became a spooled end");
    assert!(spool.run_exits().is_empty(), "and the account is removed");
    aged_past_sync_after(&spool, task.id, task.attempt);
    assert_eq!(engine.recover_spooled().await.expect("recover"), 1, "overdue: recorded");
    let row = store.get(task.id).await.expect("get").expect("row");
    assert_eq!((row.status, row.failures, row.result.as_str()), (Status::Done, 0, "surveyed"));
}

//! Group commit (I3, I5): the writes of one process that arrive together share one
//! `BEGIN IMMEDIATE … COMMIT`, and so one fsync, instead of each waiting for the file's write lock
//! in SQLite's busy handler (which sleeps 1 ms to 100 ms between tries, unfairly: under 50 clients
//! a patch waited up to 11 s).
//!
//! A write is queued; the first writer to find no leader becomes it, on a blocking thread, and
//! runs queued writes, up to [`MAX_BATCH`] per transaction: first with no savepoints, and when
//! one fails (or panics), rolled back and run again each inside a savepoint of its own, so the
//! write that fails is rolled back to its savepoint and answered with its error and the others
//! in its commit are untouched (a write is `FnMut`, a function of the transaction alone).
//! Nobody is answered `Ok` before the commit that holds the write is durable; when the commit
//! (or `BEGIN`) fails, every write of it gets the error. A leader that finds the queue empty
//! after a commit ends its lead before it answers, so the writes its answers release together
//! (a worker's run end and its next claim) lead anew and share one commit.
//! When SQLite itself ends the transaction inside a write (a full disk, an I/O error), the
//! writes before it in the batch are lost with it: they are answered with that error, and the
//! writes not yet run go on in the next transaction.
//!
//! A large write (an upsert, a replan, a purge, a restore) runs alone, so no small write waits
//! for its commit; a small write queued behind one waits at most the busy timeout, as it would
//! have for another process's lock, and is then withdrawn — never run — and answered
//! `Unavailable` by its caller.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use daicho_store::{Result, StoreError};
use rusqlite::{Connection, Transaction, TransactionBehavior};
use tokio::sync::oneshot;

use crate::backend;

/// Most writes in one transaction: enough to gather every client of a busy server, few enough
/// that one commit's work stays small.
pub(crate) const MAX_BATCH: usize = 64;

/// A queued write.
pub(crate) trait Write: Send {
    /// Whether it runs in a transaction of its own (a large write: an upsert, a purge), so
    /// that no small write waits for its commit.
    fn alone(&self) -> bool;
    /// Takes the write for a batch; false when its caller withdrew it first (its wait ran out),
    /// and then it never runs.
    fn take(&self) -> bool;
    /// Runs the write inside the batch's transaction (again, after a rollback, when a write it
    /// shared the transaction with failed); true when it succeeded.
    fn run(&mut self, tx: &Transaction<'_>) -> bool;
    /// Answers the caller once the commit's outcome is known: the write's own error, or its
    /// value when `committed` is `Ok`, or `committed`'s error (also when it never ran).
    fn answer(self: Box<Self>, committed: Result<()>);
}

/// Where a queued write is: waiting, taken for a batch, or withdrawn by its caller.
#[derive(Debug, Default)]
pub(crate) struct Claim(AtomicU8);

const QUEUED: u8 = 0;
const TAKEN: u8 = 1;
const WITHDRAWN: u8 = 2;

impl Claim {
    /// The caller gives up waiting: true when the write had not been taken (it will never run),
    /// false when it is running or has run (the caller must wait for its answer).
    pub(crate) fn withdraw(&self) -> bool {
        self.0.compare_exchange(QUEUED, WITHDRAWN, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Takes it for a batch (again, when a batch put it back unrun); false once withdrawn.
    fn take(&self) -> bool {
        matches!(
            self.0.compare_exchange(QUEUED, TAKEN, Ordering::AcqRel, Ordering::Acquire),
            Ok(_) | Err(TAKEN)
        )
    }
}

/// A write of `f`, answered through `sender`.
pub(crate) struct Pending<F, R> {
    f: Option<F>,
    result: Option<Result<R>>,
    sender: oneshot::Sender<Result<R>>,
    alone: bool,
    claim: Arc<Claim>,
}

impl<F, R> Pending<F, R> {
    pub(crate) fn new(
        f: F,
        sender: oneshot::Sender<Result<R>>,
        alone: bool,
        claim: Arc<Claim>,
    ) -> Pending<F, R> {
        Pending { f: Some(f), result: None, sender, alone, claim }
    }
}

impl<F, R> Write for Pending<F, R>
where
    R: Send,
    F: FnMut(&Transaction<'_>) -> Result<R> + Send,
{
    fn alone(&self) -> bool {
        self.alone
    }

    fn take(&self) -> bool {
        self.claim.take()
    }

    fn run(&mut self, tx: &Transaction<'_>) -> bool {
        let Some(f) = self.f.as_mut() else { return false };
        let result = f(tx);
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn answer(self: Box<Self>, committed: Result<()>) {
        let out = match (self.result, committed) {
            (Some(Err(own)), _) => Err(own),
            (Some(Ok(value)), Ok(())) => Ok(value),
            (_, Err(e)) => Err(e),
            (None, Ok(())) => Err(StoreError::backend("the write failed (it panicked) and was rolled back")),
        };
        let _ = self.sender.send(out);
    }
}

pub(crate) type Job = Box<dyn Write>;

/// The queue of writes waiting for a commit, and whether a leader is draining it.
#[derive(Default)]
pub(crate) struct Queue {
    state: Mutex<State>,
    /// Transactions committed by this queue (figures: writes per commit).
    commits: AtomicU64,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    leading: bool,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").field("commits", &self.commits()).finish_non_exhaustive()
    }
}

impl Queue {
    /// Transactions committed so far.
    pub(crate) fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `job`; true when the caller must now lead (call [`Queue::lead`]).
    pub(crate) fn push(&self, job: Job) -> bool {
        let mut state = self.state();
        state.jobs.push_back(job);
        !std::mem::replace(&mut state.leading, true)
    }

    /// Takes the next batch — up to [`MAX_BATCH`] writes in order, a write that runs alone in a
    /// batch of its own, withdrawn ones dropped — or ends the lead when the queue is empty.
    fn next_batch(&self) -> Option<Vec<Job>> {
        let mut state = self.state();
        let mut batch: Vec<Job> = Vec::new();
        while batch.len() < MAX_BATCH {
            let Some(front) = state.jobs.front() else { break };
            if front.alone() && !batch.is_empty() {
                break;
            }
            let Some(job) = state.jobs.pop_front() else { break };
            if !job.take() {
                continue;
            }
            let alone = job.alone();
            batch.push(job);
            if alone {
                break;
            }
        }
        if batch.is_empty() {
            state.leading = false;
            return None;
        }
        Some(batch)
    }

    /// Runs batches until the queue is empty (blocking), on `conn` or, when it is `None`, on a
    /// connection from `connect`; gives the connection back. `after_commit` runs after each
    /// commit, before its writes are answered (the WAL's upkeep, so that a one-shot command
    /// that exits once answered leaves it done).
    pub(crate) fn lead(
        &self,
        conn: Option<Connection>,
        connect: impl Fn() -> Result<Connection>,
        after_commit: impl Fn(&Connection),
    ) -> Option<Connection> {
        self.lead_with(conn, connect, after_commit, None).0
    }

    /// [`Queue::lead`] on a thread that must not wait for the write lock: when another
    /// connection holds it at the first transaction, the lead stops at once with every write
    /// still queued and the lead still taken, and the answer is `false`: the caller hands the
    /// lead on to a thread that may wait. `busy_timeout` is the connection's own, given back
    /// once the lock is taken.
    pub(crate) fn lead_unless_busy(
        &self,
        conn: Option<Connection>,
        connect: impl Fn() -> Result<Connection>,
        after_commit: impl Fn(&Connection),
        busy_timeout: Duration,
    ) -> (Option<Connection>, bool) {
        self.lead_with(conn, connect, after_commit, Some(busy_timeout))
    }

    fn lead_with(
        &self,
        mut conn: Option<Connection>,
        connect: impl Fn() -> Result<Connection>,
        after_commit: impl Fn(&Connection),
        mut no_wait: Option<Duration>,
    ) -> (Option<Connection>, bool) {
        let _unwinding = Unwinding(self);
        while let Some(batch) = self.next_batch() {
            let c = match conn.take().map_or_else(&connect, Ok) {
                Ok(c) => conn.insert(c),
                Err(e) => {
                    answer_all(batch, &e);
                    continue;
                }
            };
            let restore = no_wait.take();
            if restore.is_some() {
                let _ = c.busy_timeout(Duration::ZERO);
            }
            let lead = self.run_batch(c, batch, &after_commit, restore);
            if let Some(busy_timeout) = restore {
                let _ = c.busy_timeout(busy_timeout);
            }
            match lead {
                Lead::Ended => break,
                Lead::On(rest) if !rest.is_empty() => self.put_back(rest),
                Lead::On(_) => {}
                Lead::Busy(batch) => {
                    self.put_back(batch);
                    return (conn, false);
                }
            }
        }
        (conn, true)
    }

    /// Puts `jobs` back at the front of the queue, in their order.
    fn put_back(&self, jobs: Vec<Job>) {
        let mut state = self.state();
        for job in jobs.into_iter().rev() {
            state.jobs.push_front(job);
        }
    }

    /// Ends the lead when no write is queued; true when it did. Once it returns true, this
    /// leader must not touch the queue again: a write pushed from now on leads itself.
    fn resign_if_idle(&self) -> bool {
        let mut state = self.state();
        if state.jobs.is_empty() {
            state.leading = false;
        }
        !state.leading
    }

    /// Runs `batch` in one transaction; says whether the lead goes on, with the writes not run
    /// because SQLite ended the transaction under an earlier one (they go on in the next
    /// transaction).
    ///
    /// The writes first run one after the other with no savepoints: one that fails is rare, and
    /// a savepoint per write (its statements, and a copy of every page it touches) was a tenth
    /// of a commit's CPU. When one fails, the whole transaction is rolled back and the batch runs
    /// again with a savepoint each, so that only the failing write is undone; a write is a
    /// function of the transaction alone (it keeps nothing of a run rolled back), so running it
    /// again gives what its first run would have kept. A batch of one needs no second run: its
    /// write's failure rolls back the transaction it had alone.
    ///
    /// `no_wait`: the write lock is taken only if it is free now ([`Queue::lead_unless_busy`]),
    /// then the connection's busy timeout given back.
    fn run_batch(
        &self,
        conn: &mut Connection,
        mut batch: Vec<Job>,
        after_commit: impl Fn(&Connection),
        no_wait: Option<Duration>,
    ) -> Lead {
        match self.run_plain(conn, &mut batch, &after_commit, no_wait) {
            Plain::Done(lead) => lead,
            Plain::Rest(rest) => Lead::On(rest),
            Plain::Failed => self.run_in_savepoints(conn, batch, &after_commit),
            Plain::Busy => Lead::Busy(batch),
        }
    }

    /// The first run of a batch, with no savepoints: every write answered once committed (or
    /// a batch of one answered with its write's own error), or [`Plain::Failed`] with the
    /// transaction rolled back and no write answered.
    fn run_plain(
        &self,
        conn: &mut Connection,
        batch: &mut Vec<Job>,
        after_commit: &impl Fn(&Connection),
        no_wait: Option<Duration>,
    ) -> Plain {
        let tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            Err(e) if no_wait.is_some() && is_busy(&e) => return Plain::Busy,
            Err(e) => {
                answer_all(std::mem::take(batch), &backend(e));
                return Plain::Done(Lead::On(Vec::new()));
            }
        };
        // The lock is taken: a wait from here on is the connection's own.
        if let Some(busy_timeout) = no_wait {
            let _ = tx.busy_timeout(busy_timeout);
        }
        for i in 0..batch.len() {
            let ok = catch_unwind(AssertUnwindSafe(|| batch[i].run(&tx))).unwrap_or(false);
            if tx.is_autocommit() {
                // SQLite rolled the whole transaction back inside this write (a full disk, an
                // I/O error): what the batch wrote before it is gone too.
                let rest = batch.split_off(i + 1);
                answer_all(std::mem::take(batch), &rolled_back());
                return Plain::Rest(rest);
            }
            if !ok {
                let rolled = tx.rollback();
                return match (rolled, batch.len()) {
                    // The one write failed: it is answered with its own error, nothing kept.
                    (Ok(()), 1) => {
                        answer_all_with(std::mem::take(batch), Ok(()));
                        Plain::Done(Lead::On(Vec::new()))
                    }
                    (Ok(()), _) => Plain::Failed,
                    (Err(e), _) => {
                        answer_all(std::mem::take(batch), &backend(e));
                        Plain::Done(Lead::On(Vec::new()))
                    }
                };
            }
        }
        let committed = tx.commit();
        Plain::Done(self.answer_commit(conn, committed, std::mem::take(batch), after_commit))
    }

    /// A batch with a savepoint per write: a write that fails (or panics) is rolled back to its
    /// savepoint and answered with its error, the others in its commit are kept.
    fn run_in_savepoints(
        &self,
        conn: &mut Connection,
        batch: Vec<Job>,
        after_commit: &impl Fn(&Connection),
    ) -> Lead {
        let tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            Err(e) => {
                answer_all(batch, &backend(e));
                return Lead::On(Vec::new());
            }
        };
        let mut ran: Vec<Job> = Vec::with_capacity(batch.len());
        let mut jobs = batch.into_iter();
        while let Some(mut job) = jobs.next() {
            if let Err(e) = tx.execute_batch("SAVEPOINT write") {
                answer_all(ran, &backend(e));
                return Lead::On(std::iter::once(job).chain(jobs).collect());
            }
            let ok = catch_unwind(AssertUnwindSafe(|| job.run(&tx))).unwrap_or(false);
            if tx.is_autocommit() {
                // SQLite rolled the whole transaction back inside this write (a full disk, an
                // I/O error): what the batch wrote before it is gone too.
                ran.push(job);
                answer_all(ran, &rolled_back());
                return Lead::On(jobs.collect());
            }
            let closed = if ok {
                tx.execute_batch("RELEASE write")
            } else {
                tx.execute_batch("ROLLBACK TO write; RELEASE write")
            };
            ran.push(job);
            if let Err(e) = closed {
                answer_all(ran, &backend(e));
                return Lead::On(jobs.collect());
            }
        }
        let committed = tx.commit();
        self.answer_commit(conn, committed, ran, after_commit)
    }

    /// Answers the writes of a commit: each with its own outcome once `committed` is `Ok`
    /// (the WAL's upkeep first), else all with its error.
    ///
    /// When no other write is queued, the lead ends before the answers go out: the writes an
    /// answer releases together (a worker's run end and its next claim) then find no leader
    /// between two batches that would take the first of them alone, and share the next commit.
    fn answer_commit(
        &self,
        conn: &Connection,
        committed: rusqlite::Result<()>,
        ran: Vec<Job>,
        after_commit: &impl Fn(&Connection),
    ) -> Lead {
        match committed {
            Ok(()) => {
                self.commits.fetch_add(1, Ordering::Relaxed);
                after_commit(conn);
                let lead = if self.resign_if_idle() { Lead::Ended } else { Lead::On(Vec::new()) };
                answer_all_with(ran, Ok(()));
                lead
            }
            Err(e) => {
                answer_all(ran, &backend(e));
                Lead::On(Vec::new())
            }
        }
    }
}

/// Whether a leader goes on after a batch.
enum Lead {
    /// It goes on: these writes were not run (SQLite ended their transaction under an earlier
    /// one) and go first in the next batch.
    On(Vec<Job>),
    /// It ended with the queue empty, before answering the batch's writes.
    Ended,
    /// The write lock was held elsewhere and this lead may not wait: these writes were not
    /// run ([`Queue::lead_unless_busy`]).
    Busy(Vec<Job>),
}

/// How the first run of a batch ([`Queue::run_plain`]) ended.
enum Plain {
    /// Every write answered; whether the lead goes on.
    Done(Lead),
    /// SQLite ended the transaction inside a write: the writes up to it answered with that,
    /// these not run yet.
    Rest(Vec<Job>),
    /// A write of several failed: the transaction rolled back, nothing answered.
    Failed,
    /// The write lock was held elsewhere and the lead may not wait: nothing run or answered.
    Busy,
}

/// Whether `error` says another connection holds the lock.
fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(error, rusqlite::Error::SqliteFailure(e, _)
        if matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

/// The error of the writes of a transaction SQLite rolled back inside one of them.
fn rolled_back() -> StoreError {
    StoreError::Unavailable(
        "SQLite rolled back the transaction this write shared (a full disk or an I/O error); nothing of it was kept"
            .to_owned(),
    )
}

/// Ends a lead that panics outside a write: the queued writes are answered with an error
/// instead of waiting for a leader that is gone, and the next write leads again.
struct Unwinding<'q>(&'q Queue);

impl Drop for Unwinding<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let jobs: Vec<Job> = {
                let mut state = self.0.state();
                state.leading = false;
                state.jobs.drain(..).collect()
            };
            answer_all(jobs, &StoreError::backend("the ledger's writer failed (it panicked)"));
        }
    }
}

/// Answers `jobs` with `error` (a write that failed on its own keeps its own error).
fn answer_all(jobs: Vec<Job>, error: &StoreError) {
    for job in jobs {
        job.answer(Err(share(error)));
    }
}

/// Answers `jobs` with the commit's outcome `committed` (each keeps its own error, if any).
fn answer_all_with(jobs: Vec<Job>, committed: Result<()>) {
    for job in jobs {
        let outcome = match &committed {
            Ok(()) => Ok(()),
            Err(e) => Err(share(e)),
        };
        job.answer(outcome);
    }
}

/// A copy of `error` for each write it ends: the same kind and message.
fn share(error: &StoreError) -> StoreError {
    match error {
        StoreError::Unavailable(message) => StoreError::Unavailable(message.clone()),
        StoreError::Backend { message, .. } => StoreError::backend(message.clone()),
        other => StoreError::backend(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let conn = Connection::open(dir.path().join("t.db")).expect("open");
        conn.execute_batch("CREATE TABLE t (x TEXT PRIMARY KEY)").expect("a table");
        (dir, conn)
    }

    fn rows(conn: &Connection) -> Vec<String> {
        let mut s = conn.prepare("SELECT x FROM t ORDER BY x").expect("select");
        s.query_map([], |r| r.get(0)).expect("rows").map(|r| r.expect("a row")).collect()
    }

    fn insert(tx: &Transaction<'_>, x: &str) -> Result<()> {
        tx.execute("INSERT INTO t (x) VALUES (?1)", [x]).map(drop).map_err(backend)
    }

    /// Queues `f`; the receiver gets its answer.
    fn queue<R: Send + 'static>(
        q: &Queue,
        f: impl FnMut(&Transaction<'_>) -> Result<R> + Send + 'static,
    ) -> oneshot::Receiver<Result<R>> {
        queue_as(q, false, f).0
    }

    /// Queues `f`, alone or not; the receiver gets its answer, the claim withdraws it.
    fn queue_as<R: Send + 'static>(
        q: &Queue,
        alone: bool,
        f: impl FnMut(&Transaction<'_>) -> Result<R> + Send + 'static,
    ) -> (oneshot::Receiver<Result<R>>, Arc<Claim>) {
        let (sender, receiver) = oneshot::channel();
        let claim = Arc::new(Claim::default());
        q.push(Box::new(Pending::new(f, sender, alone, Arc::clone(&claim))));
        (receiver, claim)
    }

    fn no_connect() -> Result<Connection> {
        unreachable!("the test gives the leader its connection")
    }

    #[test]
    fn s14_a_failing_write_leaves_the_others_of_its_commit_and_keeps_its_own_error() {
        let (_dir, conn) = table();
        let q = Queue::default();
        let a = queue(&q, |tx| insert(tx, "a"));
        let refused = queue(&q, |tx| {
            insert(tx, "refused")?;
            Err::<(), _>(StoreError::Conflict("refused after writing".into()))
        });
        let panicked = queue(&q, |tx| -> Result<()> {
            insert(tx, "panicked")?;
            panic!("a write that panics after writing")
        });
        let b = queue(&q, |tx| insert(tx, "b"));
        let conn = q.lead(Some(conn), no_connect, |_| {}).expect("the connection back");
        assert_eq!(q.commits(), 1, "the four writes share one commit");
        assert!(a.blocking_recv().expect("answered").is_ok());
        assert!(b.blocking_recv().expect("answered").is_ok());
        let refused = refused.blocking_recv().expect("answered");
        assert!(matches!(refused, Err(StoreError::Conflict(_))), "its own error: {refused:?}");
        assert!(panicked.blocking_recv().expect("answered").is_err());
        assert_eq!(rows(&conn), ["a", "b"], "what the failed writes wrote is rolled back, the rest kept");
    }

    /// I5, S14: a commit's writes run first with no savepoints; when one fails they all run
    /// again, each in a savepoint, and what each kept is there once; a write alone in its
    /// commit that fails (or panics) keeps nothing and is answered with its own error.
    #[test]
    fn i5_writes_run_again_in_savepoints_only_when_one_of_their_commit_fails() {
        use std::sync::atomic::AtomicUsize;

        let (_dir, conn) = table();
        let q = Queue::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&runs);
        let a = queue(&q, move |tx| {
            counted.fetch_add(1, Ordering::SeqCst);
            insert(tx, "a")
        });
        let refused = queue(&q, |tx| {
            insert(tx, "refused")?;
            Err::<(), _>(StoreError::Conflict("refused after writing".into()))
        });
        let conn = q.lead(Some(conn), no_connect, |_| {}).expect("the connection back");
        assert_eq!(runs.load(Ordering::SeqCst), 2, "run without savepoints, then again in one");
        assert!(a.blocking_recv().expect("answered").is_ok());
        assert!(matches!(refused.blocking_recv().expect("answered"), Err(StoreError::Conflict(_))));
        assert_eq!(rows(&conn), ["a"], "the write run twice is kept once");
        assert_eq!(q.commits(), 1);

        let counted = Arc::clone(&runs);
        let fine = queue(&q, move |tx| {
            counted.fetch_add(1, Ordering::SeqCst);
            insert(tx, "fine")
        });
        let counted = Arc::clone(&runs);
        let also = queue(&q, move |tx| {
            counted.fetch_add(1, Ordering::SeqCst);
            insert(tx, "also")
        });
        let conn = q.lead(Some(conn), no_connect, |_| {}).expect("the connection back");
        assert!(
            fine.blocking_recv().expect("answered").is_ok()
                && also.blocking_recv().expect("answered").is_ok()
        );
        assert_eq!(runs.load(Ordering::SeqCst), 4, "writes that all succeed run once each");
        assert_eq!(q.commits(), 2);

        let alone = queue(&q, |tx| {
            insert(tx, "alone")?;
            Err::<(), _>(StoreError::Conflict("refused after writing".into()))
        });
        let conn = q.lead(Some(conn), no_connect, |_| {}).expect("the connection back");
        assert!(matches!(alone.blocking_recv().expect("answered"), Err(StoreError::Conflict(_))));
        let panics = queue(&q, |tx| -> Result<()> {
            insert(tx, "panics")?;
            panic!("a write that panics after writing")
        });
        let conn = q.lead(Some(conn), no_connect, |_| {}).expect("the connection back");
        assert!(panics.blocking_recv().expect("answered").is_err());
        assert_eq!(rows(&conn), ["a", "also", "fine"], "a failed write alone keeps nothing");
        assert_eq!(q.commits(), 2, "and commits nothing");
    }

    #[test]
    fn i5_a_write_that_ends_the_transaction_fails_every_write_it_shared() {
        let (_dir, conn) = table();
        let q = Queue::default();
        let before = queue(&q, |tx| insert(tx, "before"));
        // What SQLite does on a full disk or an I/O error inside a write: the whole
        // transaction is rolled back, not only the write's savepoint.
        let ender = queue(&q, |tx| {
            insert(tx, "ender")?;
            tx.execute_batch("ROLLBACK").map_err(backend)
        });
        let after = queue(&q, |tx| insert(tx, "after"));
        let conn = q.lead(Some(conn), no_connect, |_| {}).expect("the connection back");
        let before = before.blocking_recv().expect("answered");
        assert!(
            before.as_ref().is_err_and(StoreError::is_retryable),
            "a write whose commit was rolled back is not acknowledged, and may be tried again: {before:?}"
        );
        assert!(ender.blocking_recv().expect("answered").is_err());
        assert!(
            after.blocking_recv().expect("answered").is_ok(),
            "a write not yet run goes on in the next commit"
        );
        assert_eq!(rows(&conn), ["after"]);
    }

    /// I5, S14: a lead that may not wait for the write lock (SQLite on a worker's own thread)
    /// stops at once while another connection holds it, running and answering nothing, with the
    /// write still queued and the lead still taken (no new write leads); the lead handed on runs
    /// it once the lock is free, on the connection's own busy timeout.
    #[test]
    fn i5_s14_a_lead_that_may_not_wait_hands_a_held_lock_on_with_the_writes_queued() {
        let (dir, conn) = table();
        let other = Connection::open(dir.path().join("t.db")).expect("open");
        other.execute_batch("BEGIN IMMEDIATE").expect("the lock");
        let busy_timeout = std::time::Duration::from_secs(5);
        conn.busy_timeout(busy_timeout).expect("timeout");
        let q = Queue::default();
        let mut a = queue(&q, |tx| insert(tx, "a"));
        let started = std::time::Instant::now();
        let (conn, led) = q.lead_unless_busy(Some(conn), no_connect, |_| {}, busy_timeout);
        assert!(!led, "the lock is held elsewhere");
        assert!(started.elapsed() < busy_timeout / 5, "it did not wait: {:?}", started.elapsed());
        assert!(a.try_recv().is_err(), "not answered");
        let b = queue(&q, |tx| insert(tx, "b"));
        let (queued, leading) = {
            let state = q.state();
            (state.jobs.len(), state.leading)
        };
        assert_eq!((queued, leading), (2, true), "both queued, and the lead still taken");
        let unlock = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            other.execute_batch("ROLLBACK").expect("unlock");
        });
        let conn = q.lead(conn, no_connect, |_| {}).expect("the connection back");
        unlock.join().expect("unlocked");
        assert!(a.blocking_recv().expect("answered").is_ok(), "run once the lock is free");
        assert!(b.blocking_recv().expect("answered").is_ok());
        assert_eq!(rows(&conn), ["a", "b"]);
        assert_eq!(q.commits(), 1, "both in one commit");
    }

    /// I5: with the lock free, a lead that may not wait runs and answers its writes as any lead.
    #[test]
    fn i5_a_lead_that_may_not_wait_runs_its_writes_when_the_lock_is_free() {
        let (_dir, conn) = table();
        let q = Queue::default();
        let a = queue(&q, |tx| insert(tx, "a"));
        let (conn, led) =
            q.lead_unless_busy(Some(conn), no_connect, |_| {}, std::time::Duration::from_secs(5));
        assert!(led);
        assert!(a.blocking_recv().expect("answered").is_ok());
        assert_eq!(rows(&conn.expect("the connection back")), ["a"]);
        assert!(!q.state().leading, "the lead ended with the queue empty");
    }

    #[test]
    fn i5_writes_that_cannot_begin_are_answered_with_the_reason() {
        let (dir, conn) = table();
        // Another connection holds the write lock past the busy timeout.
        let other = Connection::open(dir.path().join("t.db")).expect("open");
        other.execute_batch("BEGIN IMMEDIATE").expect("the lock");
        conn.busy_timeout(std::time::Duration::from_millis(10)).expect("timeout");
        let q = Queue::default();
        let a = queue(&q, |tx| insert(tx, "a"));
        let conn = q.lead(Some(conn), no_connect, |_| {}).expect("the connection back");
        let a = a.blocking_recv().expect("answered");
        assert!(matches!(a, Err(StoreError::Unavailable(_))), "busy is retryable: {a:?}");
        other.execute_batch("ROLLBACK").expect("unlock");
        assert!(rows(&conn).is_empty());
        assert_eq!(q.commits(), 0);
    }

    #[test]
    fn i5_a_large_write_runs_alone_and_the_small_ones_around_it_commit_apart() {
        let (_dir, conn) = table();
        let q = Queue::default();
        let a = queue(&q, |tx| insert(tx, "a"));
        let (large, _) =
            queue_as(&q, true, |tx| (0..100).try_for_each(|n| insert(tx, &format!("large {n:03}"))));
        let b = queue(&q, |tx| insert(tx, "b"));
        let c = queue(&q, |tx| insert(tx, "c"));
        let conn = q.lead(Some(conn), no_connect, |_| {}).expect("the connection back");
        for answer in [a, large, b, c] {
            assert!(answer.blocking_recv().expect("answered").is_ok());
        }
        assert_eq!(q.commits(), 3, "[a], [large], [b, c]");
        assert_eq!(rows(&conn).len(), 103);
    }

    /// A write that, once answered, queues the next write (a worker whose run ended claims
    /// again) and says whether that write found no leader and must lead.
    struct ThenQueue {
        write: Job,
        queue: Arc<Queue>,
        next: Job,
        must_lead: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Write for ThenQueue {
        fn alone(&self) -> bool {
            self.write.alone()
        }

        fn take(&self) -> bool {
            self.write.take()
        }

        fn run(&mut self, tx: &Transaction<'_>) -> bool {
            self.write.run(tx)
        }

        fn answer(self: Box<Self>, committed: Result<()>) {
            let ThenQueue { write, queue, next, must_lead } = *self;
            write.answer(committed);
            must_lead.store(queue.push(next), Ordering::SeqCst);
        }
    }

    /// I5: the lead ends before a commit's writes are answered when nothing else is queued, so
    /// the writes an answer releases (a run's end, then the next claim a moment later) find no
    /// leader that would take the first of them alone: they share the next commit.
    #[test]
    fn i5_writes_an_answer_releases_share_the_next_commit() {
        let (_dir, conn) = table();
        let q = Arc::new(Queue::default());
        let (sender, first) = oneshot::channel();
        let run = Pending::new(|tx: &Transaction<'_>| insert(tx, "run"), sender, false, Arc::default());
        let (sender, end) = oneshot::channel();
        let released = Pending::new(|tx: &Transaction<'_>| insert(tx, "end"), sender, false, Arc::default());
        let (sender, ran) = oneshot::channel();
        let must_lead = Arc::new(std::sync::atomic::AtomicBool::new(false));
        q.push(Box::new(ThenQueue {
            write: Box::new(run),
            queue: Arc::clone(&q),
            next: Box::new(released),
            must_lead: Arc::clone(&must_lead),
        }));
        let conn = q.lead(Some(conn), no_connect, |_| {}).expect("the connection back");
        assert!(first.blocking_recv().expect("answered").is_ok());
        assert!(must_lead.load(Ordering::SeqCst), "the answered write found no leader");
        assert_eq!(q.commits(), 1, "the released write was not taken alone by the last leader");
        // The next claim joins the end before its leader starts (the yield of `write_as`).
        q.push(Box::new(Pending::new(
            |tx: &Transaction<'_>| insert(tx, "claim"),
            sender,
            false,
            Arc::default(),
        )));
        let conn = q.lead(Some(conn), no_connect, |_| {}).expect("the connection back");
        assert!(
            end.blocking_recv().expect("answered").is_ok() && ran.blocking_recv().expect("answered").is_ok()
        );
        assert_eq!(q.commits(), 2, "the end and the claim share one commit");
        assert_eq!(rows(&conn), ["claim", "end", "run"]);
    }

    #[test]
    fn i5_a_write_withdrawn_before_it_is_taken_never_runs() {
        let (_dir, conn) = table();
        let q = Queue::default();
        let (withdrawn, claim) = queue_as(&q, false, |tx| insert(tx, "withdrawn"));
        let (kept, kept_claim) = queue_as(&q, false, |tx| insert(tx, "kept"));
        assert!(claim.withdraw(), "a queued write can be withdrawn");
        let conn = q.lead(Some(conn), no_connect, |_| {}).expect("the connection back");
        assert!(withdrawn.blocking_recv().is_err(), "never run, never answered");
        assert!(kept.blocking_recv().expect("answered").is_ok());
        assert!(!kept_claim.withdraw(), "a write taken for a batch cannot be withdrawn");
        assert_eq!(rows(&conn), ["kept"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn i5_a_small_write_behind_a_long_one_gives_up_at_the_busy_timeout_and_never_runs() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let options = crate::SqliteOptions {
            busy_timeout: std::time::Duration::from_millis(100),
            ..Default::default()
        };
        let store = crate::SqliteStore::open(dir.path().join("ledger.db"), options).await.expect("open");
        let setting = |name: &'static str| {
            move |tx: &Transaction<'_>| {
                tx.execute("INSERT INTO setting (name, value) VALUES (?1, 'x')", [name]).map_err(backend)
            }
        };
        let long = {
            let store = store.clone();
            let write = setting("long");
            tokio::spawn(async move {
                store
                    .write_alone(move |tx| {
                        std::thread::sleep(std::time::Duration::from_millis(800));
                        write(tx)
                    })
                    .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let started = std::time::Instant::now();
        let small = store.write(setting("small")).await;
        assert!(matches!(small, Err(StoreError::Unavailable(_))), "{small:?}");
        assert!(started.elapsed() < std::time::Duration::from_millis(600), "gave up at the busy timeout");
        assert_eq!(long.await.expect("joined").expect("the long write commits"), 1);
        let names: Vec<String> = store
            .read(|tx| {
                let mut s = tx
                    .prepare("SELECT name FROM setting WHERE value = 'x' ORDER BY name")
                    .map_err(backend)?;
                s.query_map([], |r| r.get(0)).and_then(Iterator::collect).map_err(backend)
            })
            .await
            .expect("read");
        assert_eq!(names, ["long"], "the withdrawn write never ran");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn i5_writes_that_arrive_together_share_commits_and_each_lands() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = crate::SqliteStore::open(dir.path().join("ledger.db"), crate::SqliteOptions::default())
            .await
            .expect("open");
        let before = store.commits();
        let n = 200;
        let writes: Vec<_> = (0..n)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .write(move |tx| {
                            tx.execute(
                                "INSERT INTO setting (name, value) VALUES (?1, 'x')",
                                [format!("group-commit-{i}")],
                            )
                            .map_err(backend)
                        })
                        .await
                })
            })
            .collect();
        for w in writes {
            assert_eq!(w.await.expect("joined").expect("written"), 1);
        }
        let commits = store.commits() - before;
        let landed: i64 = store
            .read(|tx| {
                tx.query_row("SELECT count(*) FROM setting WHERE name LIKE 'group-commit-%'", [], |r| {
                    r.get(0)
                })
                .map_err(backend)
            })
            .await
            .expect("count");
        assert_eq!(landed, n, "every acknowledged write is in the ledger");
        assert!(commits < n as u64 / 2, "{n} concurrent writes took {commits} commits");
    }
}

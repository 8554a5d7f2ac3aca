//! The worker loop (`daicho worker`): keeps up to N runs going, claiming for every free slot in
//! one commit and recording every run that ended meanwhile in one commit, so that with a deep
//! queue a durable commit carries many tasks instead of one.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use daicho_core::policy::{ClaimScope, Gate, RunCounts, worker_mode};
use daicho_core::{Task, TaskId};
use daicho_store::{ClaimOutcome, ClaimRequest, NextClaim, Pick, Store, StoreError};
use futures_util::FutureExt as _;
use jiff::Timestamp;
use tokio::task::JoinSet;

use crate::executor::{ExecOutcome, RunContext};
use crate::{ActionConfig, Ended, Engine, Performed, RunReport, RunResult, Stop, exec};

/// How a worker runs.
#[derive(Clone, Debug)]
pub struct WorkOptions {
    /// Runs at once.
    pub slots: usize,
    /// How long to wait before looking again when nothing was eligible (the ledger's
    /// notifications wake the worker earlier where the store has them).
    pub poll: Duration,
    /// Return once nothing is running and nothing is eligible.
    pub once: bool,
}

/// What a worker did (fields in the order the JSON has always had).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct WorkTotals {
    /// Runs whose end was recorded or lost.
    pub ran: usize,
    /// Runs that failed or timed out.
    pub failed: usize,
    /// Runs whose lease was lost before their end was recorded.
    pub lease_lost: usize,
    /// Runs the operator's stop killed; their claims were returned without a failure (S14).
    pub interrupted: usize,
    /// Runs stopped because a person moved their rows out of `running` (S14).
    pub stopped: usize,
    /// Run ends an earlier process left in this machine's spool, recorded at the start (S14).
    pub recovered: usize,
    /// Lost runs of others (or of a killed predecessor) counted by this worker (S4).
    pub lost_counted: usize,
    /// External tasks put in the approval queue.
    pub queued: usize,
    /// Claim writes made (each for one or more tasks), not counting a one-slot claim written
    /// with run ends by one call of the store (`Store::finish_and_claim_next`: one commit, counted
    /// as the finish write). On SQLite a claim write and the finish write issued with it also
    /// share one commit.
    pub claim_commits: usize,
    /// Finish writes made (each for one or more runs).
    pub finish_commits: usize,
}

impl WorkTotals {
    fn count(&mut self, report: &RunReport) {
        self.ran += 1;
        match report.result {
            RunResult::Success => {}
            RunResult::Failure | RunResult::Timeout => self.failed += 1,
            RunResult::LeaseLost => self.lease_lost += 1,
            RunResult::Interrupted => self.interrupted += 1,
            RunResult::Stopped => self.stopped += 1,
        }
    }
}

/// The runs under way of one worker.
///
/// With one slot the run is polled by the worker loop's own task: a run's start and end then
/// cost no hand-off between threads (I5), and the loop awaits nothing else while its run goes
/// (it claims and keeps up only for a free slot; a store fault's wait drives the run,
/// [`Runs::drive`]). With more slots each run is a task of its own, so that runs go on while
/// the loop records and claims for the others. Dropped, either kills the executors under way.
enum Runs {
    One {
        run: Option<Pin<Box<dyn Future<Output = Ran> + Send>>>,
        /// The run's end, once [`Runs::drive`] saw it.
        ended: Option<Box<Ran>>,
    },
    Many(JoinSet<Performed>),
}

/// A run's end, or its panic.
type Ran = Result<Performed, StoreError>;

impl Runs {
    fn new(slots: usize) -> Runs {
        if slots == 1 { Runs::One { run: None, ended: None } } else { Runs::Many(JoinSet::new()) }
    }

    /// Runs started and not yet taken back.
    fn len(&self) -> usize {
        match self {
            Runs::One { run, ended } => usize::from(run.is_some() || ended.is_some()),
            Runs::Many(set) => set.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn start(&mut self, run: impl Future<Output = Performed> + Send + 'static) {
        match self {
            Runs::One { run: slot, ended } => {
                debug_assert!(slot.is_none() && ended.is_none(), "one slot, one run");
                let caught =
                    std::panic::AssertUnwindSafe(run).catch_unwind().map(|ran| ran.map_err(panicked));
                *slot = Some(Box::pin(caught));
            }
            Runs::Many(set) => {
                set.spawn(run);
            }
        }
    }

    /// A run that has ended, if one has (without waiting).
    fn try_join_next(&mut self) -> Option<Ran> {
        match self {
            Runs::One { run, ended } => {
                if ended.is_none()
                    && let Some(going) = run
                    && let Some(end) = going.as_mut().now_or_never()
                {
                    (*run, *ended) = (None, Some(Box::new(end)));
                }
                ended.take().map(|end| *end)
            }
            Runs::Many(set) => set.try_join_next().map(|joined| joined.map_err(not_joined)),
        }
    }

    /// The next run to end; `None` when none is under way. Cancel-safe.
    async fn join_next(&mut self) -> Option<Ran> {
        match self {
            Runs::One { run, ended } => {
                if ended.is_none() {
                    let end = run.as_mut()?.as_mut().await;
                    (*run, *ended) = (None, Some(Box::new(end)));
                }
                ended.take().map(|end| *end)
            }
            Runs::Many(set) => set.join_next().await.map(|joined| joined.map_err(not_joined)),
        }
    }

    /// Keeps a one-slot run going while the loop waits for something else (its end is kept
    /// for [`Runs::try_join_next`]); never resolves. Runs of several slots go on by themselves.
    async fn drive(&mut self) {
        if let Runs::One { run, ended } = self
            && ended.is_none()
            && let Some(going) = run
        {
            let end = going.as_mut().await;
            (*run, *ended) = (None, Some(Box::new(end)));
        }
        std::future::pending::<()>().await;
    }
}

/// The requests a [`Pick`] made inside a store's call, for the caller to look up should the
/// call fail: a claim may have committed before a store fault cut off its answer (S14).
#[derive(Clone, Default)]
pub(crate) struct Asked(Arc<std::sync::Mutex<Vec<ClaimRequest>>>);

impl Asked {
    /// `pick`, keeping every request it makes here.
    pub(crate) fn recording(&self, mut pick: Pick) -> Pick {
        let asked = self.clone();
        Box::new(move |tasks: &[Task]| {
            let tried = pick(tasks);
            asked.lock().extend_from_slice(&tried);
            tried
        })
    }

    /// The requests kept so far, emptied.
    pub(crate) fn take(&self) -> Vec<ClaimRequest> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ClaimRequest>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A run that panicked, as the error that ends the worker, with the panic's message.
fn panicked(panic: Box<dyn std::any::Any + Send>) -> StoreError {
    let text = match panic.downcast::<String>() {
        Ok(text) => *text,
        Err(panic) => panic.downcast_ref::<&str>().map_or_else(String::new, |text| (*text).to_owned()),
    };
    StoreError::backend(format!("a run panicked: {text}"))
}

/// A run task that did not end by itself: a panic ([`panicked`]), or cancelled.
fn not_joined(error: tokio::task::JoinError) -> StoreError {
    match error.try_into_panic() {
        Ok(panic) => panicked(panic),
        Err(error) => StoreError::backend(format!("a run did not end: {error}")),
    }
}

/// How long a worker waits, once a run has ended, for other runs to end, so that one commit
/// records them all. Short: a run's end is not durable until it is recorded.
const RECORD_GRACE: Duration = Duration::from_millis(3);

/// How long a worker leaves a task alone after its run failed here (S3: no self-retry).
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// The shortest time between two upkeeps of one worker (lost runs, the approval queue), however
/// short its poll interval: the same pace as remote claims' upkeep.
const UPKEEP_EVERY: Duration = Duration::from_secs(1);

/// How many ready rows one look examines for every free slot (ineligible rows are skipped).
const SCAN_PER_SLOT: usize = 8;

impl<S: Store + 'static> Engine<S> {
    /// Claims and runs ready tasks with the configured executors until `stop` resolves (or, with
    /// `once`, until nothing is left). Runs under way when `stop` resolves are abandoned: their
    /// executors are killed, their leases expire and they are counted as lost runs (S4).
    ///
    /// The operator's stop ([`Engine::with_stop`], S14) is gentler: at [`Stop::Drain`] nothing
    /// new is claimed and the worker returns once its runs have ended and been recorded; at
    /// [`Stop::Now`] the runs still going are killed and their claims returned without a
    /// failure.
    ///
    /// # Errors
    ///
    /// A store error; runs already recorded stay recorded.
    pub async fn work(
        self: &Arc<Self>,
        options: WorkOptions,
        stop: impl Future<Output = ()>,
    ) -> Result<WorkTotals, StoreError> {
        self.work_with(options, stop, exec).await
    }

    /// [`Engine::work`] with `runner` in place of the configured executors (benchmarks).
    ///
    /// # Errors
    ///
    /// As [`Engine::work`].
    pub async fn work_with<R, F>(
        self: &Arc<Self>,
        options: WorkOptions,
        stop: impl Future<Output = ()>,
        runner: R,
    ) -> Result<WorkTotals, StoreError>
    where
        R: Fn(RunContext, ActionConfig) -> F + Clone + Send + Sync + 'static,
        F: Future<Output = ExecOutcome> + Send + 'static,
    {
        let slots = options.slots.max(1);
        let mut totals = WorkTotals::default();
        let mut running = Runs::new(slots);
        let mut ended: Vec<Performed> = Vec::new();
        // S3 (no self-retry): a task whose run failed here is not claimed again by this worker
        // until RETRY_AFTER has passed; other workers and later sweeps may take it.
        let mut failed_here: HashMap<TaskId, Instant> = HashMap::new();
        let mut last_upkeep: Option<Instant> = None;
        // Looks in a row whose claims all went to other workers: look again at once, a few times.
        let mut contended = 0;
        let mut looks: u64 = 0;
        tokio::pin!(stop);
        // S14: a transient store fault (a lost connection, a lock held too long) is ridden out
        // with backoff and jitter; runs in flight go on, their ends wait to be recorded.
        let mut backoff = Duration::ZERO;
        macro_rules! store {
            ($call:expr) => {
                match $call {
                    Ok(value) => value,
                    Err(e) if e.is_retryable() => {
                        backoff = (backoff * 2).clamp(Duration::from_millis(100), Duration::from_secs(10));
                        let jitter = Duration::from_millis(spread_seed(&self.worker, looks) % 100);
                        looks += 1;
                        tracing::warn!("store unavailable, trying again in {:?}: {e}", backoff + jitter);
                        tokio::select! {
                            () = &mut stop => return Ok(totals),
                            () = tokio::time::sleep(backoff + jitter) => {}
                            () = running.drive() => {}
                        }
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            };
        }
        let mut recovered = false;
        // Claims sent in a call a store fault cut off, whose answer never came: looked up once
        // the store answers again, and run if they went through (S1, S14).
        let mut unanswered: Vec<ClaimRequest> = Vec::new();
        // The requests the one-slot claim's pick made this turn (it runs inside the store's call).
        let asked = Asked::default();
        // Rows changed by runs since the Markdown sources were last written back (X6): written
        // once the worker has nothing under way, not once per run.
        let mut unwritten = false;
        loop {
            // What an earlier process on this machine finished but could not record comes first.
            if !recovered {
                totals.recovered = store!(self.recover_spooled().await);
                recovered = true;
            }
            // Asked to stop? (Looked at on every turn: a busy worker may never reach the wait.)
            tokio::select! {
                biased;
                () = &mut stop => return Ok(totals),
                () = std::future::ready(()) => {}
            }
            // Every run that has ended by now is recorded in one commit.
            while let Some(joined) = running.try_join_next() {
                ended.push(joined?);
            }
            if !ended.is_empty() {
                // Runs that end together are recorded together: wait a moment for the others
                // that are about to end (a trivial executor's siblings end within microseconds).
                let deadline = tokio::time::Instant::now() + RECORD_GRACE;
                while !running.is_empty() {
                    match tokio::time::timeout_at(deadline, running.join_next()).await {
                        Ok(Some(joined)) => ended.push(joined?),
                        Ok(None) | Err(_) => break,
                    }
                }
            }
            // A run that just failed is not claimed again by the claim that shares the commit
            // of its end (S3: no self-retry): it is "failed here" before that claim is planned.
            for performed in &ended {
                if matches!(performed.outcome, Ended::Ran(ExecOutcome::Failure { .. })) {
                    failed_here.insert(performed.ctx.task.id, Instant::now());
                }
            }
            let draining = self.stop_level() >= Stop::Drain;
            let mut claimed = 0;
            // A claim that went through although its answer was lost is this worker's: it runs
            // now, as if the answer had come, instead of waiting out its lease to be counted a
            // lost run, a failure of a task that never ran (S4, S14). Its lease is renewed
            // first (the store may have been out of reach for much of it); it is returned at
            // once, with no failure, when the worker is stopping or has no slot for it. Each
            // request stays kept until its row is started or returned, and no longer, so a
            // store fault on the way looks again at those left and starts none twice.
            if !unanswered.is_empty() {
                let rows = store!(self.claimed_unanswered(&unanswered).await);
                unanswered.retain(|req| rows.iter().any(|row| row.id == req.id));
                for task in rows {
                    let id = task.id;
                    match self.config.action(&task.action).cloned() {
                        Some(action) if !draining && running.len() < slots => {
                            let renewed = store!(self.renew_claim(task).await);
                            unanswered.retain(|req| req.id != id);
                            let Some(task) = renewed else { continue };
                            tracing::warn!(task = %id, attempt = task.attempt, "a claim whose answer was lost went through: running it");
                            let (engine, runner) = (Arc::clone(self), runner.clone());
                            running.start(async move { engine.perform(task, &action, runner).await });
                            claimed += 1;
                        }
                        _ => {
                            let reason = "claimed in a commit whose answer was lost, and never started: the claim returned";
                            store!(self.return_claim(&task, reason).await);
                            unanswered.retain(|req| req.id != id);
                        }
                    }
                }
            }
            let free = if draining { 0 } else { slots - running.len() };
            let mut requests = Vec::new();
            let mut next: Option<(ClaimScope, Pick)> = None;
            // The ledger's kill switch is checked by the claim itself (in its one statement);
            // the `PAUSED` file here.
            if free > 0 && self.pause_file_reason().is_none() {
                // Upkeep once a poll interval, and at most once a second, not every look: lost
                // runs counted (S4), and the external rows waiting for approval queued (S2; a walk
                // of the ready set, which 16 workers polling every 50 ms made most of
                // PostgreSQL's work).
                // Not while this worker holds ends it could not record (the store was out of
                // reach): their leases may have run out meanwhile, and counting them lost first
                // would throw away finished work that the record below keeps (S14). The upkeep
                // comes on the next turn, once they are recorded.
                let due = last_upkeep.is_none_or(|at| at.elapsed() >= options.poll.max(UPKEEP_EVERY));
                if due && (backoff.is_zero() || ended.is_empty()) {
                    // What a daicho that died meanwhile left in the spool is recorded before its
                    // lease can run out and count the finished work lost (S14); and found tasks
                    // of this worker's ends whose push met a store fault are pushed (X2).
                    totals.recovered += store!(self.recover_spooled().await);
                    let lost = store!(self.count_lost_runs(self.now()).await);
                    totals.lost_counted += lost.len();
                    let to_queue = store!(self.awaiting_approval(self.now(), None).await);
                    if !to_queue.is_empty() {
                        let by = format!("worker:{}", self.worker);
                        totals.queued +=
                            store!(self.store.queue_approvals(to_queue, by, self.now()).await).len();
                    }
                    last_upkeep = Some(Instant::now());
                }
                // After losing claims to other workers, pick among the eligible rows from a
                // point of this worker's own, so that workers stop racing for the same head.
                let spread = (contended > 0).then(|| spread_seed(&self.worker, looks));
                looks += 1;
                if free == 1 {
                    next = store!(self.next_pick(&failed_here, spread).await);
                } else {
                    requests = store!(self.plan_claims(free, &failed_here, spread).await);
                }
            }
            // One free slot takes the first free row of several candidates in one claim, so
            // workers that read the same head at once each get a different row (I5); the store
            // reads and claims together (`claim_next`).
            let mut requested = requests.len().min(free);
            // The runs that ended and the next claims go to the ledger together, in one commit
            // (SQLite's group commit takes writes that arrive together; PostgreSQL gets both in
            // one transaction, `Store::finish_and_claim_next`), so one slot costs one commit per
            // task, not two. Each claim is still committed before its run starts (S1); the ends
            // are recorded whatever the claims meet, and the other way round.
            let recording = !ended.is_empty();
            let as_next = |next: Result<Option<NextClaim>, StoreError>| {
                next.map(|next| match next {
                    Some(NextClaim { tried, outcome }) => (tried, vec![outcome]),
                    None => (Vec::new(), Vec::new()),
                })
            };
            // Whether the ends and the claim were written by one call (one commit, counted once).
            let shared = recording && next.is_some();
            let (recorded, claims) = match next.take() {
                Some((scope, pick)) => {
                    let window = self.look_per_slot() + failed_here.len();
                    let pick = asked.recording(pick);
                    let (recorded, next) =
                        self.record_and_claim_next(ended.clone(), scope, window, pick).await;
                    (recorded, Some(as_next(next)))
                }
                None => {
                    let record =
                        async { if recording { Some(self.record(ended.clone()).await) } else { None } };
                    let claim = async {
                        match requests.len() {
                            0 => None,
                            _ if free == 1 => Some(
                                self.store
                                    .claim_first(requests.clone())
                                    .await
                                    .map(|o| (requests.clone(), vec![o])),
                            ),
                            _ => Some(
                                self.store.claim_many(requests.clone()).await.map(|o| (requests.clone(), o)),
                            ),
                        }
                    };
                    tokio::join!(record, claim)
                }
            };
            let mut retry = Ok(());
            match recorded {
                Some(Ok(reports)) => {
                    ended.clear();
                    unwritten |= !reports.is_empty();
                    totals.finish_commits += 1;
                    for report in &reports {
                        totals.count(report);
                        if matches!(report.result, RunResult::Failure | RunResult::Timeout) {
                            failed_here.insert(report.id, Instant::now());
                        }
                    }
                    failed_here.retain(|_, at| at.elapsed() < RETRY_AFTER);
                }
                // Not recorded: kept in `ended` for the next turn (after the claims' runs start).
                Some(Err(e)) => retry = Err(e),
                None => {}
            }
            match claims {
                Some(Ok((tried, outcomes))) => {
                    requested = tried.len().min(free);
                    requests = tried;
                    totals.claim_commits += usize::from(!outcomes.is_empty() && !shared);
                    for outcome in outcomes {
                        let task = match outcome {
                            ClaimOutcome::Claimed(task) => task,
                            // Paused: not contention, so no second look until woken or polled.
                            ClaimOutcome::Paused(_) => {
                                requested = 0;
                                continue;
                            }
                            ClaimOutcome::NotClaimable => continue,
                        };
                        // The request the row was claimed by (a task is requested once a look).
                        let Some(request) = requests.iter().find(|r| r.id == task.id) else { continue };
                        let Some(action) = self.config.action(&request.action).cloned() else { continue };
                        let (engine, runner) = (Arc::clone(self), runner.clone());
                        running.start(async move { engine.perform(*task, &action, runner).await });
                        claimed += 1;
                    }
                }
                Some(Err(e)) => {
                    // The call may have committed before its answer was lost (S14).
                    unanswered.extend(requests.iter().cloned().chain(asked.take()));
                    retry = retry.and(Err(e));
                }
                None => {}
            }
            asked.take();
            store!(retry);
            if draining && running.is_empty() {
                if unwritten {
                    self.write_back_sources().await;
                }
                return Ok(totals);
            }
            backoff = Duration::ZERO;
            // Some claims lost to other workers: the next look spreads out.
            contended = if claimed < requested { contended + 1 } else { 0 };
            // Rows the ends just released (dependents) were not ready when the claims were
            // planned: look again at once.
            if claimed > 0 || recording || (1..=3).contains(&contended) {
                continue;
            }
            if running.is_empty() && requested == 0 && unwritten {
                self.write_back_sources().await;
                unwritten = false;
            }
            // `once`: done when a look found nothing eligible (not when others took it first).
            if running.is_empty() && options.once && requested == 0 {
                return Ok(totals);
            }
            // Nothing to claim now: wait for a run to end, for the ledger to announce work (when a
            // slot is free), or for the poll interval; stop when asked.
            tokio::select! {
                () = &mut stop => return Ok(totals),
                Some(joined) = running.join_next(), if !running.is_empty() => {
                    ended.push(joined?);
                }
                () = self.store.wait_for_work(options.poll), if free > 0 => {}
                () = crate::stopped(self.stop.clone(), Stop::Drain), if !draining => {}
            }
        }
    }

    /// The claims to make for `free` slots now, of the ready rows this worker may run (its
    /// [`ClaimScope`], I5), so rows it may not run never hide one it may: [`Engine::candidates`]
    /// of the head, read wider while it holds too few (rows that failed here, caps reached on
    /// the way).
    async fn plan_claims(
        &self,
        free: usize,
        failed_here: &HashMap<TaskId, Instant>,
        spread: Option<u64>,
    ) -> Result<Vec<ClaimRequest>, StoreError> {
        let Some((scope, plan)) = self.claim_plan(free, failed_here, spread).await? else {
            return Ok(Vec::new());
        };
        let mut limit = free * SCAN_PER_SLOT + failed_here.len();
        loop {
            let tasks = self.store.ready_head(plan.now, Some(scope.clone()), limit).await?;
            let requests = self.candidates(&tasks, &plan);
            match NextClaim::wider_window(limit, tasks.len(), crate::SWEEP_SCAN) {
                Some(wider) if requests.len() < free => limit = wider,
                _ => return Ok(requests),
            }
        }
    }

    /// What one free slot claims, for [`Store::claim_next`]: the rows this worker may run and
    /// [`Engine::candidates`] of them (from `spread`'s point, after claims lost to other
    /// workers), decided where the store reads them (on SQLite in the claim's own transaction,
    /// so the head costs no round trip of its own), so that the claim goes with the run ends in
    /// one commit however the look is made. `None` when this worker may run nothing at all.
    async fn next_pick(
        self: &Arc<Self>,
        failed_here: &HashMap<TaskId, Instant>,
        spread: Option<u64>,
    ) -> Result<Option<(ClaimScope, Pick)>, StoreError> {
        let Some((scope, plan)) = self.claim_plan(1, failed_here, spread).await? else { return Ok(None) };
        let engine = Arc::clone(self);
        Ok(Some((scope, Box::new(move |tasks: &[Task]| engine.candidates(tasks, &plan)))))
    }

    /// The rows that claims of `asked` took although their answer never came (a store fault cut
    /// the call off after its commit: PostgreSQL's COMMIT went through and the connection was
    /// lost before its reply), read back once the store answers ([`daicho_store::ends::is_claim_of`]).
    pub(crate) async fn claimed_unanswered(&self, asked: &[ClaimRequest]) -> Result<Vec<Task>, StoreError> {
        let mut rows: Vec<Task> = Vec::new();
        for req in asked {
            if rows.iter().any(|row| row.id == req.id) {
                continue;
            }
            if let Some(row) = self.store.get(req.id).await?
                && daicho_store::ends::is_claim_of(&row, req)
            {
                rows.push(row);
            }
        }
        Ok(rows)
    }

    /// The row a claim of `tried` took although the call answered `error` (S14): a temporary
    /// store fault may cut off the answer of a claim that committed, which a look finds once the
    /// store answers; the claim holds, and is answered, not left to wait out its lease and be
    /// counted lost. `error` itself when it is not temporary or no claim holds.
    pub(crate) async fn claim_despite(
        &self,
        error: StoreError,
        tried: &[ClaimRequest],
    ) -> Result<Task, StoreError> {
        if !error.is_retryable() {
            return Err(error);
        }
        match self.claimed_unanswered(tried).await.map(|rows| rows.into_iter().next()) {
            Ok(Some(row)) => {
                tracing::warn!(task = %row.id, attempt = row.attempt, "a claim whose answer was lost went through: answered as claimed");
                Ok(row)
            }
            _ => Err(error),
        }
    }

    /// Renews the lease of a claim of this worker's found after its answer was lost, for a whole
    /// lease from now, before its run starts; the row as renewed. `None` when the claim is no
    /// longer current (a person moved the row, or its lease ran out and was counted).
    async fn renew_claim(&self, mut task: Task) -> Result<Option<Task>, StoreError> {
        match self.heartbeat_remote(task.id, task.attempt, &self.worker).await {
            Ok(until) => {
                if let Some(lease) = &mut task.lease {
                    lease.expires_at = until;
                }
                Ok(Some(task))
            }
            Err(StoreError::LeaseLost { .. } | StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Returns a claim of this worker's that will not run: back to pending, no failure counted,
    /// the run record closed as interrupted with `reason` (S14). A claim no longer current is
    /// left as it is.
    async fn return_claim(&self, task: &Task, reason: &str) -> Result<(), StoreError> {
        let finish = daicho_store::Finish {
            id: task.id,
            attempt: task.attempt,
            worker: self.worker.clone(),
            now: self.now(),
            end: daicho_store::RunEnd::Interrupted { reason: reason.to_owned() },
            policy: self.config.policy.failures,
        };
        match self.store.finish(finish).await {
            Ok(_) | Err(StoreError::LeaseLost { .. } | StoreError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The rows one free slot looks at and asks for: spare candidates where other workers may
    /// take a row between the look and the claim, or in the same moment (PostgreSQL), and one
    /// where the store claims one at a time in the look's own transaction (SQLite: the row asked
    /// for is claimable, and the others would only be decoded and planned for nothing — about
    /// 7 % of a one-slot worker's CPU). A look that asks for none reads wider.
    fn look_per_slot(&self) -> usize {
        if self.store.claims_one_at_a_time() { 1 } else { SCAN_PER_SLOT }
    }

    /// The scope and the plan of a look for `free` slots; `None` when no action may run.
    async fn claim_plan(
        &self,
        free: usize,
        failed_here: &HashMap<TaskId, Instant>,
        spread: Option<u64>,
    ) -> Result<Option<(ClaimScope, ClaimPlan)>, StoreError> {
        let now = self.now();
        let runs_today = self.gate_counts(now).await?;
        let gate = Gate {
            actions: &self.specs,
            paused: None,
            runs_today: runs_today.clone(),
            daily_cap: self.config.policy.daily_cap,
            now: Some(now),
        };
        let scope = ClaimScope::worker(&gate, None, None);
        if scope.is_empty() {
            return Ok(None);
        }
        let failed = failed_here.keys().copied().collect();
        let most = if free == 1 { self.look_per_slot() } else { free };
        let (worker, action) = (self.worker.clone(), None);
        Ok(Some((scope, ClaimPlan { free, failed, runs_today, spread, now, worker, action, most })))
    }

    /// The claim requests of a look, of `tasks` (the head of the ready set in run order): rows
    /// ticked ▶ first (a requested run), then automatic runs, each decided by the pure policy
    /// (S2, S5–S7, S9, S12) for the plan's worker (and only its action, when it names one),
    /// passing over rows that failed here lately (S3). Without daily caps every eligible row is
    /// a candidate (the plan's `spread` picks where to start, and a single free slot takes the
    /// first free of up to the plan's `most`); with caps, the first ones in order, counted as
    /// they are picked. Every claim of a worker, remote or not, is planned here.
    pub(crate) fn candidates(&self, tasks: &[Task], plan: &ClaimPlan) -> Vec<ClaimRequest> {
        let mut gate = Gate {
            actions: &self.specs,
            paused: None,
            runs_today: plan.runs_today.clone(),
            daily_cap: self.config.policy.daily_cap,
            now: Some(plan.now),
        };
        let mut tasks: Vec<&Task> = tasks.iter().filter(|t| !plan.failed.contains(&t.id)).collect();
        tasks.sort_by_key(|t| !t.run);
        let every_candidate = !self.capped() && (plan.spread.is_some() || plan.free == 1);
        let want = if every_candidate { usize::MAX } else { plan.free };
        let mut requests = Vec::with_capacity(plan.free);
        for task in tasks {
            if requests.len() >= want {
                break;
            }
            let decided = self.claim_request(task, worker_mode(task), &gate, &plan.worker, plan.now);
            if let Ok(request) = decided
                && plan.action.as_deref().is_none_or(|a| a == request.action)
            {
                *gate.runs_today.by_action.entry(request.action.clone()).or_insert(0) += 1;
                gate.runs_today.total += 1;
                requests.push(request);
            }
        }
        if let Some(seed) = plan.spread
            && requests.len() > plan.free
        {
            let start = (seed % requests.len() as u64) as usize;
            requests.rotate_left(start);
        }
        requests.truncate(plan.most);
        requests
    }
}

/// What a look for free slots decides with, besides the rows it reads.
#[derive(Clone, Debug)]
pub(crate) struct ClaimPlan {
    /// Free slots.
    free: usize,
    /// Rows that failed here lately (S3: no self-retry).
    failed: HashSet<TaskId>,
    /// Today's runs, for the daily caps (S9).
    runs_today: RunCounts,
    /// Where to start among eligible rows after losing claims to other workers.
    spread: Option<u64>,
    /// The look's time.
    now: Timestamp,
    /// Who claims: this worker, or a remote one.
    worker: String,
    /// Only requests for this action (a remote worker's filter).
    action: Option<String>,
    /// The most requests handed to one claim.
    most: usize,
}

impl ClaimPlan {
    /// A remote worker's look for its one slot (`remote.rs`): `most` candidates a claim.
    pub(crate) fn remote(
        worker: &str,
        action: Option<&str>,
        runs_today: RunCounts,
        now: Timestamp,
        most: usize,
    ) -> ClaimPlan {
        ClaimPlan {
            free: 1,
            failed: HashSet::new(),
            runs_today,
            spread: None,
            now,
            worker: worker.to_owned(),
            action: action.map(str::to_owned),
            most,
        }
    }
}

/// A number of this worker's own for its `look`-th look: where it starts among eligible rows.
fn spread_seed(worker: &str, look: u64) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (worker, look).hash(&mut hasher);
    hasher.finish()
}

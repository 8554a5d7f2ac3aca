//! The execution engine of daicho: ready tasks are run by executors without ever running away.
//!
//! A run is: the kill switch checked (S8); lost runs counted first (S4); the task's eligibility
//! decided by the pure policies of `daicho_core::policy` (S2, S5–S7, S9, S12); the claim
//! committed (S1); only then the executor started, with heartbeats extending the lease; the
//! end recorded, fenced by the attempt (S3 on failure, no retry); found tasks pushed in a
//! transaction of their own (X2, isolated). A sweep that finds nothing eligible starts no
//! process and makes no request (S9).

pub mod clock;
pub mod config;
pub mod doctor;
mod error;
pub mod executor;
pub mod graph;
pub mod input;
pub mod llm;
pub mod outbound;
pub mod plan;
pub mod purge;
pub mod remote;
pub mod runner;
pub mod schedule;
pub mod sheet;
pub mod sources;
pub mod spool;
pub mod supervise;
pub mod sync;
pub mod table;
pub mod text;
pub mod view;
mod work;
pub mod writeback;

use std::collections::HashSet;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use daicho_core::policy::{ActionSpec, ClaimScope, Gate, Hold, Mode, decide};
use daicho_core::{Status, Task, TaskId};
use daicho_store::{ClaimOutcome, ClaimRequest, Finish, RunEnd, RunOutcome, RunRecord, Store, StoreError};
use jiff::Timestamp;

pub use config::{
    ActionConfig, ActionKind, Config, ConfigError, ScheduleConfig, ScheduleRole, SourceConfig, SourceKind,
};
pub use error::Error;
use executor::{ExecOutcome, RunContext};
pub use text::Text;
pub use work::{WorkOptions, WorkTotals};

/// A sweep role (R1): what a scheduled invocation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Rows a person ticked ▶ run: one per invocation by default.
    RunRequested,
    /// Automatic runs of `auto` actions on `ai` tasks: at most 2 per invocation by default.
    Auto,
}

impl Role {
    /// Its name in daicho.toml and on the command line (`run-requested`, `auto`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::RunRequested => "run-requested",
            Role::Auto => "auto",
        }
    }

    /// The default number of runs per invocation.
    pub fn default_max(self) -> usize {
        match self {
            Role::RunRequested => 1,
            Role::Auto => 2,
        }
    }

    fn mode(self) -> Mode {
        match self {
            Role::RunRequested => Mode::Requested,
            Role::Auto => Mode::Auto,
        }
    }

    /// The rows this role may run under `gate` (I5): `run-requested` judges ticked rows only,
    /// `auto` every row as an automatic run.
    fn scope(self, gate: &Gate<'_>) -> ClaimScope {
        let unticked = (self == Role::Auto).then_some(Mode::Auto);
        ClaimScope::new(gate, Some(self.mode()), unticked, None, None)
    }
}

/// How one run ended, from the engine's point of view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunResult {
    /// The executor succeeded; the row is now `status`.
    Success,
    /// The executor failed; the failure is counted.
    Failure,
    /// The executor timed out; its process group was killed; the failure is counted.
    Timeout,
    /// The claim was lost while running (expired and counted by someone else, or fenced out):
    /// the result was not recorded.
    LeaseLost,
    /// The operator stopped it (S14): the executor was killed and the claim returned, no
    /// failure counted.
    Interrupted,
    /// A person moved the row out of `running` while it ran (S14): the executor was killed and
    /// the row keeps the person's change; no failure counted.
    Stopped,
}

/// How far an operator's stop has gone (S14). The first SIGINT or SIGTERM drains: nothing new
/// is claimed, runs under way may finish; after the grace period, or at a second signal, the
/// stop is immediate: runs under way are killed and their claims returned without a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stop {
    /// Running.
    Run,
    /// Claim nothing new; let runs under way finish.
    Drain,
    /// Kill runs under way and return their claims.
    Now,
}

/// A stop control for an engine: the sender side is the operator's (signals), the engine
/// watches the receiver.
pub fn stop_control() -> (tokio::sync::watch::Sender<Stop>, tokio::sync::watch::Receiver<Stop>) {
    tokio::sync::watch::channel(Stop::Run)
}

/// Waits until `stop` reaches `level` (never, when its sender is gone below it).
pub async fn stopped(mut stop: tokio::sync::watch::Receiver<Stop>, level: Stop) {
    if stop.wait_for(|s| *s >= level).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// What one run did.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The task.
    pub id: TaskId,
    /// Its title.
    pub title: String,
    /// The action that ran it.
    pub action: String,
    /// The attempt.
    pub attempt: u32,
    /// How it ended.
    pub result: RunResult,
    /// The row's status afterwards (unknown after a lost lease).
    pub status: Option<Status>,
    /// The error of a failed run.
    pub error: Option<String>,
    /// Found tasks pushed: (added, updated, skipped).
    pub pushed: Option<(usize, usize, usize)>,
    /// Why pushing found tasks failed, if it did (the run's outcome stands).
    pub push_error: Option<String>,
}

/// A ready task that did not run, and why (S7).
#[derive(Clone, Debug)]
pub struct Held {
    /// The task.
    pub id: TaskId,
    /// Its title.
    pub title: String,
    /// Why.
    pub hold: Hold,
}

/// What a sweep did.
#[derive(Clone, Debug)]
pub struct SweepReport {
    /// The role swept.
    pub role: Role,
    /// Set when the kill switch was on: then nothing else happened.
    pub paused: Option<String>,
    /// Lost runs counted first (S4).
    pub lost: Vec<(TaskId, Status)>,
    /// Runs made.
    pub ran: Vec<RunReport>,
    /// Ready tasks that will not run, each with its reason.
    pub held: Vec<Held>,
    /// External tasks newly put in the approval queue.
    pub queued: Vec<TaskId>,
    /// Eligible tasks left for a later sweep (the per-invocation limit), never dropped silently.
    pub truncated: usize,
    /// Run ends found in this machine's spool and recorded first (finished work a crash left
    /// unrecorded, S14).
    pub recovered: usize,
}

/// The outcome of `daicho run T-…`.
#[derive(Clone, Debug)]
pub enum RunOne {
    /// The task ran.
    Ran(RunReport),
    /// It did not, and why.
    Held(Held),
}

/// How a one-shot run records its end ([`Engine::execute`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Record {
    /// Once: a store fault gives the end up to the spool (a sweep).
    Once,
    /// Waiting out a store fault that may pass, while the run's lease holds (`daicho run`).
    WhileLeaseHolds,
}

/// A run done by an executor, its end not yet recorded.
#[derive(Clone, Debug)]
pub struct Performed {
    ctx: RunContext,
    action: String,
    on_success: Status,
    /// How it ended.
    outcome: Ended,
    /// Held while this engine may still record the end itself ([`HeldEnd`]); `None` for an end
    /// read back from another daicho's account.
    held: Option<Arc<HeldEnd>>,
}

/// A run of this engine that the engine holds in memory, to record its end itself (S14): from
/// before it starts until the engine's record of its end is done or given up (the last copy of
/// its `Performed` dropped). A look at the spool leaves such a run's account and end alone; an
/// account or end of this engine's name that nothing holds (its record met a store fault in a
/// sweep; or an earlier process of the same name, a restarted container's, left it) is read and
/// recorded like another worker's, so it is never left for the count of lost runs.
#[derive(Debug)]
struct HeldEnd {
    held: Arc<HeldRuns>,
    run: (TaskId, u32),
}

impl HeldEnd {
    fn new(held: &Arc<HeldRuns>, run: (TaskId, u32)) -> Arc<HeldEnd> {
        held.runs().insert(run);
        Arc::new(HeldEnd { held: Arc::clone(held), run })
    }
}

impl Drop for HeldEnd {
    fn drop(&mut self) {
        self.held.runs().remove(&self.run);
    }
}

/// The runs (task, attempt) an engine holds, each while a [`HeldEnd`] of it lives.
#[derive(Debug, Default)]
struct HeldRuns(std::sync::Mutex<HashSet<(TaskId, u32)>>);

impl HeldRuns {
    fn runs(&self) -> std::sync::MutexGuard<'_, HashSet<(TaskId, u32)>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How a performed run ended.
#[derive(Clone, Debug)]
enum Ended {
    /// The executor ended: its outcome.
    Ran(ExecOutcome),
    /// The claim was lost (its lease could not be renewed before the fence, or it ran out and
    /// the row was counted lost or claimed again), or a stopped run's processes would not go
    /// ([`Engine::all_gone`]): nothing to record.
    LeaseLost,
    /// The operator stopped it; the claim is returned without a failure.
    Interrupted(String),
    /// A person moved the row out of `running` (S14), so the executor was killed. Its end is
    /// recorded, as interrupted, to clear the lease the person's move kept as a fence
    /// ([`daicho_store::ends::plan_finish`]: a refused end, answered `LeaseLost`).
    Stopped(String),
}

/// Runs `action`'s executor for a claimed task: a child process or an LLM API request.
pub async fn exec(ctx: RunContext, action: ActionConfig) -> ExecOutcome {
    let timeout = Duration::try_from(action.timeout).unwrap_or(Duration::from_secs(1800));
    match &action.kind {
        ActionKind::Command { argv } => executor::run_command(argv, &ctx, timeout).await,
        ActionKind::Llm(llm) => llm::run_llm(llm, &ctx, timeout).await,
    }
}

/// How often a run's lease fence is read again while its worker waits to renew it
/// ([`Engine::keep_lease`]).
const FENCE_CHECK: Duration = Duration::from_secs(1);

/// How often a run's row is read to see whether a person moved it out of `running` (S14).
const STOP_CHECK: Duration = Duration::from_secs(2);

/// How long a run stopped from here may take to be gone before its end is given up
/// ([`Engine::all_gone`]): a process SIGKILL cannot end at once (in uninterruptible sleep).
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// How long a stopped run's supervisor is left to kill the run itself before it is killed too
/// ([`Engine::all_gone`]): its own killing takes at most two seconds.
const SUPERVISOR_GRACE: Duration = Duration::from_millis(2500);

/// How many ready rows one sweep examines; the rest count as truncated.
const SWEEP_SCAN: usize = 5_000;

/// How many rows awaiting approval one look queues at most.
const APPROVAL_SCAN: usize = 1_000;

/// The engine over one store.
#[derive(Debug)]
pub struct Engine<S> {
    store: Arc<S>,
    config: Config,
    specs: Vec<ActionSpec>,
    worker: String,
    pause_file: Option<PathBuf>,
    stop: tokio::sync::watch::Receiver<Stop>,
    spool: Option<spool::Spool>,
    clock: Arc<dyn clock::Clock>,
    /// When remote claims last did their upkeep (microseconds of the engine's clock).
    upkept: std::sync::atomic::AtomicI64,
    /// The runs whose ends this engine holds to record itself ([`HeldEnd`]).
    held: Arc<HeldRuns>,
}

/// Listens for SIGINT and SIGTERM and moves the returned stop control along (S14): the first
/// signal drains (nothing new is claimed), the second or the end of `grace` stops runs now, a
/// third exits the process at once.
///
/// # Errors
///
/// The signal handlers could not be installed.
pub fn operator_stop(grace: std::time::Duration) -> std::io::Result<tokio::sync::watch::Receiver<Stop>> {
    use tokio::signal::unix::{SignalKind, signal};

    let (tx, rx) = stop_control();
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        tracing::warn!(
            "stopping: nothing new is claimed; runs under way have {grace:?} to finish (signal again to stop them now)"
        );
        let _ = tx.send(Stop::Drain);
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
            () = tokio::time::sleep(grace) => {}
        }
        tracing::warn!("stopping now: runs under way are killed and their claims returned without a failure");
        let _ = tx.send(Stop::Now);
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        // A third signal: the operator wants out, whatever is still waiting.
        std::process::exit(130);
    });
    Ok(rx)
}

/// This worker's name: `host:pid`.
pub fn worker_name() -> String {
    format!("{}:{}", host_name(), std::process::id())
}

/// This machine's name, as worker names carry it.
pub fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "local".to_owned())
}

/// The spooled form of a run's end, as `worker` ran it; `None` for a run whose lease was lost
/// (no end to record).
fn spooled_end(performed: &Performed, worker: &str) -> Option<spool::SpooledEnd> {
    let end = match &performed.outcome {
        Ended::LeaseLost => return None,
        Ended::Interrupted(reason) | Ended::Stopped(reason) => {
            spool::SpooledOutcome::Interrupted { reason: reason.clone() }
        }
        Ended::Ran(ExecOutcome::Success { result, tokens, tasks, push_error }) => {
            spool::SpooledOutcome::Success {
                result: result.clone(),
                status: performed.on_success,
                tokens_in: tokens.map(|t| t.0),
                tokens_out: tokens.map(|t| t.1),
                found: tasks.clone(),
                push_error: push_error.clone(),
            }
        }
        Ended::Ran(ExecOutcome::Failure { error, timeout }) => {
            spool::SpooledOutcome::Failure { error: error.clone(), timeout: *timeout }
        }
    };
    Some(spool::SpooledEnd {
        task: performed.ctx.task.id.to_string(),
        attempt: performed.ctx.task.attempt,
        worker: worker.to_owned(),
        action: performed.action.clone(),
        end,
    })
}

/// Whether a lease owner (`host:pid`) is a daicho process of this machine that is gone: its
/// runs are lost although their leases have not expired yet (S14). Owners of other machines,
/// remote workers and agents are not judged.
pub fn owner_is_gone(owner: &str) -> bool {
    let Some((host, pid)) = owner.rsplit_once(':') else { return false };
    let Ok(pid) = pid.parse::<u32>() else { return false };
    host == host_name() && daicho_is_gone(pid)
}

/// Whether the daicho process `pid` of this machine is gone. A pid may be reused: a living
/// process that is not daicho is not it either.
pub(crate) fn daicho_is_gone(pid: u32) -> bool {
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(cmdline) => !String::from_utf8_lossy(&cmdline).contains("daicho"),
        Err(_) => true,
    }
}

/// A person's edit of a row ([`Store::edit`]) made on this machine, for the ledger named `ledger`
/// ([`supervise::use_ledger`]). When it stops a run whose daicho is gone from this machine
/// ([`owner_is_gone`]: the case `daicho doctor` reports), nobody would clear the fence its move
/// leaves (S14), and the row would wait for the lease to run out: so the run's leftovers here are
/// killed, and once none is left — seen by a look that could read every process of the machine
/// (as root, say) — the fence is cleared by the run's refused end. The row as stored.
///
/// # Errors
///
/// The edit's error, or a store error of the fence's clearing (the edit stands).
pub async fn edit_as_person<S: Store>(
    store: &S,
    ledger: &str,
    id: TaskId,
    edit: daicho_core::edit::TaskEdit,
    actor: daicho_core::Actor,
    now: Timestamp,
) -> Result<Task, StoreError> {
    let stored = store.edit(id, edit, actor, now).await?;
    let Some(lease) = daicho_core::policy::previous_run(&stored, now).cloned() else { return Ok(stored) };
    if !owner_is_gone(&lease.owner) {
        return Ok(stored);
    }
    let attempt = stored.attempt;
    // Cleared only when every process of the machine could be looked at: one this daicho may
    // not read (another user's, without root) may be what is left of the run.
    if until_gone(ledger, id, attempt).await != Ok(0) {
        return Ok(stored);
    }
    let end = RunEnd::Interrupted {
        reason: format!(
            "its daicho {} was gone; what was left of the run on this machine was killed",
            lease.owner
        ),
    };
    let policy = daicho_core::policy::FailurePolicy::default();
    match store.finish(Finish { id, attempt, worker: lease.owner, now, end, policy }).await {
        Ok(_) | Err(StoreError::LeaseLost { .. }) => {}
        Err(e) => return Err(e),
    }
    Ok(store.get(id).await?.unwrap_or(stored))
}

/// Kills every process of `attempt` (and earlier attempts) of task `id` of `ledger` on this
/// machine until none is left ([`Engine::all_gone`]): `Ok` once a look finds none and each one
/// killed has exited, with how many processes it could not read (any may be one of them); `Err`
/// when some are still there after
/// [`GONE_WITHIN`]. Each process killed is logged once.
async fn until_gone(ledger: &str, id: TaskId, attempt: u32) -> Result<usize, ()> {
    let started = tokio::time::Instant::now();
    let mut logged: HashSet<i32> = HashSet::new();
    loop {
        let (ledger, task) = (ledger.to_owned(), id.to_string());
        let spare = started.elapsed() < SUPERVISOR_GRACE;
        let scan = tokio::task::spawn_blocking(move || {
            supervise::scan_attempts(&ledger, &task, attempt.saturating_add(1), spare)
        })
        .await
        .map_err(|_| ())?;
        for pid in scan.killed.iter().filter(|pid| logged.insert(**pid)) {
            tracing::warn!(task = %id, attempt, pid, "killing a process of a stopped run");
        }
        // Gone once no scan finds one, and each one killed has exited: a killed process leaves
        // the scans (its environment is dropped) while it is still exiting.
        if scan.killed.is_empty() && scan.spared == 0 && logged.iter().all(|pid| supervise::has_exited(*pid))
        {
            return Ok(scan.unreadable);
        }
        if started.elapsed() >= GONE_WITHIN {
            return Err(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The start of the current local day, for daily caps.
fn start_of_today(now: Timestamp) -> Timestamp {
    now.to_zoned(jiff::tz::TimeZone::system()).start_of_day().map(|z| z.timestamp()).unwrap_or(now)
}

/// Runs per action since a point in time (S9, `daicho stats`).
#[derive(Clone, Debug)]
pub struct RunStats {
    /// Since when.
    pub since: Timestamp,
    /// Per action: runs started, succeeded, failed, running, and tokens used.
    pub actions: Vec<daicho_store::ActionStats>,
}

impl RunStats {
    /// The point in time `text` names, seen at `now` on this machine's clock: `today` (the start
    /// of the local day), `all`, a duration back (`7d`, `12h`) or a date or time.
    ///
    /// # Errors
    /// What is wrong with `text`.
    pub fn since(text: &str, now: Timestamp) -> Result<Timestamp, String> {
        let local = || now.to_zoned(jiff::tz::TimeZone::system());
        match text.trim() {
            "today" => Ok(start_of_today(now)),
            "all" => Ok(Timestamp::UNIX_EPOCH),
            text => match text.parse::<jiff::Span>() {
                Ok(span) => local()
                    .checked_sub(span)
                    .map(|z| z.timestamp())
                    .map_err(|_| "reaches too far back".into()),
                Err(_) => daicho_core::format::parse_timestamp(text),
            },
        }
    }
}

impl<S: Store + 'static> Engine<S> {
    /// An engine running `config`'s actions on `store`. With `pause_file`, the existence of that
    /// file (`PAUSED` beside the config) turns the kill switch on too.
    pub fn new(store: Arc<S>, config: Config, pause_file: Option<PathBuf>) -> Engine<S> {
        let specs = config.specs();
        let stop = stop_control().1;
        let clock: Arc<dyn clock::Clock> = Arc::new(clock::SystemClock);
        let upkept = std::sync::atomic::AtomicI64::new(i64::MIN);
        let held = Arc::default();
        Engine {
            store,
            config,
            specs,
            worker: worker_name(),
            pause_file,
            stop,
            spool: None,
            clock,
            upkept,
            held,
        }
    }

    /// Reads the time from `clock` instead of the system clock (tests move a
    /// [`clock::ManualClock`] instead of sleeping).
    pub fn with_clock(mut self, clock: Arc<dyn clock::Clock>) -> Engine<S> {
        self.clock = clock;
        self
    }

    /// The engine's clock.
    pub fn clock(&self) -> &dyn clock::Clock {
        &*self.clock
    }

    /// The current instant by the engine's clock.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Keeps every run's end in `spool` on this machine until the ledger has recorded it and
    /// the tasks its run found are pushed, and records what an earlier process left there before
    /// anything else (S14, X2).
    pub fn with_spool(mut self, spool: spool::Spool) -> Engine<S> {
        self.spool = Some(spool);
        self
    }

    /// Whether this engine holds the run `attempt` of `id`, to record its end itself ([`HeldEnd`]).
    fn holds(&self, id: TaskId, attempt: u32) -> bool {
        self.held.runs().contains(&(id, attempt))
    }

    /// Whether the lease of `spooled`'s run, still current, runs out within [`spool::SYNC_AFTER`]
    /// from now: the next count of lost runs would count it.
    async fn lease_runs_out(&self, id: TaskId, spooled: &spool::SpooledEnd) -> Result<bool, StoreError> {
        let soon = self.now() + spool::SYNC_AFTER;
        Ok(self.store.get(id).await?.is_some_and(|row| {
            row.status == Status::Running
                && row.attempt == spooled.attempt
                && row.lease.is_some_and(|lease| lease.owner == spooled.worker && lease.expires_at <= soon)
        }))
    }

    /// Records the run ends an earlier daicho on this machine left in the spool — those whose
    /// worker process is gone, and those a living worker has not recorded within
    /// [`spool::SYNC_AFTER`] or whose lease runs out within it — each fenced by its attempt and
    /// worker; drops those no longer current. First the ends a run's supervisor kept for a
    /// worker that died before it spooled them are spooled ([`spool::RunExit`]). The tasks a run
    /// found are pushed with its end, and also when the ledger already holds that end (its worker died between the record and the push, or, for this engine's
    /// own ends, the push met a store fault; X2). Returns how many ends were recorded.
    ///
    /// # Errors
    ///
    /// A store error other than a stale end ([`StoreError::LeaseLost`], [`StoreError::NotFound`]).
    pub async fn recover_spooled(&self) -> Result<usize, StoreError> {
        let Some(spool) = &self.spool else { return Ok(0) };
        self.spool_kept_exits(spool).await?;
        let (ends, bad) = spool.list();
        for path in bad {
            // Set aside (`.bad`), so that a worker's upkeep says it once, not every second.
            let kept = spool.set_aside(&path);
            tracing::warn!("unreadable run end in the spool, left for a person: {kept}");
        }
        let mut recovered = 0;
        for spooled in ends {
            let Some(id) = spooled.id() else { continue };
            // A worker that is still alive records its own ends (with their found tasks). The
            // ends this engine holds are left to its record. Found tasks of an end it recorded
            // whose push met a store fault are pushed now. Any other end of its name (its
            // record met a store fault in a sweep, or an earlier process of the same name
            // spooled it: [`HeldEnd`]) is recorded as another worker's, below.
            let own = spooled.worker == self.worker;
            if own {
                if self.holds(id, spooled.attempt) {
                    continue;
                }
                if let spool::SpooledOutcome::Success { found, .. } = &spooled.end
                    && !found.is_empty()
                    && self.holds_end(id, &spooled).await?
                {
                    self.push_found(&spooled.action, id, spooled.attempt, found.clone()).await?;
                    spool.remove(id, spooled.attempt);
                    continue;
                }
            }
            // Another worker's end is left to it while it lives and records promptly; one that
            // has waited in the spool past `SYNC_AFTER` (its worker is held up: the ledger locked,
            // the database out of reach), or whose lease runs out within that time (it ran out
            // while the ledger was locked and the end came just before the lock went), is
            // recorded by whoever looks first, so that the count of lost runs that follows never
            // counts a finished run lost (S4, S14). Its worker's own record then finds it
            // recorded.
            // This engine's own name is a living worker's, whatever its process is called.
            let living = own || !owner_is_gone(&spooled.worker);
            if living && !spool.overdue(id, spooled.attempt) && !self.lease_runs_out(id, &spooled).await? {
                continue;
            }
            let (end, mut found, push_error) = match spooled.end.clone() {
                spool::SpooledOutcome::Success {
                    result,
                    status,
                    tokens_in,
                    tokens_out,
                    found,
                    push_error,
                } => (RunEnd::Success { result, status, tokens_in, tokens_out }, found, push_error),
                spool::SpooledOutcome::Failure { error, timeout } => {
                    (RunEnd::Failure { error, timeout }, Vec::new(), None)
                }
                spool::SpooledOutcome::Interrupted { reason } => {
                    (RunEnd::Interrupted { reason }, Vec::new(), None)
                }
            };
            let finish = Finish {
                id,
                attempt: spooled.attempt,
                worker: spooled.worker.clone(),
                now: self.now(),
                end,
                policy: self.config.policy.failures,
            };
            let attempt = spooled.attempt;
            match self.store.finish(finish).await {
                Ok(row) => {
                    recovered += 1;
                    tracing::warn!(
                        task = %id, attempt, status = %row.status,
                        "recorded a run that ended before its worker {} could record it", spooled.worker
                    );
                    if let Some(error) = push_error {
                        self.store.note_run(id, attempt, format!("found tasks not pushed: {error}")).await?;
                    }
                }
                // Its worker recorded this end and died before it pushed what the run found
                // (X2): pushed now. Any other end no longer current is dropped, found tasks too.
                Err(StoreError::LeaseLost { .. })
                    if !found.is_empty() && self.holds_end(id, &spooled).await? =>
                {
                    tracing::warn!(task = %id, attempt, "pushing the tasks a recorded run found before its worker died");
                }
                Err(StoreError::LeaseLost { .. } | StoreError::NotFound(_)) => {
                    tracing::info!(task = %id, attempt, "spooled end no longer current: dropped");
                    found.clear();
                }
                Err(e) => return Err(e),
            }
            // Kept in the spool until what the run found is pushed (an upsert: twice adds nothing).
            if let (_, Some(error)) = self.push_found(&spooled.action, id, attempt, found).await? {
                tracing::warn!(task = %id, attempt, "found tasks not pushed: {error}");
            }
            spool.remove(id, attempt);
        }
        Ok(recovered)
    }

    /// Whether the ledger holds `spooled`'s successful end as recorded ([`Engine::recorded_run`]:
    /// the same attempt, worker and outcome, no claim since), the row at the spooled status.
    async fn holds_end(&self, id: TaskId, spooled: &spool::SpooledEnd) -> Result<bool, StoreError> {
        let spool::SpooledOutcome::Success { status, .. } = &spooled.end else { return Ok(false) };
        let same = |row: &Task, _: &RunRecord| row.status == *status;
        match self.recorded_run(id, spooled.attempt, &spooled.worker, RunOutcome::Success, same).await {
            Ok(_) => Ok(true),
            Err(StoreError::LeaseLost { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Writes a run's end to the spool (when there is one) before it is recorded; then the
    /// account the run's supervisor kept of it is no longer needed ([`spool`]).
    async fn spool_end(&self, performed: &Performed) {
        let Some(spool) = self.spool.clone() else { return };
        let (id, attempt) = (performed.ctx.task.id, performed.ctx.task.attempt);
        // A run whose lease was lost has no end to record.
        let spooled = spooled_end(performed, &self.worker);
        let written = tokio::task::spawn_blocking(move || {
            let written = spooled.map_or(Ok(()), |spooled| spool.put(id, &spooled));
            if written.is_ok() {
                spool.remove_run(id, attempt);
            }
            written
        })
        .await;
        if !matches!(written, Ok(Ok(()))) {
            tracing::warn!(task = %id, attempt, "the run's end could not be spooled: {written:?}");
        }
    }

    /// Spools the ends of runs whose supervisor kept how they ended ([`spool::RunExit`]) but
    /// whose worker, a daicho of this machine, died before it spooled the end itself (S14): each
    /// is read from that account as its worker would have read it ([`executor::outcome_of`]),
    /// when the run is still the row's current one. A run of a living worker is left to it.
    async fn spool_kept_exits(&self, spool: &spool::Spool) -> Result<(), StoreError> {
        for (id, attempt, exit) in spool.run_exits() {
            if spool.has_end(id, attempt) {
                spool.remove_run(id, attempt);
                continue;
            }
            // Left to the daicho that runs it: this engine when it holds the run, a living other.
            let own = exit.worker == self.worker;
            if (own && self.holds(id, attempt)) || (!own && !owner_is_gone(&exit.worker)) {
                continue;
            }
            let row = self.store.get(id).await?;
            let current = row.as_ref().is_some_and(|row| {
                row.status == Status::Running
                    && row.attempt == attempt
                    && row.lease.as_ref().is_some_and(|lease| lease.owner == exit.worker)
            });
            let action = row.as_ref().and_then(|row| self.config.action(&row.action));
            let (true, Some(row), Some(action)) = (current, row.clone(), action) else {
                tracing::info!(task = %id, attempt, "a kept run end no longer current: dropped");
                spool.remove_run(id, attempt);
                continue;
            };
            use std::os::unix::process::ExitStatusExt as _;
            let exited = runner::Exited {
                status: std::process::ExitStatus::from_raw(exit.status),
                stdout: runner::Captured {
                    kept: spool.run_output(id, attempt),
                    total: usize::try_from(exit.out_bytes).unwrap_or(usize::MAX),
                },
                stderr: runner::Captured::default(),
            };
            let ctx = RunContext::new(row, &action.spec.name);
            let performed = Performed {
                outcome: Ended::Ran(executor::outcome_of(&exited, &ctx)),
                action: action.spec.name.clone(),
                on_success: action.spec.on_success.status(),
                ctx,
                held: None,
            };
            let Some(end) = spooled_end(&performed, &exit.worker) else { continue };
            match spool.put(id, &end) {
                Ok(()) => spool.remove_run(id, attempt),
                Err(e) => tracing::warn!(task = %id, attempt, "a kept run end could not be spooled: {e}"),
            }
        }
        Ok(())
    }

    /// Records run ends whose copies are in the spool: when the ledger fails to record them, or
    /// has not within [`spool::SYNC_AFTER`], the copies are synced to disk first (S14: finished
    /// work outlasts the store's outage and a loss of power during it).
    async fn finish_spooled(
        &self,
        finishes: Vec<Finish>,
    ) -> Result<Vec<Result<Task, StoreError>>, StoreError> {
        let runs: Vec<(TaskId, u32)> = finishes.iter().map(|f| (f.id, f.attempt)).collect();
        self.spooled(runs, self.store.finish_many(finishes), Result::is_err).await
    }

    /// Awaits `recording`, which records the spooled ends of `runs`: their copies are synced to
    /// disk when it has not finished within [`spool::SYNC_AFTER`], or when `failed` says it
    /// did not record them.
    async fn spooled<T>(
        &self,
        runs: Vec<(TaskId, u32)>,
        recording: impl Future<Output = T>,
        failed: impl Fn(&T) -> bool,
    ) -> T {
        let Some(spool) = self.spool.clone().filter(|_| !runs.is_empty()) else { return recording.await };
        let persist = || {
            let (spool, runs) = (spool.clone(), runs.clone());
            async move {
                match tokio::task::spawn_blocking(move || spool.persist(&runs)).await {
                    Ok(Ok(())) => {}
                    failed => tracing::warn!("the spooled run ends could not be synced: {failed:?}"),
                }
            }
        };
        tokio::pin!(recording);
        let ended = tokio::select! {
            ended = &mut recording => ended,
            () = tokio::time::sleep(spool::SYNC_AFTER) => {
                persist().await;
                recording.await
            }
        };
        if failed(&ended) {
            persist().await;
        }
        ended
    }

    /// Lets the operator stop the engine's runs through `stop` (S14).
    pub fn with_stop(mut self, stop: tokio::sync::watch::Receiver<Stop>) -> Engine<S> {
        self.stop = stop;
        self
    }

    /// How far the operator's stop has gone.
    pub fn stop_level(&self) -> Stop {
        *self.stop.borrow()
    }

    /// Waits until the operator's stop reaches `level`.
    pub async fn wait_stop(&self, level: Stop) {
        stopped(self.stop.clone(), level).await;
    }

    /// The store the engine runs on.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The configuration the engine runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Names this worker (tests run several in one process).
    pub fn with_worker(mut self, worker: &str) -> Engine<S> {
        self.worker = worker.to_owned();
        self
    }

    /// The kill switch (S8): the ledger's flag or the `PAUSED` file.
    pub async fn paused(&self) -> Result<Option<String>, StoreError> {
        match self.pause_file_reason() {
            Some(reason) => Ok(Some(reason)),
            None => self.store.paused().await,
        }
    }

    /// The kill switch's `PAUSED` file, when it exists: its text, or that it exists.
    fn pause_file_reason(&self) -> Option<String> {
        let file = self.pause_file.as_ref().filter(|f| f.exists())?;
        let reason = std::fs::read_to_string(file).unwrap_or_default();
        let reason = reason.trim();
        Some(if reason.is_empty() { format!("{} exists", file.display()) } else { reason.to_owned() })
    }

    /// Whether the remote claims' upkeep (expiring leases, queueing approvals) is due at `now`:
    /// at most once a second of the engine's clock, so a busy server does not add a write and a
    /// walk of the ready set to every claim.
    pub(crate) fn upkeep_due(&self, now: Timestamp) -> bool {
        use std::sync::atomic::Ordering;
        let at = now.as_microsecond();
        let last = self.upkept.load(Ordering::Relaxed);
        let due = last == i64::MIN || at < last || at - last >= 1_000_000;
        due && self.upkept.compare_exchange(last, at, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    /// Whether any daily cap is configured (S9): overall, or on an action.
    fn capped(&self) -> bool {
        self.config.policy.daily_cap.is_some() || self.specs.iter().any(|s| s.daily_cap.is_some())
    }

    /// Today's runs for the daily caps (S9). Without a cap configured none are read, so the
    /// common case costs no query and no lookup of the local time zone (I5).
    async fn gate_counts(&self, now: Timestamp) -> Result<daicho_core::policy::RunCounts, StoreError> {
        if !self.capped() {
            return Ok(daicho_core::policy::RunCounts::default());
        }
        self.store.run_counts(start_of_today(now)).await
    }

    /// Why each of `tasks` would or would not run in `role` now (for `daicho ready`).
    pub async fn explain(&self, tasks: &[Task], role: Role) -> Result<Vec<Result<String, Hold>>, StoreError> {
        let paused = self.paused().await?;
        self.explain_given(tasks, role, paused).await
    }

    /// Why each of `tasks` would or would not run were the kill switch off (`daicho doctor`
    /// reports the pause apart from the holds behind it).
    pub async fn explain_unpaused(
        &self,
        tasks: &[Task],
        role: Role,
    ) -> Result<Vec<Result<String, Hold>>, StoreError> {
        self.explain_given(tasks, role, None).await
    }

    async fn explain_given(
        &self,
        tasks: &[Task],
        role: Role,
        paused: Option<String>,
    ) -> Result<Vec<Result<String, Hold>>, StoreError> {
        let now = self.now();
        let gate = Gate {
            actions: &self.specs,
            paused: paused.as_deref(),
            runs_today: self.gate_counts(now).await?,
            daily_cap: self.config.policy.daily_cap,
            now: Some(now),
        };
        Ok(tasks
            .iter()
            .map(|t| {
                let mode = if t.run { Mode::Requested } else { role.mode() };
                decide(t, mode, &gate).map(|a| a.name.clone())
            })
            .collect())
    }

    /// One sweep of `role`, running at most `max` tasks.
    ///
    /// # Errors
    ///
    /// A store error; runs already made stay recorded.
    pub async fn sweep(&self, role: Role, max: usize) -> Result<SweepReport, StoreError> {
        self.sweep_within(role, max, None).await
    }

    /// [`Engine::sweep`] with a time guard (R4): no run starts after `deadline`; the eligible
    /// tasks left are counted as truncated.
    ///
    /// # Errors
    ///
    /// A store error; runs already made stay recorded.
    pub async fn sweep_within(
        &self,
        role: Role,
        max: usize,
        deadline: Option<std::time::Instant>,
    ) -> Result<SweepReport, StoreError> {
        let mut report = SweepReport {
            role,
            paused: None,
            lost: Vec::new(),
            ran: Vec::new(),
            held: Vec::new(),
            queued: Vec::new(),
            truncated: 0,
            recovered: 0,
        };
        report.recovered = self.recover_spooled().await?;
        if let Some(reason) = self.paused().await? {
            report.paused = Some(reason);
            return Ok(report);
        }
        let now = self.now();
        report.lost = self.count_lost_runs(now).await?;
        let mut gate = Gate {
            actions: &self.specs,
            paused: None,
            runs_today: self.gate_counts(now).await?,
            daily_cap: self.config.policy.daily_cap,
            now: Some(now),
        };
        let mut to_queue = Vec::new();
        // Each task is considered once per sweep; after a pass that ran something, the ready set
        // is read again, so a chain moves on within one sweep up to the limit.
        let mut considered: HashSet<TaskId> = HashSet::new();
        loop {
            let ready = self.store.ready(self.now(), SWEEP_SCAN).await?;
            let mut tasks = ready.tasks;
            if ready.total > tasks.len() {
                // Past the window, the rows this role may run (I5): the held rows before them
                // do not hide them.
                let scope = role.scope(&gate);
                let seen: HashSet<TaskId> = tasks.iter().map(|t| t.id).collect();
                let more = self.store.ready_head(self.now(), Some(scope), SWEEP_SCAN).await?;
                tasks.extend(more.into_iter().filter(|t| !seen.contains(&t.id)));
            }
            let unseen = tasks.iter().filter(|t| !considered.contains(&t.id)).count();
            let runs_before = report.ran.len();
            report.truncated = ready.total.saturating_sub(tasks.len());
            for task in tasks {
                if !considered.insert(task.id) {
                    continue;
                }
                match self.claim_request(&task, role.mode(), &gate, &self.worker, self.now()) {
                    Err(hold) => {
                        if hold == Hold::AwaitingApproval {
                            to_queue.push(task.id);
                        }
                        report.held.push(Held { id: task.id, title: task.title.clone(), hold });
                    }
                    Ok(_)
                        if report.ran.len() >= max
                            || deadline.is_some_and(|d| std::time::Instant::now() >= d)
                            || self.stop_level() >= Stop::Drain =>
                    {
                        // Eligible, but over this invocation's limit or past its time budget: left
                        // for the next sweep, and counted.
                        considered.remove(&task.id);
                        report.truncated += 1;
                    }
                    Ok(request) => {
                        let name = request.action.clone();
                        if let Some(run) = self.claim_and_run(request, Record::Once).await? {
                            *gate.runs_today.by_action.entry(name).or_insert(0) += 1;
                            gate.runs_today.total += 1;
                            report.ran.push(run);
                        }
                    }
                }
            }
            if unseen == 0
                || report.ran.len() == runs_before
                || report.ran.len() >= max
                || self.stop_level() >= Stop::Drain
            {
                break;
            }
        }
        if report.truncated > 0 || considered.len() >= SWEEP_SCAN {
            // Past the window too (S2): every external row waits in the queue for its person.
            let beyond = self.awaiting_approval(self.now(), None).await?;
            let new: Vec<TaskId> = beyond.into_iter().filter(|id| !to_queue.contains(id)).collect();
            to_queue.extend(new);
        }
        if !to_queue.is_empty() {
            let by = format!("sweep:{}", role.as_str());
            report.queued = self.store.queue_approvals(to_queue, by, self.now()).await?;
        }
        if !report.ran.is_empty() {
            self.write_back_sources().await;
        }
        Ok(report)
    }

    /// Counts every lost run (S4) and kills what is left of each on this machine (S14): when a
    /// worker and its supervisor were both killed (`kill -9` of every daicho process), the
    /// executor of the lost attempt may still run here, with no one to stop it.
    pub(crate) async fn count_lost_runs(&self, now: Timestamp) -> Result<Vec<(TaskId, Status)>, StoreError> {
        let lost = self.store.expire_leases(now, self.config.policy.failures).await?;
        if lost.is_empty() || !runner::supervised() {
            return Ok(lost);
        }
        let Some(ledger) = supervise::ledger() else { return Ok(lost) };
        for &(id, _) in &lost {
            // Every attempt up to the lost one (a new claim since would be a higher one).
            let Some(row) = self.store.get(id).await? else { continue };
            let below = if row.status == Status::Running { row.attempt } else { row.attempt + 1 };
            let task = id.to_string();
            let _ =
                tokio::task::spawn_blocking(move || supervise::kill_earlier_attempts(ledger, &task, below))
                    .await;
        }
        Ok(lost)
    }

    /// Writes the ledger back into every Markdown source configured with `write_back` (X6),
    /// after runs changed rows: each is pulled first, then written once. A failure or a
    /// conflict is logged; the runs stand.
    pub async fn write_back_sources(&self) -> Vec<sync::SourceReport> {
        let mut reports = Vec::new();
        for source in self.config.sources.iter().filter(|s| s.write_back) {
            let (store, clock) = (&*self.store, self.clock());
            match writeback::pull_and_write_back(store, &self.config, clock, source, &mut || {}).await {
                Ok((mut report, written)) => {
                    report.write_back = written;
                    reports.push(report);
                }
                Err(e) => tracing::warn!(source = %source.name, "write-back failed: {}", error::chain(&e)),
            }
        }
        reports
    }

    /// Runs one task now (`daicho run`, `daicho run-heavy`), by the same rules.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`] for an unknown id, or another store error.
    pub async fn run_task(&self, id: TaskId, heavy: bool) -> Result<RunOne, StoreError> {
        let held =
            |task: &Task, hold| Ok(RunOne::Held(Held { id: task.id, title: task.title.clone(), hold }));
        self.recover_spooled().await?;
        let now = self.now();
        if let Some(reason) = self.paused().await? {
            let task = self.store.get(id).await?.ok_or(StoreError::NotFound(id))?;
            return held(&task, Hold::Paused(reason));
        }
        self.count_lost_runs(now).await?;
        let task = self.store.get(id).await?.ok_or(StoreError::NotFound(id))?;
        let gate = Gate {
            actions: &self.specs,
            paused: None,
            runs_today: self.gate_counts(now).await?,
            daily_cap: self.config.policy.daily_cap,
            now: Some(now),
        };
        let mode = if heavy { Mode::Heavy } else { Mode::Manual };
        let request = match self.claim_request(&task, mode, &gate, &self.worker, self.now()) {
            Ok(request) => request,
            Err(hold) => return held(&task, hold),
        };
        match self.claim_and_run(request, Record::WhileLeaseHolds).await? {
            Some(run) => {
                self.write_back_sources().await;
                Ok(RunOne::Ran(run))
            }
            None => {
                let status = self.store.get(id).await?.map_or(task.status, |t| t.status);
                held(&task, Hold::NotReady(status))
            }
        }
    }

    /// The one decide-then-claim step (S1, S2): the policy's decision for `task` in `mode`
    /// ([`daicho_core::policy::decide_claim`]) as the claim request `worker` makes at `now`,
    /// guarded by what the row must still hold when the claim commits. Every claim of the engine
    /// (a sweep, `run`, a worker's slots, a remote worker) is built here.
    pub(crate) fn claim_request(
        &self,
        task: &Task,
        mode: Mode,
        gate: &Gate<'_>,
        worker: &str,
        now: Timestamp,
    ) -> Result<ClaimRequest, Hold> {
        let (action, guard) = daicho_core::policy::decide_claim(task, mode, gate)?;
        Ok(ClaimRequest {
            id: task.id,
            worker: worker.to_owned(),
            action: action.name.clone(),
            now,
            lease: self.config.policy.lease,
            require_run: guard.require_run,
            require_approval: guard.require_approval,
        })
    }

    /// The ready rows of `project` (or all) that wait for a person's approval and are not in the
    /// approval queue yet (S2), found in the query behind any number of other rows.
    pub(crate) async fn awaiting_approval(
        &self,
        now: Timestamp,
        project: Option<&str>,
    ) -> Result<Vec<TaskId>, StoreError> {
        let gate = Gate { actions: &self.specs, ..Gate::default() };
        let scope = ClaimScope::awaiting_approval(&gate, project);
        if scope.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.store.ready_head(now, Some(scope), APPROVAL_SCAN).await?.iter().map(|t| t.id).collect())
    }

    /// Claims the task (S1) and, only when the claim is committed, runs it. `None` when it was
    /// not claimable (taken by another worker, changed, or paused meanwhile).
    async fn claim_and_run(
        &self,
        request: ClaimRequest,
        record: Record,
    ) -> Result<Option<RunReport>, StoreError> {
        let Some(config) = self.config.action(&request.action) else {
            return Ok(None);
        };
        let claimed = match self.store.claim(request.clone()).await {
            Ok(claimed) => claimed,
            Err(e) => {
                ClaimOutcome::Claimed(Box::new(self.claim_despite(e, std::slice::from_ref(&request)).await?))
            }
        };
        let claimed = match claimed {
            ClaimOutcome::Claimed(task) => *task,
            ClaimOutcome::NotClaimable | ClaimOutcome::Paused(_) => return Ok(None),
        };
        Ok(Some(self.execute(claimed, config, record).await?))
    }

    /// Whether no process of `attempt` of task `id` (or of an earlier attempt) is left on this
    /// machine, killing those found, for up to [`GONE_WITHIN`] (S14). Found by their environment
    /// ([`supervise::scan_attempts`]), so processes that left the run's group count too; the run's
    /// supervisor is left to kill its run for the first [`SUPERVISOR_GRACE`] (it also finds what
    /// cleared its environment), then killed too. True where runs are not supervised: their
    /// group was killed when the run was dropped.
    async fn all_gone(&self, id: TaskId, attempt: u32) -> bool {
        let Some(ledger) = supervise::ledger().filter(|_| runner::supervised()) else { return true };
        until_gone(ledger, id, attempt).await.is_ok()
    }

    /// Runs a claimed task with heartbeats, records its end, pushes what it found.
    ///
    /// With [`Record::WhileLeaseHolds`] (`daicho run`) a store fault that may pass (a full disk, a
    /// write lock held past the busy timeout, a lost connection) is waited out, with a worker's
    /// backoff, until the run's fence (a sixth of a lease before the row's lease ends, as last
    /// read; no wait when the row cannot be read): the run has ended, and an end given up would
    /// be counted a lost run — a failure — and the task run again. The operator's immediate stop
    /// ends the wait. A sweep records once ([`Record::Once`]): `serve` runs its roles one after
    /// another, and the end given up is spooled for the next look.
    async fn execute(
        &self,
        task: Task,
        action: &ActionConfig,
        record: Record,
    ) -> Result<RunReport, StoreError> {
        let done = self.perform(task, action, exec).await;
        let (id, attempt) = (done.ctx.task.id, done.ctx.task.attempt);
        let mut wait = Duration::from_millis(500);
        // Measured on the monotonic clock from the fence read once: a test clock that stands
        // still never ends the wait.
        let mut budget = None;
        loop {
            let error = match self.record(vec![done.clone()]).await {
                Ok(mut reports) => {
                    return reports.pop().ok_or_else(|| StoreError::backend("no report for a run"));
                }
                Err(error) if error.is_retryable() && record == Record::WhileLeaseHolds => error,
                Err(error) => return Err(error),
            };
            if budget.is_none() {
                let fence = match self.store.get(id).await {
                    Ok(Some(row)) if row.attempt == attempt => row.lease.map(|lease| {
                        daicho_core::policy::fence_at(lease.expires_at, self.config.policy.lease)
                    }),
                    _ => None,
                };
                let left = fence.and_then(|fence| Duration::try_from(fence.duration_since(self.now())).ok());
                budget = Some((tokio::time::Instant::now(), left.unwrap_or(Duration::ZERO)));
            }
            let (since, left) = budget.unwrap_or((tokio::time::Instant::now(), Duration::ZERO));
            let stopped = self.stop_level() == Stop::Now;
            if stopped || since.elapsed() + wait >= left {
                let spooled = self.spool.as_ref().is_some_and(|spool| spool.has_end(id, attempt));
                let then = match spooled {
                    true => "it is spooled, and the next daicho on this machine records it",
                    false => "it could not be spooled either, so the ledger will count it as a lost run",
                };
                return Err(StoreError::Unavailable(format!(
                    "{id} ran, but its end could not be recorded {}: {error}; {then}",
                    if stopped { "before the stop" } else { "while its lease held" }
                )));
            }
            tracing::warn!(task = %id, attempt, "the run ended; recording its end waits for the ledger ({error}); trying again in {wait:?}");
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.wait_stop(Stop::Now) => {}
            }
            wait = (wait * 2).min(Duration::from_secs(10));
        }
    }

    /// Runs a claimed task with `runner` while heartbeats keep its lease. The outcome is `None`
    /// when the lease was lost meanwhile (the run's end is then not recorded).
    async fn perform<R, F>(&self, task: Task, action: &ActionConfig, runner: R) -> Performed
    where
        R: FnOnce(RunContext, ActionConfig) -> F,
        F: Future<Output = ExecOutcome>,
    {
        let mut ctx = RunContext::new(task, &action.spec.name);
        // The supervisor kills the run when this daicho is silent for a third of the lease: a
        // freeze right before a renewal leaves two thirds of it (S14).
        ctx.alive_within = Duration::try_from(self.config.policy.lease / 3).ok();
        ctx.record_to = self.spool.as_ref().map(|spool| runner::RecordTo {
            base: spool.run_base(ctx.task.id, ctx.task.attempt),
            worker: self.worker.clone(),
        });
        let (id, attempt) = (ctx.task.id, ctx.task.attempt);
        // Held from before it starts: its supervisor's account and then its spooled end are this
        // engine's to read and record, no other look's.
        let held = HeldEnd::new(&self.held, (id, attempt));
        let expires = ctx.task.lease.as_ref().map_or_else(Timestamp::now, |l| l.expires_at);
        // Room for the end, kept before the run starts: a disk that fills during the run still
        // takes the end, which would otherwise be counted lost (S14, D3).
        if let Some(spool) = self.spool.clone() {
            let kept = tokio::task::spawn_blocking(move || spool.reserve(id, attempt)).await;
            if !matches!(kept, Ok(Ok(()))) {
                tracing::warn!(task = %id, attempt, "no room could be kept for the run's end: {kept:?}");
            }
        }
        tracing::info!(task = %id, attempt, action = %action.spec.name, "run starts");
        let run = runner(ctx.clone(), action.clone());
        // Dropping the run kills its executor (every process of it).
        let outcome = tokio::select! {
            outcome = run => Ended::Ran(outcome),
            ended = self.keep_lease(id, attempt, expires) => ended,
            () = stopped(self.stop.clone(), Stop::Now) => {
                tracing::warn!(task = %id, attempt, "run killed: the operator stopped daicho");
                Ended::Interrupted("stopped by the operator: the executor was killed, the claim returned".to_owned())
            }
        };
        // A run stopped from here (a person's move, the operator's stop) is over only once every
        // process of it is gone: its end clears the fence or returns the claim, and then another
        // machine may run the task (S14). Its supervisor kills them as the run is dropped; this
        // makes sure, also when the supervisor cannot (stopped, or killed by hand).
        let outcome = match outcome {
            Ended::Stopped(_) | Ended::Interrupted(_) if !self.all_gone(id, attempt).await => {
                tracing::error!(
                    task = %id,
                    attempt,
                    "processes of the stopped run are still alive: its end is not recorded, so the task waits for its lease to run out"
                );
                Ended::LeaseLost
            }
            outcome => outcome,
        };
        let performed = Performed {
            ctx,
            action: action.spec.name.clone(),
            on_success: action.spec.on_success.status(),
            outcome,
            held: Some(held),
        };
        self.spool_end(&performed).await;
        performed
    }

    /// Records the ends of several runs in one transaction (fenced by attempt each), then pushes
    /// each run's found tasks in a transaction of its own (X2). One report per run, in order.
    async fn record(&self, done: Vec<Performed>) -> Result<Vec<RunReport>, StoreError> {
        let (ends, finishes) = Ends::of(done, &self.worker, self.now(), self.config.policy.failures);
        let recorded = if finishes.is_empty() { Vec::new() } else { self.finish_spooled(finishes).await? };
        self.after_record(ends, recorded).await
    }

    /// A worker's turn on one free slot (I5): records `done` ([`Engine::record`]) and makes the
    /// next claim with `pick` in one call of the store ([`Store::finish_and_claim_next`]: one
    /// commit for both). Each gets its own result.
    pub(crate) async fn record_and_claim_next(
        &self,
        done: Vec<Performed>,
        scope: ClaimScope,
        window: usize,
        pick: daicho_store::Pick,
    ) -> (Option<Result<Vec<RunReport>, StoreError>>, Result<Option<daicho_store::NextClaim>, StoreError>)
    {
        let recording = !done.is_empty();
        let (ends, finishes) = Ends::of(done, &self.worker, self.now(), self.config.policy.failures);
        let runs: Vec<(TaskId, u32)> = finishes.iter().map(|f| (f.id, f.attempt)).collect();
        let both =
            self.store.finish_and_claim_next(finishes, self.now(), scope, window, crate::SWEEP_SCAN, pick);
        let (recorded, next) = self.spooled(runs, both, |(recorded, _)| recorded.is_err()).await;
        let recorded = match recorded {
            Ok(recorded) if recording => Some(self.after_record(ends, recorded).await),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        };
        (recorded, next)
    }

    /// The row, when the ledger holds `report`'s end as this worker recorded it: the run record
    /// of its attempt closed by this worker with the end's outcome (success, failure or timeout:
    /// only the run's own worker writes those), and no claim since.
    async fn recorded_earlier(&self, report: &RunReport) -> Result<Option<Task>, StoreError> {
        let outcome = match report.result {
            RunResult::Success => RunOutcome::Success,
            RunResult::Failure => RunOutcome::Failure,
            RunResult::Timeout => RunOutcome::Timeout,
            RunResult::LeaseLost | RunResult::Interrupted | RunResult::Stopped => return Ok(None),
        };
        match self.recorded_run(report.id, report.attempt, &self.worker, outcome, |_, _| true).await {
            Ok((row, _)) => {
                tracing::warn!(task = %report.id, attempt = report.attempt, "a run's end recorded by a commit whose answer was lost");
                Ok(Some(row))
            }
            Err(StoreError::LeaseLost { .. } | StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// What follows the record of run ends: the spooled copies of those recorded (or no longer
    /// current) removed, and each run's found tasks pushed. One report per run, in order.
    async fn after_record(
        &self,
        ends: Ends,
        recorded: Vec<Result<Task, StoreError>>,
    ) -> Result<Vec<RunReport>, StoreError> {
        // The ends stay held until their record is done ([`HeldEnd`]).
        let Ends { reports, after, held: _held } = ends;
        // Ends and what follows them come back in the order the recorded runs were pushed.
        let mut ends = recorded.into_iter().zip(after);
        let mut out = Vec::with_capacity(reports.len());
        for (mut report, recorded) in reports {
            let Some((end, (found, push_error))) = recorded.then(|| ends.next()).flatten() else {
                out.push(report);
                continue;
            };
            let (id, attempt) = (report.id, report.attempt);
            // An end an earlier call recorded, whose answer a store fault cut off (the commit
            // went through, the connection was lost before its reply), comes back stale when
            // recorded again: it is the ledger's all the same, and what the run found is pushed
            // (S14, X2).
            let end = match end {
                Err(StoreError::LeaseLost { .. }) => match self.recorded_earlier(&report).await? {
                    Some(row) => Ok(row),
                    None => end,
                },
                end => end,
            };
            match end {
                Ok(row) => report.status = Some(row.status),
                Err(StoreError::LeaseLost { .. }) => {
                    // No longer current: the spooled copy of the end has done its job. (A run a
                    // person stopped had its fence cleared by it, and stays `Stopped`.)
                    if let Some(spool) = &self.spool {
                        spool.remove(id, attempt);
                    }
                    if report.result != RunResult::Stopped {
                        report.result = RunResult::LeaseLost;
                    }
                    out.push(report);
                    continue;
                }
                Err(e) => return Err(e),
            }
            tracing::info!(task = %id, attempt, result = ?report.result, status = ?report.status, "run ends");
            // The end is recorded whatever follows: a store fault from here on fails no report.
            // The spooled copy stays until the found tasks are pushed, so that a daicho that
            // dies first leaves them to the next daicho on this machine, and a push the store
            // refused for now is made on this worker's next look at the spool (X2, S14).
            let pushed = async {
                if let Some(error) = &push_error {
                    self.store.note_run(id, attempt, format!("found tasks not pushed: {error}")).await?;
                }
                self.push_found(&report.action, id, attempt, found).await
            };
            match pushed.await {
                Ok((pushed, error)) => {
                    if let Some(spool) = &self.spool {
                        spool.remove(id, attempt);
                    }
                    report.pushed = pushed;
                    report.push_error = error.or(push_error);
                }
                Err(e) => {
                    let kept = match self.spool {
                        Some(_) => "; kept in the spool and pushed on a later look at it",
                        None => "",
                    };
                    tracing::warn!(task = %id, attempt, "found tasks not pushed: {e}{kept}");
                    report.push_error = Some(format!("{e}{kept}"));
                }
            }
            out.push(report);
        }
        Ok(out)
    }

    /// Extends the lease (expiring at `expires`) every third of its length, and reads the row
    /// every [`STOP_CHECK`]; returns only when the claim is no longer current
    /// ([`Ended::Stopped`] when a person moved the row out of `running`, else
    /// [`Ended::LeaseLost`]), or the lease could not be renewed before
    /// [`daicho_core::policy::fence_at`] ([`Ended::LeaseLost`]). Then the caller
    /// drops the run, killing its executor while the lease still holds, so no other worker's claim
    /// of the task overlaps it (S14, self-fencing). A store error is retried until then.
    async fn keep_lease(&self, id: TaskId, attempt: u32, mut expires: Timestamp) -> Ended {
        let lease = self.config.policy.lease;
        // Time left before `fence`, by the engine's clock.
        let left_before =
            |fence: Timestamp| Duration::try_from(fence.duration_since(self.now())).unwrap_or(Duration::ZERO);
        let every =
            Duration::try_from(lease / 3).unwrap_or(Duration::from_secs(60)).max(Duration::from_millis(100));
        // How the run ends when its row says the claim is gone: stopped by a person (the row
        // moved out of `running`, the lease kept as a fence), or lost otherwise (its lease ran
        // out and the row was counted lost or claimed again): nothing to record then.
        let gone = |row: &Task| {
            let fenced = row.attempt == attempt && row.lease.as_ref().is_some_and(|l| l.owner == self.worker);
            if fenced && row.status != Status::Running {
                tracing::warn!(task = %id, attempt, status = %row.status, "run stopped: a person moved the task");
                return Some(Ended::Stopped(format!(
                    "a person moved the task to {} during the run; the executor was killed",
                    row.status
                )));
            }
            (!fenced).then(|| {
                tracing::warn!(task = %id, attempt, "run stopped: the claim is no longer current");
                Ended::LeaseLost
            })
        };
        let mut wait = every;
        let mut checked = tokio::time::Instant::now();
        loop {
            let fence = daicho_core::policy::fence_at(expires, lease);
            // Slept in slices of at most a second, the fence read again after each by the
            // engine's clock (the wall clock the lease is counted in): a suspended machine or a
            // paused VM stops the monotonic clock tokio sleeps on, so after a resume the fence
            // may have passed long before a whole sleep of `wait` ends (S14).
            let slept = tokio::time::Instant::now();
            loop {
                let left = left_before(fence);
                if left.is_zero() {
                    tracing::warn!(task = %id, attempt, "run stopped: the lease could not be renewed before {fence}");
                    return Ended::LeaseLost;
                }
                if checked.elapsed() >= STOP_CHECK {
                    // A person's move out of `running` is seen within seconds, not at the next
                    // renewal (a third of the lease): the row runs again once this run is gone.
                    checked = tokio::time::Instant::now();
                    let read = tokio::time::timeout(left.min(STOP_CHECK), self.store.get(id)).await;
                    // Unanswered or failed: the heartbeat finds out in its turn.
                    if let Ok(Ok(Some(row))) = read
                        && let Some(ended) = gone(&row)
                    {
                        return ended;
                    }
                }
                let rest = wait.saturating_sub(slept.elapsed());
                if rest.is_zero() {
                    break;
                }
                tokio::time::sleep(rest.min(left).min(FENCE_CHECK)).await;
            }
            let left = left_before(fence);
            let until = self.now() + lease;
            match tokio::time::timeout(left, self.store.heartbeat(id, attempt, &self.worker, until)).await {
                Ok(Ok(())) => {
                    expires = until;
                    wait = every;
                }
                Ok(Err(StoreError::LeaseLost { .. })) => {
                    let left = left_before(fence);
                    let read =
                        tokio::time::timeout(left.max(Duration::from_secs(1)), self.store.get(id)).await;
                    return match read {
                        Ok(Ok(Some(row))) => gone(&row).unwrap_or(Ended::LeaseLost),
                        _ => {
                            tracing::warn!(task = %id, attempt, "run stopped: the claim is no longer current");
                            Ended::LeaseLost
                        }
                    };
                }
                Ok(Err(e)) => {
                    // A transient store error: try again soon, while the lease still holds.
                    tracing::warn!(task = %id, "heartbeat failed: {e}");
                    wait = (every / 4).max(Duration::from_millis(100));
                }
                Err(_) => {
                    tracing::warn!(task = %id, "heartbeat unanswered until the fence");
                }
            }
        }
    }
}

/// The runs of a record, as the record's reports and what follows each recorded end: the tasks
/// its run found, and why pushing them failed, if it did.
struct Ends {
    /// Each run's report, and whether its end is among the finishes.
    reports: Vec<(RunReport, bool)>,
    /// For each finish, in order: the tasks found and the push error.
    after: Vec<(Vec<daicho_core::Item>, Option<String>)>,
    /// The ends, held until their record is done ([`HeldEnd`]).
    held: Vec<Arc<HeldEnd>>,
}

impl Ends {
    /// The reports and finishes of `done` by `worker` at `now`.
    fn of(
        done: Vec<Performed>,
        worker: &str,
        now: Timestamp,
        policy: daicho_core::policy::FailurePolicy,
    ) -> (Ends, Vec<Finish>) {
        let mut reports = Vec::with_capacity(done.len());
        let mut finishes = Vec::with_capacity(done.len());
        let mut after = Vec::with_capacity(done.len());
        let mut held = Vec::with_capacity(done.len());
        for performed in done {
            let Performed { ctx, action, on_success, outcome, held: kept } = performed;
            held.extend(kept);
            let mut report = RunReport {
                id: ctx.task.id,
                title: ctx.task.title.clone(),
                action,
                attempt: ctx.task.attempt,
                result: RunResult::LeaseLost,
                status: None,
                error: None,
                pushed: None,
                push_error: None,
            };
            let stopped = matches!(outcome, Ended::Stopped(_));
            let (end, found, push_error) = match outcome {
                Ended::LeaseLost => {
                    reports.push((report, false));
                    continue;
                }
                Ended::Interrupted(reason) | Ended::Stopped(reason) => {
                    report.error = Some(reason.clone());
                    (RunEnd::Interrupted { reason }, Vec::new(), None)
                }
                Ended::Ran(ExecOutcome::Success { result, tasks, tokens, push_error }) => (
                    RunEnd::Success {
                        result,
                        status: on_success,
                        tokens_in: tokens.map(|t| t.0),
                        tokens_out: tokens.map(|t| t.1),
                    },
                    tasks,
                    push_error,
                ),
                Ended::Ran(ExecOutcome::Failure { error, timeout }) => {
                    report.error = Some(error.clone());
                    (RunEnd::Failure { error, timeout }, Vec::new(), None)
                }
            };
            report.result = match &end {
                RunEnd::Success { .. } => RunResult::Success,
                RunEnd::Failure { timeout: true, .. } => RunResult::Timeout,
                RunEnd::Failure { .. } => RunResult::Failure,
                RunEnd::Interrupted { .. } if stopped => RunResult::Stopped,
                RunEnd::Interrupted { .. } => RunResult::Interrupted,
            };
            finishes.push(Finish {
                id: ctx.task.id,
                attempt: ctx.task.attempt,
                worker: worker.to_owned(),
                now,
                end,
                policy,
            });
            after.push((found, push_error));
            reports.push((report, true));
        }
        (Ends { reports, after, held }, finishes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// S9: `stats --since` takes `all`, `today` (the local day's start), a duration back and a
    /// date or time; anything else says what is wrong.
    #[test]
    fn s9_stats_since_takes_all_today_a_duration_back_or_a_time() {
        let now: Timestamp = "2026-12-03T12:00:00Z".parse().expect("a time");
        let day = jiff::SignedDuration::from_hours(24);
        assert_eq!(RunStats::since("all", now), Ok(Timestamp::UNIX_EPOCH));
        let today = RunStats::since(" today ", now).expect("today");
        assert!(today <= now && now.duration_since(today) < day, "{today}");
        assert_eq!(
            RunStats::since("2026-12-01T09:00:00Z", now),
            Ok("2026-12-01T09:00:00Z".parse().expect("a time"))
        );
        let week = RunStats::since("7d", now).expect("a week back");
        let back = now.duration_since(week);
        assert!(back > day * 6 && back < day * 8, "{back:?}");
        assert!(RunStats::since("bogus", now).expect_err("refused").contains("bogus"));
    }
}

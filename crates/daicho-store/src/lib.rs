//! The storage contract of daicho.
//!
//! [`Store`] is the one interface the engine, the CLI and the server use. Each method is one
//! transaction: it either happens whole or not at all, and every mutation writes its journal
//! entry in the same transaction. Backends (SQLite, PostgreSQL) implement the contract; the
//! suite in [`contract`] is written once and instantiated by every backend with
//! [`store_contract_tests!`].
//!
//! Stores apply the decisions of `daicho-core` (`merge_plan`, `check_new_deps`, `TaskEdit`);
//! they never re-decide them. Backend-specific code is SQL, not policy.

pub mod codec;
pub mod contract;
pub mod ends;
pub mod model;
pub mod states;
pub mod writes;

pub use states::{JournalKind, RunOutcome};

use std::future::Future;

use daicho_core::dag::DagError;
use daicho_core::edit::TaskEdit;
use daicho_core::item::Items;
use daicho_core::policy::{ClaimScope, FailurePolicy, RunCounts};
use daicho_core::{Actor, InputError, Item, Status, Task, TaskId};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value};

/// What the store reports when a method fails.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No task has this id.
    #[error("no task {0}")]
    NotFound(TaskId),
    /// Input refused: names the file, the line and the reason.
    #[error(transparent)]
    InvalidInput(#[from] InputError),
    /// A dependency change refused: an unknown id or a cycle (with its path).
    #[error(transparent)]
    Dag(#[from] DagError),
    /// The change conflicts with the stored state.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A write of a run whose claim is no longer current: the row was finished, expired or
    /// claimed again (a higher attempt) since. The write is rejected (fencing).
    #[error("lease lost: {id} attempt {attempt} is no longer the current run")]
    LeaseLost {
        /// The task.
        id: TaskId,
        /// The stale attempt.
        attempt: u32,
    },
    /// The writer may not do this (S13): only a person edits, approves, or sets `running`
    /// by a claim.
    #[error(transparent)]
    Refused(#[from] daicho_core::authority::Refusal),
    /// The database is out of reach or busy for now: a lost or refused connection, a server
    /// shutting down, a lock held longer than the busy timeout. Trying again later may succeed;
    /// nothing was written.
    #[error("database unavailable (temporary; try again): {0}")]
    Unavailable(String),
    /// The database failed or could not be opened, or what it holds does not read back. The
    /// source error, when there is one, is kept (`std::error::Error::source`).
    #[error("database: {message}")]
    Backend {
        /// What failed.
        message: String,
        /// The error underneath, if any (the driver's, a decoder's).
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl StoreError {
    /// A backend failure with no error underneath.
    pub fn backend(message: impl Into<String>) -> StoreError {
        StoreError::Backend { message: message.into(), source: None }
    }

    /// A backend failure caused by `source`: the message names both, the source is kept.
    pub fn backend_from(
        context: impl std::fmt::Display,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> StoreError {
        let source = source.into();
        StoreError::Backend { message: format!("{context}: {source}"), source: Some(source) }
    }

    /// Whether trying again later may succeed ([`StoreError::Unavailable`]).
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// A store result.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// What to do with a dependency on an id the ledger does not have.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnknownDeps {
    /// Refuse the whole batch (push, import, add).
    #[default]
    Refuse,
    /// Keep the row; it shows as blocked by a missing task. No command uses it today: a pull
    /// source's unknown dep is refused like any other input's (X4); the contract keeps it
    /// tested for a caller that must hold such a row.
    Keep,
}

/// How many items of a batch an upsert builds and writes at a time ([`Batch::ranges`]).
pub const UPSERT_RANGE: usize = 4096;

/// A batch of incoming items to upsert through `merge_plan`.
#[derive(Clone, Debug)]
pub struct Batch {
    /// The items, in input order: held, or read again from their text a range at a time.
    pub items: Items,
    /// Who is writing (`sync:<source>`, `push:<source>`, `human:<name>`).
    pub actor: Actor,
    /// The time stamped on new rows and journal entries.
    pub now: Timestamp,
    /// The file (or stream) named in errors about items that carry no file of their own.
    pub file: String,
    /// What to do with a dependency on an unknown id.
    pub unknown_deps: UnknownDeps,
}

/// An item the upsert left alone, with the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedItem {
    /// The item's file, when it came from one (an import of several files names it).
    pub file: Option<std::sync::Arc<str>>,
    /// The item's line in its file.
    pub line: Option<usize>,
    /// The item's title.
    pub title: String,
    /// The row it matched, if any.
    pub id: Option<TaskId>,
    /// Why it changed nothing.
    pub reason: std::borrow::Cow<'static, str>,
}

/// What an upsert did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpsertReport {
    /// Rows added, in input order.
    pub added: Vec<TaskId>,
    /// Rows patched, in input order.
    pub updated: Vec<TaskId>,
    /// Items skipped, with reasons.
    pub skipped: Vec<SkippedItem>,
    /// Fields only a person writes that a pulled source's items carried: not written (S13).
    pub ignored: Vec<IgnoredField>,
}

/// A person-only field a pulled source offered and the upsert did not write (S13).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoredField {
    /// The item's line in its file.
    pub line: Option<usize>,
    /// The item's title.
    pub title: String,
    /// The field (`run`, `correction`, `result`, `run_at`, `failures`).
    pub field: &'static str,
}

impl UpsertReport {
    /// Adds what the plan of the `items` that start at item `start` did (both backends): their
    /// rows added and patched, their skips and ignored fields, after those of the ranges before.
    pub fn note_plan(&mut self, start: usize, items: &[Item], plan: &daicho_core::Plan) {
        self.added.extend(plan.add.iter().map(|a| a.task.id));
        self.updated.extend(plan.patch.iter().map(|p| p.id));
        self.skipped.extend(plan.skip.iter().map(|s| SkippedItem {
            file: items.get(s.index - start).and_then(|i| i.file.clone()),
            line: s.line,
            title: s.title.clone(),
            id: s.id,
            reason: s.reason.text(),
        }));
        self.ignored.extend(plan.ignored.iter().map(|n| IgnoredField {
            line: n.line,
            title: items.get(n.index - start).map(|i| i.title.clone()).unwrap_or_default(),
            field: n.field.name(),
        }));
    }
}

/// Which rows [`Store::list`] returns; every set field must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only this project.
    pub project: Option<String>,
    /// Only these statuses (empty: all).
    pub statuses: Vec<Status>,
    /// Only this source.
    pub source: Option<String>,
    /// Only rows with this tag.
    pub tag: Option<String>,
    /// Only rows that wait on this task (its dependents).
    pub waiting_on: Option<TaskId>,
    /// Only rows with this assignee.
    pub assignee: Option<String>,
    /// Only rows of this work type.
    pub work_type: Option<String>,
    /// Only rows whose title or body contains this text (ASCII letters in any case).
    pub text: Option<String>,
    /// Only rows due before this day (with `statuses` open: the overdue ones).
    pub due_before: Option<jiff::civil::Date>,
    /// The order of the rows, and of keyset pages.
    pub order: ListOrder,
    /// Only rows after this one in `order` (keyset paging: pass the last id of the previous
    /// page).
    pub after: Option<TaskId>,
    /// At most this many rows.
    pub limit: Option<usize>,
}

/// The order of a listing; every order ends with the id, so pages never skip or repeat a row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ListOrder {
    /// By id.
    #[default]
    Id,
    /// By due date, undated last.
    Due,
    /// Larger priority first.
    Priority,
    /// Most recently changed first.
    Updated,
}

impl ListOrder {
    /// Every order, as named in URLs and on the command line.
    pub const ALL: [ListOrder; 4] = [ListOrder::Id, ListOrder::Due, ListOrder::Priority, ListOrder::Updated];

    /// The order's name (`id`, `due`, `priority`, `updated`).
    pub fn as_str(self) -> &'static str {
        match self {
            ListOrder::Id => "id",
            ListOrder::Due => "due",
            ListOrder::Priority => "priority",
            ListOrder::Updated => "updated",
        }
    }

    /// The order a name means.
    pub fn parse(name: &str) -> Option<ListOrder> {
        ListOrder::ALL.into_iter().find(|o| o.as_str() == name)
    }
}

/// A task in the approval queue (S2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queued {
    /// The task.
    pub id: TaskId,
    /// When it was queued.
    pub queued_at: Timestamp,
    /// Who queued it: the role or worker whose run found it (`sweep:run-requested`,
    /// `worker:host:pid`); empty for entries older than the record.
    pub queued_by: String,
}

/// What a person decided on an external task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Approved: the next run may send it.
    Approved,
    /// Rejected: dropped, the reason kept.
    Rejected,
}

impl Decision {
    /// The name stored and shown (`approved`, `rejected`).
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approved => "approved",
            Decision::Rejected => "rejected",
        }
    }

    /// The decision a stored name means; anything else is an approval (the only decision
    /// recorded before rejections were).
    pub fn parse(text: Option<&str>) -> Decision {
        match text {
            Some("rejected") => Decision::Rejected,
            _ => Decision::Approved,
        }
    }
}

/// A decision on an external task, as the approval history shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decided {
    /// The queue entry (queued at the decision when it was never queued).
    pub queued: Queued,
    /// When the person decided.
    pub decided_at: Timestamp,
    /// Who decided.
    pub decided_by: String,
    /// What they decided.
    pub decision: Decision,
    /// Their reason (a rejection's; empty for most approvals).
    pub reason: String,
}

/// How many rows of one project are in one status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusCount {
    /// The project.
    pub project: String,
    /// The status.
    pub status: Status,
    /// The number of rows.
    pub count: u64,
}

/// The ready set: the first rows in run order and how many there are in all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadySet {
    /// Ready rows in run order (priority, then id), at most the limit asked for.
    pub tasks: Vec<Task>,
    /// The number of ready rows in all.
    pub total: usize,
}

/// One journal entry: a change to one row.
#[derive(Clone, Debug, PartialEq)]
pub struct JournalEntry {
    /// Increasing sequence number across the ledger.
    pub seq: i64,
    /// When the change was committed.
    pub at: Timestamp,
    /// The row.
    pub task: TaskId,
    /// Who changed it (`sync:<source>`, `human:<name>`, …).
    pub actor: String,
    /// What the entry records (`add`, `patch`, `edit`, `claim`, …).
    pub kind: JournalKind,
    /// The changed fields before (empty for `add`).
    pub before: Map<String, Value>,
    /// The changed fields after (the whole row for `add`).
    pub after: Map<String, Value>,
}

impl JournalEntry {
    /// An entry from its stored columns (`seq, at, task_id, actor, kind, before, after`; `at` in
    /// microseconds), as both backends store it.
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`] naming the entry and the column that does not read back.
    pub fn from_stored(
        seq: i64,
        at: i64,
        task: &str,
        actor: String,
        kind: &str,
        before: &str,
        after: &str,
    ) -> Result<JournalEntry> {
        let corrupt = |what: &str| StoreError::backend(format!("journal entry {seq}: bad {what}"));
        Ok(JournalEntry {
            seq,
            at: Timestamp::from_microsecond(at).map_err(|_| corrupt("time"))?,
            task: TaskId::parse(task).ok_or_else(|| corrupt("task id"))?,
            actor,
            kind: JournalKind::parse(kind).ok_or_else(|| corrupt("kind"))?,
            before: serde_json::from_str(before).map_err(|_| corrupt("before"))?,
            after: serde_json::from_str(after).map_err(|_| corrupt("after"))?,
        })
    }
}

/// A request to claim one task for a run (S1).
#[derive(Clone, Debug)]
pub struct ClaimRequest {
    /// The task.
    pub id: TaskId,
    /// The worker claiming it (`host:pid`); it owns the lease.
    pub worker: String,
    /// The action that will run it.
    pub action: String,
    /// The claim's time: `run_at`, and the start of the lease.
    pub now: Timestamp,
    /// How long the lease lasts without a heartbeat.
    pub lease: SignedDuration,
    /// Claim only if the ▶ run box is ticked (a requested or approved run); the flag is cleared.
    pub require_run: bool,
    /// Claim only if a person approved this run (an external task, S2, S13): ▶ run ticked by
    /// `approve`, with the approving person recorded. The claim spends the approval.
    pub require_approval: bool,
}

/// Decides, of a window of the ready set in run order, which rows a worker would claim and how:
/// the requests, in the order to try them; none to read a wider window ([`Store::claim_next`]).
/// It runs wherever the store reads the rows, so it owns everything it needs; it decides from
/// the rows it is shown alone, since a store may show it the same head again (SQLite runs a
/// claim again when a write it shared a commit with failed).
pub type Pick = Box<dyn FnMut(&[Task]) -> Vec<ClaimRequest> + Send>;

/// What [`Store::claim_next`] did.
#[derive(Clone, Debug)]
pub struct NextClaim {
    /// The requests `pick` made, in the order they were tried.
    pub tried: Vec<ClaimRequest>,
    /// `Claimed` with the row of one of them; `NotClaimable` when other workers took them all
    /// first; `Paused` when the kill switch is on (nothing was written then).
    pub outcome: ClaimOutcome,
}

impl NextClaim {
    /// The first window [`Store::claim_next`] reads: `window` rows, at least one, at most `limit`.
    pub fn first_window(window: usize, limit: usize) -> usize {
        window.clamp(1, limit.max(1))
    }

    /// The window [`Store::claim_next`] reads after one of `window` rows that gave `read` rows
    /// and no request: four times wider, up to `limit`; `None` once the head was read to its end
    /// (fewer rows than asked) or to `limit`.
    pub fn wider_window(window: usize, read: usize, limit: usize) -> Option<usize> {
        (read >= window && window < limit).then(|| (window * 4).min(limit))
    }
}

/// What a claim got.
#[derive(Clone, Debug, PartialEq)]
pub enum ClaimOutcome {
    /// The row is ours: `running`, `run = false`, attempt + 1, leased. Committed.
    Claimed(Box<Task>),
    /// The row is no longer claimable (another worker took it, a person changed it, or it is no
    /// longer ready). Nothing was written.
    NotClaimable,
    /// The kill switch is on; nothing was written.
    Paused(String),
}

/// How a run ended, as the worker reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// The executor succeeded: the row goes to `status` (`review` or `done`) with `result`.
    Success {
        /// What the run produced.
        result: String,
        /// `review` or `done` (the action's `on_success`).
        status: Status,
        /// Prompt tokens reported by an LLM API.
        tokens_in: Option<u64>,
        /// Completion tokens reported by an LLM API.
        tokens_out: Option<u64>,
    },
    /// The executor failed (or timed out): one more failure, back to `pending` or to
    /// `needs_human` at the cap (S3). No retry.
    Failure {
        /// What went wrong.
        error: String,
        /// Whether it was a timeout (S11).
        timeout: bool,
    },
    /// The operator stopped the run (a signal to daicho, S14): its executor was killed and the
    /// claim is returned — back to `pending`, no failure counted, journaled `interrupted`.
    Interrupted {
        /// Why it was stopped.
        reason: String,
    },
}

/// The report of a finished run.
#[derive(Clone, Debug)]
pub struct Finish {
    /// The task.
    pub id: TaskId,
    /// The attempt the worker claimed: the fence.
    pub attempt: u32,
    /// The worker that claimed it.
    pub worker: String,
    /// When the run ended.
    pub now: Timestamp,
    /// How it ended.
    pub end: RunEnd,
    /// How failures are counted.
    pub policy: FailurePolicy,
}

/// One run of a task, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRecord {
    /// The task.
    pub task: TaskId,
    /// The attempt (1 for the first claim).
    pub attempt: u32,
    /// The worker.
    pub worker: String,
    /// The action.
    pub action: String,
    /// When it started.
    pub started: Timestamp,
    /// When it ended, if it has.
    pub finished: Option<Timestamp>,
    /// `running`, `success`, `failure`, `timeout`, `lost` or `interrupted`.
    pub outcome: RunOutcome,
    /// The error of a failed run.
    pub error: String,
    /// Prompt tokens, if reported.
    pub tokens_in: Option<u64>,
    /// Completion tokens, if reported.
    pub tokens_out: Option<u64>,
    /// `T-0042:<attempt>`.
    pub idempotency_key: String,
    /// Notes written after the run (e.g. a failed push of found tasks).
    pub note: String,
}

/// What `purge_source` did (or, without `apply`, would do).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PurgeReport {
    /// The rows purged (or that would be), as they were.
    pub purged: Vec<Task>,
    /// The rows kept, each with the reason.
    pub kept: Vec<(TaskId, String)>,
}

/// What `restore_source` did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// The rows brought back.
    pub restored: Vec<TaskId>,
    /// The purged rows not brought back, each with the reason.
    pub skipped: Vec<(TaskId, String)>,
}

/// Runs per action over a period.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActionStats {
    /// The action.
    pub action: String,
    /// Runs started.
    pub runs: u64,
    /// Runs that succeeded.
    pub successes: u64,
    /// Runs that failed, timed out or were lost.
    pub failures: u64,
    /// Runs still under way.
    pub running: u64,
    /// Prompt tokens.
    pub tokens_in: u64,
    /// Completion tokens.
    pub tokens_out: u64,
}

/// Rows of a dashboard source read per page by [`cross_view`].
const VIEW_PAGE: usize = 5_000;

/// The cross-project view (V1–V4) of the whole ledger without walking it: the open rows per
/// project from the status counts, each project's first rows from [`Store::view_head`] (an
/// index range), and the dashboard sources' open rows counted per project (read in pages of
/// their key range). The reads are separate: a row changed meanwhile shows as one read saw it.
///
/// # Errors
///
/// A store error.
pub async fn cross_view<S: Store>(
    store: &S,
    options: daicho_core::view::ViewOptions,
) -> Result<daicho_core::view::CrossView> {
    use daicho_core::view::{DashboardLine, ProjectHead, is_open_work};
    use std::collections::BTreeMap;
    let mut open: BTreeMap<String, usize> = BTreeMap::new();
    for count in store.status_counts().await?.into_iter().filter(|c| is_open_work(c.status)) {
        *open.entry(count.project).or_default() += count.count as usize;
    }
    let statuses: Vec<Status> = Status::ALL.into_iter().filter(|s| is_open_work(*s)).collect();
    let mut dashboards: BTreeMap<(String, String), usize> = BTreeMap::new();
    for source in &options.dashboard_sources {
        let mut after = Some(TaskId::new(0));
        while let Some(from) = after {
            let filter = ListFilter {
                source: Some(source.clone()),
                statuses: statuses.clone(),
                after: Some(from),
                limit: Some(VIEW_PAGE),
                ..ListFilter::default()
            };
            let page = store.list(filter).await?;
            for task in &page {
                *dashboards.entry((task.project.clone(), source.clone())).or_default() += 1;
            }
            after = page.last().map(|t| t.id).filter(|_| page.len() == VIEW_PAGE);
        }
    }
    for ((project, _), n) in &dashboards {
        if let Some(count) = open.get_mut(project) {
            *count = count.saturating_sub(*n);
        }
    }
    let exclude: Vec<String> = options.dashboard_sources.iter().cloned().collect();
    let mut heads = Vec::new();
    for (project, count) in open.into_iter().filter(|(_, n)| *n > 0) {
        let rows = store.view_head(project.clone(), exclude.clone(), options.per_project).await?;
        heads.push(ProjectHead { project, open: count, rows });
    }
    let dashboards = dashboards
        .into_iter()
        .map(|((project, source), open)| DashboardLine { project, source, open })
        .collect();
    Ok(daicho_core::view::from_heads(&heads, dashboards, &options))
}

/// What a store's one-transaction [`Store::finish_and_claim_next`] answers given `both`, its
/// outcome: should that transaction fail, the ends do not wait on the claim — they are recorded
/// on their own (`finishes`, as given to it), and the claim keeps the error. Both backends'.
pub async fn ends_alone_if_failed<S: Store>(
    store: &S,
    both: Result<(Vec<Result<Task>>, Option<NextClaim>)>,
    finishes: Vec<Finish>,
) -> (Result<Vec<Result<Task>>>, Result<Option<NextClaim>>) {
    match both {
        Ok((ends, next)) => (Ok(ends), Ok(next)),
        Err(e) if finishes.is_empty() => (Ok(Vec::new()), Err(e)),
        Err(e) => (store.finish_many(finishes).await, Err(e)),
    }
}

/// Status counts from a backend's `(project, status, count)` rows, by project then status (in the
/// ledger's status order). An unknown status name is ignored.
pub fn sorted_counts(rows: Vec<(String, String, i64)>) -> Vec<StatusCount> {
    let mut counts: Vec<StatusCount> = rows
        .into_iter()
        .filter_map(|(project, status, count)| {
            Some(StatusCount { project, status: Status::parse(&status)?, count: count.max(0) as u64 })
        })
        .collect();
    counts.sort_by(|a, b| a.project.cmp(&b.project).then((a.status as u8).cmp(&(b.status as u8))));
    counts
}

/// Decides a role lease from the stored value (`owner|expiry in µs`): whether `owner` may take it.
pub fn role_lease_free(stored: Option<&str>, owner: &str, now: Timestamp) -> bool {
    let Some((holder, expiry)) = stored.and_then(|v| v.rsplit_once('|')) else { return true };
    holder == owner || expiry.parse::<i64>().is_ok_and(|e| e <= now.as_microsecond())
}

/// The stored value of a role lease.
pub fn role_lease_value(owner: &str, until: Timestamp) -> String {
    format!("{owner}|{}", until.as_microsecond())
}

/// The storage contract. Each method is one transaction.
///
/// Implementations are cheap to share (`Send + Sync`); methods take `&self`.
pub trait Store: Send + Sync {
    /// Upserts a batch (sync, push, import, add) in one transaction.
    ///
    /// Reads the rows the items match and decides what to do (the merge rules of
    /// `daicho_core::merge`, a range of items at a time: [`Batch::decider`]), checks the whole
    /// batch's new dependency edges with `daicho_core::dag::check_new_deps`, then, a range at a
    /// time in the same transaction, inserts the new rows,
    /// fills the patched cells, keeps the per-row count of unmet deps right and journals every
    /// change with `batch.actor`. New rows keep a requested `T-` id when that number was never
    /// used; other ids are assigned from a counter that never goes back, so an id is never
    /// given twice.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidInput`] naming `batch.file`, the item's line and the reason when a
    /// dependency reference resolves to nothing, names an unknown id (with
    /// [`UnknownDeps::Refuse`]) or closes a cycle. Nothing is written then.
    fn upsert(&self, batch: Batch) -> impl Future<Output = Result<UpsertReport>> + Send;

    /// Replaces a plan (D4) in one transaction: every row of `retire` still open (pending,
    /// running, review) becomes `dropped`, journaled with `batch.actor`, then `batch` is upserted
    /// as by [`Store::upsert`]. When the upsert is refused nothing is dropped either.
    ///
    /// # Errors
    ///
    /// As [`Store::upsert`].
    fn replan(&self, batch: Batch, retire: Vec<TaskId>) -> impl Future<Output = Result<UpsertReport>> + Send;

    /// The row with this id, or `None`.
    fn get(&self, id: TaskId) -> impl Future<Output = Result<Option<Task>>> + Send;

    /// Rows matching the filter, by id.
    fn list(&self, filter: ListFilter) -> impl Future<Output = Result<Vec<Task>>> + Send;

    /// The number of rows per project and status, by project then status (the web UI's project
    /// list and `/metrics`).
    fn status_counts(&self) -> impl Future<Output = Result<Vec<StatusCount>>> + Send;

    /// The ready set at `now` (D1, D5): pending rows whose deps are all `done` or `dropped` and
    /// whose `not_before` has passed, by priority (larger first) then id; at most `limit` rows
    /// plus the total count. An index range scan, not a walk of the graph.
    fn ready(&self, now: Timestamp, limit: usize) -> impl Future<Output = Result<ReadySet>> + Send;

    /// The first `limit` open rows (pending, running, review, needs_human) of `project` in the
    /// cross view's order — due date, undated last, then id — leaving out rows of the `exclude`d
    /// (dashboard) sources (V1–V3). An index range, not a scan of the project.
    fn view_head(
        &self,
        project: String,
        exclude: Vec<String>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Task>>> + Send;

    /// The first `limit` rows of the ready set, as [`Store::ready`] orders them, without counting
    /// the rest (a worker looking for its next claims needs no total). With a `scope`, only the
    /// rows it admits ([`ClaimScope::admits`], I5) and no earlier run of which may still be alive
    /// ([`codec::unfenced_where`], S14): a claim finds the row it may run behind any number of
    /// rows it may not.
    fn ready_head(
        &self,
        now: Timestamp,
        scope: Option<ClaimScope>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Task>>> + Send;

    /// Applies a person's edit to one row and returns the row as stored afterwards (read back
    /// in the same transaction). An edit that changes nothing writes nothing. An edit that moves
    /// a row out of `running` closes its run's record as interrupted and keeps the lease as a
    /// fence until the run's end clears it (S14, [`ends::run_stopped_by_edit`]).
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`] for an unknown id; [`StoreError::Dag`] when new deps name an
    /// unknown id or close a cycle.
    fn edit(
        &self,
        id: TaskId,
        edit: TaskEdit,
        actor: Actor,
        now: Timestamp,
    ) -> impl Future<Output = Result<Task>> + Send;

    /// The journal of one row, oldest first.
    fn journal(&self, id: TaskId) -> impl Future<Output = Result<Vec<JournalEntry>>> + Send;

    /// Claims one task for a run (S1), in one committed transaction: only if the kill switch is
    /// off, the row is `pending` and ready (deps done, `not_before` passed) and, with
    /// `require_run`, its ▶ box is ticked, and with `require_approval`, a person approved the
    /// run (`approved_by` set). The row becomes `running` with `run = false`, no approval,
    /// `run_at = now`, attempt + 1 and a lease to `worker` until `now + lease`; a run record
    /// and a journal entry are written. Only after this returns `Claimed` may the executor
    /// start.
    ///
    /// # Transactions, locks and timeouts
    ///
    /// The check and the update are one write transaction, so two workers (threads, processes,
    /// machines) never both get `Claimed` for the same row and attempt.
    fn claim(&self, request: ClaimRequest) -> impl Future<Output = Result<ClaimOutcome>> + Send;

    /// Claims several tasks in one transaction (one durable commit for all): each request is
    /// decided as by [`Store::claim`], in order. For workers with several free slots.
    fn claim_many(
        &self,
        requests: Vec<ClaimRequest>,
    ) -> impl Future<Output = Result<Vec<ClaimOutcome>>> + Send;

    /// Claims the first of `requests`, in their order, that is claimable now, in one
    /// transaction: each is decided as by [`Store::claim`] until one is claimed (or the kill
    /// switch is found on). Workers that claim from the same head of the ready set at once each
    /// get a different row, and a row another worker took costs no commit of its own (I5).
    /// `NotClaimable` when none of them was.
    fn claim_first(&self, requests: Vec<ClaimRequest>) -> impl Future<Output = Result<ClaimOutcome>> + Send;

    /// A worker's next claim for one free slot (S1, D1, I5): the head of the ready set that
    /// `scope` admits, `window` rows in run order, read wider (four times over, up to `limit`
    /// rows) while `pick` makes no request of it; then the first of `pick`'s requests, in its
    /// order, that is claimable, claimed as by [`Store::claim`]. `None` when `pick` made no
    /// request of any window (nothing eligible: the worker may wait).
    ///
    /// The default reads the head ([`Store::ready_head`]) and claims through
    /// [`Store::claim_first`]: two round trips a look, and a row another worker took in between
    /// is passed over.
    ///
    /// # Transactions, locks and timeouts
    ///
    /// SQLite reads and claims in one write transaction: the rows it reads are the rows it
    /// claims from, so a claim never loses a row to another worker, and reading the head costs no
    /// round trip of its own. `pick` runs where the rows are read (on SQLite inside that
    /// transaction, on the store's thread): it must be quick and must not block.
    fn claim_next(
        &self,
        now: Timestamp,
        scope: ClaimScope,
        window: usize,
        limit: usize,
        mut pick: Pick,
    ) -> impl Future<Output = Result<Option<NextClaim>>> + Send {
        async move {
            let mut window = NextClaim::first_window(window, limit);
            loop {
                let head = self.ready_head(now, Some(scope.clone()), window).await?;
                let tried = pick(&head);
                if !tried.is_empty() {
                    let outcome = self.claim_first(tried.clone()).await?;
                    return Ok(Some(NextClaim { tried, outcome }));
                }
                let Some(wider) = NextClaim::wider_window(window, head.len(), limit) else { return Ok(None) };
                window = wider;
            }
        }
    }

    /// Records several run ends in one transaction: each as by [`Store::finish`], in order. A
    /// stale one gets its own [`StoreError::LeaseLost`] and writes nothing (but the end of a run
    /// a person stopped, which clears its fence); the others commit.
    fn finish_many(&self, finishes: Vec<Finish>) -> impl Future<Output = Result<Vec<Result<Task>>>> + Send;

    /// A worker's turn (I5): records `finishes` as [`Store::finish_many`] does and then makes
    /// the next claim as [`Store::claim_next`] does, so that one slot costs one commit per task.
    /// Each part has its own result: the ends are recorded whatever the claim meets, and the
    /// other way round.
    ///
    /// The default runs the two side by side. Both backends override it with one transaction,
    /// the ends first (so the claim may take a row they released); should that transaction fail,
    /// the ends are recorded on their own ([`ends_alone_if_failed`]).
    fn finish_and_claim_next(
        &self,
        finishes: Vec<Finish>,
        now: Timestamp,
        scope: ClaimScope,
        window: usize,
        limit: usize,
        pick: Pick,
    ) -> impl Future<Output = (Result<Vec<Result<Task>>>, Result<Option<NextClaim>>)> + Send {
        async move {
            let record =
                async { if finishes.is_empty() { Ok(Vec::new()) } else { self.finish_many(finishes).await } };
            join(record, self.claim_next(now, scope, window, limit, pick)).await
        }
    }

    /// Extends the lease of a running claim to `until`.
    ///
    /// # Errors
    ///
    /// [`StoreError::LeaseLost`] unless the row is still `running` under this attempt and worker.
    fn heartbeat(
        &self,
        id: TaskId,
        attempt: u32,
        worker: &str,
        until: Timestamp,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Records the end of a run and returns the row as stored: success sets the result and
    /// `review`/`done`; failure adds one to `failures` and sets `pending`, or `needs_human` at
    /// the cap (S3). The lease is cleared, the run record closed, the journal written; a row
    /// that becomes `done` unblocks its dependents in the same transaction.
    ///
    /// # Errors
    ///
    /// [`StoreError::LeaseLost`] when the claim is no longer current (a stale worker's late
    /// write): nothing is written, except for the end of a run a person stopped by moving its
    /// row out of `running` (S14): that end clears the lease the move kept as a fence, and is
    /// journaled, and nothing else ([`ends::plan_finish`]).
    fn finish(&self, finish: Finish) -> impl Future<Output = Result<Task>> + Send;

    /// Counts every lost run (S4): each `running` row whose lease expired by `now` (or that has
    /// none) gets one timeout failure and goes back to `pending`, or to `needs_human` at the
    /// cap. Returns the rows and their new status. Idempotent: a second call finds nothing.
    fn expire_leases(
        &self,
        now: Timestamp,
        policy: FailurePolicy,
    ) -> impl Future<Output = Result<Vec<(TaskId, Status)>>> + Send;

    /// A scheduler role's round-robin cursor (R3): the last name it visited, if any.
    fn cursor(&self, role: &str) -> impl Future<Output = Result<Option<String>>> + Send;

    /// Stores a scheduler role's cursor (R3).
    fn set_cursor(&self, role: &str, last: &str) -> impl Future<Output = Result<()>> + Send;

    /// Takes (or keeps) the lease on a scheduler role for `owner` until `until` (R2: two `serve`
    /// processes on one ledger never run the same role at once): true when `owner` holds it now
    /// — it was free, expired by `now`, or already `owner`'s. `until <= now` releases it.
    fn lease_role(
        &self,
        role: &str,
        owner: &str,
        now: Timestamp,
        until: Timestamp,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// F2: the rows of `source` no person or run has touched may go (`daicho_core::purge`); every
    /// other row stays, with its reason. With `apply`, the purgeable rows are deleted in one
    /// transaction, each journaled (`purge`) with its full row; without, nothing is written.
    fn purge_source(
        &self,
        source: &str,
        apply: bool,
        actor: Actor,
        now: Timestamp,
    ) -> impl Future<Output = Result<PurgeReport>> + Send;

    /// F2: brings the purged rows of `source` back from the journal as they were (same id, key and
    /// cells), journaled (`restore`), in one transaction. A row whose id or key is in use again
    /// is skipped with the reason.
    fn restore_source(
        &self,
        source: &str,
        actor: Actor,
        now: Timestamp,
    ) -> impl Future<Output = Result<RestoreReport>> + Send;

    /// Turns the kill switch on (with a reason) or off (S8), journaled as a ledger event.
    fn set_paused(
        &self,
        reason: Option<String>,
        actor: Actor,
        now: Timestamp,
    ) -> impl Future<Output = Result<()>> + Send;

    /// The kill switch: `Some(reason)` while paused.
    fn paused(&self) -> impl Future<Output = Result<Option<String>>> + Send;

    /// Runs started at or after `since`, per action and in all (for daily caps, S9).
    fn run_counts(&self, since: Timestamp) -> impl Future<Output = Result<RunCounts>> + Send;

    /// Runs per action started at or after `since`, with outcomes and tokens (`daicho stats`).
    fn stats(&self, since: Timestamp) -> impl Future<Output = Result<Vec<ActionStats>>> + Send;

    /// The runs of one task, oldest first.
    fn runs(&self, id: TaskId) -> impl Future<Output = Result<Vec<RunRecord>>> + Send;

    /// Adds a note to a run record (a failed push of found tasks, X2).
    fn note_run(&self, id: TaskId, attempt: u32, note: String) -> impl Future<Output = Result<()>> + Send;

    /// Puts tasks in the approval queue (S2), recording who queued them (`by`); a task already
    /// queued, or decided, is not queued again. Returns the ones newly queued.
    fn queue_approvals(
        &self,
        ids: Vec<TaskId>,
        by: String,
        now: Timestamp,
    ) -> impl Future<Output = Result<Vec<TaskId>>> + Send;

    /// The approval queue: pending tasks waiting for a person, oldest first.
    fn approvals(&self) -> impl Future<Output = Result<Vec<Queued>>> + Send;

    /// A person rejects an external task: it is dropped with `rejected: <reason>` as its
    /// correction and its ▶ run box cleared (the edit of [`Store::edit`], journaled), and the
    /// decision recorded with the reason, in one transaction. Returns the row as stored.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`] for an unknown id; [`StoreError::InvalidInput`] for a blank
    /// reason; [`StoreError::Refused`] when the actor is no person (S13).
    fn reject(
        &self,
        id: TaskId,
        reason: String,
        actor: Actor,
        now: Timestamp,
    ) -> impl Future<Output = Result<Task>> + Send;

    /// The decisions people made on external tasks, latest first, at most `limit`.
    fn decisions(&self, limit: usize) -> impl Future<Output = Result<Vec<Decided>>> + Send;

    /// A number that grows with every change of the ledger a page shows (every journaled write,
    /// every task queued for approval) and never goes back: open pages compare it to know when
    /// to update (I2). Cheap: two index lookups.
    fn change_mark(&self) -> impl Future<Output = Result<u64>> + Send;

    /// A person approves a queued (or any external) task: ticks `run` and closes its queue
    /// entry, journaled. Returns the row as stored.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`] for an unknown id; [`StoreError::Conflict`] unless the row is
    /// `pending`.
    fn approve(&self, id: TaskId, actor: Actor, now: Timestamp) -> impl Future<Output = Result<Task>> + Send;

    /// Waits until work may have become ready, or `timeout` passes: a hint for idle workers, never
    /// a guarantee (callers look again either way). A store without notifications just sleeps.
    fn wait_for_work(&self, timeout: std::time::Duration) -> impl Future<Output = ()> + Send;

    /// Whether [`Store::claim_next`] reads the head and claims in one transaction that no other
    /// claim can take the head's rows from: one writer at a time (SQLite), or a look of one row
    /// that reads it locked, passing over the rows other looks hold (PostgreSQL). Then the first
    /// row its pick asks for is claimable, and a worker needs no spare candidates against other
    /// workers' claims (I5).
    fn claims_one_at_a_time(&self) -> bool {
        false
    }
}

/// Runs two futures side by side until both are done (the store has no async runtime of its
/// own to join them with).
async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (std::pin::pin!(a), std::pin::pin!(b));
    let (mut first, mut second) = (None, None);
    std::future::poll_fn(|cx| {
        if first.is_none()
            && let std::task::Poll::Ready(out) = a.as_mut().poll(cx)
        {
            first = Some(out);
        }
        if second.is_none()
            && let std::task::Poll::Ready(out) = b.as_mut().poll(cx)
        {
            second = Some(out);
        }
        match (first.is_some(), second.is_some()) {
            (true, true) => std::task::Poll::Ready(()),
            _ => std::task::Poll::Pending,
        }
    })
    .await;
    (first.expect("polled to the end"), second.expect("polled to the end"))
}

#[doc(hidden)]
pub mod __deps {
    pub use daicho_core;
    pub use jiff;
}

/// Implements [`Store`] for an enum whose every variant holds one store, by delegating each
/// method to the variant's store: `delegate_store!(AnyStore { Sqlite, Postgres });`. Kept beside
/// the trait, so that a new method is added here and not in every enum over backends.
#[macro_export]
macro_rules! delegate_store {
    ($ty:ident { $($variant:ident),+ $(,)? }) => {
        $crate::delegate_store!(@impl $ty { $($variant),+ };
            upsert(batch: $crate::Batch) -> $crate::Result<$crate::UpsertReport>;
            replan(batch: $crate::Batch, retire: Vec<$crate::__deps::daicho_core::TaskId>)
                -> $crate::Result<$crate::UpsertReport>;
            get(id: $crate::__deps::daicho_core::TaskId)
                -> $crate::Result<Option<$crate::__deps::daicho_core::Task>>;
            list(filter: $crate::ListFilter) -> $crate::Result<Vec<$crate::__deps::daicho_core::Task>>;
            status_counts() -> $crate::Result<Vec<$crate::StatusCount>>;
            ready(now: $crate::__deps::jiff::Timestamp, limit: usize) -> $crate::Result<$crate::ReadySet>;
            view_head(project: String, exclude: Vec<String>, limit: usize)
                -> $crate::Result<Vec<$crate::__deps::daicho_core::Task>>;
            ready_head(
                now: $crate::__deps::jiff::Timestamp,
                scope: Option<$crate::__deps::daicho_core::policy::ClaimScope>,
                limit: usize
            )
                -> $crate::Result<Vec<$crate::__deps::daicho_core::Task>>;
            edit(
                id: $crate::__deps::daicho_core::TaskId,
                edit: $crate::__deps::daicho_core::edit::TaskEdit,
                actor: $crate::__deps::daicho_core::Actor,
                now: $crate::__deps::jiff::Timestamp
            ) -> $crate::Result<$crate::__deps::daicho_core::Task>;
            journal(id: $crate::__deps::daicho_core::TaskId) -> $crate::Result<Vec<$crate::JournalEntry>>;
            claim(request: $crate::ClaimRequest) -> $crate::Result<$crate::ClaimOutcome>;
            claim_many(requests: Vec<$crate::ClaimRequest>) -> $crate::Result<Vec<$crate::ClaimOutcome>>;
            claim_first(requests: Vec<$crate::ClaimRequest>) -> $crate::Result<$crate::ClaimOutcome>;
            claim_next(
                now: $crate::__deps::jiff::Timestamp,
                scope: $crate::__deps::daicho_core::policy::ClaimScope,
                window: usize,
                limit: usize,
                pick: $crate::Pick
            ) -> $crate::Result<Option<$crate::NextClaim>>;
            finish_many(finishes: Vec<$crate::Finish>)
                -> $crate::Result<Vec<$crate::Result<$crate::__deps::daicho_core::Task>>>;
            finish_and_claim_next(
                finishes: Vec<$crate::Finish>,
                now: $crate::__deps::jiff::Timestamp,
                scope: $crate::__deps::daicho_core::policy::ClaimScope,
                window: usize,
                limit: usize,
                pick: $crate::Pick
            ) -> (
                $crate::Result<Vec<$crate::Result<$crate::__deps::daicho_core::Task>>>,
                $crate::Result<Option<$crate::NextClaim>>
            );
            heartbeat(
                id: $crate::__deps::daicho_core::TaskId,
                attempt: u32,
                worker: &str,
                until: $crate::__deps::jiff::Timestamp
            ) -> $crate::Result<()>;
            finish(finish: $crate::Finish) -> $crate::Result<$crate::__deps::daicho_core::Task>;
            expire_leases(
                now: $crate::__deps::jiff::Timestamp,
                policy: $crate::__deps::daicho_core::policy::FailurePolicy
            ) -> $crate::Result<Vec<($crate::__deps::daicho_core::TaskId, $crate::__deps::daicho_core::Status)>>;
            cursor(role: &str) -> $crate::Result<Option<String>>;
            set_cursor(role: &str, last: &str) -> $crate::Result<()>;
            lease_role(
                role: &str,
                owner: &str,
                now: $crate::__deps::jiff::Timestamp,
                until: $crate::__deps::jiff::Timestamp
            ) -> $crate::Result<bool>;
            purge_source(
                source: &str,
                apply: bool,
                actor: $crate::__deps::daicho_core::Actor,
                now: $crate::__deps::jiff::Timestamp
            ) -> $crate::Result<$crate::PurgeReport>;
            restore_source(
                source: &str,
                actor: $crate::__deps::daicho_core::Actor,
                now: $crate::__deps::jiff::Timestamp
            ) -> $crate::Result<$crate::RestoreReport>;
            set_paused(
                reason: Option<String>,
                actor: $crate::__deps::daicho_core::Actor,
                now: $crate::__deps::jiff::Timestamp
            ) -> $crate::Result<()>;
            paused() -> $crate::Result<Option<String>>;
            run_counts(since: $crate::__deps::jiff::Timestamp)
                -> $crate::Result<$crate::__deps::daicho_core::policy::RunCounts>;
            stats(since: $crate::__deps::jiff::Timestamp) -> $crate::Result<Vec<$crate::ActionStats>>;
            runs(id: $crate::__deps::daicho_core::TaskId) -> $crate::Result<Vec<$crate::RunRecord>>;
            note_run(id: $crate::__deps::daicho_core::TaskId, attempt: u32, note: String) -> $crate::Result<()>;
            queue_approvals(
                ids: Vec<$crate::__deps::daicho_core::TaskId>,
                by: String,
                now: $crate::__deps::jiff::Timestamp
            ) -> $crate::Result<Vec<$crate::__deps::daicho_core::TaskId>>;
            approvals() -> $crate::Result<Vec<$crate::Queued>>;
            reject(
                id: $crate::__deps::daicho_core::TaskId,
                reason: String,
                actor: $crate::__deps::daicho_core::Actor,
                now: $crate::__deps::jiff::Timestamp
            ) -> $crate::Result<$crate::__deps::daicho_core::Task>;
            decisions(limit: usize) -> $crate::Result<Vec<$crate::Decided>>;
            change_mark() -> $crate::Result<u64>;
            approve(
                id: $crate::__deps::daicho_core::TaskId,
                actor: $crate::__deps::daicho_core::Actor,
                now: $crate::__deps::jiff::Timestamp
            ) -> $crate::Result<$crate::__deps::daicho_core::Task>;
        );
    };
    (@impl $ty:ident $variants:tt; $(
        $method:ident ( $($arg:ident : $argty:ty),* $(,)? ) -> $ret:ty;
    )*) => {
        impl $crate::Store for $ty {
            $(
                async fn $method(&self, $($arg: $argty),*) -> $ret {
                    $crate::delegate_store!(@match self, $ty, $variants, $method($($arg),*))
                }
            )*

            async fn wait_for_work(&self, timeout: std::time::Duration) {
                $crate::delegate_store!(@match self, $ty, $variants, wait_for_work(timeout))
            }

            fn claims_one_at_a_time(&self) -> bool {
                $crate::delegate_store!(@sync self, $ty, $variants, claims_one_at_a_time())
            }
        }
    };
    (@sync $self:ident, $ty:ident, { $($variant:ident),+ }, $method:ident $args:tt) => {
        match $self {
            $($ty::$variant(store) => store.$method $args,)+
        }
    };
    (@match $self:ident, $ty:ident, { $($variant:ident),+ }, $method:ident $args:tt) => {
        match $self {
            $($ty::$variant(store) => store.$method $args.await,)+
        }
    };
}

impl Batch {
    /// Starts deciding how the batch merges (`daicho_core::merge::Decider` under the authority
    /// of the batch's actor, S13): the one place both backends decide an upsert. Every range of
    /// items ([`Batch::ranges`]) is checked here first; a backend then reads the rows each range
    /// matches and hands them to [`Batch::take`], finishes, checks the new edges, and builds and
    /// writes a range at a time (`Decided::plan`).
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidInput`] naming the item's file and line: a person-only field from a
    /// producer; an item that no longer reads.
    pub fn decider(&self, next_id: u64) -> Result<daicho_core::merge::Decider> {
        use daicho_core::merge::Decider;

        let mut decider = Decider::for_actor(&self.actor, next_id);
        for range in self.ranges() {
            let items = self.range(range.clone())?;
            decider.check(range.start, &items).map_err(|r| self.refusal(&r, &[]))?;
        }
        Ok(decider)
    }

    /// The items at `range`, read again when the batch keeps them as text.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidInput`]: an item that no longer reads.
    pub fn range(&self, range: std::ops::Range<usize>) -> Result<std::borrow::Cow<'_, [Item]>> {
        self.items.range(range).map_err(StoreError::InvalidInput)
    }

    /// Decides the `items` that start at item `start` given their keys
    /// (`daicho_core::merge::incoming_keys`) and the ledger rows those keys or the items'
    /// requested ids match.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidInput`] naming the item's file and line: an id twice in the input
    /// (both lines given), an id that names another task (both keys given).
    pub fn take(
        &self,
        decider: &mut daicho_core::merge::Decider,
        start: usize,
        items: &[Item],
        keys: Vec<Option<String>>,
        rows: &[Task],
    ) -> Result<()> {
        decider.take(start, items, keys, rows).map_err(|r| self.refusal(&r, rows))
    }

    /// The input error of a refused batch; `rows` may hold the row a refusal names.
    fn refusal(&self, refused: &daicho_core::merge::Refused, rows: &[Task]) -> StoreError {
        use daicho_core::authority::refused_field_reason;
        use daicho_core::merge::Refused;

        let reason = match refused {
            Refused::PersonField(note) => refused_field_reason(&self.actor, note.field),
            Refused::IdOfAnotherTask { id, row_key, item_key, .. } => {
                let project = rows
                    .iter()
                    .find(|t| t.id == *id)
                    .filter(|t| !t.project.is_empty())
                    .map(|t| format!(" of project {}", t.project))
                    .unwrap_or_default();
                format!(
                    "names {id}, which is another task{project}: its key is '{row_key}', this item's is \
                     '{item_key}'; an id addresses a row only with the same source and title (M1, S13) — \
                     drop the id to add a new task"
                )
            }
            Refused::DuplicateId { first_index, reference, .. } => {
                let first = self.items.get(*first_index);
                let line = first.as_ref().and_then(|first| first.line);
                let here = self.items.get(refused.index()).and_then(|item| item.file.clone());
                // In another file of the same import, that file is named (`a.csv:2`).
                let elsewhere =
                    first.and_then(|first| first.file.clone()).filter(|file| Some(file) != here.as_ref());
                let at = match (line, elsewhere) {
                    (Some(line), Some(file)) => format!("{file}:{line}"),
                    (Some(line), None) => format!("line {line}"),
                    (None, _) => format!("item #{}", first_index + 1),
                };
                format!("id '{reference}' appears twice in this input: here and at {at}")
            }
        };
        self.error_at(Some(refused.index()), reason)
    }

    /// The ranges of items a backend builds and writes in turn: the rows of one range are
    /// built only when it is written, so a large batch never holds a copy of every new row
    /// (I1: memory grows with the range, not the batch). One transaction holds them all.
    pub fn ranges(&self) -> impl Iterator<Item = std::ops::Range<usize>> + use<> {
        let n = self.items.len();
        (0..n).step_by(UPSERT_RANGE).map(move |start| start..(start + UPSERT_RANGE).min(n))
    }

    /// The dependency edges the batch adds or replaces, over the whole batch, for
    /// `daicho_core::dag::check_new_deps`, each with its item as origin.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidInput`] naming the item when a dependency reference resolves to
    /// nothing.
    pub fn dep_changes(
        &self,
        decided: &daicho_core::merge::Decided,
    ) -> Result<Vec<daicho_core::dag::NewDeps>> {
        use daicho_core::dag::NewDeps;

        if let Some(unresolved) = decided.unresolved.first() {
            return Err(self.error_at(
                Some(unresolved.index),
                format!(
                    "depends on '{}', which names no task of this input and is not a task id",
                    unresolved.reference
                ),
            ));
        }
        Ok(decided
            .dep_changes()
            .into_iter()
            .map(|c| NewDeps { task: c.task, deps: c.deps, origin: Some(c.index) })
            .collect())
    }

    /// An input error about the item at `index`: names its file (or the batch's) and its line.
    pub fn error_at(&self, index: Option<usize>, reason: impl Into<String>) -> StoreError {
        let item = index.and_then(|i| self.items.get(i));
        let file = item.as_ref().and_then(|i| i.file.as_deref()).unwrap_or(&self.file);
        StoreError::InvalidInput(InputError::new(file, item.as_ref().and_then(|i| i.line), reason))
    }

    /// Converts a dependency error whose origin is an item index into an input error. The
    /// item's title is named too, since a new item's id may be one the ledger just chose; a
    /// missing dep of an item that names no id is the item's by its title alone (the item may be
    /// a new row, whose chosen id is never written: naming it would send a person looking for a
    /// row that is not there).
    pub fn dag_error(&self, error: DagError) -> StoreError {
        let item = error.origin().and_then(|i| self.items.get(i));
        let reason = match (&error, item) {
            (DagError::UnknownDep { task, dep, .. }, Some(item))
                if item.ref_id.as_deref().and_then(TaskId::parse) != Some(*task) =>
            {
                format!("task '{}' depends on {dep}, which is not in the ledger", item.title.trim())
            }
            (_, Some(item)) => format!("{error} (task '{}')", item.title.trim()),
            (_, None) => error.to_string(),
        };
        self.error_at(error.origin(), reason)
    }
}

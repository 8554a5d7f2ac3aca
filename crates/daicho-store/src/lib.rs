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

pub mod contract;

use std::future::Future;

use daicho_core::dag::DagError;
use daicho_core::edit::TaskEdit;
use daicho_core::{Actor, InputError, Item, Status, Task, TaskId};
use jiff::Timestamp;
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
    /// The database failed or could not be opened.
    #[error("database: {0}")]
    Backend(String),
}

/// A store result.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// What to do with a dependency on an id the ledger does not have.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnknownDeps {
    /// Refuse the whole batch (push, import, add).
    #[default]
    Refuse,
    /// Keep the row; it shows as blocked by a missing task (pull sources).
    Keep,
}

/// A batch of incoming items to upsert through `merge_plan`.
#[derive(Clone, Debug)]
pub struct Batch {
    /// The items, in input order.
    pub items: Vec<Item>,
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
    /// The item's line in its file.
    pub line: Option<usize>,
    /// The item's title.
    pub title: String,
    /// The row it matched, if any.
    pub id: Option<TaskId>,
    /// Why it changed nothing.
    pub reason: String,
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
    /// At most this many rows.
    pub limit: Option<usize>,
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
    /// `add`, `patch` or `edit`.
    pub kind: String,
    /// The changed fields before (empty for `add`).
    pub before: Map<String, Value>,
    /// The changed fields after (the whole row for `add`).
    pub after: Map<String, Value>,
}

/// The storage contract. Each method is one transaction.
///
/// Implementations are cheap to share (`Send + Sync`); methods take `&self`.
pub trait Store: Send + Sync {
    /// Upserts a batch (sync, push, import, add) in one transaction.
    ///
    /// Reads the rows the items match, asks `daicho_core::merge_plan` what to do, checks the new
    /// dependency edges with `daicho_core::dag::check_new_deps`, then inserts the new rows,
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

    /// The row with this id, or `None`.
    fn get(&self, id: TaskId) -> impl Future<Output = Result<Option<Task>>> + Send;

    /// Rows matching the filter, by id.
    fn list(&self, filter: ListFilter) -> impl Future<Output = Result<Vec<Task>>> + Send;

    /// The ready set at `now` (D1, D5): pending rows whose deps are all `done` or `dropped` and
    /// whose `not_before` has passed, by priority (larger first) then id; at most `limit` rows
    /// plus the total count. An index range scan, not a walk of the graph.
    fn ready(&self, now: Timestamp, limit: usize) -> impl Future<Output = Result<ReadySet>> + Send;

    /// Applies a person's edit to one row and returns the row as stored afterwards (read back
    /// in the same transaction). An edit that changes nothing writes nothing.
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
}

impl Batch {
    /// An input error about the item at `index`: names its file (or the batch's) and its line.
    pub fn error_at(&self, index: Option<usize>, reason: impl Into<String>) -> StoreError {
        let item = index.and_then(|i| self.items.get(i));
        let file = item.and_then(|i| i.file.as_deref()).unwrap_or(&self.file);
        StoreError::InvalidInput(InputError::new(file, item.and_then(|i| i.line), reason))
    }

    /// Converts a dependency error whose origin is an item index into an input error. The
    /// item's title is named too, since a new item's id may be one the ledger just chose.
    pub fn dag_error(&self, error: DagError) -> StoreError {
        let title = error.origin().and_then(|i| self.items.get(i)).map(|i| i.title.trim());
        let reason = match title {
            Some(title) => format!("{error} (task '{title}')"),
            None => error.to_string(),
        };
        self.error_at(error.origin(), reason)
    }
}

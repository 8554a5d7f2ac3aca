//! The JSON written by `--json`: boundary structs converted from core types, so that the core
//! promises no wire format. Field names are the ledger's English column names.

use daicho_core::Task;
use daicho_store::{JournalEntry, SkippedItem, UpsertReport};
use serde::Serialize;
use serde_json::{Map, Value};

/// A task, every field including the hidden ones.
#[derive(Debug, Serialize)]
pub struct TaskJson {
    /// `T-0001`.
    pub id: String,
    /// Project.
    pub project: String,
    /// `pending`, `running`, `review`, `done`, `dropped` or `needs_human`.
    pub status: &'static str,
    /// The ▶ run checkbox.
    pub run: bool,
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
    /// Source.
    pub source: String,
    /// Evidence.
    pub evidence: String,
    /// Due date, `YYYY-MM-DD`.
    pub due: Option<String>,
    /// Assignee.
    pub assignee: String,
    /// Work type.
    #[serde(rename = "type")]
    pub work_type: String,
    /// Priority (larger runs first).
    pub priority: i64,
    /// Earliest start, RFC 3339.
    pub not_before: Option<String>,
    /// Action.
    pub action: String,
    /// Result of the last run.
    pub result: String,
    /// When the last run started, RFC 3339.
    pub run_at: Option<String>,
    /// A person's correction.
    pub correction: String,
    /// Ids this task waits for.
    pub deps: Vec<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// Dedupe key.
    pub key: String,
    /// Failures counted.
    pub failures: u32,
    /// Aggregate row.
    pub refresh: bool,
    /// Claims so far.
    pub attempt: u32,
    /// Lease owner while running.
    pub lease_owner: Option<String>,
    /// Lease expiry while running.
    pub lease_expires_at: Option<String>,
    /// Created, RFC 3339.
    pub created_at: String,
    /// Last changed, RFC 3339.
    pub updated_at: String,
}

impl From<&Task> for TaskJson {
    fn from(t: &Task) -> TaskJson {
        TaskJson {
            id: t.id.to_string(),
            project: t.project.clone(),
            status: t.status.as_str(),
            run: t.run,
            title: t.title.clone(),
            body: t.body.clone(),
            source: t.source.clone(),
            evidence: t.evidence.clone(),
            due: t.due.map(|d| d.to_string()),
            assignee: t.assignee.clone(),
            work_type: t.work_type.clone(),
            priority: t.priority,
            not_before: t.not_before.map(|x| x.to_string()),
            action: t.action.clone(),
            result: t.result.clone(),
            run_at: t.run_at.map(|x| x.to_string()),
            correction: t.correction.clone(),
            deps: t.deps.iter().map(ToString::to_string).collect(),
            tags: t.tags.iter().map(str::to_owned).collect(),
            key: t.key.clone(),
            failures: t.failures,
            refresh: t.refresh,
            attempt: t.attempt,
            lease_owner: t.lease.as_ref().map(|l| l.owner.clone()),
            lease_expires_at: t.lease.as_ref().map(|l| l.expires_at.to_string()),
            created_at: t.created_at.to_string(),
            updated_at: t.updated_at.to_string(),
        }
    }
}

/// The ready set.
#[derive(Debug, Serialize)]
pub struct ReadyJson {
    /// Ready tasks in all.
    pub total: usize,
    /// The first ones, in run order.
    pub tasks: Vec<TaskJson>,
}

/// The counts a push returns (X2).
#[derive(Debug, Serialize)]
pub struct PushJson {
    /// Rows added.
    pub added: usize,
    /// Rows updated.
    pub updated: usize,
    /// Items skipped.
    pub skipped: usize,
}

impl From<&UpsertReport> for PushJson {
    fn from(r: &UpsertReport) -> PushJson {
        PushJson { added: r.added.len(), updated: r.updated.len(), skipped: r.skipped.len() }
    }
}

/// An import's result: the counts, the ids and every skip with its reason.
#[derive(Debug, Serialize)]
pub struct ImportJson {
    /// Rows added.
    pub added: usize,
    /// Rows updated.
    pub updated: usize,
    /// Items skipped.
    pub skipped: usize,
    /// Ids added, in input order.
    pub added_ids: Vec<String>,
    /// Ids updated, in input order.
    pub updated_ids: Vec<String>,
    /// Each skipped item and why.
    pub skips: Vec<SkipJson>,
}

impl From<&UpsertReport> for ImportJson {
    fn from(r: &UpsertReport) -> ImportJson {
        ImportJson {
            added: r.added.len(),
            updated: r.updated.len(),
            skipped: r.skipped.len(),
            added_ids: r.added.iter().map(ToString::to_string).collect(),
            updated_ids: r.updated.iter().map(ToString::to_string).collect(),
            skips: r.skipped.iter().map(SkipJson::from).collect(),
        }
    }
}

/// A skipped item.
#[derive(Debug, Serialize)]
pub struct SkipJson {
    /// Its line in its file.
    pub line: Option<usize>,
    /// Its title.
    pub title: String,
    /// The row it matched.
    pub id: Option<String>,
    /// Why it changed nothing.
    pub reason: String,
}

impl From<&SkippedItem> for SkipJson {
    fn from(s: &SkippedItem) -> SkipJson {
        SkipJson {
            line: s.line,
            title: s.title.clone(),
            id: s.id.map(|i| i.to_string()),
            reason: s.reason.clone(),
        }
    }
}

/// A journal entry.
#[derive(Debug, Serialize)]
pub struct JournalJson {
    /// Sequence number.
    pub seq: i64,
    /// When, RFC 3339.
    pub at: String,
    /// The task.
    pub task: String,
    /// Who.
    pub actor: String,
    /// `add`, `patch` or `edit`.
    pub kind: String,
    /// Changed fields before.
    pub before: Map<String, Value>,
    /// Changed fields after.
    pub after: Map<String, Value>,
}

impl From<&JournalEntry> for JournalJson {
    fn from(e: &JournalEntry) -> JournalJson {
        JournalJson {
            seq: e.seq,
            at: e.at.to_string(),
            task: e.task.to_string(),
            actor: e.actor.clone(),
            kind: e.kind.clone(),
            before: e.before.clone(),
            after: e.after.clone(),
        }
    }
}

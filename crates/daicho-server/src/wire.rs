//! The JSON written by `--json`: boundary structs converted from core types, so that the core
//! promises no wire format. Field names are the ledger's English column names.

use daicho_core::Task;
use daicho_engine::sync::{IgnoredReport, SkipReport};
use daicho_store::{ActionStats, JournalEntry, UpsertReport};
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
    /// Lease owner while running (and on a row a person moved out of `running`, until its run
    /// has stopped: a fence, S14).
    pub lease_owner: Option<String>,
    /// Lease expiry while running (or of such a fence).
    pub lease_expires_at: Option<String>,
    /// Created, RFC 3339.
    pub created_at: String,
    /// Last changed, RFC 3339.
    pub updated_at: String,
    /// The cells a person wrote, which no source fills or overwrites again (S13).
    pub person_cells: Vec<&'static str>,
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
            person_cells: t.person_cells.iter().map(daicho_core::authority::SourceCell::name).collect(),
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

/// Why a ready row will or will not run (S7).
#[derive(Debug, Serialize)]
pub struct WhyJson {
    /// The task.
    pub id: String,
    /// Whether a sweep would run it now.
    pub runs: bool,
    /// The action that would run it.
    pub action: Option<String>,
    /// The kind of hold (`stalled`, `awaiting_approval`, …) when it will not run.
    pub hold: Option<&'static str>,
    /// The reason, for a person.
    pub reason: String,
}

/// The ready set with why each row will or will not run.
#[derive(Debug, Serialize)]
pub struct ReadyWhyJson {
    /// The ready set.
    #[serde(flatten)]
    pub ready: ReadyJson,
    /// One entry per listed task, in the same order.
    pub why: Vec<WhyJson>,
}

impl ReadyWhyJson {
    /// The ready set and the engine's decision for each of its listed rows.
    pub fn new(
        ready: &daicho_store::ReadySet,
        decisions: Vec<Result<String, daicho_core::policy::Hold>>,
    ) -> Self {
        let why = decisions
            .into_iter()
            .zip(&ready.tasks)
            .map(|(decision, task)| WhyJson {
                id: task.id.to_string(),
                runs: decision.is_ok(),
                reason: daicho_engine::table::why(&decision, daicho_core::lang::Lang::En),
                hold: decision.as_ref().err().map(|hold| hold.kind()),
                action: decision.ok(),
            })
            .collect();
        ReadyWhyJson {
            ready: ReadyJson { total: ready.total, tasks: ready.tasks.iter().map(TaskJson::from).collect() },
            why,
        }
    }
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
    pub skips: Vec<SkipReport>,
    /// Fields only a person writes that were not written (`by_person` of a file imported
    /// without `--ledger`); left out when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<IgnoredReport>,
}

impl From<&UpsertReport> for ImportJson {
    fn from(r: &UpsertReport) -> ImportJson {
        ImportJson {
            added: r.added.len(),
            updated: r.updated.len(),
            skipped: r.skipped.len(),
            added_ids: r.added.iter().map(ToString::to_string).collect(),
            updated_ids: r.updated.iter().map(ToString::to_string).collect(),
            skips: r.skipped.iter().map(SkipReport::from).collect(),
            ignored: r.ignored.iter().map(IgnoredReport::from).collect(),
        }
    }
}

/// Runs of one action (`daicho stats`).
#[derive(Debug, Serialize)]
pub struct StatsJson {
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

impl From<&ActionStats> for StatsJson {
    fn from(s: &ActionStats) -> StatsJson {
        StatsJson {
            action: s.action.clone(),
            runs: s.runs,
            successes: s.successes,
            failures: s.failures,
            running: s.running,
            tokens_in: s.tokens_in,
            tokens_out: s.tokens_out,
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
            kind: e.kind.to_string(),
            before: e.before.clone(),
            after: e.after.clone(),
        }
    }
}

/// One run (`run`, `run-heavy`, `sweep`).
#[derive(Debug, Serialize)]
pub struct RunJson {
    /// The task.
    pub id: String,
    /// Its title.
    pub title: String,
    /// The action that ran it.
    pub action: String,
    /// The attempt.
    pub attempt: u32,
    /// `success`, `failure`, `timeout`, `lease_lost`, `interrupted` (the operator's stop) or
    /// `stopped` (a person moved the row out of `running`).
    pub result: &'static str,
    /// The row's status afterwards.
    pub status: Option<&'static str>,
    /// The error of a failed run.
    pub error: Option<String>,
    /// Found tasks pushed.
    pub pushed: Option<PushJson>,
    /// Why pushing found tasks failed.
    pub push_error: Option<String>,
}

impl From<&daicho_engine::RunReport> for RunJson {
    fn from(r: &daicho_engine::RunReport) -> RunJson {
        use daicho_engine::RunResult;
        RunJson {
            id: r.id.to_string(),
            title: r.title.clone(),
            action: r.action.clone(),
            attempt: r.attempt,
            result: match r.result {
                RunResult::Success => "success",
                RunResult::Failure => "failure",
                RunResult::Timeout => "timeout",
                RunResult::LeaseLost => "lease_lost",
                RunResult::Interrupted => "interrupted",
                RunResult::Stopped => "stopped",
            },
            status: r.status.map(|s| s.as_str()),
            error: r.error.clone(),
            pushed: r.pushed.map(|(added, updated, skipped)| PushJson { added, updated, skipped }),
            push_error: r.push_error.clone(),
        }
    }
}

/// A task that will not run, and why (S7).
#[derive(Debug, Serialize)]
pub struct HeldJson {
    /// The task.
    pub id: String,
    /// Its title.
    pub title: String,
    /// The kind of hold: `stalled`, `awaiting_approval`, `heavy`, `paused`, ….
    pub hold: &'static str,
    /// The reason, for a person.
    pub reason: String,
}

impl From<&daicho_engine::Held> for HeldJson {
    fn from(h: &daicho_engine::Held) -> HeldJson {
        HeldJson {
            id: h.id.to_string(),
            title: h.title.clone(),
            hold: h.hold.kind(),
            reason: h.hold.to_string(),
        }
    }
}

/// A lost run counted (S4).
#[derive(Debug, Serialize)]
pub struct LostJson {
    /// The task.
    pub id: String,
    /// Its status afterwards: `pending`, or `needs_human` at the cap.
    pub status: &'static str,
}

/// What a sweep did.
#[derive(Debug, Serialize)]
pub struct SweepJson {
    /// `run-requested` or `auto`.
    pub role: &'static str,
    /// The kill switch's reason, when paused (then nothing ran).
    pub paused: Option<String>,
    /// Lost runs counted first.
    pub lost: Vec<LostJson>,
    /// Runs made.
    pub ran: Vec<RunJson>,
    /// Ready tasks that did not run, with reasons.
    pub held: Vec<HeldJson>,
    /// External tasks newly queued for approval.
    pub queued: Vec<String>,
    /// Eligible tasks left for a later sweep.
    pub truncated: usize,
    /// Run ends a crashed process left in this machine's spool, recorded first (S14).
    pub recovered: usize,
}

impl From<&daicho_engine::SweepReport> for SweepJson {
    fn from(r: &daicho_engine::SweepReport) -> SweepJson {
        SweepJson {
            role: match r.role {
                daicho_engine::Role::RunRequested => "run-requested",
                daicho_engine::Role::Auto => "auto",
            },
            paused: r.paused.clone(),
            lost: r.lost.iter().map(|(id, s)| LostJson { id: id.to_string(), status: s.as_str() }).collect(),
            ran: r.ran.iter().map(RunJson::from).collect(),
            held: r.held.iter().map(HeldJson::from).collect(),
            queued: r.queued.iter().map(ToString::to_string).collect(),
            truncated: r.truncated,
            recovered: r.recovered,
        }
    }
}

/// One run of a task, as recorded.
#[derive(Debug, Serialize)]
pub struct RunRecordJson {
    /// The attempt (1 for the first claim).
    pub attempt: u32,
    /// The worker.
    pub worker: String,
    /// The action.
    pub action: String,
    /// When it started, RFC 3339.
    pub started: String,
    /// When it ended, RFC 3339.
    pub finished: Option<String>,
    /// `running`, `success`, `failure`, `timeout` or `lost`.
    pub outcome: String,
    /// The error of a failed run.
    pub error: String,
    /// Prompt tokens, if reported.
    pub tokens_in: Option<u64>,
    /// Completion tokens, if reported.
    pub tokens_out: Option<u64>,
    /// `T-0042:<attempt>`.
    pub idempotency_key: String,
    /// Notes written after the run.
    pub note: String,
}

impl From<&daicho_store::RunRecord> for RunRecordJson {
    fn from(r: &daicho_store::RunRecord) -> RunRecordJson {
        RunRecordJson {
            attempt: r.attempt,
            worker: r.worker.clone(),
            action: r.action.clone(),
            started: r.started.to_string(),
            finished: r.finished.map(|t| t.to_string()),
            outcome: r.outcome.to_string(),
            error: r.error.clone(),
            tokens_in: r.tokens_in,
            tokens_out: r.tokens_out,
            idempotency_key: r.idempotency_key.clone(),
            note: r.note.clone(),
        }
    }
}

/// A role run of the schedule as `serve --json` prints it: the sweep, sync or view report, or
/// `{"role", "skipped"}` when another `serve` holds the role.
pub fn role_run_json(run: &daicho_engine::schedule::RoleRun) -> serde_json::Value {
    use daicho_engine::schedule::RoleOutcome;
    let value = match &run.outcome {
        RoleOutcome::Skipped => {
            return serde_json::json!({ "role": run.role.as_str(), "skipped": "another serve holds this role" });
        }
        RoleOutcome::View(report) => serde_json::to_value(report),
        RoleOutcome::Sync(report) => serde_json::to_value(report),
        RoleOutcome::Sweep(report) => serde_json::to_value(SweepJson::from(report)),
    };
    value.unwrap_or_default()
}

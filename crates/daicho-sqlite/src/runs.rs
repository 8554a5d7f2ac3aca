//! Runs: claims, heartbeats, finishes, lost runs, the kill switch, caps, approvals (S1–S9).
//!
//! Every function here runs inside one `BEGIN IMMEDIATE` transaction opened by the caller.

use daicho_core::policy::{FailurePolicy, RunCounts, idempotency_key};
use daicho_core::{Actor, Status, Task, TaskId};
use daicho_store::writes::{JournalWrite, RowWrite, change_writes};
use daicho_store::{
    ActionStats, ClaimOutcome, ClaimRequest, Decided, Decision, Finish, JournalKind, Queued, Result,
    RunOutcome, RunRecord, StoreError,
};
use jiff::Timestamp;
use rusqlite::{OptionalExtension, Transaction, params};

use crate::rows::{self, micros};
use crate::{backend, get_task};

/// The setting that holds the kill switch's reason while paused.
const PAUSED: &str = "paused";

pub(crate) fn paused_in(tx: &Transaction<'_>) -> Result<Option<String>> {
    tx.prepare_cached("SELECT value FROM setting WHERE name = ?1")
        .and_then(|mut s| s.query_row([PAUSED], |r| r.get(0)).optional())
        .map_err(backend)
}

pub(crate) fn set_paused_in(
    tx: &Transaction<'_>,
    reason: Option<&str>,
    actor: &Actor,
    now: Timestamp,
) -> Result<()> {
    let before = paused_in(tx)?;
    match reason {
        Some(reason) => tx
            .execute("INSERT OR REPLACE INTO setting (name, value) VALUES (?1, ?2)", [PAUSED, reason])
            .map_err(backend)?,
        None => tx.execute("DELETE FROM setting WHERE name = ?1", [PAUSED]).map_err(backend)?,
    };
    if before.as_deref() != reason {
        let kind = if reason.is_some() { JournalKind::Pause } else { JournalKind::Resume };
        let after = serde_json::json!({ "paused": reason }).to_string();
        let before = serde_json::json!({ "paused": before }).to_string();
        rows::journal(tx, &JournalWrite::event(now, &actor.to_string(), kind, before, after))
            .map_err(backend)?;
    }
    Ok(())
}

pub(crate) fn claim_in(tx: &Transaction<'_>, req: &ClaimRequest) -> Result<ClaimOutcome> {
    if let Some(reason) = paused_in(tx)? {
        return Ok(ClaimOutcome::Paused(reason));
    }
    claim_row_in(tx, req, None)
}

/// The claim's statement: the row taken if it is still ready (and ▶ ticked, and approved, when
/// the request requires it). Built once, not per claim. It writes the row
/// [`daicho_store::ends::plan_claim`] makes, which the claim answers with, not read back: a
/// `RETURNING` clause made SQLite fill and empty a temporary table on every claim (a b-tree
/// opened and closed, about 4 % of a claim's CPU); debug builds read the row to check.
static CLAIM_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "UPDATE task SET status = 'running', run = 0, approved_by = '', run_at = ?2, \
         attempt = attempt + 1, lease_owner = ?3, lease_expires_at = ?4, updated_at = ?2 \
         WHERE num = ?1 AND {}",
        daicho_store::codec::claimable_where("?2", "?5", "?6"),
    )
});

/// [`claim_in`] once the kill switch has been looked at in this transaction: `before` is the
/// row as this transaction last read it, if the caller has it (`claim_next` read it in the
/// head), else it is read here.
pub(crate) fn claim_row_in(
    tx: &Transaction<'_>,
    req: &ClaimRequest,
    before: Option<&Task>,
) -> Result<ClaimOutcome> {
    let read;
    let before = match before {
        Some(task) => task,
        None => match get_task(tx, req.id)? {
            Some(task) => {
                read = task;
                &read
            }
            None => return Ok(ClaimOutcome::NotClaimable),
        },
    };
    let now = micros(req.now);
    let claimed = tx
        .prepare_cached(&CLAIM_SQL)
        .and_then(|mut s| {
            s.execute(params![
                req.id.num() as i64,
                now,
                req.worker,
                micros(req.now + req.lease),
                req.require_run,
                req.require_approval
            ])
        })
        .map_err(backend)?;
    if claimed == 0 {
        return Ok(ClaimOutcome::NotClaimable);
    }
    let after = daicho_store::codec::as_stored(daicho_store::ends::plan_claim(before, req));
    debug_assert_eq!(get_task(tx, req.id).ok().flatten().as_ref(), Some(&after), "the row as written");
    tx.prepare_cached(
        "INSERT INTO run (task, attempt, worker, action, started, idempotency_key) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| {
        s.execute(params![
            req.id.num() as i64,
            after.attempt,
            req.worker,
            req.action,
            now,
            idempotency_key(req.id, after.attempt)
        ])
    })
    .map_err(backend)?;
    let actor = Actor::Worker(req.worker.clone()).to_string();
    let entry = JournalWrite::change(req.now, before, &after, &actor, JournalKind::Claim, None)?;
    rows::journal(tx, &entry).map_err(backend)?;
    Ok(ClaimOutcome::Claimed(Box::new(after)))
}

/// The row, if `attempt` by `worker` is still its current run.
fn current_run(tx: &Transaction<'_>, id: TaskId, attempt: u32, worker: &str) -> Result<Task> {
    let task = get_task(tx, id)?.ok_or(StoreError::NotFound(id))?;
    let owned = task.lease.as_ref().is_some_and(|l| l.owner == worker);
    if task.status != Status::Running || task.attempt != attempt || !owned {
        return Err(StoreError::LeaseLost { id, attempt });
    }
    Ok(task)
}

pub(crate) fn heartbeat_in(
    tx: &Transaction<'_>,
    id: TaskId,
    attempt: u32,
    worker: &str,
    until: Timestamp,
) -> Result<()> {
    current_run(tx, id, attempt, worker)?;
    tx.prepare_cached("UPDATE task SET lease_expires_at = ?2 WHERE num = ?1")
        .and_then(|mut s| s.execute(params![id.num() as i64, micros(until)]))
        .map_err(backend)?;
    Ok(())
}

/// Closes the record of `task`'s run `attempt`, unless it is closed already (a person's edit
/// closed it, [`daicho_store::ends::run_stopped_by_edit`]).
pub(crate) fn close_run(
    tx: &Transaction<'_>,
    task: &Task,
    attempt: u32,
    now: Timestamp,
    outcome: RunOutcome,
    error: &str,
    tokens: (Option<u64>, Option<u64>),
) -> Result<()> {
    tx.prepare_cached(
        "UPDATE run SET finished = ?3, outcome = ?4, error = ?5, tokens_in = ?6, tokens_out = ?7 \
         WHERE task = ?1 AND attempt = ?2 AND outcome = 'running'",
    )
    .and_then(|mut s| {
        s.execute(params![
            task.id.num() as i64,
            attempt,
            micros(now),
            outcome.as_str(),
            error,
            tokens.0.map(|t| t as i64),
            tokens.1.map(|t| t as i64)
        ])
    })
    .map_err(backend)?;
    Ok(())
}

pub(crate) fn finish_in(tx: &Transaction<'_>, finish: &Finish) -> Result<Task> {
    let before = get_task(tx, finish.id)?.ok_or(StoreError::NotFound(finish.id))?;
    let plan = daicho_store::ends::plan_finish(&before, finish)?;
    write_plan(tx, &before, &plan, finish.now)?;
    if plan.refused {
        // Written (the fence is cleared), and refused as the run's end: the caller keeps this
        // write whatever the answer ([`crate::finish_many_in`]).
        return Err(StoreError::LeaseLost { id: finish.id, attempt: finish.attempt });
    }
    // The row as written, not read again (a read per run's end); debug builds read it to check.
    let after = daicho_store::codec::as_stored(plan.after);
    debug_assert_eq!(get_task(tx, finish.id).ok().flatten().as_ref(), Some(&after), "the row as written");
    Ok(after)
}

/// Writes a run's end: the row, its dependents' counters, the journal and the run record.
fn write_plan(
    tx: &Transaction<'_>,
    before: &Task,
    plan: &daicho_store::ends::EndPlan,
    now: Timestamp,
) -> Result<()> {
    let at = plan.after.updated_at;
    rows::apply(tx, &change_writes(at, before, &plan.after, &plan.actor, plan.kind, plan.error.as_deref())?)?;
    close_run(
        tx,
        &plan.after,
        before.attempt,
        now,
        plan.outcome,
        plan.error.as_deref().unwrap_or(""),
        plan.tokens,
    )
}

pub(crate) fn expire_in(
    tx: &Transaction<'_>,
    now: Timestamp,
    policy: FailurePolicy,
) -> Result<Vec<(TaskId, Status)>> {
    let lost: Vec<Task> = tx
        .prepare_cached(&format!(
            "SELECT {} FROM task WHERE status = 'running' AND (lease_expires_at IS NULL OR lease_expires_at <= ?1)",
            rows::COLUMNS
        ))
        .and_then(|mut s| s.query_map([micros(now)], rows::read_task)?.collect())
        .map_err(backend)?;
    let mut out = Vec::with_capacity(lost.len());
    for before in lost {
        let owner = before.lease.as_ref().map(|l| l.owner.clone()).unwrap_or_default();
        let plan = daicho_store::ends::plan_lost(&before, now, policy);
        write_plan(tx, &before, &plan, now)?;
        let (error, status) = (plan.error.unwrap_or_default(), plan.after.status);
        tracing::warn!(task = %before.id, attempt = before.attempt, %owner, "{error}");
        out.push((before.id, status));
    }
    Ok(out)
}

pub(crate) fn run_counts_in(tx: &Transaction<'_>, since: Timestamp) -> Result<RunCounts> {
    let rows: Vec<(String, i64)> = tx
        .prepare_cached("SELECT action, count(*) FROM run WHERE started >= ?1 GROUP BY action")
        .and_then(|mut s| s.query_map([micros(since)], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .map_err(backend)?;
    let mut counts = RunCounts::default();
    for (action, n) in rows {
        counts.total += n as u32;
        counts.by_action.insert(action, n as u32);
    }
    Ok(counts)
}

pub(crate) fn stats_in(tx: &Transaction<'_>, since: Timestamp) -> Result<Vec<ActionStats>> {
    let read = |r: &rusqlite::Row<'_>| {
        Ok(ActionStats {
            action: r.get(0)?,
            runs: r.get::<_, i64>(1)? as u64,
            successes: r.get::<_, i64>(2)? as u64,
            failures: r.get::<_, i64>(3)? as u64,
            running: r.get::<_, i64>(4)? as u64,
            tokens_in: r.get::<_, i64>(5)? as u64,
            tokens_out: r.get::<_, i64>(6)? as u64,
        })
    };
    // Since the first run: the counts kept with the runs (`run_count`, migration 8), not a pass
    // over them all.
    if daicho_store::codec::stats_all_time(since) {
        return tx
            .prepare_cached(
                "SELECT action, runs, successes, failures, running, tokens_in, tokens_out FROM run_count \
                 WHERE runs > 0 ORDER BY action",
            )
            .and_then(|mut s| s.query_map([], read)?.collect())
            .map_err(backend);
    }
    tx.prepare_cached(
        "SELECT action, count(*), sum(outcome = 'success'), sum(outcome IN ('failure', 'timeout', 'lost')), \
         sum(outcome = 'running'), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0) \
         FROM run WHERE started >= ?1 GROUP BY action ORDER BY action",
    )
    .and_then(|mut s| s.query_map([micros(since)], read)?.collect())
    .map_err(backend)
}

pub(crate) fn runs_in(tx: &Transaction<'_>, id: TaskId) -> Result<Vec<RunRecord>> {
    let time = |index: usize, v: i64| {
        Timestamp::from_microsecond(v).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Integer, Box::new(e))
        })
    };
    tx.prepare_cached(
        "SELECT attempt, worker, action, started, finished, outcome, error, tokens_in, tokens_out, \
         idempotency_key, note FROM run WHERE task = ?1 ORDER BY attempt",
    )
    .and_then(|mut s| {
        s.query_map([id.num() as i64], |r| {
            Ok(RunRecord {
                task: id,
                attempt: r.get(0)?,
                worker: r.get(1)?,
                action: r.get(2)?,
                started: time(3, r.get(3)?)?,
                finished: r.get::<_, Option<i64>>(4)?.map(|v| time(4, v)).transpose()?,
                outcome: {
                    let word: String = r.get(5)?;
                    RunOutcome::parse(&word).ok_or_else(|| {
                        rusqlite::Error::FromSqlConversionFailure(
                            5,
                            rusqlite::types::Type::Text,
                            format!("bad outcome '{word}'").into(),
                        )
                    })?
                },
                error: r.get(6)?,
                tokens_in: r.get::<_, Option<i64>>(7)?.map(|t| t as u64),
                tokens_out: r.get::<_, Option<i64>>(8)?.map(|t| t as u64),
                idempotency_key: r.get(9)?,
                note: r.get(10)?,
            })
        })?
        .collect()
    })
    .map_err(backend)
}

pub(crate) fn note_in(tx: &Transaction<'_>, id: TaskId, attempt: u32, note: &str) -> Result<()> {
    tx.execute(
        "UPDATE run SET note = CASE WHEN note = '' THEN ?3 ELSE note || char(10) || ?3 END \
         WHERE task = ?1 AND attempt = ?2",
        params![id.num() as i64, attempt, note],
    )
    .map_err(backend)?;
    Ok(())
}

/// Queues a task for approval once (S2): a task already queued is not queued again; one whose
/// last decision is spent — its approved run claimed (and failed, or was stopped), or its
/// approval withdrawn by a change to what the run would do — is queued anew, so a person sees
/// it again. A row approved and not yet claimed keeps its decision.
const QUEUE_SQL: &str = "INSERT INTO approval (task, queued_at, queued_by) VALUES (?1, ?2, ?3) \
     ON CONFLICT (task) DO UPDATE SET queued_at = excluded.queued_at, queued_by = excluded.queued_by, \
     decided_at = NULL, decided_by = NULL, decision = NULL, reason = '' WHERE approval.decided_at IS NOT NULL \
     AND NOT EXISTS (SELECT 1 FROM task WHERE num = excluded.task AND approved_by <> '')";

pub(crate) fn queue_approvals_in(
    tx: &Transaction<'_>,
    ids: &[TaskId],
    by: &str,
    now: Timestamp,
) -> Result<Vec<TaskId>> {
    let mut queued = Vec::new();
    let mut insert = tx.prepare_cached(QUEUE_SQL).map_err(backend)?;
    for id in ids {
        if insert.execute(params![id.num() as i64, micros(now), by]).map_err(backend)? > 0 {
            queued.push(*id);
        }
    }
    Ok(queued)
}

fn timestamp(micros: i64, what: &'static str) -> Result<Timestamp> {
    Timestamp::from_microsecond(micros).map_err(|e| StoreError::backend_from(what, e))
}

pub(crate) fn approvals_in(tx: &Transaction<'_>) -> Result<Vec<Queued>> {
    let rows: Vec<(i64, i64, i64, String)> = tx
        .prepare_cached(
            "SELECT a.task, t.id_width, a.queued_at, a.queued_by FROM approval a JOIN task t ON t.num = a.task \
             WHERE a.decided_at IS NULL AND t.status = 'pending' ORDER BY a.queued_at, a.task",
        )
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect())
        .map_err(backend)?;
    rows.into_iter()
        .map(|(num, width, at, by)| {
            let id = TaskId::with_width(num as u64, width as u8);
            Ok(Queued { id, queued_at: timestamp(at, "an approval's time")?, queued_by: by })
        })
        .collect()
}

pub(crate) fn decisions_in(tx: &Transaction<'_>, limit: usize) -> Result<Vec<Decided>> {
    type Row = (i64, i64, i64, String, i64, String, Option<String>, String);
    let rows: Vec<Row> = tx
        .prepare_cached(
            "SELECT a.task, t.id_width, a.queued_at, a.queued_by, a.decided_at, coalesce(a.decided_by, ''), \
             a.decision, a.reason FROM approval a JOIN task t ON t.num = a.task \
             WHERE a.decided_at IS NOT NULL ORDER BY a.decided_at DESC, a.task DESC LIMIT ?1",
        )
        .and_then(|mut s| {
            s.query_map([limit as i64], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?))
            })?
            .collect()
        })
        .map_err(backend)?;
    rows.into_iter()
        .map(|(num, width, queued_at, queued_by, decided_at, decided_by, decision, reason)| {
            let id = TaskId::with_width(num as u64, width as u8);
            Ok(Decided {
                queued: Queued { id, queued_at: timestamp(queued_at, "an approval's time")?, queued_by },
                decided_at: timestamp(decided_at, "a decision's time")?,
                decided_by,
                decision: Decision::parse(decision.as_deref()),
                reason,
            })
        })
        .collect()
}

/// Records a person's decision on a task's queue entry (created if it was never queued).
pub(crate) fn decide_in(
    tx: &Transaction<'_>,
    id: TaskId,
    decision: Decision,
    reason: &str,
    actor: &Actor,
    now: Timestamp,
) -> Result<()> {
    tx.prepare_cached(&daicho_store::codec::decide_sql(|n| format!("?{n}")))
        .and_then(|mut s| {
            s.execute(params![id.num() as i64, micros(now), actor.to_string(), decision.as_str(), reason])
        })
        .map_err(backend)?;
    Ok(())
}

pub(crate) fn approve_in(tx: &Transaction<'_>, id: TaskId, actor: &Actor, now: Timestamp) -> Result<Task> {
    let before = get_task(tx, id)?.ok_or(StoreError::NotFound(id))?;
    let unmet: u32 = tx
        .query_row("SELECT unmet_deps FROM task WHERE num = ?1", [id.num() as i64], |r| r.get(0))
        .map_err(backend)?;
    let after = daicho_store::ends::plan_approve(&before, unmet, actor, now)?;
    let mut writes = Vec::new();
    if after != before {
        writes.push(RowWrite::update(&before, &after));
    }
    decide_in(tx, id, Decision::Approved, "", actor, now)?;
    writes.push(RowWrite::Journal(JournalWrite::change(
        now,
        &before,
        &after,
        &actor.to_string(),
        JournalKind::Approve,
        None,
    )?));
    rows::apply(tx, &writes)?;
    get_task(tx, id)?.ok_or(StoreError::NotFound(id))
}

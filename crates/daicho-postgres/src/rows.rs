//! The mapping between [`Task`] and the `task` table.

use daicho_core::task::Lease;
use daicho_core::{Status, Tags, Task, TaskId};
use daicho_store::{Result, StoreError};
use deadpool_postgres::Transaction;
use jiff::Timestamp;
use tokio_postgres::Row;

use crate::backend;

/// The columns of `task` that make a [`Task`], in the order [`read_task`] reads them.
pub(crate) const COLUMNS: &str = "num, id_width, project, status, run, title, body, source, evidence, due, \
    assignee, work_type, priority, not_before, action, result, run_at, correction, deps, tags, key, \
    failures, refresh, attempt, lease_owner, lease_expires_at, created_at, updated_at, approved_by";

pub(crate) fn micros(t: Timestamp) -> i64 {
    t.as_microsecond()
}

pub(crate) fn time(value: i64) -> Result<Timestamp> {
    Timestamp::from_microsecond(value).map_err(|e| StoreError::Backend(format!("bad time {value}: {e}")))
}

pub(crate) fn deps_text(deps: &[TaskId]) -> String {
    deps.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

pub(crate) fn parse_deps(text: &str) -> Vec<TaskId> {
    text.split(',').filter_map(TaskId::parse).collect()
}

/// Reads a row selected with [`COLUMNS`].
pub(crate) fn read_task(row: &Row) -> Result<Task> {
    let num: i64 = row.get(0);
    let width: i32 = row.get(1);
    let status: String = row.get(3);
    let due: Option<String> = row.get(9);
    let lease_owner: Option<String> = row.get(24);
    let lease_expires_at: Option<i64> = row.get(25);
    let failures: i32 = row.get(21);
    let attempt: i32 = row.get(23);
    Ok(Task {
        id: TaskId::with_width(num as u64, width.clamp(1, 20) as u8),
        project: row.get(2),
        status: Status::parse(&status)
            .ok_or_else(|| StoreError::Backend(format!("bad status '{status}'")))?,
        run: row.get(4),
        title: row.get(5),
        body: row.get(6),
        source: row.get(7),
        evidence: row.get(8),
        due: due
            .map(|d| d.parse().map_err(|_| StoreError::Backend(format!("bad date '{d}'"))))
            .transpose()?,
        assignee: row.get(10),
        work_type: row.get(11),
        priority: row.get(12),
        not_before: row.get::<_, Option<i64>>(13).map(time).transpose()?,
        action: row.get(14),
        result: row.get(15),
        run_at: row.get::<_, Option<i64>>(16).map(time).transpose()?,
        correction: row.get(17),
        deps: parse_deps(&row.get::<_, String>(18)),
        tags: Tags::parse_list(&row.get::<_, String>(19)),
        key: row.get(20),
        failures: failures as u32,
        refresh: row.get(22),
        attempt: attempt as u32,
        lease: match (lease_owner, lease_expires_at) {
            (Some(owner), Some(at)) => Some(Lease { owner, expires_at: time(at)? }),
            _ => None,
        },
        created_at: time(row.get(26))?,
        updated_at: time(row.get(27))?,
        approved_by: row.get(28),
    })
}

pub(crate) async fn get_task(tx: &Transaction<'_>, id: TaskId) -> Result<Option<Task>> {
    let stmt =
        tx.prepare_cached(&format!("SELECT {COLUMNS} FROM task WHERE num = $1")).await.map_err(backend)?;
    tx.query_opt(&stmt, &[&(id.num() as i64)]).await.map_err(backend)?.as_ref().map(read_task).transpose()
}

/// The row with this id, locked until the transaction ends: a claim (which takes no write lock)
/// cannot change it between this read and the caller's write.
pub(crate) async fn lock_task(tx: &Transaction<'_>, id: TaskId) -> Result<Option<Task>> {
    let stmt = tx
        .prepare_cached(&format!("SELECT {COLUMNS} FROM task WHERE num = $1 FOR UPDATE"))
        .await
        .map_err(backend)?;
    tx.query_opt(&stmt, &[&(id.num() as i64)]).await.map_err(backend)?.as_ref().map(read_task).transpose()
}

pub(crate) async fn insert_task(tx: &Transaction<'_>, t: &Task, unmet: i32) -> Result<()> {
    let stmt = tx
        .prepare_cached(
            "INSERT INTO task (num, id_width, project, status, run, title, body, source, evidence, due, \
             assignee, work_type, priority, not_before, action, result, run_at, correction, deps, tags, key, \
             failures, refresh, attempt, lease_owner, lease_expires_at, created_at, updated_at, unmet_deps, \
             approved_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
             $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30)",
        )
        .await
        .map_err(backend)?;
    tx.execute(
        &stmt,
        &[
            &(t.id.num() as i64),
            &i32::from(t.id.width()),
            &t.project,
            &t.status.as_str(),
            &t.run,
            &t.title,
            &t.body,
            &t.source,
            &t.evidence,
            &t.due.map(|d| d.to_string()),
            &t.assignee,
            &t.work_type,
            &t.priority,
            &t.not_before.map(micros),
            &t.action,
            &t.result,
            &t.run_at.map(micros),
            &t.correction,
            &deps_text(&t.deps),
            &t.tags.to_list(),
            &t.key,
            &(t.failures as i32),
            &t.refresh,
            &(t.attempt as i32),
            &t.lease.as_ref().map(|l| l.owner.clone()),
            &t.lease.as_ref().map(|l| micros(l.expires_at)),
            &micros(t.created_at),
            &micros(t.updated_at),
            &unmet,
            &t.approved_by,
        ],
    )
    .await
    .map_err(|e| {
        if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) {
            StoreError::Conflict(format!("{} or its key is already in the ledger", t.id))
        } else {
            backend(e)
        }
    })?;
    Ok(())
}

pub(crate) async fn update_task(tx: &Transaction<'_>, t: &Task) -> Result<()> {
    let stmt = tx
        .prepare_cached(
            "UPDATE task SET project = $2, status = $3, run = $4, title = $5, body = $6, source = $7, \
             evidence = $8, due = $9, assignee = $10, work_type = $11, priority = $12, not_before = $13, \
             action = $14, result = $15, run_at = $16, correction = $17, deps = $18, tags = $19, \
             failures = $20, refresh = $21, attempt = $22, lease_owner = $23, lease_expires_at = $24, \
             updated_at = $25, approved_by = $26 WHERE num = $1",
        )
        .await
        .map_err(backend)?;
    tx.execute(
        &stmt,
        &[
            &(t.id.num() as i64),
            &t.project,
            &t.status.as_str(),
            &t.run,
            &t.title,
            &t.body,
            &t.source,
            &t.evidence,
            &t.due.map(|d| d.to_string()),
            &t.assignee,
            &t.work_type,
            &t.priority,
            &t.not_before.map(micros),
            &t.action,
            &t.result,
            &t.run_at.map(micros),
            &t.correction,
            &deps_text(&t.deps),
            &t.tags.to_list(),
            &(t.failures as i32),
            &t.refresh,
            &(t.attempt as i32),
            &t.lease.as_ref().map(|l| l.owner.clone()),
            &t.lease.as_ref().map(|l| micros(l.expires_at)),
            &micros(t.updated_at),
            &t.approved_by,
        ],
    )
    .await
    .map_err(backend)?;
    Ok(())
}

pub(crate) async fn replace_deps(tx: &Transaction<'_>, id: TaskId, deps: &[TaskId]) -> Result<()> {
    tx.execute("DELETE FROM task_dep WHERE task = $1", &[&(id.num() as i64)]).await.map_err(backend)?;
    insert_deps(tx, id, deps).await
}

pub(crate) async fn insert_deps(tx: &Transaction<'_>, id: TaskId, deps: &[TaskId]) -> Result<()> {
    if deps.is_empty() {
        return Ok(());
    }
    let nums: Vec<i64> = deps.iter().map(|d| d.num() as i64).collect();
    let stmt = tx
        .prepare_cached(
            "INSERT INTO task_dep (task, dep) SELECT $1, unnest($2::BIGINT[]) ON CONFLICT DO NOTHING",
        )
        .await
        .map_err(backend)?;
    tx.execute(&stmt, &[&(id.num() as i64), &nums]).await.map_err(backend)?;
    Ok(())
}

pub(crate) async fn status_of(tx: &Transaction<'_>, id: TaskId) -> Result<Option<Status>> {
    let stmt = tx.prepare_cached("SELECT status FROM task WHERE num = $1").await.map_err(backend)?;
    let row = tx.query_opt(&stmt, &[&(id.num() as i64)]).await.map_err(backend)?;
    Ok(row.and_then(|r| Status::parse(&r.get::<_, String>(0))))
}

pub(crate) async fn recount_unmet(tx: &Transaction<'_>, id: TaskId) -> Result<()> {
    let stmt = tx
        .prepare_cached(
            "UPDATE task SET unmet_deps = (SELECT count(*) FROM task_dep d LEFT JOIN task t ON t.num = d.dep \
             WHERE d.task = $1 AND (t.status IS NULL OR t.status NOT IN ('done', 'dropped'))) WHERE num = $1",
        )
        .await
        .map_err(backend)?;
    tx.execute(&stmt, &[&(id.num() as i64)]).await.map_err(backend)?;
    Ok(())
}

pub(crate) async fn shift_dependents(tx: &Transaction<'_>, id: TaskId, delta: i32) -> Result<()> {
    let stmt = tx
        .prepare_cached(
            "UPDATE task SET unmet_deps = unmet_deps + $2 WHERE num IN (SELECT task FROM task_dep WHERE dep = $1)",
        )
        .await
        .map_err(backend)?;
    tx.execute(&stmt, &[&(id.num() as i64), &delta]).await.map_err(backend)?;
    Ok(())
}

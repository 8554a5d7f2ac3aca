//! Reading and writing task rows: the mapping between [`Task`] and the `task` table.

use daicho_core::task::Lease;
use daicho_core::{Status, Tags, Task, TaskId};
use jiff::Timestamp;
use jiff::civil::Date;
use rusqlite::types::Type;
use rusqlite::{Row, Transaction, params};

/// The columns of `task` that make a [`Task`], in the order [`read_task`] reads them.
pub(crate) const COLUMNS: &str = "num, id_width, project, status, run, title, body, source, evidence, due, \
    assignee, work_type, priority, not_before, action, result, run_at, correction, deps, tags, key, \
    failures, refresh, attempt, lease_owner, lease_expires_at, created_at, updated_at, approved_by";

pub(crate) fn micros(t: Timestamp) -> i64 {
    t.as_microsecond()
}

fn bad(index: usize, what: &str, value: &str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(index, Type::Text, format!("bad {what} '{value}'").into())
}

fn timestamp(index: usize, value: Option<i64>) -> rusqlite::Result<Option<Timestamp>> {
    value.map(|v| Timestamp::from_microsecond(v).map_err(|_| bad(index, "time", &v.to_string()))).transpose()
}

/// The deps column: display ids separated by commas (`T-500,T-0001`).
pub(crate) fn deps_text(deps: &[TaskId]) -> String {
    deps.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

/// Parses the deps column; ids that do not parse are skipped (the column is only written here).
pub(crate) fn parse_deps(text: &str) -> Vec<TaskId> {
    text.split(',').filter_map(TaskId::parse).collect()
}

/// Reads a row selected with [`COLUMNS`].
pub(crate) fn read_task(row: &Row<'_>) -> rusqlite::Result<Task> {
    let num: i64 = row.get(0)?;
    let width: i64 = row.get(1)?;
    let status: String = row.get(3)?;
    let due: Option<String> = row.get(9)?;
    let lease_owner: Option<String> = row.get(24)?;
    let lease_expires_at = timestamp(25, row.get(25)?)?;
    Ok(Task {
        id: TaskId::with_width(num as u64, width.clamp(1, 20) as u8),
        project: row.get(2)?,
        status: Status::parse(&status).ok_or_else(|| bad(3, "status", &status))?,
        run: row.get(4)?,
        title: row.get(5)?,
        body: row.get(6)?,
        source: row.get(7)?,
        evidence: row.get(8)?,
        due: due.map(|d| d.parse::<Date>().map_err(|_| bad(9, "date", &d))).transpose()?,
        assignee: row.get(10)?,
        work_type: row.get(11)?,
        priority: row.get(12)?,
        not_before: timestamp(13, row.get(13)?)?,
        action: row.get(14)?,
        result: row.get(15)?,
        run_at: timestamp(16, row.get(16)?)?,
        correction: row.get(17)?,
        deps: parse_deps(&row.get::<_, String>(18)?),
        tags: Tags::parse_list(&row.get::<_, String>(19)?),
        key: row.get(20)?,
        failures: row.get(21)?,
        refresh: row.get(22)?,
        attempt: row.get(23)?,
        lease: match (lease_owner, lease_expires_at) {
            (Some(owner), Some(expires_at)) => Some(Lease { owner, expires_at }),
            _ => None,
        },
        created_at: timestamp(26, row.get(26)?)?.unwrap_or_default(),
        updated_at: timestamp(27, row.get(27)?)?.unwrap_or_default(),
        approved_by: row.get(28)?,
    })
}

/// Inserts a new row with its count of unmet deps.
pub(crate) fn insert_task(tx: &Transaction<'_>, t: &Task, unmet_deps: i64) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT INTO task (num, id_width, project, status, run, title, body, source, evidence, due, \
         assignee, work_type, priority, not_before, action, result, run_at, correction, deps, tags, key, \
         failures, refresh, attempt, lease_owner, lease_expires_at, created_at, updated_at, unmet_deps, \
         approved_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, \
         ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30)",
    )?;
    stmt.execute(params![
        t.id.num() as i64,
        i64::from(t.id.width()),
        t.project,
        t.status.as_str(),
        t.run,
        t.title,
        t.body,
        t.source,
        t.evidence,
        t.due.map(|d| d.to_string()),
        t.assignee,
        t.work_type,
        t.priority,
        t.not_before.map(micros),
        t.action,
        t.result,
        t.run_at.map(micros),
        t.correction,
        deps_text(&t.deps),
        t.tags.to_list(),
        t.key,
        t.failures,
        t.refresh,
        t.attempt,
        t.lease.as_ref().map(|l| l.owner.clone()),
        t.lease.as_ref().map(|l| micros(l.expires_at)),
        micros(t.created_at),
        micros(t.updated_at),
        unmet_deps,
        t.approved_by,
    ])?;
    Ok(())
}

/// Writes every field of an existing row except its id, key and `unmet_deps`.
pub(crate) fn update_task(tx: &Transaction<'_>, t: &Task) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare_cached(
        "UPDATE task SET project = ?2, status = ?3, run = ?4, title = ?5, body = ?6, source = ?7, \
         evidence = ?8, due = ?9, assignee = ?10, work_type = ?11, priority = ?12, not_before = ?13, \
         action = ?14, result = ?15, run_at = ?16, correction = ?17, deps = ?18, tags = ?19, \
         failures = ?20, refresh = ?21, attempt = ?22, lease_owner = ?23, lease_expires_at = ?24, \
         updated_at = ?25, approved_by = ?26 WHERE num = ?1",
    )?;
    stmt.execute(params![
        t.id.num() as i64,
        t.project,
        t.status.as_str(),
        t.run,
        t.title,
        t.body,
        t.source,
        t.evidence,
        t.due.map(|d| d.to_string()),
        t.assignee,
        t.work_type,
        t.priority,
        t.not_before.map(micros),
        t.action,
        t.result,
        t.run_at.map(micros),
        t.correction,
        deps_text(&t.deps),
        t.tags.to_list(),
        t.failures,
        t.refresh,
        t.attempt,
        t.lease.as_ref().map(|l| l.owner.clone()),
        t.lease.as_ref().map(|l| micros(l.expires_at)),
        micros(t.updated_at),
        t.approved_by,
    ])?;
    Ok(())
}

/// Replaces the edges of a row in `task_dep` (the reverse index of deps).
pub(crate) fn replace_deps(tx: &Transaction<'_>, id: TaskId, deps: &[TaskId]) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM task_dep WHERE task = ?1")?.execute([id.num() as i64])?;
    insert_deps(tx, id, deps)
}

/// Adds the edges of a new row to `task_dep`.
pub(crate) fn insert_deps(tx: &Transaction<'_>, id: TaskId, deps: &[TaskId]) -> rusqlite::Result<()> {
    let mut insert = tx.prepare_cached("INSERT OR IGNORE INTO task_dep (task, dep) VALUES (?1, ?2)")?;
    for dep in deps {
        insert.execute([id.num() as i64, dep.num() as i64])?;
    }
    Ok(())
}

/// The status of a row, `None` when it does not exist.
pub(crate) fn status_of(tx: &Transaction<'_>, id: TaskId) -> rusqlite::Result<Option<Status>> {
    use rusqlite::OptionalExtension as _;
    let text: Option<String> = tx
        .prepare_cached("SELECT status FROM task WHERE num = ?1")?
        .query_row([id.num() as i64], |r| r.get(0))
        .optional()?;
    Ok(text.and_then(|t| Status::parse(&t)))
}

/// Sets a row's `unmet_deps` from its edges: deps missing or not `done`/`dropped`.
pub(crate) fn recount_unmet(tx: &Transaction<'_>, id: TaskId) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "UPDATE task SET unmet_deps = (SELECT count(*) FROM task_dep d LEFT JOIN task t ON t.num = d.dep \
         WHERE d.task = ?1 AND (t.status IS NULL OR t.status NOT IN ('done', 'dropped'))) WHERE num = ?1",
    )?
    .execute([id.num() as i64])?;
    Ok(())
}

/// Adds `delta` to `unmet_deps` of every row that waits for `id`.
pub(crate) fn shift_dependents(tx: &Transaction<'_>, id: TaskId, delta: i64) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "UPDATE task SET unmet_deps = unmet_deps + ?2 WHERE num IN (SELECT task FROM task_dep WHERE dep = ?1)",
    )?
    .execute([id.num() as i64, delta])?;
    Ok(())
}

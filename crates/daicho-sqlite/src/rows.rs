//! The `task` table through the shared codec (`daicho_store::codec`), and the one place that
//! applies the writes the shared plans (`daicho_store::writes`) decide.

use std::collections::HashMap;

use daicho_core::{Status, Task, TaskId};
use daicho_store::codec::{self, Cell, CellKind, TASK_COLUMNS};
use daicho_store::writes::{JournalWrite, RowWrite};
use daicho_store::{Result, StoreError};
use jiff::Timestamp;
use rusqlite::types::{ToSqlOutput, Type};
use rusqlite::{OptionalExtension, Row, ToSql, Transaction, params};

use crate::backend;

pub(crate) use daicho_store::codec::COLUMNS;

pub(crate) fn micros(t: Timestamp) -> i64 {
    t.as_microsecond()
}

/// SQLite's placeholder for the `n`th parameter.
pub(crate) fn mark(n: usize) -> String {
    format!("?{n}")
}

/// The insert of a row, built once: building its text for every row was a sixth of the
/// instructions of a large push.
static INSERT_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| codec::insert_sql(mark));

/// The update of each set of columns met so far, built once per set (a process meets a few
/// dozen: a claim's, a finish's, each kind of edit).
static UPDATE_SQL: std::sync::LazyLock<std::sync::Mutex<HashMap<codec::Columns, std::sync::Arc<str>>>> =
    std::sync::LazyLock::new(Default::default);

/// The most update texts kept; past it a text is built for each use.
const UPDATE_SQL_KEPT: usize = 256;

fn update_sql(columns: codec::Columns) -> std::sync::Arc<str> {
    let mut kept = UPDATE_SQL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(sql) = kept.get(&columns) {
        return std::sync::Arc::clone(sql);
    }
    let sql: std::sync::Arc<str> = codec::update_sql(columns, mark).into();
    if kept.len() < UPDATE_SQL_KEPT {
        kept.insert(columns, std::sync::Arc::clone(&sql));
    }
    sql
}

struct Bind<'a>(&'a Cell);

impl ToSql for Bind<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        match self.0 {
            Cell::Int(v) => v.to_sql(),
            Cell::BigInt(v) => v.to_sql(),
            Cell::Text(v) => v.to_sql(),
            Cell::Bool(v) => v.to_sql(),
        }
    }
}

/// Reads a row selected with [`COLUMNS`].
pub(crate) fn read_task(row: &Row<'_>) -> rusqlite::Result<Task> {
    let mut cells = Vec::with_capacity(TASK_COLUMNS.len());
    for (i, (_, kind)) in TASK_COLUMNS.iter().enumerate() {
        cells.push(match kind {
            CellKind::Int => Cell::Int(row.get(i)?),
            CellKind::BigInt => Cell::BigInt(row.get(i)?),
            CellKind::Text => Cell::Text(row.get(i)?),
            CellKind::Bool => Cell::Bool(row.get(i)?),
        });
    }
    codec::decode(cells).map_err(|e| rusqlite::Error::FromSqlConversionFailure(0, Type::Text, e.into()))
}

/// The status of a row, `None` when it does not exist.
pub(crate) fn status_of(tx: &Transaction<'_>, id: TaskId) -> rusqlite::Result<Option<Status>> {
    let text: Option<String> = tx
        .prepare_cached("SELECT status FROM task WHERE num = ?1")?
        .query_row([id.num() as i64], |r| r.get(0))
        .optional()?;
    Ok(text.and_then(|t| Status::parse(&t)))
}

/// The statuses of the rows of `ids` the ledger has.
pub(crate) fn statuses(tx: &Transaction<'_>, ids: &[TaskId]) -> Result<HashMap<TaskId, Status>> {
    let mut found = HashMap::new();
    for id in ids {
        if let Some(status) = status_of(tx, *id).map_err(backend)? {
            found.insert(*id, status);
        }
    }
    Ok(found)
}

/// The rows with one of these ids or keys, each once, in the order asked (ids first).
pub(crate) fn rows_matching<'k>(
    tx: &Transaction<'_>,
    ids: &[TaskId],
    keys: impl IntoIterator<Item = &'k str>,
) -> Result<Vec<Task>> {
    let mut by_num =
        tx.prepare_cached(&format!("SELECT {COLUMNS} FROM task WHERE num = ?1")).map_err(backend)?;
    let mut by_key =
        tx.prepare_cached(&format!("SELECT {COLUMNS} FROM task WHERE key = ?1")).map_err(backend)?;
    let mut seen = std::collections::HashSet::new();
    let mut rows = Vec::new();
    for id in ids {
        if let Some(task) = by_num.query_row([id.num() as i64], read_task).optional().map_err(backend)?
            && seen.insert(task.id.num())
        {
            rows.push(task);
        }
    }
    for key in keys {
        if let Some(task) = by_key.query_row([key], read_task).optional().map_err(backend)?
            && seen.insert(task.id.num())
        {
            rows.push(task);
        }
    }
    Ok(rows)
}

/// Applies a plan's writes, in order.
pub(crate) fn apply(tx: &Transaction<'_>, writes: &[RowWrite]) -> Result<()> {
    apply_all(tx, writes.iter().map(Ok))
}

/// Applies writes as they are made ([`daicho_store::writes::plan_upsert`]), in order.
pub(crate) fn apply_all<W: std::borrow::Borrow<RowWrite>>(
    tx: &Transaction<'_>,
    writes: impl IntoIterator<Item = Result<W>>,
) -> Result<()> {
    for write in writes {
        let write = write?;
        let write = write.borrow();
        apply_one(tx, write).map_err(|e| match (e, write) {
            (rusqlite::Error::SqliteFailure(f, _), RowWrite::Insert { task, .. })
                if f.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                StoreError::Conflict(format!("{} or its key is already in the ledger", task.id))
            }
            (other, _) => backend(other),
        })?;
    }
    Ok(())
}

fn apply_one(tx: &Transaction<'_>, write: &RowWrite) -> rusqlite::Result<()> {
    match write {
        RowWrite::Insert { task, unmet_deps } => {
            let mut cells = codec::encode(task);
            cells.push(Cell::BigInt(Some(i64::from(*unmet_deps))));
            let binds: Vec<Bind<'_>> = cells.iter().map(Bind).collect();
            tx.prepare_cached(&INSERT_SQL)?.execute(rusqlite::params_from_iter(binds))?;
            insert_deps(tx, task.id, &task.deps)?;
        }
        RowWrite::Update { columns, cells } => {
            if !columns.is_empty() {
                let binds: Vec<Bind<'_>> = cells.iter().map(Bind).collect();
                tx.prepare_cached(&update_sql(*columns))?.execute(rusqlite::params_from_iter(binds))?;
            }
        }
        RowWrite::Redeps { id, deps } => {
            tx.prepare_cached("DELETE FROM task_dep WHERE task = ?1")?.execute([id.num() as i64])?;
            insert_deps(tx, *id, deps)?;
            tx.prepare_cached(&codec::recount_sql("?1"))?.execute([id.num() as i64])?;
        }
        RowWrite::ShiftDependents { id, delta } => {
            tx.prepare_cached(&codec::shift_sql("?1", "?2"))?
                .execute([id.num() as i64, i64::from(*delta)])?;
        }
        RowWrite::Delete(id) => {
            for sql in [
                "DELETE FROM task_dep WHERE task = ?1",
                "DELETE FROM approval WHERE task = ?1",
                "DELETE FROM task WHERE num = ?1",
            ] {
                tx.prepare_cached(sql)?.execute([id.num() as i64])?;
            }
        }
        RowWrite::Journal(entry) => journal(tx, entry)?,
    }
    Ok(())
}

/// Adds the edges of a row to `task_dep`.
fn insert_deps(tx: &Transaction<'_>, id: TaskId, deps: &[TaskId]) -> rusqlite::Result<()> {
    let mut insert = tx.prepare_cached("INSERT OR IGNORE INTO task_dep (task, dep) VALUES (?1, ?2)")?;
    for dep in deps {
        insert.execute([id.num() as i64, dep.num() as i64])?;
    }
    Ok(())
}

/// Appends one journal entry (task 0, shown as `ledger`, for an event of the whole ledger).
pub(crate) fn journal(tx: &Transaction<'_>, e: &JournalWrite) -> rusqlite::Result<()> {
    let (num, id) = match e.task {
        Some(id) => (id.num() as i64, id.to_string()),
        None => (0, "ledger".to_owned()),
    };
    tx.prepare_cached(
        "INSERT INTO journal (at, task, task_id, actor, kind, before, after) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![micros(e.at), num, id, e.actor, e.kind.as_str(), e.before, e.after])?;
    Ok(())
}

//! The `task` table through the shared codec (`daicho_store::codec`), and the one place that
//! applies the writes the shared plans (`daicho_store::writes`) decide.

use std::collections::HashMap;

use daicho_core::{Status, Task, TaskId};
use daicho_store::codec::{self, Cell, CellKind, TASK_COLUMNS};
use daicho_store::writes::{JournalWrite, RowWrite};
use daicho_store::{Result, StoreError};
use jiff::Timestamp;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::backend;
use crate::tx::Tx;

pub(crate) use daicho_store::codec::COLUMNS;

pub(crate) fn micros(t: Timestamp) -> i64 {
    t.as_microsecond()
}

pub(crate) fn time(value: i64) -> Result<Timestamp> {
    Timestamp::from_microsecond(value)
        .map_err(|e| StoreError::backend_from(format_args!("bad time {value}"), e))
}

/// PostgreSQL's placeholder for the `n`th parameter.
pub(crate) fn mark(n: usize) -> String {
    format!("${n}")
}

fn bind(cell: &Cell) -> &(dyn ToSql + Sync) {
    match cell {
        Cell::Int(v) => v,
        Cell::BigInt(v) => v,
        Cell::Text(v) => v,
        Cell::Bool(v) => v,
    }
}

/// Reads a row selected with [`COLUMNS`] (first).
pub(crate) fn read_task(row: &Row) -> Result<Task> {
    let cells = TASK_COLUMNS
        .iter()
        .enumerate()
        .map(|(i, (_, kind))| match kind {
            CellKind::Int => Cell::Int(row.get(i)),
            CellKind::BigInt => Cell::BigInt(row.get(i)),
            CellKind::Text => Cell::Text(row.get(i)),
            CellKind::Bool => Cell::Bool(row.get(i)),
        })
        .collect();
    codec::decode(cells).map_err(StoreError::backend)
}

pub(crate) async fn get_task(tx: &Tx, id: TaskId) -> Result<Option<Task>> {
    let stmt =
        tx.prepare_cached(&format!("SELECT {COLUMNS} FROM task WHERE num = $1")).await.map_err(backend)?;
    tx.query_opt(&stmt, &[&(id.num() as i64)]).await.map_err(backend)?.as_ref().map(read_task).transpose()
}

/// The row with this id, locked until the transaction ends: a claim (which takes no write lock)
/// cannot change it between this read and the caller's write.
pub(crate) async fn lock_task(tx: &Tx, id: TaskId) -> Result<Option<Task>> {
    let stmt = tx
        .prepare_cached(&format!("SELECT {COLUMNS} FROM task WHERE num = $1 FOR UPDATE"))
        .await
        .map_err(backend)?;
    tx.query_opt(&stmt, &[&(id.num() as i64)]).await.map_err(backend)?.as_ref().map(read_task).transpose()
}

/// The rows with one of these ids or keys.
pub(crate) async fn rows_matching(tx: &Tx, ids: &[TaskId], keys: &[&str]) -> Result<Vec<Task>> {
    let nums: Vec<i64> = ids.iter().map(|i| i.num() as i64).collect();
    let rows = tx
        .query(&format!("SELECT {COLUMNS} FROM task WHERE key = ANY($1) OR num = ANY($2)"), &[&keys, &nums])
        .await
        .map_err(backend)?;
    rows.iter().map(read_task).collect()
}

/// The statuses of the rows of `ids` the ledger has.
pub(crate) async fn statuses(tx: &Tx, ids: &[TaskId]) -> Result<HashMap<TaskId, Status>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let nums: Vec<i64> = ids.iter().map(|i| i.num() as i64).collect();
    let stmt =
        tx.prepare_cached("SELECT num, status FROM task WHERE num = ANY($1)").await.map_err(backend)?;
    let rows = tx.query(&stmt, &[&nums]).await.map_err(backend)?;
    Ok(rows
        .iter()
        .filter_map(|r| Some((TaskId::new(r.get::<_, i64>(0) as u64), Status::parse(r.get(1))?)))
        .collect())
}

/// Applies a plan's writes, in order; the journal entries go in one statement at the end (in
/// their order: no row write reads the journal).
pub(crate) async fn apply(tx: &Tx, writes: &[RowWrite]) -> Result<()> {
    // Collected (pointers only): a mapping closure held across the awaits would not be `Send`
    // for every lifetime, as async store methods must be.
    let writes: Vec<Result<&RowWrite>> = writes.iter().map(Ok).collect();
    apply_all(tx, writes).await
}

/// Journal entries gathered before one insert statement: a large upsert sends its journal in
/// statements of this many, so memory does not grow with the batch.
const JOURNAL_CHUNK: usize = 1_000;

/// Applies writes as they are made ([`daicho_store::writes::plan_upsert`]), in order; new rows
/// and their edges go in statements of [`JOURNAL_CHUNK`] rows (a 200,000-item push made 400,000
/// round trips), flushed before any other write so that every write sees the rows before it;
/// journal entries in statements of as many (no row write reads the journal).
pub(crate) async fn apply_all<W: std::borrow::Borrow<RowWrite>>(
    tx: &Tx,
    writes: impl IntoIterator<Item = Result<W>>,
) -> Result<()> {
    let mut journal = JournalRows::default();
    let mut inserts = InsertRows::default();
    for write in writes {
        let write = write?;
        if journal.len() >= JOURNAL_CHUNK {
            std::mem::take(&mut inserts).insert(tx).await?;
            std::mem::take(&mut journal).insert(tx).await?;
        }
        let write = write.borrow();
        if !matches!(write, RowWrite::Insert { .. } | RowWrite::Journal(_)) {
            std::mem::take(&mut inserts).insert(tx).await?;
        }
        match write {
            RowWrite::Insert { task, unmet_deps } => {
                inserts.push(task, *unmet_deps);
                if inserts.len() >= JOURNAL_CHUNK {
                    std::mem::take(&mut inserts).insert(tx).await?;
                }
            }
            RowWrite::Journal(entry) => journal.push(entry),
            RowWrite::Update { columns, cells } if !columns.is_empty() => {
                let stmt = tx.prepare_cached(&codec::update_sql(*columns, mark)).await.map_err(backend)?;
                let params: Vec<&(dyn ToSql + Sync)> = cells.iter().map(bind).collect();
                tx.execute(&stmt, &params).await.map_err(backend)?;
            }
            RowWrite::Update { .. } => {}
            RowWrite::Redeps { id, deps } => {
                let num = id.num() as i64;
                tx.execute("DELETE FROM task_dep WHERE task = $1", &[&num]).await.map_err(backend)?;
                insert_deps(tx, *id, deps).await?;
                let stmt = tx.prepare_cached(&codec::recount_sql("$1")).await.map_err(backend)?;
                tx.execute(&stmt, &[&num]).await.map_err(backend)?;
            }
            RowWrite::ShiftDependents { id, delta } => {
                let stmt = tx.prepare_cached(&codec::shift_sql("$1", "$2")).await.map_err(backend)?;
                tx.execute(&stmt, &[&(id.num() as i64), delta]).await.map_err(backend)?;
            }
            RowWrite::Delete(id) => {
                for sql in [
                    "DELETE FROM task_dep WHERE task = $1",
                    "DELETE FROM approval WHERE task = $1",
                    "DELETE FROM task WHERE num = $1",
                ] {
                    tx.execute(sql, &[&(id.num() as i64)]).await.map_err(backend)?;
                }
            }
        }
    }
    inserts.insert(tx).await?;
    journal.insert(tx).await
}

/// New rows, column by column, with their edges: inserted with one statement each.
#[derive(Default)]
struct InsertRows {
    columns: Vec<Column>,
    unmet: Vec<i32>,
    edges: (Vec<i64>, Vec<i64>),
}

/// One column's cells of [`InsertRows`], as the array bound for `unnest`.
enum Column {
    Int(Vec<i32>),
    BigInt(Vec<Option<i64>>),
    Text(Vec<Option<String>>),
    Bool(Vec<bool>),
}

impl InsertRows {
    fn len(&self) -> usize {
        self.unmet.len()
    }

    fn push(&mut self, task: &Task, unmet_deps: u32) {
        if self.columns.is_empty() {
            self.columns = TASK_COLUMNS
                .iter()
                .map(|(_, kind)| match kind {
                    CellKind::Int => Column::Int(Vec::new()),
                    CellKind::BigInt => Column::BigInt(Vec::new()),
                    CellKind::Text => Column::Text(Vec::new()),
                    CellKind::Bool => Column::Bool(Vec::new()),
                })
                .collect();
        }
        for (column, cell) in self.columns.iter_mut().zip(codec::encode(task)) {
            match (column, cell) {
                (Column::Int(v), Cell::Int(c)) => v.push(c),
                (Column::BigInt(v), Cell::BigInt(c)) => v.push(c),
                (Column::Text(v), Cell::Text(c)) => v.push(c),
                (Column::Bool(v), Cell::Bool(c)) => v.push(c),
                _ => unreachable!("the codec encodes each column as TASK_COLUMNS types it"),
            }
        }
        self.unmet.push(unmet_deps as i32);
        for dep in &task.deps {
            self.edges.0.push(task.id.num() as i64);
            self.edges.1.push(dep.num() as i64);
        }
    }

    async fn insert(self, tx: &Tx) -> Result<()> {
        if self.unmet.is_empty() {
            return Ok(());
        }
        let arrays: Vec<String> = TASK_COLUMNS
            .iter()
            .enumerate()
            .map(|(i, (_, kind))| {
                let sql_type = match kind {
                    CellKind::Int => "INT",
                    CellKind::BigInt => "BIGINT",
                    CellKind::Text => "TEXT",
                    CellKind::Bool => "BOOLEAN",
                };
                format!("${}::{sql_type}[]", i + 1)
            })
            .collect();
        let sql = format!(
            "INSERT INTO task ({COLUMNS}, unmet_deps) SELECT * FROM unnest({}, ${}::INT[])",
            arrays.join(", "),
            TASK_COLUMNS.len() + 1
        );
        let stmt = tx.prepare_cached(&sql).await.map_err(backend)?;
        let mut params: Vec<&(dyn ToSql + Sync)> = self
            .columns
            .iter()
            .map(|column| -> &(dyn ToSql + Sync) {
                match column {
                    Column::Int(v) => v,
                    Column::BigInt(v) => v,
                    Column::Text(v) => v,
                    Column::Bool(v) => v,
                }
            })
            .collect();
        params.push(&self.unmet);
        tx.execute(&stmt, &params).await.map_err(|e| {
            if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) {
                let detail = e.as_db_error().and_then(|d| d.detail()).unwrap_or_default();
                StoreError::Conflict(format!("a new row or its key is already in the ledger: {detail}"))
            } else {
                backend(e)
            }
        })?;
        if !self.edges.0.is_empty() {
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO task_dep (task, dep) SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[]) \
                     ON CONFLICT DO NOTHING",
                )
                .await
                .map_err(backend)?;
            tx.execute(&stmt, &[&self.edges.0, &self.edges.1]).await.map_err(backend)?;
        }
        Ok(())
    }
}

/// Adds the edges of a row to `task_dep`.
async fn insert_deps(tx: &Tx, id: TaskId, deps: &[TaskId]) -> Result<()> {
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

/// The statement that inserts [`JournalRows`], in their order, with their parameters numbered
/// from `$first` (as [`JournalRows::params`] gives them): `1` alone, more when the entries go
/// with other writes in one statement.
pub(crate) fn journal_insert_sql(first: usize) -> String {
    journal_insert_where_sql(first, "true")
}

/// [`journal_insert_sql`] of the entries for which `filter` holds (an expression over `j`, the
/// entry: `j.task` is its row's number).
pub(crate) fn journal_insert_where_sql(first: usize, filter: &str) -> String {
    let [at, task, id, actor, kind, before, after] = std::array::from_fn::<usize, 7, _>(|i| first + i);
    format!(
        "INSERT INTO journal (at, task, task_id, actor, kind, before, after) \
         SELECT at, task, task_id, actor, kind, before, after \
         FROM unnest(${at}::BIGINT[], ${task}::BIGINT[], ${id}::TEXT[], ${actor}::TEXT[], ${kind}::TEXT[], \
         ${before}::TEXT[], ${after}::TEXT[]) \
         WITH ORDINALITY AS j(at, task, task_id, actor, kind, before, after, n) WHERE {filter} ORDER BY n"
    )
}

/// The statement of [`JournalRows::insert`].
pub(crate) static JOURNAL_INSERT: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| journal_insert_sql(1));

/// Journal entries, column by column, inserted in order with one statement.
#[derive(Default)]
pub(crate) struct JournalRows {
    at: Vec<i64>,
    nums: Vec<i64>,
    ids: Vec<String>,
    actors: Vec<String>,
    kinds: Vec<&'static str>,
    before: Vec<String>,
    after: Vec<String>,
}

impl JournalRows {
    /// Adds an entry (task 0, shown as `ledger`, for an event of the whole ledger).
    pub(crate) fn push(&mut self, e: &JournalWrite) {
        let (num, id) = match e.task {
            Some(id) => (id.num() as i64, id.to_string()),
            None => (0, "ledger".to_owned()),
        };
        self.at.push(micros(e.at));
        self.nums.push(num);
        self.ids.push(id);
        self.actors.push(e.actor.clone());
        self.kinds.push(e.kind.as_str());
        self.before.push(e.before.clone());
        self.after.push(e.after.clone());
    }

    /// How many entries are gathered.
    pub(crate) fn len(&self) -> usize {
        self.nums.len()
    }

    /// The entries' columns, bound as [`journal_insert_sql`]'s parameters in their order.
    pub(crate) fn params(&self) -> [&(dyn ToSql + Sync); 7] {
        [&self.at, &self.nums, &self.ids, &self.actors, &self.kinds, &self.before, &self.after]
    }

    pub(crate) async fn insert(&self, tx: &Tx) -> Result<()> {
        if self.nums.is_empty() {
            return Ok(());
        }
        let stmt = tx.prepare_cached(&JOURNAL_INSERT).await.map_err(backend)?;
        tx.execute(&stmt, &self.params()).await.map_err(backend)?;
        Ok(())
    }
}

//! F2: purging a source's untouched rows, and restoring them from the journal. What goes and
//! what comes back is decided by `daicho_store::writes`; this reads what it needs.

use std::collections::{BTreeMap, BTreeSet};

use daicho_core::{Actor, Task, TaskId};
use daicho_store::writes::{plan_purge, plan_restore, purged_rows, restore_lookups};
use daicho_store::{PurgeReport, RestoreReport, Result};
use jiff::Timestamp;

use crate::backend;
use crate::rows::{self, COLUMNS, read_task};
use crate::tx::Tx;

pub(crate) async fn purge_in(
    tx: &Tx,
    source: &str,
    apply: bool,
    actor: &Actor,
    now: Timestamp,
) -> Result<PurgeReport> {
    let found: Vec<Task> = tx
        .query(&format!("SELECT {COLUMNS} FROM task WHERE source = $1 ORDER BY num FOR UPDATE"), &[&source])
        .await
        .map_err(backend)?
        .iter()
        .map(read_task)
        .collect::<Result<_>>()?;
    let nums: Vec<i64> = found.iter().map(|t| t.id.num() as i64).collect();
    let edited: BTreeSet<TaskId> = tx
        .query("SELECT DISTINCT task FROM journal WHERE task = ANY($1) AND actor LIKE 'human:%'", &[&nums])
        .await
        .map_err(backend)?
        .iter()
        .map(|r| TaskId::new(r.get::<_, i64>(0) as u64))
        .collect();
    let mut dependents: BTreeMap<TaskId, Vec<TaskId>> = BTreeMap::new();
    for r in
        tx.query("SELECT dep, task FROM task_dep WHERE dep = ANY($1)", &[&nums]).await.map_err(backend)?
    {
        let (dep, task): (i64, i64) = (r.get(0), r.get(1));
        dependents.entry(TaskId::new(dep as u64)).or_default().push(TaskId::new(task as u64));
    }
    let (report, writes) = plan_purge(&found, &edited, &dependents, apply, actor, now)?;
    rows::apply(tx, &writes).await?;
    Ok(report)
}

pub(crate) async fn restore_in(
    tx: &Tx,
    source: &str,
    actor: &Actor,
    now: Timestamp,
) -> Result<RestoreReport> {
    let entries = tx
        .query("SELECT before FROM journal WHERE kind = 'purge' ORDER BY seq", &[])
        .await
        .map_err(backend)?;
    let purged = purged_rows(entries.iter().map(|r| r.get::<_, &str>(0)), source)?;
    let (ids, keys) = restore_lookups(&purged);
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let ledger = rows::rows_matching(tx, &ids, &keys).await?;
    let (report, writes) = plan_restore(purged, &ledger, actor, now)?;
    rows::apply(tx, &writes).await?;
    Ok(report)
}

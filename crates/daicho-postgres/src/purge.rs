//! F2: purging a source's untouched rows, and restoring them from the journal.

use std::collections::{BTreeMap, BTreeSet};

use daicho_core::purge::purge_plan;
use daicho_core::{Actor, Status, Task, TaskId};
use daicho_store::{PurgeReport, RestoreReport, Result, StoreError};
use deadpool_postgres::Transaction;
use jiff::Timestamp;

use crate::rows::{self, COLUMNS, read_task};
use crate::{backend, journal};

pub(crate) async fn purge_in(
    tx: &Transaction<'_>,
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
    let plan = purge_plan(&found, &edited, &dependents);
    let by_id: BTreeMap<TaskId, &Task> = found.iter().map(|t| (t.id, t)).collect();
    let purged: Vec<Task> = plan.purge.iter().map(|id| by_id[id].clone()).collect();
    if apply {
        for task in &purged {
            let row = serde_json::to_string(task).map_err(backend)?;
            let num = task.id.num() as i64;
            journal(tx, now, num, &task.id.to_string(), &actor.to_string(), "purge", &row, "{}").await?;
            for sql in [
                "DELETE FROM task_dep WHERE task = $1",
                "DELETE FROM approval WHERE task = $1",
                "DELETE FROM task WHERE num = $1",
            ] {
                tx.execute(sql, &[&num]).await.map_err(backend)?;
            }
        }
    }
    Ok(PurgeReport { purged, kept: plan.keep })
}

pub(crate) async fn restore_in(
    tx: &Transaction<'_>,
    source: &str,
    actor: &Actor,
    now: Timestamp,
) -> Result<RestoreReport> {
    let entries = tx
        .query("SELECT before FROM journal WHERE kind = 'purge' ORDER BY seq", &[])
        .await
        .map_err(backend)?;
    // The last purge of each row of this source.
    let mut purged: BTreeMap<TaskId, Task> = BTreeMap::new();
    for entry in entries {
        let task: Task = serde_json::from_str(entry.get::<_, &str>(0))
            .map_err(|e| StoreError::Backend(format!("a purge entry: {e}")))?;
        if task.source == source {
            purged.insert(task.id, task);
        }
    }
    let mut report = RestoreReport::default();
    for (id, task) in purged {
        if rows::get_task(tx, id).await?.is_some() {
            report.skipped.push((id, "it is in the ledger".into()));
            continue;
        }
        if let Some(holder) =
            tx.query_opt("SELECT num FROM task WHERE key = $1", &[&task.key]).await.map_err(backend)?
        {
            report
                .skipped
                .push((id, format!("its key is {}'s now", TaskId::new(holder.get::<_, i64>(0) as u64))));
            continue;
        }
        let mut unmet = 0;
        for dep in &task.deps {
            if !rows::status_of(tx, *dep).await?.is_some_and(Status::satisfies_deps) {
                unmet += 1;
            }
        }
        rows::insert_task(tx, &task, unmet).await?;
        rows::insert_deps(tx, task.id, &task.deps).await?;
        let row = serde_json::to_string(&task).map_err(backend)?;
        journal(tx, now, id.num() as i64, &id.to_string(), &actor.to_string(), "restore", "{}", &row).await?;
        report.restored.push(id);
    }
    Ok(report)
}

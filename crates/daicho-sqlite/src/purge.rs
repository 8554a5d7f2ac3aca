//! F2: purging a source's untouched rows, and restoring them from the journal.

use std::collections::{BTreeMap, BTreeSet};

use daicho_core::purge::purge_plan;
use daicho_core::{Actor, Status, Task, TaskId};
use daicho_store::{PurgeReport, RestoreReport, Result, StoreError};
use jiff::Timestamp;
use rusqlite::{OptionalExtension, Transaction};

use crate::{backend, journal, rows};

pub(crate) fn purge_in(
    tx: &Transaction<'_>,
    source: &str,
    apply: bool,
    actor: &Actor,
    now: Timestamp,
) -> Result<PurgeReport> {
    let found: Vec<Task> = tx
        .prepare_cached(&format!("SELECT {} FROM task WHERE source = ?1 ORDER BY num", rows::COLUMNS))
        .and_then(|mut s| s.query_map([source], rows::read_task)?.collect())
        .map_err(backend)?;
    let mut edited = BTreeSet::new();
    let mut dependents: BTreeMap<TaskId, Vec<TaskId>> = BTreeMap::new();
    for task in &found {
        let num = task.id.num() as i64;
        let by_person: Option<i64> = tx
            .prepare_cached("SELECT 1 FROM journal WHERE task = ?1 AND actor LIKE 'human:%' LIMIT 1")
            .and_then(|mut s| s.query_row([num], |r| r.get(0)).optional())
            .map_err(backend)?;
        if by_person.is_some() {
            edited.insert(task.id);
        }
        let needers: Vec<i64> = tx
            .prepare_cached("SELECT task FROM task_dep WHERE dep = ?1")
            .and_then(|mut s| s.query_map([num], |r| r.get(0))?.collect())
            .map_err(backend)?;
        dependents.insert(task.id, needers.into_iter().map(|n| TaskId::new(n as u64)).collect());
    }
    let plan = purge_plan(&found, &edited, &dependents);
    let by_id: BTreeMap<TaskId, &Task> = found.iter().map(|t| (t.id, t)).collect();
    let purged: Vec<Task> = plan.purge.iter().map(|id| by_id[id].clone()).collect();
    if apply {
        for task in &purged {
            let row = serde_json::to_string(task).map_err(|e| StoreError::Backend(e.to_string()))?;
            journal(tx, now, task.id, &actor.to_string(), "purge", &row, "{}")?;
            let num = task.id.num() as i64;
            for sql in [
                "DELETE FROM task_dep WHERE task = ?1",
                "DELETE FROM approval WHERE task = ?1",
                "DELETE FROM task WHERE num = ?1",
            ] {
                tx.execute(sql, [num]).map_err(backend)?;
            }
        }
    }
    Ok(PurgeReport { purged, kept: plan.keep })
}

pub(crate) fn restore_in(
    tx: &Transaction<'_>,
    source: &str,
    actor: &Actor,
    now: Timestamp,
) -> Result<RestoreReport> {
    let entries: Vec<String> = tx
        .prepare_cached("SELECT before FROM journal WHERE kind = 'purge' ORDER BY seq")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(backend)?;
    // The last purge of each row of this source.
    let mut purged: BTreeMap<TaskId, Task> = BTreeMap::new();
    for entry in entries {
        let task: Task =
            serde_json::from_str(&entry).map_err(|e| StoreError::Backend(format!("a purge entry: {e}")))?;
        if task.source == source {
            purged.insert(task.id, task);
        }
    }
    let mut report = RestoreReport::default();
    for (id, task) in purged {
        if crate::get_task(tx, id)?.is_some() {
            report.skipped.push((id, "it is in the ledger".into()));
            continue;
        }
        let holder: Option<i64> = tx
            .prepare_cached("SELECT num FROM task WHERE key = ?1")
            .and_then(|mut s| s.query_row([&task.key], |r| r.get(0)).optional())
            .map_err(backend)?;
        if let Some(holder) = holder {
            report.skipped.push((id, format!("its key is {}'s now", TaskId::new(holder as u64))));
            continue;
        }
        let mut unmet = 0;
        for dep in &task.deps {
            if !rows::status_of(tx, *dep).map_err(backend)?.is_some_and(Status::satisfies_deps) {
                unmet += 1;
            }
        }
        rows::insert_task(tx, &task, unmet).map_err(backend)?;
        rows::insert_deps(tx, task.id, &task.deps).map_err(backend)?;
        let row = serde_json::to_string(&task).map_err(|e| StoreError::Backend(e.to_string()))?;
        journal(tx, now, task.id, &actor.to_string(), "restore", "{}", &row)?;
        report.restored.push(id);
    }
    Ok(report)
}

//! F2: purging a source's untouched rows, and restoring them from the journal. What goes and
//! what comes back is decided by `daicho_store::writes`; this reads what it needs.

use std::collections::{BTreeMap, BTreeSet};

use daicho_core::{Actor, Task, TaskId};
use daicho_store::writes::{plan_purge, plan_restore, purged_rows, restore_lookups};
use daicho_store::{PurgeReport, RestoreReport, Result};
use jiff::Timestamp;
use rusqlite::{OptionalExtension, Transaction};

use crate::{backend, rows};

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
    let (report, writes) = plan_purge(&found, &edited, &dependents, apply, actor, now)?;
    rows::apply(tx, &writes)?;
    Ok(report)
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
    let purged = purged_rows(entries.iter().map(String::as_str), source)?;
    let (ids, keys) = restore_lookups(&purged);
    let ledger = rows::rows_matching(tx, &ids, keys.iter().map(String::as_str))?;
    let (report, writes) = plan_restore(purged, &ledger, actor, now)?;
    rows::apply(tx, &writes)?;
    Ok(report)
}

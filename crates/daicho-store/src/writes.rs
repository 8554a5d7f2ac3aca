//! What upsert, edit, purge and restore write, decided once for every backend (pure: no I/O).
//!
//! A backend reads what a plan needs (the matched rows, the statuses of deps), calls the plan and
//! applies the [`RowWrite`]s it returns, in order, as SQL. The `unmet_deps` bookkeeping that keeps
//! `ready` an index scan is decided here: a row inserted with its count, the rows waiting for a
//! row that moves into or out of a satisfying status shifted, a row whose deps change recounted.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use daicho_core::edit::changed_fields;
use daicho_core::{Actor, Plan, Status, Task, TaskId};
use jiff::Timestamp;
use serde_json::{Map, Value};

use crate::codec::{Cell, Columns, update_of};
use crate::states::JournalKind;
use crate::{Batch, PurgeReport, RestoreReport, Result, StoreError};

/// One write to make, in the order a plan lists them.
// An insert carries its whole row, as an update did before it carried only its changed cells;
// the writes are applied as they are made (`plan_upsert` yields them one at a time), so boxing
// the row would cost an allocation each and save nothing held.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum RowWrite {
    /// Insert a new row with its count of unmet deps, and its edges in `task_dep`.
    Insert {
        /// The row.
        task: Task,
        /// Its deps missing or not `done`/`dropped`.
        unmet_deps: u32,
    },
    /// Write the `columns` of an existing row (not `unmet_deps`): the cells that changed
    /// ([`RowWrite::update`]).
    Update {
        /// The columns to write.
        columns: Columns,
        /// The parameters of [`crate::codec::update_sql`]: the row's number, then the new cells
        /// of `columns` in order.
        cells: Vec<Cell>,
    },
    /// Replace a row's edges in `task_dep` and recount its `unmet_deps` from them.
    Redeps {
        /// The row.
        id: TaskId,
        /// Its new deps.
        deps: Vec<TaskId>,
    },
    /// Add `delta` to `unmet_deps` of every row that waits for `id`.
    ShiftDependents {
        /// The row waited for.
        id: TaskId,
        /// −1 when it starts satisfying deps, +1 when it stops.
        delta: i32,
    },
    /// Delete a row, its edges and its approval queue entry.
    Delete(TaskId),
    /// Append a journal entry.
    Journal(JournalWrite),
}

impl RowWrite {
    /// The update of a row from `before` to `after`: the cells that changed.
    pub fn update(before: &Task, after: &Task) -> RowWrite {
        let (columns, cells) = update_of(before, after);
        RowWrite::Update { columns, cells }
    }
}

/// A journal entry to append.
#[derive(Clone, Debug, PartialEq)]
pub struct JournalWrite {
    /// When.
    pub at: Timestamp,
    /// The row (`None`: the ledger as a whole, stored as task 0 named `ledger`).
    pub task: Option<TaskId>,
    /// Who.
    pub actor: String,
    /// What.
    pub kind: JournalKind,
    /// A JSON object: the changed fields before (the versioned row for `purge`).
    pub before: String,
    /// A JSON object: the changed fields after (the whole row for `add` and `restore`).
    pub after: String,
}

fn json(value: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(value).map_err(|e| StoreError::backend_from("encoding a journal entry", e))
}

impl JournalWrite {
    /// The fields that differ between `before` and `after` (and the run's error, if any).
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`] if the fields do not encode (they always do).
    pub fn change(
        at: Timestamp,
        before: &Task,
        after: &Task,
        actor: &str,
        kind: JournalKind,
        error: Option<&str>,
    ) -> Result<JournalWrite> {
        let (b, mut a) = changed_fields(before, after);
        if let Some(error) = error {
            a.insert("error".into(), error.into());
        }
        Ok(JournalWrite {
            at,
            task: Some(after.id),
            actor: actor.to_owned(),
            kind,
            before: json(&b)?,
            after: json(&a)?,
        })
    }

    /// A whole row that came into the ledger (`add`, `restore`).
    ///
    /// # Errors
    ///
    /// As [`JournalWrite::change`].
    pub fn arrival(at: Timestamp, task: &Task, actor: &str, kind: JournalKind) -> Result<JournalWrite> {
        Ok(JournalWrite {
            at,
            task: Some(task.id),
            actor: actor.to_owned(),
            kind,
            before: "{}".into(),
            after: json(task)?,
        })
    }

    /// An event of the ledger as a whole (pause, resume).
    pub fn event(
        at: Timestamp,
        actor: &str,
        kind: JournalKind,
        before: String,
        after: String,
    ) -> JournalWrite {
        JournalWrite { at, task: None, actor: actor.to_owned(), kind, before, after }
    }
}

/// The version of the row record a `purge` entry stores, under the key [`RECORD_VERSION_KEY`].
pub const RECORD_VERSION: u64 = 1;
/// The key of the record version in a `purge` entry.
pub const RECORD_VERSION_KEY: &str = "_v";

/// The row a `purge` entry keeps, so that `restore` can bring it back: the row's JSON with the
/// record version.
///
/// # Errors
///
/// As [`JournalWrite::change`].
pub fn encode_record(task: &Task) -> Result<String> {
    let mut map = match serde_json::to_value(task) {
        Ok(Value::Object(map)) => map,
        Ok(_) => Map::new(),
        Err(e) => return Err(StoreError::backend_from("encoding a row", e)),
    };
    map.insert(RECORD_VERSION_KEY.into(), RECORD_VERSION.into());
    json(&map)
}

/// A row from a `purge` entry of any version: the fields it has over the defaults of a new
/// row, so that an entry written before a field existed (no version mark, fields missing) always
/// reads back.
///
/// # Errors
///
/// [`StoreError::Backend`] when the entry is no JSON object or a field it has is malformed.
pub fn decode_record(text: &str) -> Result<Task> {
    let corrupt = |e: serde_json::Error| StoreError::backend_from("a purge entry", e);
    let Value::Object(mut record) = serde_json::from_str::<Value>(text).map_err(corrupt)? else {
        return Err(StoreError::backend("a purge entry: not a JSON object"));
    };
    record.remove(RECORD_VERSION_KEY);
    let blank = Task::new(TaskId::new(0), "", "", Timestamp::UNIX_EPOCH);
    let Ok(Value::Object(mut row)) = serde_json::to_value(&blank) else {
        return Err(StoreError::backend("a purge entry: no default row"));
    };
    row.extend(record);
    serde_json::from_value(Value::Object(row)).map_err(corrupt)
}

/// The deps of `tasks` that are not among them: whose statuses an insert must look up.
pub fn outside_deps(tasks: &[&Task]) -> Vec<TaskId> {
    let inside: HashSet<TaskId> = tasks.iter().map(|t| t.id).collect();
    let outside: BTreeSet<TaskId> =
        tasks.iter().flat_map(|t| t.deps.iter().copied()).filter(|d| !inside.contains(d)).collect();
    outside.into_iter().collect()
}

/// The writes that insert new rows: first the rows that waited for one of them (a missing dep
/// until now) that arrives satisfied get one unmet dep fewer (before the new rows' own edges
/// exist, so only older rows move), then each row with its count of unmet deps, from the other
/// new rows and `statuses` (the ledger's status of every [`outside_deps`] id it has).
pub fn inserts(tasks: &[&Task], statuses: &HashMap<TaskId, Status>) -> Vec<RowWrite> {
    insert_writes(tasks.to_vec(), statuses).collect()
}

/// [`inserts`], made one at a time as they are applied (an upsert of many rows never holds all
/// their copies at once).
pub fn insert_writes<'a>(
    tasks: Vec<&'a Task>,
    statuses: &'a HashMap<TaskId, Status>,
) -> impl Iterator<Item = RowWrite> + 'a {
    let arriving: HashMap<TaskId, Status> = tasks.iter().map(|t| (t.id, t.status)).collect();
    let shifts: Vec<RowWrite> = tasks
        .iter()
        .filter(|t| t.status.satisfies_deps())
        .map(|t| RowWrite::ShiftDependents { id: t.id, delta: -1 })
        .collect();
    shifts.into_iter().chain(tasks.into_iter().map(move |task| {
        let unmet = task
            .deps
            .iter()
            .filter(|d| !arriving.get(d).or_else(|| statuses.get(d)).is_some_and(|s| s.satisfies_deps()))
            .count();
        RowWrite::Insert { task: task.clone(), unmet_deps: unmet as u32 }
    }))
}

/// The writes of a range of an upsert whose merge was decided by [`Batch::decider`] (`plan` is
/// the range's, from `Decided::plan`) and whose deps were checked: the new rows ([`inserts`]),
/// each journaled `add` with the whole row, then each patch applied to its row as read
/// (`before`, locked where the backend locks), deps recounted where they changed, journaled
/// `patch`. Made one at a time as the backend applies them, so memory
/// does not grow with copies of every row and journal entry of a large batch.
///
/// # Errors
///
/// Each item: [`StoreError::NotFound`] for a patched row missing from `before`;
/// [`StoreError::Backend`] if a journal entry does not encode. The caller's transaction is then
/// rolled back.
pub fn plan_upsert<'a>(
    batch: &'a Batch,
    plan: &'a Plan,
    before: &'a HashMap<TaskId, Task>,
    statuses: &'a HashMap<TaskId, Status>,
) -> impl Iterator<Item = Result<RowWrite>> + 'a {
    let actor = batch.actor.to_string();
    let added: Vec<&Task> = plan.add.iter().map(|a| &a.task).collect();
    let arrival_actor = actor.clone();
    let arrivals = plan.add.iter().map(move |a| {
        JournalWrite::arrival(batch.now, &a.task, &arrival_actor, JournalKind::Add).map(RowWrite::Journal)
    });
    // A patch is a change of one row like any other: the row, its edges when its deps were
    // filled, its journal entry.
    let patches = plan.patch.iter().flat_map(move |patch| -> Vec<Result<RowWrite>> {
        let Some(row) = before.get(&patch.id) else { return vec![Err(StoreError::NotFound(patch.id))] };
        let mut after = row.clone();
        patch.fields.apply_to(&mut after);
        after.updated_at = batch.now;
        match change_writes(batch.now, row, &after, &actor, JournalKind::Patch, None) {
            Ok(writes) => writes.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        }
    });
    insert_writes(added, statuses).map(Ok).chain(arrivals).chain(patches)
}

/// The writes of a status change or edit of one row at `at`, `before` → `after` (see
/// [`crate::ends::plan_edit`]): the row, its dependents shifted when it moves into or out of a
/// satisfying status, its edges and count when its deps change, the journal entry (with the run's
/// error, if any). Nothing when nothing changed.
///
/// # Errors
///
/// As [`JournalWrite::change`].
pub fn change_writes(
    at: Timestamp,
    before: &Task,
    after: &Task,
    actor: &str,
    kind: JournalKind,
    error: Option<&str>,
) -> Result<Vec<RowWrite>> {
    if before == after && error.is_none() {
        return Ok(Vec::new());
    }
    let mut writes = vec![RowWrite::update(before, after)];
    if before.status.satisfies_deps() != after.status.satisfies_deps() {
        let delta = if after.status.satisfies_deps() { -1 } else { 1 };
        writes.push(RowWrite::ShiftDependents { id: after.id, delta });
    }
    if before.deps != after.deps {
        writes.push(RowWrite::Redeps { id: after.id, deps: after.deps.clone() });
    }
    writes.push(RowWrite::Journal(JournalWrite::change(at, before, after, actor, kind, error)?));
    Ok(writes)
}

/// F2: which of a source's rows (`found`, by id) go (`daicho_core::purge::purge_plan`, from the
/// rows a person touched and the rows that wait for each), and, with `apply`, the writes: each
/// journaled `purge` with its versioned row ([`encode_record`]), then deleted.
///
/// # Errors
///
/// As [`JournalWrite::change`].
pub fn plan_purge(
    found: &[Task],
    edited: &BTreeSet<TaskId>,
    dependents: &BTreeMap<TaskId, Vec<TaskId>>,
    apply: bool,
    actor: &Actor,
    now: Timestamp,
) -> Result<(PurgeReport, Vec<RowWrite>)> {
    let plan = daicho_core::purge::purge_plan(found, edited, dependents);
    let by_id: BTreeMap<TaskId, &Task> = found.iter().map(|t| (t.id, t)).collect();
    let purged: Vec<Task> = plan.purge.iter().map(|id| by_id[id].clone()).collect();
    let mut writes = Vec::new();
    if apply {
        for task in &purged {
            writes.push(RowWrite::Journal(JournalWrite {
                at: now,
                task: Some(task.id),
                actor: actor.to_string(),
                kind: JournalKind::Purge,
                before: encode_record(task)?,
                after: "{}".into(),
            }));
            writes.push(RowWrite::Delete(task.id));
        }
    }
    Ok((PurgeReport { purged, kept: plan.keep }, writes))
}

/// F2: the rows of `source` the `purge` entries keep (`entries`: their `before`, oldest first),
/// the last purge of each row. Rows of other sources are passed over.
///
/// # Errors
///
/// [`StoreError::Backend`] for an entry that does not read back ([`decode_record`]).
pub fn purged_rows<'a>(
    entries: impl IntoIterator<Item = &'a str>,
    source: &str,
) -> Result<BTreeMap<TaskId, Task>> {
    let mut purged = BTreeMap::new();
    for entry in entries {
        let task = decode_record(entry)?;
        if task.source == source {
            purged.insert(task.id, task);
        }
    }
    Ok(purged)
}

/// The ids and keys whose ledger rows [`plan_restore`] needs, and the deps whose statuses it needs.
pub fn restore_lookups(purged: &BTreeMap<TaskId, Task>) -> (Vec<TaskId>, Vec<String>) {
    let rows: Vec<&Task> = purged.values().collect();
    let mut ids: Vec<TaskId> = purged.keys().copied().collect();
    ids.extend(outside_deps(&rows));
    (ids, purged.values().map(|t| t.key.clone()).collect())
}

/// F2: brings `purged` rows back as they were, journaled `restore` with the whole row: a row
/// whose id or key is in use (in `ledger`, the rows read for [`restore_lookups`], or by a row
/// restored before it) is skipped with the reason. Rows waiting for a restored row that satisfies
/// deps get one unmet dep fewer, as for an added row.
///
/// # Errors
///
/// As [`JournalWrite::change`].
pub fn plan_restore(
    purged: BTreeMap<TaskId, Task>,
    ledger: &[Task],
    actor: &Actor,
    now: Timestamp,
) -> Result<(RestoreReport, Vec<RowWrite>)> {
    let mut ids: HashSet<TaskId> = ledger.iter().map(|t| t.id).collect();
    let mut keys: HashMap<String, TaskId> = ledger.iter().map(|t| (t.key.clone(), t.id)).collect();
    let mut statuses: HashMap<TaskId, Status> = ledger.iter().map(|t| (t.id, t.status)).collect();
    let mut report = RestoreReport::default();
    let mut writes = Vec::new();
    for (id, task) in purged {
        if ids.contains(&id) {
            report.skipped.push((id, "it is in the ledger".into()));
            continue;
        }
        if let Some(holder) = keys.get(&task.key) {
            report.skipped.push((id, format!("its key is {holder}'s now")));
            continue;
        }
        writes.extend(inserts(&[&task], &statuses));
        writes.push(RowWrite::Journal(JournalWrite::arrival(
            now,
            &task,
            &actor.to_string(),
            JournalKind::Restore,
        )?));
        ids.insert(id);
        keys.insert(task.key.clone(), id);
        statuses.insert(id, task.status);
        report.restored.push(id);
    }
    Ok((report, writes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).expect("time")
    }

    fn task(num: u64, deps: &[u64], status: Status) -> Task {
        let mut t = Task::new(TaskId::new(num), &format!("t{num}"), "src", at(1));
        t.deps = deps.iter().map(|d| TaskId::new(*d)).collect();
        t.status = status;
        t
    }

    #[test]
    fn d1_inserts_count_unmet_deps_and_release_rows_waiting_for_a_satisfied_arrival() {
        let a = task(1, &[], Status::Done);
        let b = task(2, &[1, 9, 8], Status::Pending);
        let statuses = HashMap::from([(TaskId::new(9), Status::Dropped), (TaskId::new(8), Status::Review)]);
        assert_eq!(outside_deps(&[&a, &b]), [TaskId::new(8), TaskId::new(9)]);
        let writes = inserts(&[&a, &b], &statuses);
        assert_eq!(writes[0], RowWrite::ShiftDependents { id: TaskId::new(1), delta: -1 });
        assert_eq!(writes[1], RowWrite::Insert { task: a, unmet_deps: 0 });
        // 1 done (in the batch), 9 dropped, 8 in review: one unmet.
        assert_eq!(writes[2], RowWrite::Insert { task: b, unmet_deps: 1 });
    }

    #[test]
    fn d1_an_edit_shifts_dependents_when_the_status_crosses_and_recounts_changed_deps() {
        let before = task(3, &[1], Status::Pending);
        let mut after = before.clone();
        after.status = Status::Done;
        after.deps = vec![TaskId::new(2)];
        after.updated_at = at(5);
        let writes =
            change_writes(at(5), &before, &after, "human:ana", JournalKind::Edit, None).expect("plan");
        assert_eq!(writes[1], RowWrite::ShiftDependents { id: TaskId::new(3), delta: -1 });
        assert_eq!(writes[2], RowWrite::Redeps { id: TaskId::new(3), deps: vec![TaskId::new(2)] });
        let RowWrite::Journal(entry) = &writes[3] else { panic!("a journal entry last: {writes:?}") };
        assert_eq!((entry.kind, entry.at, entry.actor.as_str()), (JournalKind::Edit, at(5), "human:ana"));
        assert!(
            change_writes(at(5), &before, &before, "human:ana", JournalKind::Edit, None)
                .expect("plan")
                .is_empty()
        );
    }

    #[test]
    fn f2_a_purge_entry_of_the_old_form_without_newer_fields_reads_back() {
        // Written before `approved_by` and the version mark existed.
        let old = r#"{"id":"T-0007","project":"p","status":"pending","run":false,"title":"old","body":"",
            "source":"src","evidence":"","due":null,"assignee":"","type":"","priority":2,"not_before":null,
            "action":"","result":"","run_at":null,"correction":"","deps":["T-0001"],"tags":[],
            "key":"src|old","failures":0,"refresh":false,"attempt":0,"lease":null,
            "created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}"#;
        let task = decode_record(old).expect("reads back");
        assert_eq!(
            (task.id, task.title.as_str(), task.priority, task.approved_by.as_str()),
            (TaskId::new(7), "old", 2, "")
        );
        // Only the fields that name the row are needed.
        let sparse =
            decode_record(r#"{"id":"T-0008","title":"x","source":"src","key":"src|x"}"#).expect("reads back");
        assert_eq!((sparse.status, sparse.deps.len()), (Status::Pending, 0));
        // The current form round-trips and carries the version.
        let record = encode_record(&task).expect("encodes");
        assert!(record.contains(r#""_v":1"#), "{record}");
        assert_eq!(decode_record(&record).expect("reads back"), task);
        assert!(decode_record("[1]").is_err());
    }

    #[test]
    fn f2_restore_skips_ids_and_keys_in_use_and_counts_unmet_deps() {
        let mut gone = task(4, &[1], Status::Pending);
        gone.key = "src|t4".into();
        let mut taken = task(5, &[], Status::Pending);
        taken.key = "src|t5".into();
        let mut holder = task(6, &[], Status::Pending);
        holder.key = "src|t5".into();
        let purged = BTreeMap::from([(gone.id, gone.clone()), (taken.id, taken)]);
        let (ids, keys) = restore_lookups(&purged);
        assert_eq!((ids.len(), keys.len()), (3, 2));
        let ledger = [task(1, &[], Status::Running), holder];
        let (report, writes) =
            plan_restore(purged, &ledger, &Actor::Human("ana".into()), at(9)).expect("plan");
        assert_eq!(report.restored, [TaskId::new(4)]);
        assert_eq!(report.skipped, [(TaskId::new(5), "its key is T-0006's now".to_owned())]);
        assert_eq!(writes[0], RowWrite::Insert { task: gone, unmet_deps: 1 });
    }
}

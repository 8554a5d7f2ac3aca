//! A person's edit of one row (F1) and the journal's view of any change.

use jiff::Timestamp;
use jiff::civil::Date;
use serde_json::{Map, Value};

use crate::id::TaskId;
use crate::task::{Status, Task};

/// The fields `daicho set` may change; `None` leaves a field as it is.
///
/// The dedupe key never changes: a renamed row still matches the item its source knows it by.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskEdit {
    /// New status.
    pub status: Option<Status>,
    /// New correction (修正指示); empty clears it.
    pub correction: Option<String>,
    /// Tick or clear the ▶ run checkbox.
    pub run: Option<bool>,
    /// New title (the key stays).
    pub title: Option<String>,
    /// New body.
    pub body: Option<String>,
    /// New evidence.
    pub evidence: Option<String>,
    /// New project.
    pub project: Option<String>,
    /// New due date; `Some(None)` clears it.
    pub due: Option<Option<Date>>,
    /// New assignee.
    pub assignee: Option<String>,
    /// New work type.
    pub work_type: Option<String>,
    /// New priority.
    pub priority: Option<i64>,
    /// New earliest start; `Some(None)` clears it.
    pub not_before: Option<Option<Timestamp>>,
    /// New action.
    pub action: Option<String>,
    /// New deps (replacing the old ones); checked for cycles and unknown ids by the store.
    pub deps: Option<Vec<TaskId>>,
    /// Tags to add.
    pub add_tags: Vec<String>,
    /// Tags to remove.
    pub remove_tags: Vec<String>,
    /// Count the row's failures from zero again (S3): a person who fixed the cause gives a
    /// parked task its three tries back.
    pub reset_failures: bool,
    /// Cells handed back to the sources: a person's earlier edit of them no longer keeps a
    /// sync, push or refresh from writing them (S13, M5, M6).
    pub give_back: Vec<crate::authority::SourceCell>,
}

impl TaskEdit {
    /// Whether the edit changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == TaskEdit::default()
    }

    /// The row after the edit. `updated_at` becomes `now` when anything changed.
    pub fn apply(&self, task: &Task, now: Timestamp) -> Task {
        let mut next = task.clone();
        if let Some(v) = self.status {
            // A person moving a row out of `running` stops its run, but the lease stays, as a
            // fence: the run's executor may live until its worker sees the move, so no claim
            // takes the row until that worker has killed it and cleared the lease, or the lease
            // has run out (S14, [`crate::policy::previous_run`]).
            next.status = v;
        }
        if let Some(v) = &self.correction {
            next.correction = v.clone();
        }
        if self.reset_failures {
            next.failures = 0;
        }
        if let Some(v) = self.run {
            next.run = v;
            if !v {
                // Clearing ▶ run withdraws an approval with it (S2).
                next.approved_by.clear();
            }
        }
        if let Some(v) = &self.title {
            next.title = v.clone();
        }
        if let Some(v) = &self.body {
            next.body = v.clone();
        }
        if let Some(v) = &self.evidence {
            next.evidence = v.clone();
        }
        if let Some(v) = &self.project {
            next.project = v.clone();
        }
        if let Some(v) = self.due {
            next.due = v;
        }
        if let Some(v) = &self.assignee {
            next.assignee = v.clone();
        }
        if let Some(v) = &self.work_type {
            next.work_type = v.clone();
        }
        if let Some(v) = self.priority {
            next.priority = v;
        }
        if let Some(v) = self.not_before {
            next.not_before = v;
        }
        if let Some(v) = &self.action {
            next.action = v.trim().to_owned();
        }
        if let Some(v) = &self.deps {
            let mut deps: Vec<TaskId> = Vec::with_capacity(v.len());
            for id in v {
                if !deps.contains(id) {
                    deps.push(*id);
                }
            }
            next.deps = deps;
        }
        for tag in &self.add_tags {
            next.tags.insert(tag);
        }
        for tag in &self.remove_tags {
            next.tags.remove(tag);
        }
        if next != *task {
            next.updated_at = now;
        }
        next
    }
}

/// The fields that differ between two versions of a row, as two JSON objects (before, after),
/// for the journal. `updated_at` is left out: the journal entry has its own time.
///
/// Compared field by field, and only the fields that differ are encoded: every claim and every
/// run's end writes a journal entry, and encoding both whole rows to compare them was a tenth of
/// a claim's CPU (I5). The keys are the row's serde names (`work_type` is `type`), the same as
/// [`serde_json::to_value`] of the row gives; a test holds the two equal.
pub fn changed_fields(before: &Task, after: &Task) -> (Map<String, Value>, Map<String, Value>) {
    let mut b = Map::new();
    let mut a = Map::new();
    // Every field named, so a field added to `Task` does not compile until it is journaled here.
    let Task {
        id,
        project,
        status,
        run,
        title,
        body,
        source,
        evidence,
        due,
        assignee,
        work_type,
        priority,
        not_before,
        action,
        result,
        run_at,
        correction,
        deps,
        tags,
        key,
        failures,
        refresh,
        attempt,
        lease,
        approved_by,
        person_cells,
        created_at,
        updated_at: _,
    } = after;
    let mut field = |name: &str, old: Value, new: Value| {
        b.insert(name.to_owned(), old);
        a.insert(name.to_owned(), new);
    };
    macro_rules! compare {
        ($($name:literal => $field:ident),* $(,)?) => {
            $(if before.$field != *$field {
                field($name, json(&before.$field), json($field));
            })*
        };
    }
    compare!(
        "id" => id,
        "project" => project,
        "status" => status,
        "run" => run,
        "title" => title,
        "body" => body,
        "source" => source,
        "evidence" => evidence,
        "due" => due,
        "assignee" => assignee,
        "type" => work_type,
        "priority" => priority,
        "not_before" => not_before,
        "action" => action,
        "result" => result,
        "run_at" => run_at,
        "correction" => correction,
        "deps" => deps,
        "tags" => tags,
        "key" => key,
        "failures" => failures,
        "refresh" => refresh,
        "attempt" => attempt,
        "lease" => lease,
        "approved_by" => approved_by,
        "person_cells" => person_cells,
        "created_at" => created_at,
    );
    (b, a)
}

/// One field's JSON form (its `Serialize` never fails: no maps with non-string keys).
fn json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f1_an_edit_changes_only_what_it_names_and_keeps_the_key() {
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let task = Task::new(TaskId::new(1), "draft", "src", t0);
        let edit = TaskEdit {
            status: Some(Status::Review),
            correction: Some("shorter".into()),
            run: Some(true),
            title: Some("draft v2".into()),
            add_tags: vec!["AI".into()],
            ..TaskEdit::default()
        };
        let t1 = t0 + jiff::SignedDuration::from_secs(5);
        let after = edit.apply(&task, t1);
        assert_eq!(after.key, task.key, "the key never changes");
        assert_eq!(after.updated_at, t1);
        let (before, now) = changed_fields(&task, &after);
        let mut keys: Vec<&String> = now.keys().collect();
        keys.sort();
        assert_eq!(keys, ["correction", "run", "status", "tags", "title"]);
        assert_eq!(before["status"], "pending");
        assert_eq!(now["status"], "review");
        assert!(TaskEdit::default().apply(&task, t1) == task, "an empty edit changes nothing");
    }

    /// The journal's diff as it was first written: both rows encoded whole, then compared.
    fn changed_fields_by_value(before: &Task, after: &Task) -> (Map<String, Value>, Map<String, Value>) {
        let (Value::Object(old), Value::Object(new)) =
            (serde_json::to_value(before).unwrap(), serde_json::to_value(after).unwrap())
        else {
            unreachable!("a row encodes as an object")
        };
        let (mut b, mut a) = (Map::new(), Map::new());
        for (key, value) in new {
            if key != "updated_at" && old[&key] != value {
                b.insert(key.clone(), old[&key].clone());
                a.insert(key, value);
            }
        }
        (b, a)
    }

    /// F1, I5: the field-by-field diff gives what encoding both rows whole gives, for every
    /// field changed alone, for all of them at once and for mixes of them; `updated_at` alone
    /// is no change. A field left out of the comparison fails here.
    #[test]
    fn f1_the_journal_diff_names_each_changed_field_as_the_row_encodes_it() {
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let base = Task::new(TaskId::new(7), "draft", "src", t0);
        let t1 = t0 + jiff::SignedDuration::from_secs(90);
        let mut other = Task::new(TaskId::with_width(8, 5), "draft v2", "elsewhere", t1);
        other.project = "PJ".into();
        other.status = Status::Running;
        other.run = true;
        other.body = "body".into();
        other.evidence = "why".into();
        other.due = Some(jiff::civil::date(2027, 1, 31));
        other.assignee = "sato".into();
        other.work_type = "review".into();
        other.priority = 3;
        other.not_before = Some(t1);
        other.action = "claude".into();
        other.result = "ok".into();
        other.run_at = Some(t1);
        other.correction = "shorter".into();
        other.deps = vec![TaskId::new(1), TaskId::new(2)];
        other.tags = crate::task::Tags::parse_list("ai, heavy");
        other.key = "elsewhere|draft".into();
        other.failures = 2;
        other.refresh = true;
        other.attempt = 4;
        other.lease = Some(crate::task::Lease { owner: "w1".into(), expires_at: t1 });
        other.approved_by = "human:sato".into();
        other.person_cells = crate::authority::PersonCells::of(crate::authority::SourceCell::ALL);
        other.updated_at = t1 + jiff::SignedDuration::from_secs(1);
        let fields: Vec<String> = match serde_json::to_value(&base).unwrap() {
            Value::Object(map) => map.keys().filter(|k| *k != "updated_at").cloned().collect(),
            _ => unreachable!(),
        };
        // Takes the fields named by `mask` from `other`, the rest from `base`.
        let mix = |mask: &dyn Fn(usize) -> bool| -> Task {
            let (Value::Object(mut row), Value::Object(from)) =
                (serde_json::to_value(&base).unwrap(), serde_json::to_value(&other).unwrap())
            else {
                unreachable!()
            };
            for (i, name) in fields.iter().enumerate() {
                if mask(i) {
                    row.insert(name.clone(), from[name].clone());
                }
            }
            serde_json::from_value(Value::Object(row)).unwrap()
        };
        let check = |after: &Task| {
            assert_eq!(changed_fields(&base, after), changed_fields_by_value(&base, after));
            assert_eq!(changed_fields(after, &base), changed_fields_by_value(after, &base));
        };
        for (i, name) in fields.iter().enumerate() {
            let after = mix(&|j| j == i);
            let (_, now) = changed_fields(&base, &after);
            assert_eq!(now.keys().collect::<Vec<_>>(), [name], "{name} alone");
            check(&after);
        }
        check(&other);
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let bits = seed >> 16;
            check(&mix(&|j| bits >> j & 1 == 1));
        }
        let mut touched = base.clone();
        touched.updated_at = t1;
        assert_eq!(changed_fields(&base, &touched), (Map::new(), Map::new()));
    }

    /// S3, F1: a person resets a parked task's failures and asks for a run; on a row without
    /// failures the reset changes nothing.
    #[test]
    fn s3_f1_a_reset_gives_a_parked_task_its_tries_back() {
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let mut parked = Task::new(TaskId::new(1), "flaky", "src", t0);
        parked.status = Status::NeedsHuman;
        parked.failures = 3;
        let retry = TaskEdit {
            status: Some(Status::Pending),
            run: Some(true),
            reset_failures: true,
            ..TaskEdit::default()
        };
        assert!(!retry.is_empty());
        let after = retry.apply(&parked, t0);
        assert_eq!((after.status, after.run, after.failures), (Status::Pending, true, 0));
        let reset_only = TaskEdit { reset_failures: true, ..TaskEdit::default() };
        let fresh = Task::new(TaskId::new(2), "fine", "src", t0);
        assert!(reset_only.apply(&fresh, t0) == fresh, "nothing to reset, nothing changes");
    }
}

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
            next.status = v;
            if v != Status::Running {
                // A person moving a row out of `running` ends its lease.
                next.lease = None;
            }
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
pub fn changed_fields(before: &Task, after: &Task) -> (Map<String, Value>, Map<String, Value>) {
    let (Value::Object(old), Value::Object(new)) =
        (serde_json::to_value(before).unwrap_or_default(), serde_json::to_value(after).unwrap_or_default())
    else {
        return (Map::new(), Map::new());
    };
    let mut b = Map::new();
    let mut a = Map::new();
    for (key, new_value) in new {
        if key == "updated_at" {
            continue;
        }
        let old_value = old.get(&key).cloned().unwrap_or(Value::Null);
        if old_value != new_value {
            b.insert(key.clone(), old_value);
            a.insert(key, new_value);
        }
    }
    (b, a)
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

//! F2: which rows of a source may go. A row goes only when no person and no run has touched it:
//! `pending`, never run, no result, no correction, no failures, no person's edit in its
//! journal, and no row that stays depends on it (it would be blocked for good).

use std::collections::{BTreeMap, BTreeSet};

use crate::TaskId;
use crate::task::{Status, Task};

/// The decision for one source's rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PurgePlan {
    /// Rows that may be deleted, by id.
    pub purge: Vec<TaskId>,
    /// Rows that stay, each with the reason, by id.
    pub keep: Vec<(TaskId, String)>,
}

/// Decides over `rows` (one source's): `edited_by_person` holds the rows a person changed
/// (journal), `dependents` maps a row to the rows that depend on it (any source).
pub fn purge_plan(
    rows: &[Task],
    edited_by_person: &BTreeSet<TaskId>,
    dependents: &BTreeMap<TaskId, Vec<TaskId>>,
) -> PurgePlan {
    let mut reasons: BTreeMap<TaskId, String> = BTreeMap::new();
    for t in rows {
        let reason = if t.status != Status::Pending {
            Some(format!("its status is {}", t.status))
        } else if t.attempt > 0 || t.failures > 0 {
            Some("it has run".to_owned())
        } else if !t.result.trim().is_empty() {
            Some("it has a result".to_owned())
        } else if !t.correction.trim().is_empty() {
            Some("it has a person's correction".to_owned())
        } else if edited_by_person.contains(&t.id) || !t.person_cells.is_empty() {
            Some("a person edited it".to_owned())
        } else {
            None
        };
        if let Some(reason) = reason {
            reasons.insert(t.id, reason);
        }
    }
    // A row that stays keeps every row it depends on, transitively.
    let mut candidates: BTreeSet<TaskId> =
        rows.iter().map(|t| t.id).filter(|id| !reasons.contains_key(id)).collect();
    loop {
        let mut changed = false;
        for id in candidates.clone() {
            if let Some(needer) =
                dependents.get(&id).and_then(|ds| ds.iter().find(|d| !candidates.contains(d)))
            {
                candidates.remove(&id);
                reasons.insert(id, format!("{needer} depends on it"));
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    PurgePlan { purge: candidates.into_iter().collect(), keep: reasons.into_iter().collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(n: u64) -> Task {
        Task::new(TaskId::new(n), &format!("item {n}"), "scan", jiff::Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn f2_only_untouched_rows_go_and_each_kept_row_says_why() {
        let mut rows: Vec<Task> = (1..=7).map(row).collect();
        rows[1].status = Status::Done;
        rows[2].attempt = 1;
        rows[3].correction = "shorter".into();
        rows[4].result = "found".into();
        let edited: BTreeSet<TaskId> = [TaskId::new(6)].into();
        // T-0007 is needed by T-0100 (another source); T-0001 by T-0007.
        let dependents: BTreeMap<TaskId, Vec<TaskId>> =
            [(TaskId::new(7), vec![TaskId::new(100)]), (TaskId::new(1), vec![TaskId::new(7)])].into();
        let plan = purge_plan(&rows, &edited, &dependents);
        assert!(plan.purge.is_empty(), "{plan:?}");
        let reasons: Vec<(u64, &str)> = plan.keep.iter().map(|(id, r)| (id.num(), r.as_str())).collect();
        assert_eq!(
            reasons,
            [
                (1, "T-0007 depends on it"),
                (2, "its status is done"),
                (3, "it has run"),
                (4, "it has a person's correction"),
                (5, "it has a result"),
                (6, "a person edited it"),
                (7, "T-0100 depends on it"),
            ]
        );
        let free = purge_plan(&rows[..1], &BTreeSet::new(), &BTreeMap::new());
        assert_eq!(free.purge, [TaskId::new(1)]);
    }
}

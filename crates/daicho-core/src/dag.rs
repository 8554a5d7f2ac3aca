//! The dependency DAG (D1, D2): the ready set, unknown deps and cycles.
//!
//! Stores keep the ready set as an index range scan (a per-row count of unmet deps); the
//! function [`ready`] here is the definition that the stores are tested against.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use jiff::Timestamp;

use crate::id::TaskId;
use crate::task::{Status, Task};

/// Whether `task` is ready (D1, D5): pending, every dep `done` or `dropped`, and its
/// `not_before` (if any) reached. `status_of` gives the status of a ledger row, `None` for an
/// unknown id (a missing dep blocks).
pub fn is_ready(task: &Task, now: Timestamp, status_of: impl Fn(TaskId) -> Option<Status>) -> bool {
    task.status == Status::Pending
        && task.not_before.is_none_or(|t| t <= now)
        && task.deps.iter().all(|&dep| status_of(dep).is_some_and(Status::satisfies_deps))
}

/// The ready set of a whole ledger in run order: priority (larger first), then smallest id.
pub fn ready(tasks: &[Task], now: Timestamp) -> Vec<TaskId> {
    let status: HashMap<TaskId, Status> = tasks.iter().map(|t| (t.id, t.status)).collect();
    let mut ready: Vec<&Task> =
        tasks.iter().filter(|t| is_ready(t, now, |id| status.get(&id).copied())).collect();
    ready.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.id.cmp(&b.id)));
    ready.into_iter().map(|t| t.id).collect()
}

/// Why a set of dependency edges is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DagError {
    /// A task waits for an id the ledger does not have.
    #[error("{task} depends on {dep}, which is not in the ledger")]
    UnknownDep {
        /// The waiting task.
        task: TaskId,
        /// The missing reference as written.
        dep: String,
        /// Where the waiting task came from (see [`NewDeps::origin`]).
        origin: Option<usize>,
    },
    /// The edges would close a cycle; `path` starts and ends with the same id.
    #[error("dependency cycle{}: {}", CycleLength(path), CyclePath(path))]
    Cycle {
        /// The cycle, first id repeated at the end.
        path: Vec<TaskId>,
        /// Where the first task of the cycle with a known origin came from.
        origin: Option<usize>,
    },
}

impl DagError {
    /// The origin of the change the error belongs to, if known.
    pub fn origin(&self) -> Option<usize> {
        match self {
            DagError::UnknownDep { origin, .. } | DagError::Cycle { origin, .. } => *origin,
        }
    }
}

/// The ids a long cycle's message shows at each end.
const CYCLE_ENDS: usize = 4;

/// Formats a cycle path as `T-0001 → T-0002 → T-0001`; a long one as its first and last few
/// ids around `… (N more) …`, so a cycle through 100,000 tasks is still a one-line message.
#[derive(Debug)]
pub struct CyclePath<'a>(pub &'a [TaskId]);

impl fmt::Display for CyclePath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.0;
        let long = path.len() > 2 * CYCLE_ENDS + 1;
        for (i, id) in path.iter().enumerate() {
            if long && i == CYCLE_ENDS {
                write!(f, " → … ({} more) …", path.len() - 2 * CYCLE_ENDS)?;
            }
            if long && (CYCLE_ENDS..path.len() - CYCLE_ENDS).contains(&i) {
                continue;
            }
            if i > 0 {
                f.write_str(" → ")?;
            }
            write!(f, "{id}")?;
        }
        Ok(())
    }
}

/// ` of N tasks` for a cycle too long to show whole; nothing for one shown whole.
struct CycleLength<'a>(&'a [TaskId]);

impl fmt::Display for CycleLength<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() > 2 * CYCLE_ENDS + 1 { write!(f, " of {} tasks", self.0.len() - 1) } else { Ok(()) }
    }
}

/// New or replaced outgoing edges of one task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewDeps {
    /// The task whose deps are set.
    pub task: TaskId,
    /// Its deps after the change.
    pub deps: Vec<TaskId>,
    /// Where the change came from, for errors: a number the caller chooses (the store uses the
    /// item's index in its batch).
    pub origin: Option<usize>,
}

/// Checks that setting `changes` on an acyclic ledger keeps it acyclic and names no unknown id.
///
/// `ledger_deps` answers for a ledger row: `Some(deps)` when the row exists, `None` when it does
/// not. Tasks in `changes` exist by definition (they are being added or edited), and their deps
/// in `changes` replace the ledger's. With `refuse_unknown` false a missing dep is allowed (the
/// row will show as blocked by a missing task). Only the part of the graph reachable from the
/// changed tasks is visited: a ledger that was acyclic can only gain a cycle through them.
///
/// # Errors
///
/// [`DagError::UnknownDep`] for the first missing dep (in the order of `changes`), or
/// [`DagError::Cycle`] with the cycle's path.
pub fn check_new_deps(
    changes: &[NewDeps],
    refuse_unknown: bool,
    mut ledger_deps: impl FnMut(TaskId) -> Option<Vec<TaskId>>,
) -> Result<(), DagError> {
    let overlay: HashMap<TaskId, &NewDeps> = changes.iter().map(|c| (c.task, c)).collect();
    let mut known: HashMap<TaskId, Option<Vec<TaskId>>> = HashMap::new();
    let mut deps_of = |id: TaskId| -> Option<Vec<TaskId>> {
        if let Some(change) = overlay.get(&id) {
            return Some(change.deps.clone());
        }
        known.entry(id).or_insert_with(|| ledger_deps(id)).clone()
    };

    if refuse_unknown {
        for change in changes {
            for &dep in &change.deps {
                if deps_of(dep).is_none() {
                    return Err(DagError::UnknownDep {
                        task: change.task,
                        dep: dep.to_string(),
                        origin: change.origin,
                    });
                }
            }
        }
    }

    // Iterative depth-first search with three colours; a grey node met again closes a cycle.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Colour {
        Grey,
        Black,
    }
    let mut colour: HashMap<TaskId, Colour> = HashMap::new();
    for change in changes {
        if colour.contains_key(&change.task) {
            continue;
        }
        let mut stack: Vec<(TaskId, Vec<TaskId>, usize)> = Vec::new();
        colour.insert(change.task, Colour::Grey);
        stack.push((change.task, deps_of(change.task).unwrap_or_default(), 0));
        while let Some((node, deps, next)) = stack.last_mut() {
            if *next == deps.len() {
                colour.insert(*node, Colour::Black);
                stack.pop();
                continue;
            }
            let dep = deps[*next];
            *next += 1;
            match colour.get(&dep) {
                Some(Colour::Black) => {}
                Some(Colour::Grey) => {
                    let start = stack.iter().position(|(n, _, _)| *n == dep).unwrap_or(0);
                    let mut path: Vec<TaskId> = stack[start..].iter().map(|(n, _, _)| *n).collect();
                    path.push(dep);
                    let origin = path.iter().find_map(|id| overlay.get(id).and_then(|c| c.origin));
                    return Err(DagError::Cycle { path, origin });
                }
                None => {
                    colour.insert(dep, Colour::Grey);
                    let deps = deps_of(dep).unwrap_or_default();
                    stack.push((dep, deps, 0));
                }
            }
        }
    }
    Ok(())
}

/// Finds a cycle in a whole graph (for `doctor` and for tests), smallest start id first.
pub fn find_cycle(graph: &BTreeMap<TaskId, Vec<TaskId>>) -> Option<Vec<TaskId>> {
    let changes: Vec<NewDeps> =
        graph.iter().map(|(&task, deps)| NewDeps { task, deps: deps.clone(), origin: None }).collect();
    match check_new_deps(&changes, false, |_| None) {
        Err(DagError::Cycle { path, .. }) => Some(path),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(n: u64) -> TaskId {
        TaskId::new(n)
    }

    fn task(n: u64, status: Status, deps: &[u64]) -> Task {
        let mut t = Task::new(id(n), &format!("task {n}"), "test", Timestamp::UNIX_EPOCH);
        t.status = status;
        t.deps = deps.iter().map(|&d| id(d)).collect();
        t
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    #[test]
    fn d1_ready_needs_every_dep_done_or_dropped_and_orders_by_priority_then_id() {
        // The reference graph of seeds/002: t1 → t2, t3 → t4 (needs t2 and t3) → t5.
        let mut tasks = vec![
            task(1, Status::Done, &[]),
            task(2, Status::Pending, &[1]),
            task(3, Status::Pending, &[1]),
            task(4, Status::Pending, &[2, 3]),
            task(5, Status::Pending, &[4]),
        ];
        assert_eq!(ready(&tasks, now()), [id(2), id(3)], "a single worker takes T-0002 first");
        tasks[1].status = Status::Done;
        assert_eq!(ready(&tasks, now()), [id(3)], "t4 waits for both t2 and t3");
        tasks[2].status = Status::Dropped;
        assert_eq!(ready(&tasks, now()), [id(4)], "dropped satisfies a dep");
        tasks[3].status = Status::Review;
        assert_eq!(ready(&tasks, now()), Vec::<TaskId>::new(), "review does not satisfy a dep");
        let mut urgent = task(9, Status::Pending, &[]);
        urgent.priority = 5;
        tasks.push(urgent);
        tasks.push(task(8, Status::Pending, &[]));
        assert_eq!(ready(&tasks, now()), [id(9), id(8)], "priority first, then id");
    }

    #[test]
    fn d1_missing_deps_block_and_not_before_defers() {
        let mut later = task(2, Status::Pending, &[]);
        later.not_before = Some(now() + jiff::SignedDuration::from_secs(60));
        let tasks = vec![task(1, Status::Pending, &[99]), later];
        assert!(ready(&tasks, now()).is_empty());
        assert_eq!(ready(&tasks, now() + jiff::SignedDuration::from_secs(60)), [id(2)]);
    }

    #[test]
    fn d2_a_long_cycle_is_named_by_its_length_and_ends() {
        let n = 100_000u64;
        let path: Vec<TaskId> = (1..=n).chain([1]).map(id).collect();
        let message = DagError::Cycle { path, origin: None }.to_string();
        assert_eq!(
            message,
            "dependency cycle of 100000 tasks: T-0001 → T-0002 → T-0003 → T-0004 → … (99993 more) … → \
             T-99998 → T-99999 → T-100000 → T-0001"
        );
    }

    #[test]
    fn d2_a_cycle_is_refused_with_its_path() {
        let ledger: HashMap<TaskId, Vec<TaskId>> =
            [(id(1), vec![]), (id(2), vec![id(1)]), (id(3), vec![id(2)])].into_iter().collect();
        let change = NewDeps { task: id(1), deps: vec![id(3)], origin: Some(7) };
        let err = check_new_deps(&[change], true, |t| ledger.get(&t).cloned()).unwrap_err();
        assert_eq!(err, DagError::Cycle { path: vec![id(1), id(3), id(2), id(1)], origin: Some(7) });
        assert_eq!(err.to_string(), "dependency cycle: T-0001 → T-0003 → T-0002 → T-0001");

        let self_loop = NewDeps { task: id(2), deps: vec![id(2)], origin: None };
        assert!(matches!(
            check_new_deps(&[self_loop], true, |t| ledger.get(&t).cloned()),
            Err(DagError::Cycle { .. })
        ));
    }

    #[test]
    fn d2_an_unknown_dep_is_refused_or_kept_by_policy() {
        let change = NewDeps { task: id(5), deps: vec![id(42)], origin: Some(3) };
        let err = check_new_deps(std::slice::from_ref(&change), true, |_| None).unwrap_err();
        assert_eq!(err.to_string(), "T-0005 depends on T-0042, which is not in the ledger");
        assert_eq!(err.origin(), Some(3));
        assert_eq!(check_new_deps(&[change], false, |_| None), Ok(()));
    }

    fn graph_strategy() -> impl Strategy<Value = BTreeMap<TaskId, Vec<TaskId>>> {
        prop::collection::vec(prop::collection::vec(1u64..=12, 0..4), 1..12).prop_map(|rows| {
            rows.into_iter()
                .enumerate()
                .map(|(i, deps)| (id(i as u64 + 1), deps.into_iter().map(id).collect()))
                .collect()
        })
    }

    /// A brute-force acyclicity test: repeatedly remove nodes with no remaining deps.
    fn acyclic_by_peeling(graph: &BTreeMap<TaskId, Vec<TaskId>>) -> bool {
        let mut left: BTreeMap<TaskId, Vec<TaskId>> = graph
            .iter()
            .map(|(k, v)| (*k, v.iter().copied().filter(|d| graph.contains_key(d)).collect()))
            .collect();
        loop {
            let free: Vec<TaskId> =
                left.iter().filter(|(_, deps)| deps.is_empty()).map(|(k, _)| *k).collect();
            if free.is_empty() {
                return left.is_empty();
            }
            for k in &free {
                left.remove(k);
            }
            for deps in left.values_mut() {
                deps.retain(|d| !free.contains(d));
            }
        }
    }

    proptest! {
        #[test]
        fn d2_no_cycle_is_ever_accepted(graph in graph_strategy()) {
            let found = find_cycle(&graph);
            prop_assert_eq!(found.is_none(), acyclic_by_peeling(&graph));
            if let Some(path) = found {
                prop_assert!(path.len() >= 2);
                prop_assert_eq!(path.first(), path.last());
                for pair in path.windows(2) {
                    prop_assert!(graph[&pair[0]].contains(&pair[1]), "{:?} is not an edge", pair);
                }
            }
        }

        #[test]
        fn d1_ready_matches_the_definition(
            rows in prop::collection::vec((0usize..6, prop::collection::vec(1u64..=10, 0..3), -2i64..3), 1..10)
        ) {
            let tasks: Vec<Task> = rows.iter().enumerate().map(|(i, (s, deps, prio))| {
                let mut t = task(i as u64 + 1, Status::ALL[*s], deps);
                t.priority = *prio;
                t
            }).collect();
            let got = ready(&tasks, now());
            // The definition, evaluated naively for each row.
            let mut want: Vec<&Task> = tasks.iter().filter(|t| {
                t.status == Status::Pending && t.deps.iter().all(|d| {
                    tasks.iter().any(|o| o.id == *d && matches!(o.status, Status::Done | Status::Dropped))
                })
            }).collect();
            want.sort_by_key(|t| (-t.priority, t.id.num()));
            prop_assert_eq!(got, want.into_iter().map(|t| t.id).collect::<Vec<_>>());
        }
    }
}

//! Which ready rows a claim looks at (S2, S5, S6, S9, S12; I5): the eligibility rules of
//! [`decide`](super::decide) as a filter the store applies in its ready query, so that rows
//! that can never run for this claimer — manual tasks, heavy ones, external ones awaiting
//! approval, other actions' — do not hide the one that can, however many there are.
//!
//! A scope admits every row `decide` lets run (a property test holds it to that); it may admit
//! a few that `decide` then holds, since it does not model the order in which routing tries an
//! action's work types before its assignees. `decide` keeps the last word on every claim.

use super::{ActionSpec, Gate, Mode};
use crate::task::{TAG_AI, TAG_EXTERNAL, TAG_HEAVY, Task};

/// The ready rows one claimer may take: how rows with ▶ run ticked and the other rows are
/// judged, the routes of the actions that may run now, and an optional project.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimScope {
    /// How a row with ▶ run ticked is judged; `None`: such rows are not taken.
    pub ticked: Option<Mode>,
    /// How a row without ▶ run is judged; `None`: such rows are not taken.
    pub unticked: Option<Mode>,
    /// Only this project's rows.
    pub project: Option<String>,
    /// The actions that may run now (configured, not heavy, under their caps).
    pub routes: Vec<Route>,
    /// Selects instead the rows that wait for a person's approval (S2): external rows of these
    /// routes without one — what a claim would take once approved. The store leaves out the
    /// rows already in the approval queue.
    pub awaiting_approval: bool,
}

/// One action a claim may run, and the rows that route to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Route {
    /// The action's name: rows naming it route to it.
    pub name: String,
    /// Rows without an action route here by work type …
    pub types: Vec<String>,
    /// … or by assignee.
    pub assignees: Vec<String>,
    /// Outbound: every row it runs needs a person's approval (S2).
    pub external: bool,
    /// May run automatically (S6).
    pub auto: bool,
}

impl ClaimScope {
    /// The scope of a claimer that judges ticked rows in `ticked` mode and the others in
    /// `unticked` mode under `gate` (its actions and today's runs), for rows of `project`, and
    /// only the action named `action` when given. Heavy actions and actions over their daily cap
    /// are left out; over the overall cap nothing is in scope.
    pub fn new(
        gate: &Gate<'_>,
        ticked: Option<Mode>,
        unticked: Option<Mode>,
        project: Option<&str>,
        action: Option<&str>,
    ) -> ClaimScope {
        let over_total = gate.daily_cap.is_some_and(|cap| gate.runs_today.total >= cap);
        let routes = gate
            .actions
            .iter()
            .filter(|a| !over_total && !a.heavy && action.is_none_or(|name| name == a.name))
            .filter(|a| {
                a.daily_cap
                    .is_none_or(|cap| gate.runs_today.by_action.get(&a.name).copied().unwrap_or(0) < cap)
            })
            .map(Route::of)
            .collect();
        ClaimScope { ticked, unticked, project: project.map(str::to_owned), routes, awaiting_approval: false }
    }

    /// The rows of `project` (or all) that [`decide`](super::decide) holds as
    /// [`Hold::AwaitingApproval`](super::Hold::AwaitingApproval) in any mode: external rows of a
    /// configured action that is not heavy, without a person's approval. Caps do not matter: a
    /// person is asked either way.
    pub fn awaiting_approval(gate: &Gate<'_>, project: Option<&str>) -> ClaimScope {
        ClaimScope {
            ticked: Some(Mode::Manual),
            unticked: Some(Mode::Manual),
            project: project.map(str::to_owned),
            routes: gate.actions.iter().filter(|a| !a.heavy).map(Route::of).collect(),
            awaiting_approval: true,
        }
    }

    /// A worker's scope (local or remote): a ticked row is a requested run, any other an
    /// automatic one ([`worker_mode`](super::worker_mode)).
    pub fn worker(gate: &Gate<'_>, project: Option<&str>, action: Option<&str>) -> ClaimScope {
        ClaimScope::new(gate, Some(Mode::Requested), Some(Mode::Auto), project, action)
    }

    /// Whether no row can be in scope (no action may run).
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty() || (self.ticked.is_none() && self.unticked.is_none())
    }

    /// Whether the scope admits `task`: the rule the store's query applies, written here once
    /// more in Rust so that both can be checked against [`decide`](super::decide).
    pub fn admits(&self, task: &Task) -> bool {
        let Some(mode) = (if task.run { self.ticked } else { self.unticked }) else {
            return false;
        };
        if self.project.as_ref().is_some_and(|p| *p != task.project) || task.tags.contains(TAG_HEAVY) {
            return false;
        }
        let approved = task.run && !task.approved_by.is_empty();
        if self.awaiting_approval {
            return !approved
                && self.routes.iter().any(|route| {
                    route.matches(task) && (route.external || task.tags.contains(TAG_EXTERNAL))
                });
        }
        self.routes.iter().any(|route| {
            route.matches(task)
                && (mode != Mode::Auto || (route.auto && task.tags.contains(TAG_AI)))
                && (approved || !(route.external || task.tags.contains(TAG_EXTERNAL)))
        })
    }
}

impl Route {
    fn of(action: &ActionSpec) -> Route {
        Route {
            name: action.name.clone(),
            types: action.types.clone(),
            assignees: action.assignees.clone(),
            external: action.external,
            auto: action.auto,
        }
    }

    /// Whether `task` may route here: it names this action, or names none and has one of its
    /// work types or assignees.
    pub fn matches(&self, task: &Task) -> bool {
        if !task.action.is_empty() {
            return task.action == self.name;
        }
        (!task.work_type.is_empty() && self.types.contains(&task.work_type))
            || (!task.assignee.is_empty() && self.assignees.contains(&task.assignee))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::TaskId;
    use crate::policy::{Hold, RunCounts, decide, worker_mode};
    use crate::task::{Status, Tags};
    use jiff::Timestamp;
    use proptest::prelude::*;

    fn actions() -> Vec<ActionSpec> {
        let spec = |name: &str, types: &[&str], assignees: &[&str]| ActionSpec {
            name: name.to_owned(),
            types: types.iter().map(|s| (*s).to_owned()).collect(),
            assignees: assignees.iter().map(|s| (*s).to_owned()).collect(),
            ..ActionSpec::default()
        };
        vec![
            ActionSpec { auto: true, ..spec("summarize", &["調査"], &["bot"]) },
            ActionSpec { external: true, auto: true, ..spec("mail", &["送信"], &[]) },
            ActionSpec { heavy: true, auto: true, ..spec("render", &["動画"], &["bot"]) },
            ActionSpec { daily_cap: Some(2), ..spec("draft", &["調査", "下書き"], &["ai-team"]) },
        ]
    }

    const ACTIONS: [&str; 6] = ["", "summarize", "mail", "render", "draft", "unknown"];
    const TYPES: [&str; 5] = ["", "調査", "送信", "動画", "下書き"];
    const PEOPLE: [&str; 4] = ["", "bot", "ai-team", "佐藤"];
    const TAGS: [&str; 8] = ["", "ai", "external", "heavy", "ai,external", "ai,heavy", "x", "ai,x"];

    fn task(
        action: usize,
        work_type: usize,
        assignee: usize,
        tags: usize,
        run: bool,
        approved: bool,
    ) -> Task {
        let mut t = Task::new(TaskId::new(7), "t", "s", Timestamp::UNIX_EPOCH);
        t.status = Status::Pending;
        t.action = ACTIONS[action].to_owned();
        t.work_type = TYPES[work_type].to_owned();
        t.assignee = PEOPLE[assignee].to_owned();
        t.tags = Tags::parse_list(TAGS[tags]);
        t.run = run;
        t.approved_by = if approved { "human:佐藤".to_owned() } else { String::new() };
        t.project = if tags.is_multiple_of(2) { "PJ-01".to_owned() } else { "PJ-02".to_owned() };
        t
    }

    fn modes() -> impl Strategy<Value = Option<Mode>> {
        prop_oneof![Just(None), Just(Some(Mode::Auto)), Just(Some(Mode::Requested))]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// The scope admits every row `decide` lets run in the mode the scope judges it in, for
        /// every cap state, project and action filter: no eligible row is ever filtered out; and
        /// the approval scope admits every row `decide` holds for a person's approval.
        #[test]
        fn i5_a_scope_admits_every_row_decide_lets_run(
            (action, work_type, assignee, tags) in (0..ACTIONS.len(), 0..TYPES.len(), 0..PEOPLE.len(), 0..TAGS.len()),
            (run, approved) in (any::<bool>(), any::<bool>()),
            (ticked, unticked) in (modes(), modes()),
            (draft_runs, total_runs, daily_cap) in (0u32..4, 0u32..6, prop::option::of(1u32..5)),
            project in prop::option::of(prop_oneof![Just("PJ-01"), Just("PJ-02")]),
            only in prop::option::of(0..ACTIONS.len()),
        ) {
            let specs = actions();
            let runs_today = RunCounts {
                total: total_runs,
                by_action: [("draft".to_owned(), draft_runs)].into_iter().collect(),
            };
            let gate = Gate { actions: &specs, paused: None, runs_today, daily_cap, now: None };
            let only = only.map(|i| ACTIONS[i]);
            let scope = ClaimScope::new(&gate, ticked, unticked, project, only);
            let t = task(action, work_type, assignee, tags, run, approved);
            let mode = if run { ticked } else { unticked };
            let eligible = mode.is_some_and(|mode| {
                decide(&t, mode, &gate).is_ok_and(|a| only.is_none_or(|name| a.name == name))
            }) && project.is_none_or(|p| p == t.project);
            prop_assert!(!eligible || scope.admits(&t), "{t:?} is eligible but out of {scope:?}");
            let waits = decide(&t, mode.unwrap_or(Mode::Manual), &gate) == Err(Hold::AwaitingApproval)
                && project.is_none_or(|p| p == t.project);
            let awaiting = ClaimScope::awaiting_approval(&gate, project);
            prop_assert!(!waits || awaiting.admits(&t), "{t:?} awaits approval but is out of {awaiting:?}");
        }
    }

    #[test]
    fn i5_a_scope_leaves_out_what_can_never_run_for_the_claimer() {
        let specs = actions();
        let gate = Gate { actions: &specs, ..Gate::default() };
        let scope = ClaimScope::worker(&gate, None, None);
        assert_eq!(
            scope.routes.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["summarize", "mail", "draft"]
        );
        // Manual, heavy, awaiting approval, not tagged ai, an unknown action: out.
        for (t, why) in [
            (task(0, 0, 3, 0, false, false), "manual"),
            (task(1, 0, 0, 5, false, false), "tagged heavy"),
            (task(3, 0, 0, 1, true, false), "a heavy action"),
            (task(2, 0, 0, 1, false, false), "external, not approved"),
            (task(2, 0, 0, 1, true, false), "external, ticked but not approved"),
            (task(1, 0, 0, 2, true, false), "tagged external, not approved"),
            (task(1, 0, 0, 0, false, false), "automatic without the ai tag"),
            (task(5, 0, 0, 1, false, false), "an unknown action"),
        ] {
            assert!(!scope.admits(&t), "{why}: {t:?}");
        }
        assert!(scope.admits(&task(1, 0, 0, 1, false, false)), "ai + an auto action");
        assert!(scope.admits(&task(0, 1, 0, 1, false, false)), "routed by work type");
        assert!(scope.admits(&task(2, 0, 0, 1, true, true)), "external, approved");
        assert!(scope.admits(&task(4, 0, 0, 0, true, false)), "requested run of a non-auto action");
        // Over the overall cap nothing is in scope; over an action's cap that action is out.
        let capped = Gate {
            daily_cap: Some(1),
            runs_today: RunCounts { total: 1, ..RunCounts::default() },
            ..gate.clone()
        };
        assert!(ClaimScope::worker(&capped, None, None).is_empty());
        let draft_capped = Gate {
            runs_today: RunCounts { total: 2, by_action: [("draft".to_owned(), 2)].into_iter().collect() },
            ..gate
        };
        assert!(!ClaimScope::worker(&draft_capped, None, None).routes.iter().any(|r| r.name == "draft"));
    }

    #[test]
    fn i5_the_worker_scope_judges_rows_as_worker_mode_does() {
        let specs = actions();
        let gate = Gate { actions: &specs, ..Gate::default() };
        let scope = ClaimScope::worker(&gate, None, None);
        for t in [task(4, 0, 0, 0, true, false), task(1, 0, 0, 1, false, false)] {
            assert_eq!(Some(worker_mode(&t)), if t.run { scope.ticked } else { scope.unticked });
        }
    }
}

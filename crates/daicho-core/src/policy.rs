//! The safety valves as pure functions (S2–S9, S12, C2): routing, eligibility with a reason for
//! every task that will not run, failure counting, lease expiry, and the correction text.
//!
//! The engine applies these decisions; it never re-decides them.

mod scope;

pub use scope::{ClaimScope, Route};

use crate::lang::Lang;
use std::collections::HashMap;
use std::fmt;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::id::TaskId;
use crate::task::{Status, TAG_AI, TAG_EXTERNAL, TAG_HEAVY, Task};

/// What a successful run leaves the row in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnSuccess {
    /// `review`: a person checks the result (the default).
    #[default]
    Review,
    /// `done`: the chain moves on by itself.
    Done,
}

impl OnSuccess {
    /// The status a success sets.
    pub fn status(self) -> Status {
        match self {
            OnSuccess::Review => Status::Review,
            OnSuccess::Done => Status::Done,
        }
    }
}

/// What the policies need to know of a configured action (the executor details live in the
/// engine).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActionSpec {
    /// The action's name, as tasks name it in `action`.
    pub name: String,
    /// An outbound action (mail, order, publish): runs only with a person's approval (S2).
    pub external: bool,
    /// Too long for a sweep: runs only through `daicho run-heavy` (S5).
    pub heavy: bool,
    /// May run automatically, on tasks tagged `ai` (S6).
    pub auto: bool,
    /// The status a success sets.
    pub on_success: OnSuccess,
    /// Work types (分類) the action accepts (S12).
    pub types: Vec<String>,
    /// Assignees (担当) the action accepts (S12).
    pub assignees: Vec<String>,
    /// Runs per day at most, if capped (S9).
    pub daily_cap: Option<u32>,
}

/// Why a ready task has no action to run it (S7, S12).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stall {
    /// The task names an action that is not configured.
    UnknownAction(String),
    /// No action names the task's type or assignee.
    NoRoute {
        /// The task's work type.
        work_type: String,
        /// The task's assignee.
        assignee: String,
    },
}

impl Stall {
    /// Why nothing can run the task, in `lang`.
    pub fn text(&self, lang: Lang) -> String {
        match (self, lang) {
            (Stall::UnknownAction(name), Lang::En) => format!("no executor configured for action '{name}'"),
            (Stall::UnknownAction(name), Lang::Ja) => format!("AI機能 '{name}' を実行する設定がありません"),
            (Stall::NoRoute { work_type, assignee }, Lang::En) => {
                format!("no executor accepts type '{work_type}' or assignee '{assignee}'")
            }
            (Stall::NoRoute { work_type, assignee }, Lang::Ja) => {
                format!("分類 '{work_type}' も担当 '{assignee}' も受け付ける実行先がありません")
            }
        }
    }
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text(Lang::En))
    }
}

/// Picks the action for a task (S12): the action it names; else the first that accepts its
/// work type; else the first that accepts its assignee. `Ok(None)` for a manual task (no
/// action, no route, not tagged `ai`): a person does it.
///
/// # Errors
///
/// A [`Stall`] when the task names an unknown action, or is tagged `ai` and nothing accepts it.
pub fn route<'a>(task: &Task, actions: &'a [ActionSpec]) -> Result<Option<&'a ActionSpec>, Stall> {
    if !task.action.trim().is_empty() {
        let name = task.action.trim();
        return actions
            .iter()
            .find(|a| a.name == name)
            .map(Some)
            .ok_or_else(|| Stall::UnknownAction(name.to_owned()));
    }
    let by_type = (!task.work_type.is_empty())
        .then(|| actions.iter().find(|a| a.types.iter().any(|t| t == &task.work_type)))
        .flatten();
    let by_assignee = || {
        (!task.assignee.is_empty())
            .then(|| actions.iter().find(|a| a.assignees.iter().any(|x| x == &task.assignee)))
            .flatten()
    };
    match by_type.or_else(by_assignee) {
        Some(action) => Ok(Some(action)),
        None if task.tags.contains(TAG_AI) => {
            Err(Stall::NoRoute { work_type: task.work_type.clone(), assignee: task.assignee.clone() })
        }
        None => Ok(None),
    }
}

/// How a run is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The `auto` sweep role: automatic runs (needs tag `ai` and an `auto` action).
    Auto,
    /// The `run-requested` sweep role: rows whose ▶ run box a person ticked.
    Requested,
    /// `daicho run T-…`: a person runs one task now.
    Manual,
    /// `daicho run-heavy T-…`: a person runs one heavy task now.
    Heavy,
}

/// Runs already made today, for the daily caps (S9).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunCounts {
    /// Runs today per action name.
    pub by_action: HashMap<String, u32>,
    /// Runs today in all.
    pub total: u32,
}

/// The context of an eligibility decision.
#[derive(Clone, Debug, Default)]
pub struct Gate<'a> {
    /// The configured actions.
    pub actions: &'a [ActionSpec],
    /// The kill switch (S8), with its reason.
    pub paused: Option<&'a str>,
    /// Runs made today.
    pub runs_today: RunCounts,
    /// The overall daily cap, if any.
    pub daily_cap: Option<u32>,
    /// The time of the decision, when the decider knows it: a row whose previous run may still
    /// be alive is then held ([`Hold::Stopping`]); without it only the claim's statement, which
    /// always checks that, finds out.
    pub now: Option<Timestamp>,
}

/// Why a ready task will not run now (S7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hold {
    /// The kill switch is on (S8).
    Paused(String),
    /// The row is not `pending` with every dep done (a manual run of a row that is not ready).
    NotReady(Status),
    /// A manual task: no action; a person does it.
    Manual,
    /// Not tagged `ai`: automatic runs need a person's allowance (S6).
    NoAiTag,
    /// The action is not configured `auto` (S6).
    NotAuto(String),
    /// External: waits in the approval queue for a person to tick `run` (S2).
    AwaitingApproval,
    /// Heavy: never run by a sweep (S5).
    Heavy(TaskId),
    /// The `run-requested` role only runs rows a person ticked.
    NotRequested,
    /// Nothing can run it (S7, S12).
    Stalled(Stall),
    /// The action's daily cap is reached (S9).
    ActionCap(String, u32),
    /// The overall daily cap is reached (S9).
    DailyCap(u32),
    /// A person moved the row out of `running` while it ran: its worker is stopping that run,
    /// and the row runs again once the run has stopped, at the latest when its lease runs out
    /// (S14, [`previous_run`]).
    Stopping {
        /// The worker whose run is being stopped.
        owner: String,
        /// When its lease runs out.
        until: Timestamp,
    },
}

impl Hold {
    /// A short machine-readable kind (`stalled`, `awaiting_approval`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Hold::Paused(_) => "paused",
            Hold::NotReady(_) => "not_ready",
            Hold::Manual => "manual",
            Hold::NoAiTag => "no_ai_tag",
            Hold::NotAuto(_) => "not_auto",
            Hold::AwaitingApproval => "awaiting_approval",
            Hold::Heavy(_) => "heavy",
            Hold::NotRequested => "not_requested",
            Hold::Stalled(_) => "stalled",
            Hold::ActionCap(..) => "action_cap",
            Hold::DailyCap(_) => "daily_cap",
            Hold::Stopping { .. } => "stopping",
        }
    }
}

impl Hold {
    /// Why the task will not run now, in `lang`.
    pub fn text(&self, lang: Lang) -> String {
        if lang == Lang::En {
            return self.to_string();
        }
        match self {
            Hold::Paused(reason) if reason.is_empty() => "一時停止中: `daicho resume` で再開".to_owned(),
            Hold::Paused(reason) => format!("一時停止中 ({reason}): `daicho resume` で再開"),
            Hold::NotReady(status) => {
                format!("実行可能ではありません: 状態が{}か、依存を待っています", status.label(true))
            }
            Hold::Manual => "手作業のタスク: AI機能がなく、人が行います".to_owned(),
            Hold::NoAiTag => "aiタグなし: 自動実行には 🤖 (タグ ai) が必要です".to_owned(),
            Hold::NotAuto(action) => format!("AI機能 '{action}' は auto に設定されていません"),
            Hold::AwaitingApproval => "外部送信、承認待ち: 人が承認します (`daicho approve`)".to_owned(),
            Hold::Heavy(id) => format!("重い処理: `daicho run-heavy {id}` で実行します"),
            Hold::NotRequested => "実行が依頼されていません: ▶ を付けます (`daicho set --run`)".to_owned(),
            Hold::Stalled(stall) => format!("停滞: {}", stall.text(lang)),
            Hold::ActionCap(action, cap) => format!("AI機能 '{action}' の1日の上限 {cap} 回に達しました"),
            Hold::DailyCap(cap) => format!("1日の上限 {cap} 回に達しました"),
            Hold::Stopping { owner, until } => {
                format!("前回の実行を {owner} が停止中: 停止を確認したら再実行します (遅くとも {until})")
            }
        }
    }
}

impl fmt::Display for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Hold::Paused(reason) if reason.is_empty() => f.write_str("paused: `daicho resume` to run again"),
            Hold::Paused(reason) => write!(f, "paused ({reason}): `daicho resume` to run again"),
            Hold::NotReady(status) => write!(f, "not ready: the row is {status} or waits for a dep"),
            Hold::Manual => f.write_str("manual task: no action, a person does it"),
            Hold::NoAiTag => f.write_str("no ai tag: automatic runs need 🤖 (tag ai)"),
            Hold::NotAuto(action) => write!(f, "action '{action}' is not configured auto"),
            Hold::AwaitingApproval => {
                f.write_str("external, awaiting approval: a person approves it (`daicho approve`)")
            }
            Hold::Heavy(id) => write!(f, "heavy: run it with `daicho run-heavy {id}`"),
            Hold::NotRequested => f.write_str("run not requested: tick ▶ run (`daicho set --run`)"),
            Hold::Stalled(stall) => write!(f, "stalled: {stall}"),
            Hold::ActionCap(action, cap) => {
                write!(f, "daily cap of {cap} runs reached for action '{action}'")
            }
            Hold::DailyCap(cap) => write!(f, "daily cap of {cap} runs reached"),
            Hold::Stopping { owner, until } => write!(
                f,
                "its previous run is being stopped by {owner}: it runs again once that run has stopped \
                 (at the latest {until})"
            ),
        }
    }
}

/// Whether a task is external: its action is, or it is tagged `external` (S2).
pub fn is_external(task: &Task, action: Option<&ActionSpec>) -> bool {
    task.tags.contains(TAG_EXTERNAL) || action.is_some_and(|a| a.external)
}

/// Whether a person approved the next run of a task (S2, S13): ▶ run ticked by an approval
/// recorded with the approving person. A tick alone — by a person's edit or a file's `run`
/// column — does not approve an external task.
pub fn is_approved(task: &Task) -> bool {
    task.run && !task.approved_by.is_empty()
}

/// Whether a task is heavy: its action is, or it is tagged `heavy` (S5).
pub fn is_heavy(task: &Task, action: Option<&ActionSpec>) -> bool {
    task.tags.contains(TAG_HEAVY) || action.is_some_and(|a| a.heavy)
}

/// Decides whether a ready task may run now in `mode`, and with which action (S2, S5–S9, S12).
/// The caller has established that the row is in the ready set (or checks
/// [`Hold::NotReady`] itself for a manual run).
///
/// # Errors
///
/// The [`Hold`] that keeps it from running: every ready task that will not run has one.
pub fn decide<'a>(task: &Task, mode: Mode, gate: &Gate<'a>) -> Result<&'a ActionSpec, Hold> {
    if let Some(reason) = gate.paused {
        return Err(Hold::Paused(reason.to_owned()));
    }
    if task.status != Status::Pending {
        return Err(Hold::NotReady(task.status));
    }
    let action = match route(task, gate.actions) {
        Ok(Some(action)) => action,
        Ok(None) => return Err(Hold::Manual),
        Err(stall) => return Err(Hold::Stalled(stall)),
    };
    if is_heavy(task, Some(action)) && mode != Mode::Heavy {
        return Err(Hold::Heavy(task.id));
    }
    if is_external(task, Some(action)) && !is_approved(task) {
        return Err(Hold::AwaitingApproval);
    }
    match mode {
        Mode::Auto => {
            if !task.tags.contains(TAG_AI) {
                return Err(Hold::NoAiTag);
            }
            if !action.auto {
                return Err(Hold::NotAuto(action.name.clone()));
            }
        }
        Mode::Requested if !task.run => return Err(Hold::NotRequested),
        Mode::Requested | Mode::Manual | Mode::Heavy => {}
    }
    if let Some(cap) = action.daily_cap
        && gate.runs_today.by_action.get(&action.name).copied().unwrap_or(0) >= cap
    {
        return Err(Hold::ActionCap(action.name.clone(), cap));
    }
    if let Some(cap) = gate.daily_cap
        && gate.runs_today.total >= cap
    {
        return Err(Hold::DailyCap(cap));
    }
    // Last: a row held for any other reason says that one, which a stopped run's end changes
    // nothing about.
    if let Some(lease) = gate.now.and_then(|now| previous_run(task, now)) {
        return Err(Hold::Stopping { owner: lease.owner.clone(), until: lease.expires_at });
    }
    Ok(action)
}

/// What the claim of a task decided runnable must still find in the row when it commits, so a
/// person's change between the decision and the claim (unticking ▶ run, say) wins (S1, S2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimGuard {
    /// The ▶ run box must still be ticked (a requested run).
    pub require_run: bool,
    /// A person's approval must still be there (an external task).
    pub require_approval: bool,
}

/// The [`ClaimGuard`] for a task that [`decide`] let run with `action` in `mode`.
pub fn claim_guard(task: &Task, action: &ActionSpec, mode: Mode) -> ClaimGuard {
    let external = is_external(task, Some(action));
    ClaimGuard { require_run: mode == Mode::Requested || external, require_approval: external }
}

/// The one decision before every claim (S1, S2): [`decide`] picks the action or says why the
/// task is held, and [`claim_guard`] says what the claim must still find in the row — the ▶ run
/// box for a requested run or an external task, a person's approval for an external task.
/// Every path that claims (a sweep, `run`, a worker's slots, a remote worker) goes through it.
///
/// # Errors
///
/// The [`Hold`] when the task may not run in `mode` now.
pub fn decide_claim<'a>(
    task: &Task,
    mode: Mode,
    gate: &Gate<'a>,
) -> Result<(&'a ActionSpec, ClaimGuard), Hold> {
    let action = decide(task, mode, gate)?;
    Ok((action, claim_guard(task, action, mode)))
}

/// The mode a ready task is claimed in by a worker: requested when a person ticked ▶ run,
/// automatic otherwise.
pub fn worker_mode(task: &Task) -> Mode {
    if task.run { Mode::Requested } else { Mode::Auto }
}

/// How failures are counted (S3, S4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailurePolicy {
    /// At this many failures the row goes to `needs_human` (default 3).
    pub max_failures: u32,
}

impl Default for FailurePolicy {
    fn default() -> FailurePolicy {
        FailurePolicy { max_failures: 3 }
    }
}

impl FailurePolicy {
    /// The failure count and status after one more failure: back to `pending` (no self-retry:
    /// the next sweep decides), or `needs_human` at the cap.
    pub fn after_failure(self, failures: u32) -> (u32, Status) {
        let failures = failures.saturating_add(1);
        let status = if failures >= self.max_failures.max(1) { Status::NeedsHuman } else { Status::Pending };
        (failures, status)
    }
}

/// Whether a `running` row's run is lost (S4): its lease has expired, or it has none.
pub fn run_is_lost(task: &Task, now: Timestamp) -> bool {
    task.status == Status::Running && task.lease.as_ref().is_none_or(|lease| lease.expires_at <= now)
}

/// The lease of a run that may still be alive on a row that is no longer `running` (S14): a
/// person moved the row while it ran, and its worker has not yet stopped the run and cleared the
/// lease ([`crate::task::Lease`]). No claim takes the row until then, or until the lease runs out
/// (by then the worker has killed the run itself, [`fence_at`]). Every claim statement of both
/// backends checks the same (`daicho_store::codec::claimable_where`).
pub fn previous_run(task: &Task, now: Timestamp) -> Option<&crate::task::Lease> {
    task.lease.as_ref().filter(|lease| task.status != Status::Running && lease.expires_at > now)
}

/// When a worker that could not renew a lease expiring at `expires_at` must kill its run
/// (S14, self-fencing): a sixth of the lease before it expires, so the run is gone before any
/// other worker may claim the task again.
pub fn fence_at(expires_at: Timestamp, lease: jiff::SignedDuration) -> Timestamp {
    expires_at - lease / 6
}

/// At most this many characters of a correction reach a run (C2).
pub const MAX_CORRECTION_CHARS: usize = 4000;

/// The correction handed to a task's next run (C1, C2): the row's own, cut to 4,000 characters.
pub fn correction_for_run(task: &Task) -> Option<String> {
    let text = task.correction.trim();
    (!text.is_empty()).then(|| text.chars().take(MAX_CORRECTION_CHARS).collect())
}

/// Appends the correction section to an LLM user message (C1): a person's instruction about the
/// previous result, to be applied first and to win over any default it contradicts.
pub fn with_correction(user_message: &str, correction: Option<&str>) -> String {
    match correction {
        None => user_message.to_owned(),
        Some(text) => format!(
            "{user_message}\n\n## Additional correction from a person (about the previous result; apply it first)\n\
             {text}\n\
             Where any default way of doing this contradicts the correction above, follow the correction."
        ),
    }
}

/// The idempotency key handed to an executor (S10): `T-0042:<attempt>`.
pub fn idempotency_key(id: TaskId, attempt: u32) -> String {
    format!("{id}:{attempt}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{Lease, Tags};

    fn task(id: u64, work_type: &str, tags: &str) -> Task {
        let mut t = Task::new(TaskId::new(id), &format!("t{id}"), "s", Timestamp::UNIX_EPOCH);
        t.work_type = work_type.to_owned();
        t.tags = Tags::parse_list(tags);
        t
    }

    fn action(name: &str, types: &[&str]) -> ActionSpec {
        ActionSpec {
            name: name.to_owned(),
            auto: true,
            types: types.iter().map(|t| (*t).to_owned()).collect(),
            ..ActionSpec::default()
        }
    }

    fn gate(actions: &[ActionSpec]) -> Gate<'_> {
        Gate { actions, ..Gate::default() }
    }

    #[test]
    fn s12_routing_by_name_type_and_assignee() {
        let mut writer = action("writer", &["制作/記事"]);
        writer.assignees = vec!["qiita-writer".into()];
        let actions = [action("research", &["調査/記事"]), writer];
        let named = Task { action: "research".into(), ..task(1, "", "") };
        assert_eq!(route(&named, &actions).unwrap().unwrap().name, "research");
        assert_eq!(route(&task(2, "制作/記事", "ai"), &actions).unwrap().unwrap().name, "writer");
        let by_assignee = Task { assignee: "qiita-writer".into(), ..task(3, "other", "ai") };
        assert_eq!(route(&by_assignee, &actions).unwrap().unwrap().name, "writer");
        let unknown = Task { action: "mailer".into(), ..task(4, "", "") };
        assert_eq!(route(&unknown, &actions), Err(Stall::UnknownAction("mailer".into())));
        assert_eq!(route(&task(5, "", ""), &actions), Ok(None), "a manual task");
    }

    #[test]
    fn s7_s12_a_ready_ai_task_nothing_accepts_is_stalled() {
        // seeds/004 sweep 3: T-503 (type 台帳) is ready, but no executor takes 台帳.
        let actions = [action("research", &["調査/記事"]), action("writer", &["制作/記事"])];
        let t503 = task(503, "台帳", "ai");
        let hold = decide(&t503, Mode::Auto, &gate(&actions)).unwrap_err();
        assert_eq!(hold.kind(), "stalled");
        assert_eq!(hold.to_string(), "stalled: no executor accepts type '台帳' or assignee ''");
    }

    #[test]
    fn s2_s13_external_runs_only_after_a_persons_approval() {
        let mut publish = action("publish", &["外部/投稿"]);
        publish.external = true;
        let actions = [publish, action("writer", &["制作/記事"])];
        let mut t = task(1, "外部/投稿", "ai");
        for mode in [Mode::Auto, Mode::Requested, Mode::Manual] {
            assert_eq!(decide(&t, mode, &gate(&actions)), Err(Hold::AwaitingApproval), "{mode:?}");
        }
        t.run = true;
        assert_eq!(
            decide(&t, Mode::Requested, &gate(&actions)),
            Err(Hold::AwaitingApproval),
            "a tick without an approval (a file's run column, an edit) holds"
        );
        t.approved_by = "human:ana".into();
        assert!(decide(&t, Mode::Requested, &gate(&actions)).is_ok());
        t.run = false;
        assert_eq!(
            decide(&t, Mode::Requested, &gate(&actions)),
            Err(Hold::AwaitingApproval),
            "claimed: spent"
        );
        let tagged = task(2, "制作/記事", "ai,external");
        assert_eq!(decide(&tagged, Mode::Auto, &gate(&actions)), Err(Hold::AwaitingApproval));
    }

    #[test]
    fn s14_a_worker_fences_itself_before_its_lease_ends() {
        let expires = Timestamp::from_second(1_800_000_600).unwrap();
        let lease = jiff::SignedDuration::from_mins(30);
        assert_eq!(fence_at(expires, lease), expires - jiff::SignedDuration::from_mins(5));
        assert!(fence_at(expires, jiff::SignedDuration::from_secs(3)) < expires);
    }

    #[test]
    fn s5_heavy_only_through_run_heavy() {
        let mut pdf = action("pdf", &["重い"]);
        pdf.heavy = true;
        let actions = [pdf];
        let t = task(42, "重い", "ai");
        let hold = decide(&t, Mode::Auto, &gate(&actions)).unwrap_err();
        assert_eq!(hold.to_string(), "heavy: run it with `daicho run-heavy T-0042`");
        assert_eq!(decide(&t, Mode::Manual, &gate(&actions)), Err(Hold::Heavy(t.id)));
        assert!(decide(&t, Mode::Heavy, &gate(&actions)).is_ok());
    }

    #[test]
    fn s6_automatic_runs_need_ai_tag_and_auto_action() {
        let mut manual_only = action("draft", &["a"]);
        manual_only.auto = false;
        let actions = [manual_only, action("auto", &["b"])];
        assert_eq!(decide(&task(1, "b", ""), Mode::Auto, &gate(&actions)), Err(Hold::NoAiTag));
        assert_eq!(
            decide(&task(2, "a", "ai"), Mode::Auto, &gate(&actions)),
            Err(Hold::NotAuto("draft".into()))
        );
        assert!(decide(&task(3, "b", "ai"), Mode::Auto, &gate(&actions)).is_ok());
        assert!(decide(&task(4, "a", ""), Mode::Manual, &gate(&actions)).is_ok(), "a person may run it");
        assert_eq!(decide(&task(5, "b", "ai"), Mode::Requested, &gate(&actions)), Err(Hold::NotRequested));
    }

    #[test]
    fn s8_s9_paused_and_daily_caps() {
        let mut capped = action("capped", &["a"]);
        capped.daily_cap = Some(2);
        let actions = [capped];
        let t = task(1, "a", "ai");
        let paused = Gate { paused: Some("night off"), ..gate(&actions) };
        assert_eq!(decide(&t, Mode::Auto, &paused).unwrap_err().kind(), "paused");
        let mut runs = RunCounts::default();
        runs.by_action.insert("capped".into(), 2);
        runs.total = 2;
        let at_cap = Gate { runs_today: runs.clone(), ..gate(&actions) };
        assert_eq!(decide(&t, Mode::Auto, &at_cap), Err(Hold::ActionCap("capped".into(), 2)));
        let mut uncapped = actions.to_vec();
        uncapped[0].daily_cap = None;
        let overall = Gate { actions: &uncapped, runs_today: runs, daily_cap: Some(2), ..Gate::default() };
        assert_eq!(decide(&t, Mode::Auto, &overall), Err(Hold::DailyCap(2)));
    }

    #[test]
    fn s3_three_failures_park_the_row() {
        let policy = FailurePolicy::default();
        assert_eq!(policy.after_failure(0), (1, Status::Pending));
        assert_eq!(policy.after_failure(1), (2, Status::Pending));
        assert_eq!(policy.after_failure(2), (3, Status::NeedsHuman));
        assert_eq!(FailurePolicy { max_failures: 5 }.after_failure(3), (4, Status::Pending));
    }

    /// S14: a person's move out of `running` keeps the run's lease on the row, and a decision
    /// that knows the time holds the row while that run may live, naming its worker, until the
    /// lease runs out; the running row itself is no fence.
    #[test]
    fn s14_a_row_whose_stopped_run_may_still_live_is_held_until_its_lease_runs_out() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let until = now + jiff::SignedDuration::from_mins(30);
        let mut running = task(1, "", "ai");
        running.action = "act".into();
        running.status = Status::Running;
        running.lease = Some(Lease { owner: "w1".into(), expires_at: until });
        assert_eq!(previous_run(&running, now), None, "a running row's lease is no fence");
        let edit = crate::edit::TaskEdit { status: Some(Status::Pending), ..Default::default() };
        let moved = edit.apply(&running, now);
        assert_eq!(moved.lease, running.lease, "the move keeps the lease");
        assert_eq!(previous_run(&moved, now).map(|l| l.owner.as_str()), Some("w1"));
        let actions = [action("act", &[])];
        let held = Hold::Stopping { owner: "w1".into(), until };
        let at = |now| Gate { now: Some(now), ..gate(&actions) };
        assert_eq!(decide(&moved, Mode::Auto, &at(now)).map(|a| a.name.clone()), Err(held.clone()));
        assert_eq!(decide(&moved, Mode::Manual, &at(now)).map(|a| a.name.clone()), Err(held.clone()));
        let manual = Task { action: String::new(), tags: Tags::default(), ..moved.clone() };
        assert_eq!(
            decide(&manual, Mode::Auto, &at(now)),
            Err(Hold::Manual),
            "another hold says its own reason"
        );
        assert!(held.to_string().contains("w1") && held.text(Lang::Ja).contains("w1"), "{held}");
        assert_eq!(held.kind(), "stopping");
        assert_eq!(decide(&moved, Mode::Auto, &at(until)).map(|a| a.name.clone()), Ok("act".into()));
        assert_eq!(previous_run(&moved, until), None, "a lease run out fences nothing");
        assert_eq!(
            decide(&moved, Mode::Auto, &gate(&actions)).map(|a| a.name.clone()),
            Ok("act".into()),
            "without the time, the claim's statement decides"
        );
    }

    #[test]
    fn s4_a_running_row_whose_lease_expired_is_lost() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let mut t = task(1, "", "");
        t.status = Status::Running;
        t.lease = Some(Lease { owner: "w".into(), expires_at: now + jiff::SignedDuration::from_secs(1) });
        assert!(!run_is_lost(&t, now));
        assert!(run_is_lost(&t, now + jiff::SignedDuration::from_secs(1)));
        t.lease = None;
        assert!(run_is_lost(&t, now), "running without a lease has no owner to finish it");
        t.status = Status::Pending;
        assert!(!run_is_lost(&t, now));
    }

    #[test]
    fn c1_c2_correction_is_cut_and_appended_as_a_section() {
        let mut t = task(1, "", "");
        assert_eq!(correction_for_run(&t), None);
        t.correction = "あ".repeat(5000);
        assert_eq!(correction_for_run(&t).unwrap().chars().count(), 4000);
        let message = with_correction("Write the draft.", Some("Shorter."));
        assert!(message.starts_with("Write the draft.\n\n## Additional correction from a person"));
        assert!(message.contains("Shorter.\nWhere any default"));
        assert_eq!(with_correction("Write.", None), "Write.");
    }

    #[test]
    fn s10_idempotency_key() {
        assert_eq!(idempotency_key(TaskId::new(42), 3), "T-0042:3");
    }
}

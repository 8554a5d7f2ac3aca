//! What a run of a task would do (S2): the action it routes to and, for the person who approves
//! an external task, what that action would run or send — the command line and the task on its
//! standard input, or the endpoint, model and the very message an `llm` action would post.

use daicho_core::policy::{route, with_correction};
use daicho_core::{Task, TaskId};
use daicho_store::{Decision, Store};
use serde::Serialize;

use crate::config::ActionKind;
use crate::llm::render_prompt;
use crate::{Config, Engine};

/// What a run of one task would do.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Outbound {
    /// The action it routes to (empty for a manual task or one no action takes).
    pub action: String,
    /// `command`, `llm`, `manual` (a person does it) or `none` (no action takes it).
    pub kind: &'static str,
    /// A command action's program and arguments (the task goes to it as JSON on stdin).
    pub command: Vec<String>,
    /// An `llm` action's chat-completions URL.
    pub endpoint: String,
    /// An `llm` action's model.
    pub model: String,
    /// What an `llm` action sends as the user message, the person's correction included.
    pub message: String,
    /// The action is outbound (S2): it runs only with a person's approval.
    pub external: bool,
    /// Why no action would run it, when none would.
    pub problem: Option<String>,
}

impl Outbound {
    /// What a run of `task` would do under `config`.
    pub fn of(task: &Task, config: &Config) -> Outbound {
        let specs = config.specs();
        let spec = match route(task, &specs) {
            Ok(Some(spec)) => spec,
            Ok(None) => return Outbound { kind: "manual", ..Outbound::default() },
            Err(stall) => {
                return Outbound { kind: "none", problem: Some(stall.to_string()), ..Outbound::default() };
            }
        };
        let mut out = Outbound { action: spec.name.clone(), external: spec.external, ..Outbound::default() };
        match config.action(&spec.name).map(|a| &a.kind) {
            Some(ActionKind::Command { argv }) => {
                out.kind = "command";
                out.command = argv.clone();
            }
            Some(ActionKind::Llm(llm)) => {
                out.kind = "llm";
                out.endpoint = format!("{}/chat/completions", llm.base_url.trim_end_matches('/'));
                out.model = llm.model.clone();
                let correction = Some(task.correction.as_str()).filter(|c| !c.trim().is_empty());
                out.message = with_correction(&render_prompt(&llm.prompt, task), correction);
            }
            None => out.kind = "none",
        }
        out
    }
}

impl<S> Engine<S> {
    /// What a run of `task` would do under this engine's configuration.
    pub fn outbound(&self, task: &Task) -> Outbound {
        Outbound::of(task, &self.config)
    }
}

/// One task of the approval queue (S2): when and by whom it was queued, and what its run would
/// do. `--json` and the API give `id`, `title`, `queued_at`, `queued_by` and `outbound`.
#[derive(Clone, Debug, Serialize)]
pub struct Awaiting {
    /// The task's id.
    pub id: TaskId,
    /// Its title.
    pub title: String,
    /// When it was queued.
    pub queued_at: jiff::Timestamp,
    /// Who queued it (`sweep:run-requested`, `worker:host:pid`).
    pub queued_by: String,
    /// What its run would do.
    pub outbound: Outbound,
    /// The task as stored (for a page that shows more of it).
    #[serde(skip)]
    pub task: Task,
}

/// The approval queue, oldest first: every external task waiting for a person (S2).
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct ApprovalQueue(pub Vec<Awaiting>);

/// One decision a person made on an external task (approved or rejected, by whom, why).
#[derive(Clone, Debug, Serialize)]
pub struct DecisionLine {
    /// The task's id.
    pub id: TaskId,
    /// `approved` or `rejected`.
    pub decision: &'static str,
    /// When it was decided.
    pub decided_at: jiff::Timestamp,
    /// Who decided (`human:<name>`).
    pub decided_by: String,
    /// The reason given (a rejection's).
    pub reason: String,
    /// When the task was queued.
    pub queued_at: jiff::Timestamp,
    /// Who queued it.
    pub queued_by: String,
    /// The decision, for a page that marks it.
    #[serde(skip)]
    pub decided: Decision,
}

/// The latest decisions, newest first.
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct Decisions(pub Vec<DecisionLine>);

impl<S: Store + 'static> Engine<S> {
    /// The approval queue, each task with what its run would do.
    ///
    /// # Errors
    /// A store error reading the queue or a task.
    pub async fn approval_queue(&self) -> Result<ApprovalQueue, daicho_store::StoreError> {
        let mut queue = Vec::new();
        for queued in self.store().approvals().await? {
            let Some(task) = self.store().get(queued.id).await? else { continue };
            queue.push(Awaiting {
                id: queued.id,
                title: task.title.clone(),
                queued_at: queued.queued_at,
                queued_by: queued.queued_by,
                outbound: self.outbound(&task),
                task,
            });
        }
        Ok(ApprovalQueue(queue))
    }

    /// The latest `limit` decisions on external tasks, newest first.
    ///
    /// # Errors
    /// A store error.
    pub async fn decisions(&self, limit: usize) -> Result<Decisions, daicho_store::StoreError> {
        let decided = self.store().decisions(limit).await?.into_iter().map(|d| DecisionLine {
            id: d.queued.id,
            decision: d.decision.as_str(),
            decided: d.decision,
            decided_at: d.decided_at,
            decided_by: d.decided_by,
            reason: d.reason,
            queued_at: d.queued.queued_at,
            queued_by: d.queued.queued_by,
        });
        Ok(Decisions(decided.collect()))
    }
}

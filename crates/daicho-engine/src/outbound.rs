//! What a run of a task would do (S2): the action it routes to and, for the person who approves
//! an external task, what that action would run or send — the command line and the task on its
//! standard input, or the endpoint, model and the very message an `llm` action would post.

use daicho_core::Task;
use daicho_core::policy::{route, with_correction};
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

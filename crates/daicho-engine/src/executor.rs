//! Executors: what runs a claimed task. `command` runs a child process (here); `llm` calls an
//! OpenAI-compatible endpoint ([`crate::llm`]).
//!
//! Each run gets a [`RunContext`] of its own: the correction travels in it and nowhere else, so
//! it cannot reach another task's run, whatever happens to this one (C3).

use std::time::Duration;

use daicho_core::format::ItemDefaults;
use daicho_core::policy::{correction_for_run, idempotency_key};
use daicho_core::{Item, Task};

use serde::Serialize;

use crate::runner;

/// The most of a result kept (1 MiB), and of an executor's stderr; the rest is cut with a marker
/// saying how much.
pub const OUTPUT_CAP: usize = 1 << 20;

/// The most of an executor's stdout read (16 MiB): the structured output
/// (`{"result", "tasks"}`) is parsed from it before the result is capped, so found tasks survive
/// a long result. Past it the output is drained and dropped.
pub const READ_CAP: usize = 16 << 20;

/// Everything one run knows about its task.
#[derive(Clone, Debug)]
pub struct RunContext {
    /// The claimed row (status `running`).
    pub task: Task,
    /// `T-0042:<attempt>` (S10).
    pub idempotency_key: String,
    /// The person's correction for this run, at most 4,000 characters (C1, C2).
    pub correction: Option<String>,
    /// The action's name.
    pub action: String,
    /// How long the run supervisor waits for a sign of life from this daicho before it kills
    /// the run itself (S14: a frozen daicho cannot fence its run; the supervisor does, before
    /// the lease can expire). `None`: no such limit (a run under no lease).
    pub alive_within: Option<Duration>,
    /// Where the run's supervisor keeps the run's own account of its end, for a daicho that
    /// dies before it spools the end itself ([`crate::spool`]). `None`: none is kept.
    pub record_to: Option<runner::RecordTo>,
}

impl RunContext {
    /// The context of a claimed task.
    pub fn new(task: Task, action: &str) -> RunContext {
        RunContext {
            idempotency_key: idempotency_key(task.id, task.attempt),
            correction: correction_for_run(&task),
            action: action.to_owned(),
            task,
            alive_within: None,
            record_to: None,
        }
    }
}

/// How an executor's run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecOutcome {
    /// It succeeded.
    Success {
        /// The result text.
        result: String,
        /// Tasks it found, to push (X2).
        tasks: Vec<Item>,
        /// Token usage reported by an LLM API: (prompt, completion).
        tokens: Option<(u64, u64)>,
        /// Why the found tasks could not be read, if they could not (the run still succeeds).
        push_error: Option<String>,
    },
    /// It failed or timed out.
    Failure {
        /// What went wrong.
        error: String,
        /// Whether it timed out (S11).
        timeout: bool,
    },
}

/// The task as a command executor reads it on stdin (a boundary type).
#[derive(Debug, Serialize)]
struct TaskInput<'a> {
    id: String,
    project: &'a str,
    title: &'a str,
    body: &'a str,
    source: &'a str,
    evidence: &'a str,
    #[serde(rename = "type")]
    work_type: &'a str,
    assignee: &'a str,
    due: Option<String>,
    deps: Vec<String>,
    tags: Vec<&'a str>,
    action: &'a str,
    attempt: u32,
    idempotency_key: &'a str,
    correction: Option<&'a str>,
    result: &'a str,
}

fn task_input(ctx: &RunContext) -> String {
    let t = &ctx.task;
    let input = TaskInput {
        id: t.id.to_string(),
        project: &t.project,
        title: &t.title,
        body: &t.body,
        source: &t.source,
        evidence: &t.evidence,
        work_type: &t.work_type,
        assignee: &t.assignee,
        due: t.due.map(|d| d.to_string()),
        deps: t.deps.iter().map(ToString::to_string).collect(),
        tags: t.tags.iter().collect(),
        action: &ctx.action,
        attempt: t.attempt,
        idempotency_key: &ctx.idempotency_key,
        correction: ctx.correction.as_deref(),
        result: &t.result,
    };
    serde_json::to_string(&input).unwrap_or_else(|_| "{}".to_owned())
}

/// Cuts `text` to at most `cap` bytes (at a character boundary), saying how much was cut.
pub fn cap_text(mut text: String, cap: usize, more: usize) -> String {
    let mut cut = more;
    if text.len() > cap {
        let mut end = cap;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        cut += text.len() - end;
        text.truncate(end);
    }
    if cut > 0 {
        text.push_str(&format!("\n…[cut: {cut} more bytes of output]"));
    }
    text
}

/// Runs a `command` action: `argv` as given (task text is never interpolated into it), the task
/// as JSON on stdin, `DAICHO_TASK_ID`, `DAICHO_CORRECTION` and `DAICHO_IDEMPOTENCY_KEY` in the
/// environment, in a process group of its own, under the run supervisor when one is in use
/// ([`crate::supervise`]). After `timeout` every process of the run is killed (S11), and so it
/// is when the run is dropped (S14). Exit 0 is success: stdout is the result, or `{"result": …, "tasks": […]}`.
pub async fn run_command(argv: &[String], ctx: &RunContext, timeout: Duration) -> ExecOutcome {
    let failure = |error: String| ExecOutcome::Failure { error, timeout: false };
    if argv.is_empty() {
        return failure("the action has no command".to_owned());
    }
    if runner::supervised()
        && let Some(ledger) = crate::supervise::ledger()
    {
        // No earlier attempt of this task of this ledger may still run on this machine (S14).
        let (task, attempt) = (ctx.task.id.to_string(), ctx.task.attempt);
        let _ = tokio::task::spawn_blocking(move || {
            crate::supervise::kill_earlier_attempts(ledger, &task, attempt)
        })
        .await;
    }
    let spec = runner::Spec {
        argv,
        dir: None,
        alive_within: ctx.alive_within,
        env: vec![
            (crate::runner::TASK_VAR, ctx.task.id.to_string()),
            // Always set, so a correction can never be inherited from daicho's own environment (C3).
            ("DAICHO_CORRECTION", ctx.correction.clone().unwrap_or_default()),
            ("DAICHO_IDEMPOTENCY_KEY", ctx.idempotency_key.clone()),
            ("DAICHO_ATTEMPT", ctx.task.attempt.to_string()),
            ("DAICHO_ACTION", ctx.action.clone()),
        ],
        input: task_input(ctx).into_bytes(),
        timeout,
        stdout_cap: READ_CAP,
        stderr_cap: OUTPUT_CAP,
        record_to: ctx.record_to.clone(),
    };
    let ended = match runner::run(spec).await {
        Ok(ended) => ended,
        Err(e @ runner::RunError::TimedOut(_)) => {
            return ExecOutcome::Failure { error: e.to_string(), timeout: true };
        }
        Err(e) => return failure(e.to_string()),
    };
    outcome_of(&ended, ctx)
}

/// How a command run ended, from its exit status and output: exit 0 is success, its stdout the
/// result or `{"result": …, "tasks": […]}`; anything else a failure with stderr's last lines.
/// The one reading of a run's end, for the run itself and for one recovered from the record its
/// supervisor kept ([`crate::spool`]).
pub fn outcome_of(ended: &runner::Exited, ctx: &RunContext) -> ExecOutcome {
    if !ended.status.success() {
        return ExecOutcome::Failure { error: ended.failure(5), timeout: false };
    }
    let unread = ended.stdout.cut();
    let out = String::from_utf8_lossy(&ended.stdout.kept);
    let mut outcome = parse_output(&out, ctx);
    if let ExecOutcome::Success { result, push_error, .. } = &mut outcome {
        *result = cap_text(std::mem::take(result), OUTPUT_CAP, unread);
        if unread > 0 && out.trim_start().starts_with('{') && push_error.is_none() {
            *push_error = Some(format!(
                "the output was over {} MiB and was cut; found tasks in it could not be read",
                READ_CAP >> 20
            ));
        }
    }
    outcome
}

/// Reads an executor's stdout: plain text is the result; an object with only the keys
/// `result` and `tasks` (`{"result": …, "tasks": […]}`) also carries found tasks to push. Any
/// other JSON is a plain result.
pub fn parse_output(out: &str, ctx: &RunContext) -> ExecOutcome {
    let trimmed = out.trim();
    if trimmed.starts_with('{')
        && let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(trimmed)
        && !map.is_empty()
        && map.keys().all(|k| k == "result" || k == "tasks")
    {
        let result = match map.get("result") {
            Some(serde_json::Value::String(text)) => text.clone(),
            Some(serde_json::Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        let (tasks, push_error) = match map.get("tasks") {
            Some(tasks) => {
                let defaults = ItemDefaults { source: ctx.action.clone(), project: ctx.task.project.clone() };
                let name = format!("<output of run {}>", ctx.idempotency_key);
                // Push is isolated: found tasks that cannot be read never fail the run.
                match daicho_core::format::json::parse(&tasks.to_string(), &name, &defaults) {
                    Ok(items) => (items, None),
                    Err(e) => (Vec::new(), Some(e.to_string())),
                }
            }
            None => (Vec::new(), None),
        };
        return ExecOutcome::Success { result, tasks, tokens: None, push_error };
    }
    ExecOutcome::Success { result: trimmed.to_owned(), tasks: Vec::new(), tokens: None, push_error: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use daicho_core::TaskId;

    fn ctx() -> RunContext {
        let mut task = Task::new(TaskId::new(1), "t", "s", jiff::Timestamp::UNIX_EPOCH);
        task.attempt = 1;
        RunContext::new(task, "act")
    }

    #[tokio::test]
    async fn s11_output_is_capped_and_drained() {
        let argv: Vec<String> =
            ["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x"].iter().map(|s| (*s).to_owned()).collect();
        match run_command(&argv, &ctx(), Duration::from_secs(20)).await {
            ExecOutcome::Success { result, .. } => {
                let (kept, marker) = result.split_at(OUTPUT_CAP);
                assert!(kept.bytes().all(|b| b == b'x'), "kept up to the cap");
                assert_eq!(
                    marker, "\n…[cut: 1951424 more bytes of output]",
                    "the rest was drained and counted"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn x2_found_tasks_survive_a_result_over_the_cap() {
        let script = r#"printf '{"result": "'; head -c 3000000 /dev/zero | tr '\0' y; printf '", "tasks": [{"title": "found after a long result"}]}'"#;
        let argv: Vec<String> = ["sh", "-c", script].iter().map(|s| (*s).to_owned()).collect();
        match run_command(&argv, &ctx(), Duration::from_secs(20)).await {
            ExecOutcome::Success { result, tasks, push_error, .. } => {
                assert_eq!(tasks.len(), 1, "{push_error:?}");
                assert_eq!(tasks[0].title, "found after a long result");
                assert!(
                    result.ends_with("…[cut: 1951424 more bytes of output]"),
                    "{}",
                    &result[result.len() - 60..]
                );
                assert_eq!(push_error, None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn x2_only_a_result_and_tasks_object_carries_found_tasks() {
        let ctx = ctx();
        let out = parse_output(r#"{"result": "done", "tasks": [{"title": "found one"}]}"#, &ctx);
        let ExecOutcome::Success { result, tasks, push_error, .. } = out else { panic!() };
        assert_eq!((result.as_str(), tasks.len(), push_error), ("done", 1, None));
        assert_eq!(tasks[0].source, "act", "found tasks come from the action");
        let bad = parse_output(r#"{"result": "done", "tasks": [{"title": 3}]}"#, &ctx);
        let ExecOutcome::Success { push_error, .. } = bad else { panic!() };
        assert!(push_error.is_some(), "bad found tasks never fail the run");
        let other = parse_output(r#"{"id": "T-0001", "result": ""}"#, &ctx);
        let ExecOutcome::Success { result, tasks, .. } = other else { panic!() };
        assert!(result.starts_with("{\"id\"") && tasks.is_empty(), "any other JSON is a plain result");
    }
}

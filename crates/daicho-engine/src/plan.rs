//! Plans (D4): a goal decomposed into tasks with deps, saved in one transaction as the
//! versioned source `plan:<goal>` (then `plan:<goal>#2`, … per replacement).

use daicho_core::format::{self, Format, ItemDefaults};
use daicho_core::{Actor, Item, Task, TaskId};
use daicho_store::{Batch, ListFilter, Store, UnknownDeps};
use serde::Serialize;

use crate::executor::{ExecOutcome, RunContext};
use crate::{Config, Error};

/// What saving a plan did (fields in the order the JSON has always had).
#[derive(Debug, Serialize)]
pub struct PlanReport {
    /// The goal.
    pub goal: String,
    /// The project of the plan's tasks.
    pub project: String,
    /// The source the plan's rows carry (`plan:<goal>`, then `plan:<goal>#2`, … per replacement).
    pub source: String,
    /// The tasks added.
    pub added: Vec<String>,
    /// Open tasks of the replaced plan, now dropped.
    pub dropped: Vec<String>,
}

/// A plan to save.
#[derive(Debug)]
pub struct PlanRequest {
    /// The goal, in a sentence (trimmed, not empty).
    pub goal: String,
    /// The project the plan's tasks belong to.
    pub project: String,
    /// The plan's items (blank ones are dropped).
    pub items: Vec<Item>,
    /// Where the items came from, for errors.
    pub file: String,
    /// Replace the goal's saved plan (its open tasks are dropped).
    pub replace: bool,
    /// Who saves it, for the journal.
    pub actor: Actor,
    /// When.
    pub now: jiff::Timestamp,
}

/// Drops blank items and refuses a plan with no tasks left.
///
/// # Errors
///
/// [`Error::Invalid`] naming `file`.
pub fn check_items(items: &mut Vec<Item>, file: &str) -> Result<(), Error> {
    items.retain(|i| !i.is_blank());
    if items.is_empty() {
        return Err(Error::Invalid(format!("{file}: the plan has no tasks")));
    }
    Ok(())
}

/// Saves a plan in one transaction: checked first (unique ids, known deps, no cycle); a goal
/// that already has a plan is refused unless `replace`, which drops the old plan's open tasks
/// (journaled) in the same transaction.
///
/// # Errors
///
/// [`Error::Invalid`] for an empty plan or an existing one without `replace`; a store error
/// (the plan refused, the ledger out of reach).
pub async fn save<S: Store>(store: &S, request: PlanRequest) -> Result<PlanReport, Error> {
    let PlanRequest { goal, project, mut items, file, replace, actor, now } = request;
    check_items(&mut items, &file)?;
    let base = format!("plan:{goal}");
    let filter = ListFilter { project: Some(project.clone()), ..ListFilter::default() };
    let earlier: Vec<Task> = store
        .list(filter)
        .await?
        .into_iter()
        .filter(|t| t.source == base || t.source.strip_prefix(&base).is_some_and(|v| v.starts_with('#')))
        .collect();
    let version = earlier
        .iter()
        .map(|t| t.source.strip_prefix(&format!("{base}#")).and_then(|v| v.parse::<u32>().ok()).unwrap_or(1))
        .max();
    if let Some(version) = version
        && !replace
    {
        return Err(Error::Invalid(format!(
            "the goal '{goal}' already has a plan in project '{project}' ({} tasks, source '{}'); pass --replace to drop its open tasks and save this one",
            earlier.len(),
            if version == 1 { base.clone() } else { format!("{base}#{version}") }
        )));
    }
    let source = match version {
        None => base,
        Some(v) => format!("{base}#{}", v + 1),
    };
    for item in &mut items {
        item.source = source.clone();
    }
    let retire: Vec<TaskId> = earlier.iter().filter(|t| t.status.is_open()).map(|t| t.id).collect();
    let batch = Batch { items: items.into(), actor, now, file, unknown_deps: UnknownDeps::Refuse };
    let report = store.replan(batch, retire.clone()).await?;
    Ok(PlanReport {
        goal,
        project,
        source,
        added: report.added.iter().map(ToString::to_string).collect(),
        dropped: retire.iter().map(ToString::to_string).collect(),
    })
}

/// Runs the decomposer action `name` on the goal and reads its plan: the items and where they
/// came from. The items are an agent's output: a person's field in them refuses the plan (S13).
///
/// # Errors
///
/// [`Error::Invalid`] for an unknown action, a failed run or a person's field; an input error
/// for output that is not a plan.
pub async fn decompose(
    config: &Config,
    name: &str,
    goal: &str,
    defaults: &ItemDefaults,
    now: jiff::Timestamp,
) -> Result<(Vec<Item>, String), Error> {
    let action = config
        .action(name)
        .ok_or_else(|| Error::Invalid(format!("no action named '{name}' in the configuration")))?;
    let mut task = Task::new(TaskId::new(0), goal, "plan", now);
    task.project = defaults.project.clone();
    let file = format!("<output of action {name}>");
    let items = match crate::exec(RunContext::new(task, name), action.clone()).await {
        ExecOutcome::Success { tasks, .. } if !tasks.is_empty() => tasks,
        ExecOutcome::Success { result, push_error: Some(error), .. } if result.is_empty() => {
            return Err(Error::Invalid(format!("{file}: {error}")));
        }
        ExecOutcome::Success { result, .. } => format::parse(Format::Json, &result, &file, defaults)?,
        ExecOutcome::Failure { error, .. } => {
            return Err(Error::Invalid(format!("the decomposer action '{name}' failed: {error}")));
        }
    };
    // A decomposer is an agent (S13): no person-only field, and no row born done or dropped,
    // which would release the plan's later steps as if a person had closed it.
    let screen = daicho_core::authority::screen(daicho_core::authority::Authority::Agent, &items);
    if let Some(note) = screen.refused.or_else(|| daicho_core::authority::closed_item(&items)) {
        let reason = daicho_core::authority::refused_field_reason(
            &Actor::Worker(format!("action:{name}")),
            note.field,
        );
        return Err(Error::Invalid(format!("{file}: task #{}: {reason}", note.index + 1)));
    }
    Ok((items, file))
}

//! `daicho plan`: a goal decomposed into tasks with deps, saved in one transaction (D4).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use daicho_core::format::{self, Format, ItemDefaults};
use daicho_core::{Actor, Item, Task, TaskId};
use daicho_engine::executor::{ExecOutcome, RunContext};
use daicho_store::{Batch, ListFilter, Store, UnknownDeps};
use serde::Serialize;

use super::Context;
use crate::input::{self, FormatArg};
use crate::output;

/// Save a plan for a goal: tasks with deps from a JSON file (a tasks.json document or an item
/// array; ids such as `t1` are local to the plan) or from a decomposer action's output. The plan
/// is checked first (unique ids, known deps, no cycle) and saved in one transaction; tasks may
/// carry `not_before`. A goal that already has a plan is refused unless `--replace`, which drops
/// the old plan's open tasks (journaled) in the same transaction.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("origin").required(true).args(["from", "action"])))]
pub struct Args {
    /// The project the plan's tasks belong to.
    #[arg(long, short)]
    pub project: String,
    /// The goal, in a sentence.
    #[arg(long)]
    pub goal: String,
    /// The plan file (`-` reads standard input).
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// The plan file's format (default: by extension, else JSON).
    #[arg(long, value_enum, requires = "from")]
    pub format: Option<FormatArg>,
    /// A configured action that decomposes the goal: it gets the goal as a task and prints the
    /// plan as JSON (or `{"tasks": […]}`).
    #[arg(long, value_name = "NAME")]
    pub action: Option<String>,
    /// Replace the goal's saved plan: its open tasks are dropped.
    #[arg(long)]
    pub replace: bool,
}

#[derive(Debug, Serialize)]
struct PlanJson {
    goal: String,
    project: String,
    /// The source the plan's rows carry (`plan:<goal>`, then `plan:<goal>#2`, … per replacement).
    source: String,
    added: Vec<String>,
    /// Open tasks of the replaced plan, now dropped.
    dropped: Vec<String>,
}

/// Runs `daicho plan`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let goal = args.goal.trim().to_owned();
    if goal.is_empty() {
        bail!("--goal must not be empty");
    }
    let defaults = ItemDefaults { source: String::new(), project: args.project.clone() };
    let (mut items, file) = match (&args.from, &args.action) {
        (Some(path), _) => {
            let (name, bytes) = input::read(path)?;
            let format = input::format_of(args.format, &name, Some(Format::Json))?;
            (input::parse(&name, &bytes, format, &defaults)?, name)
        }
        (None, Some(action)) => {
            let (items, file) = decompose(ctx, action, &goal, &args.project, &defaults).await?;
            // The plan is saved by the person who asked for it, but its items are an agent's
            // output: they may not carry a person's fields (S13).
            let screen = daicho_core::authority::screen(daicho_core::authority::Authority::Agent, &items);
            if let Some(note) = screen.refused {
                let reason = daicho_core::authority::refused_field_reason(
                    &Actor::Worker(format!("action:{action}")),
                    note.field,
                );
                bail!("{file}: task #{}: {reason}", note.index + 1);
            }
            (items, file)
        }
        (None, None) => bail!("give --from FILE or --action NAME"),
    };
    items.retain(|i| !i.is_blank());
    if items.is_empty() {
        bail!("{file}: the plan has no tasks");
    }
    let store = crate::ledger::open(&ctx.db).await?;
    let base = format!("plan:{goal}");
    let filter = ListFilter { project: Some(args.project.clone()), ..ListFilter::default() };
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
        && !args.replace
    {
        bail!(
            "the goal '{goal}' already has a plan in project '{}' ({} tasks, source '{}'); pass --replace to drop its open tasks and save this one",
            args.project,
            earlier.len(),
            if version == 1 { base.clone() } else { format!("{base}#{version}") }
        );
    }
    let source = match version {
        None => base,
        Some(v) => format!("{base}#{}", v + 1),
    };
    for item in &mut items {
        item.source = source.clone();
    }
    let retire: Vec<TaskId> = earlier.iter().filter(|t| t.status.is_open()).map(|t| t.id).collect();
    let batch = Batch {
        items,
        actor: Actor::Human(ctx.user.clone()),
        now: jiff::Timestamp::now(),
        file,
        unknown_deps: UnknownDeps::Refuse,
    };
    let report = store.replan(batch, retire.clone()).await?;
    let result = PlanJson {
        goal,
        project: args.project,
        source,
        added: report.added.iter().map(ToString::to_string).collect(),
        dropped: retire.iter().map(ToString::to_string).collect(),
    };
    if ctx.json {
        output::print_json(&result)?;
    } else {
        let mut text = format!(
            "planned '{}': {} tasks added ({})",
            result.goal,
            result.added.len(),
            result.added.join(", ")
        );
        if !result.dropped.is_empty() {
            text.push_str(&format!("; the old plan's open tasks dropped: {}", result.dropped.join(", ")));
        }
        output::print(&text)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs a decomposer action on the goal and reads its plan.
async fn decompose(
    ctx: &Context,
    name: &str,
    goal: &str,
    project: &str,
    defaults: &ItemDefaults,
) -> anyhow::Result<(Vec<Item>, String)> {
    let config = ctx.load_config()?;
    let action =
        config.action(name).with_context(|| format!("no action named '{name}' in the configuration"))?;
    let mut task = Task::new(TaskId::new(0), goal, "plan", jiff::Timestamp::now());
    task.project = project.to_owned();
    let file = format!("<output of action {name}>");
    match daicho_engine::exec(RunContext::new(task, name), action.clone()).await {
        ExecOutcome::Success { tasks, .. } if !tasks.is_empty() => Ok((tasks, file)),
        ExecOutcome::Success { result, push_error: Some(error), .. } if result.is_empty() => {
            bail!("{file}: {error}")
        }
        ExecOutcome::Success { result, .. } => {
            Ok((format::parse(Format::Json, &result, &file, defaults)?, file))
        }
        ExecOutcome::Failure { error, .. } => bail!("the decomposer action '{name}' failed: {error}"),
    }
}

//! `daicho plan`: a goal decomposed into tasks with deps, saved in one transaction (D4) by
//! `daicho_engine::plan`, which versions the plan's source.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use daicho_core::format::{Format, ItemDefaults};
use daicho_engine::{input, plan};

use super::{Context, FormatArg};

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

/// Runs `daicho plan`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let goal = args.goal.trim().to_owned();
    if goal.is_empty() {
        bail!("--goal must not be empty");
    }
    // Saved as the person's plan (S13): refused inside a run before a decomposer is called.
    let actor = ctx.actor()?;
    let defaults = ItemDefaults { source: String::new(), project: args.project.clone() };
    let (mut items, file) = match (&args.from, &args.action) {
        (Some(path), _) => {
            let (name, bytes) = input::read(path)?;
            let format = input::format_of(args.format.map(FormatArg::format), &name, Some(Format::Json))?;
            (input::parse(&name, &bytes, format, &defaults)?, name)
        }
        (None, Some(action)) => {
            plan::decompose(&ctx.load_config()?, action, &goal, &defaults, jiff::Timestamp::now()).await?
        }
        (None, None) => bail!("give --from FILE or --action NAME"),
    };
    plan::check_items(&mut items, &file)?;
    let (project, replace, now) = (args.project, args.replace, jiff::Timestamp::now());
    let request = plan::PlanRequest { goal, project, items, file, replace, actor, now };
    ctx.report(&plan::save(&ctx.store().await?, request).await?)?;
    Ok(ExitCode::SUCCESS)
}

//! `daicho list`: tasks filtered by project, status, source and tag.

use std::process::ExitCode;

use daicho_core::Status;
use daicho_store::{ListFilter, Store};

use super::Context;
use crate::output;
use crate::wire::TaskJson;

/// List tasks by id. Filters combine: every one given must match.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this project.
    #[arg(long, short)]
    pub project: Option<String>,
    /// Only these statuses (comma separated; Japanese names accepted; `open` = pending,running,review).
    #[arg(long, short, value_delimiter = ',')]
    pub status: Vec<String>,
    /// Only this source.
    #[arg(long)]
    pub source: Option<String>,
    /// Only tasks with this tag.
    #[arg(long)]
    pub tag: Option<String>,
    /// At most this many.
    #[arg(long, short = 'n')]
    pub limit: Option<usize>,
    /// Only rows after this id (the next page after a --limit page).
    #[arg(long)]
    pub after: Option<daicho_core::TaskId>,
}

/// Parses status names, with `open` and `closed` as shorthands.
pub fn parse_statuses(names: &[String]) -> anyhow::Result<Vec<Status>> {
    let mut statuses = Vec::new();
    for name in names {
        match name.trim().to_lowercase().as_str() {
            "open" => statuses.extend(Status::ALL.into_iter().filter(|s| s.is_open())),
            "closed" => statuses.extend(Status::ALL.into_iter().filter(|s| s.is_closed())),
            _ => statuses.push(name.parse::<Status>()?),
        }
    }
    Ok(statuses)
}

/// Runs `daicho list`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let store = crate::ledger::open(&ctx.db).await?;
    let filter = ListFilter {
        project: args.project,
        statuses: parse_statuses(&args.status)?,
        source: args.source,
        tag: args.tag,
        after: args.after,
        limit: args.limit,
    };
    let tasks = store.list(filter).await?;
    if ctx.json {
        output::print_json(&tasks.iter().map(TaskJson::from).collect::<Vec<_>>())?;
    } else if tasks.is_empty() {
        output::print("no tasks")?;
    } else {
        output::print(&output::task_table(&tasks, ctx.ja))?;
        output::print(&format!("{} task{}", tasks.len(), if tasks.len() == 1 { "" } else { "s" }))?;
    }
    Ok(ExitCode::SUCCESS)
}

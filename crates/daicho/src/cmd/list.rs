//! `daicho list`: tasks filtered by project, status, source and tag.

use std::process::ExitCode;

use daicho_core::Status;
use daicho_store::{ListFilter, Store};

use super::Context;
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
    /// Only tasks that wait on this one (its dependents).
    #[arg(long, value_name = "ID")]
    pub waiting_on: Option<daicho_core::TaskId>,
    /// At most this many.
    #[arg(long, short = 'n')]
    pub limit: Option<usize>,
    /// Only rows after this id (the next page after a --limit page).
    #[arg(long)]
    pub after: Option<daicho_core::TaskId>,
}

/// Runs `daicho list`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let statuses = Status::parse_filter(args.status.iter().map(String::as_str)).map_err(super::usage)?;
    let (project, source, tag, after, limit) = (args.project, args.source, args.tag, args.after, args.limit);
    let waiting_on = args.waiting_on;
    let filter =
        ListFilter { project, statuses, source, tag, waiting_on, after, limit, ..ListFilter::default() };
    let tasks = ctx.reader().await?.list(filter).await?;
    let text = match tasks.len() {
        0 => "no tasks".to_owned(),
        n => format!(
            "{}\n{n} task{}",
            daicho_engine::table::task_table(&tasks, ctx.ja(), ctx.terminal),
            if n == 1 { "" } else { "s" }
        ),
    };
    ctx.emit(&tasks.iter().map(TaskJson::from).collect::<Vec<_>>(), text)?;
    Ok(ExitCode::SUCCESS)
}

//! `daicho ready`: the ready set in run order (D1).

use std::process::ExitCode;

use daicho_store::Store;

use super::Context;
use crate::output;
use crate::wire::{ReadyJson, TaskJson};

/// List the tasks that are ready: pending, every dependency done or dropped, start time reached.
/// Ordered by priority (larger first), then by id.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Show at most this many.
    #[arg(long, short = 'n', default_value_t = 50)]
    pub limit: usize,
}

/// Runs `daicho ready`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let store = crate::ledger::open(&ctx.db).await?;
    let ready = store.ready(jiff::Timestamp::now(), args.limit).await?;
    if ctx.json {
        let tasks = ready.tasks.iter().map(TaskJson::from).collect();
        output::print_json(&ReadyJson { total: ready.total, tasks })?;
    } else if ready.total == 0 {
        output::print("nothing is ready")?;
    } else {
        output::print(&output::task_table(&ready.tasks, ctx.ja))?;
        let more = ready.total - ready.tasks.len();
        let tail = if more > 0 { format!(" ({more} more; use --limit)") } else { String::new() };
        output::print(&format!("{} ready{tail}", ready.total))?;
    }
    Ok(ExitCode::SUCCESS)
}

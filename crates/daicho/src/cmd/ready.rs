//! `daicho ready`: the ready set in run order (D1), each row with why it will or will not run (S7).

use std::process::ExitCode;

use daicho_store::Store;

use super::Context;
use crate::wire::ReadyWhyJson;
use daicho_engine::table;

/// List the tasks that are ready: pending, every dependency done or dropped, start time reached.
/// Ordered by priority (larger first), then by id. Each row says whether the next automatic
/// sweep (or, for a ticked row, the run-requested sweep) would run it, and if not, why.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Show at most this many.
    #[arg(long, short = 'n', default_value_t = 50)]
    pub limit: usize,
}

/// Runs `daicho ready`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let engine = ctx.reading_engine().await?;
    let ready = engine.store().ready(jiff::Timestamp::now(), args.limit).await?;
    let decisions = engine.explain(&ready.tasks, daicho_engine::Role::Auto).await?;
    let text = || table::ready(&ready, &decisions, ctx.lang, ctx.terminal);
    ctx.emit_with(|| ReadyWhyJson::new(&ready, decisions.clone()), text)?;
    Ok(ExitCode::SUCCESS)
}

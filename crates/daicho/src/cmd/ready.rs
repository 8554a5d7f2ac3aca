//! `daicho ready`: the ready set in run order (D1), each row with why it will or will not run (S7).

use std::process::ExitCode;

use daicho_store::Store;

use super::Context;
use crate::output;
use crate::wire::ReadyWhyJson;

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
    let engine = ctx.engine().await?;
    let ready = engine.store().ready(jiff::Timestamp::now(), args.limit).await?;
    let decisions = engine.explain(&ready.tasks, daicho_engine::Role::Auto).await?;
    let json = ReadyWhyJson::new(&ready, decisions);
    let text = if ready.total == 0 {
        "nothing is ready".to_owned()
    } else {
        let reasons: Vec<String> = json.why.iter().map(|w| w.reason.clone()).collect();
        let more = ready.total - ready.tasks.len();
        let tail = if more > 0 { format!(" ({more} more; use --limit)") } else { String::new() };
        format!("{}\n{} ready{tail}", output::ready_table(&ready.tasks, &reasons, ctx.ja), ready.total)
    };
    ctx.emit(&json, text)?;
    Ok(ExitCode::SUCCESS)
}

//! `daicho stats`: runs per action, outcomes and tokens (S9).

use std::process::ExitCode;

use daicho_engine::RunStats;
use daicho_store::Store;

use super::Context;
use crate::wire::StatsJson;

/// Runs per action since a point in time: started, succeeded, failed, running, and the tokens
/// that LLM APIs reported.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Since when: `today` (default), `all`, a duration back such as `7d`, or a date.
    #[arg(long, default_value = "today")]
    pub since: String,
}

/// Runs `daicho stats`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let since = RunStats::since(&args.since, jiff::Timestamp::now())
        .map_err(|e| super::usage(anyhow::anyhow!("--since: {e}")))?;
    let stats = RunStats { since, actions: ctx.reader().await?.stats(since).await? };
    let json: Vec<StatsJson> = stats.actions.iter().map(StatsJson::from).collect();
    ctx.emit(&json, stats.text(ctx.lang))?;
    Ok(ExitCode::SUCCESS)
}

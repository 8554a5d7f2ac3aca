//! `daicho doctor`: stuck states found and explained, each with the command that fixes it (F3),
//! by `Engine::doctor`.

use std::process::ExitCode;

use super::Context;

/// Find stuck states and say how to fix each: the kill switch on, runs whose lease expired (lost
/// runs not yet counted), ready tasks nothing can run (stalled), tasks parked for a person,
/// external tasks waiting for approval, and dependency cycles (only a hand edit of the database
/// can make one). Exit code 1 when something was found.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `daicho doctor`.
pub async fn run(_args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let report = ctx.reading_engine().await?.doctor_in(ctx.lang).await?;
    ctx.report(&report)?;
    Ok(if report.findings.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

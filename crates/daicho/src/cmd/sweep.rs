//! `daicho sweep`: one role once, for cron or systemd timers (R2).

use std::process::ExitCode;

use daicho_engine::Role;

use super::Context;
use crate::output;
use crate::wire::SweepJson;

/// The roles a sweep can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RoleArg {
    /// Rows a person ticked ▶ run (one per invocation by default).
    RunRequested,
    /// Automatic runs: `ai`-tagged tasks with `auto` actions (two per invocation by default).
    Auto,
    /// Pull the configured sources, round-robin from where the last sync sweep stopped.
    Sync,
    /// Write the cross view's files named in [view] (HTML, Markdown).
    View,
}

/// Run one sweep role once: count lost runs, then run eligible ready tasks up to the limit,
/// queue external ones for approval, and say why every other ready task did not run. Nothing
/// eligible means no process is started and no request is made.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The role.
    #[arg(long, value_enum)]
    pub role: RoleArg,
    /// At most this many runs (default: 1 for run-requested, 2 for auto), or sources for sync
    /// (default: all of them).
    #[arg(long)]
    pub max: Option<usize>,
    /// sync: start no source after this long (the rest are counted as truncated).
    #[arg(long, default_value = "10m", value_parser = super::duration)]
    pub budget: std::time::Duration,
}

/// Runs `daicho sweep`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let config = ctx.load_config()?;
    let role = match args.role {
        RoleArg::RunRequested => Role::RunRequested,
        RoleArg::Auto => Role::Auto,
        RoleArg::View => {
            let today = jiff::Zoned::now().date();
            ctx.report(&daicho_engine::view::write_files(&ctx.store().await?, &config, today).await?)?;
            return Ok(ExitCode::SUCCESS);
        }
        RoleArg::Sync => {
            // The sync role (R1, R3, R4): sources round-robin from the persisted cursor, at most
            // `--max`, none started after `--budget`; what is left is reported as truncated.
            let (store, clock) = (ctx.store().await?, daicho_engine::clock::SystemClock);
            let mut progress = output::Progress::new("sources", 0);
            let (max, budget) = (args.max, args.budget);
            let report = daicho_engine::sync::sync_sweep(&store, &config, &clock, max, budget, &mut |p| {
                progress.on(p)
            })
            .await;
            progress.finish();
            let report = report?;
            ctx.report(&report)?;
            return Ok(if report.failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS });
        }
    };
    let engine = ctx.running_engine(config).await?;
    let report = engine.sweep(role, args.max.unwrap_or(role.default_max())).await?;
    ctx.emit(&SweepJson::from(&report), report.text(ctx.lang))?;
    Ok(ExitCode::SUCCESS)
}

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
}

/// Run one sweep role once: count lost runs, then run eligible ready tasks up to the limit,
/// queue external ones for approval, and say why every other ready task did not run. Nothing
/// eligible means no process is started and no request is made.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The role.
    #[arg(long, value_enum)]
    pub role: RoleArg,
    /// At most this many runs (default: 1 for run-requested, 2 for auto).
    #[arg(long)]
    pub max: Option<usize>,
}

/// Runs `daicho sweep`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let role = match args.role {
        RoleArg::RunRequested => Role::RunRequested,
        RoleArg::Auto => Role::Auto,
    };
    let engine = ctx.engine().await?;
    let report = engine.sweep(role, args.max.unwrap_or(role.default_max())).await?;
    if ctx.json {
        output::print_json(&SweepJson::from(&report))?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(reason) = &report.paused {
        output::print(&format!("paused ({reason}): nothing ran; `daicho resume` to run again"))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut lines = Vec::new();
    for (id, status) in &report.lost {
        lines.push(format!("lost run of {id} counted as a timeout failure; now {status}"));
    }
    for run in &report.ran {
        lines.push(output::run_line(run));
    }
    for held in &report.held {
        lines.push(format!("held {} {}: {}", held.id, output::cell(&held.title, 40), held.hold));
    }
    for id in &report.queued {
        lines.push(format!("queued {id} for approval"));
    }
    lines.push(format!(
        "{} ran, {} held, {} queued for approval, truncated: {}",
        report.ran.len(),
        report.held.len(),
        report.queued.len(),
        report.truncated
    ));
    output::print(&lines.join("\n"))?;
    Ok(ExitCode::SUCCESS)
}

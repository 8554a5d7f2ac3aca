//! `daicho sweep`: one role once, for cron or systemd timers (R2).

use std::process::ExitCode;

use daicho_engine::Role;
use daicho_engine::sync::SyncSweepReport;

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
    #[arg(long, default_value = "10m")]
    pub budget: String,
}

/// Runs `daicho sweep`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let role = match args.role {
        RoleArg::RunRequested => Role::RunRequested,
        RoleArg::Auto => Role::Auto,
        RoleArg::Sync => return sync_role(args, ctx).await,
        RoleArg::View => {
            let config = ctx.load_config()?;
            let store = crate::ledger::open(&ctx.db).await?;
            let today = jiff::Zoned::now().date();
            let report = daicho_engine::view::write_files(&store, &config, today).await?;
            if ctx.json {
                output::print_json(&report)?;
            } else {
                output::print(&view_text(&report))?;
            }
            return Ok(ExitCode::SUCCESS);
        }
    };
    let engine = ctx.running_engine(ctx.load_config()?).await?;
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
    if report.recovered > 0 {
        lines.push(format!("recorded {} run end(s) a crashed process left unrecorded", report.recovered));
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

/// The sync role (R1, R3, R4): sources round-robin from the persisted cursor, at most `--max` per
/// invocation, none started after `--budget`; what is left is reported as truncated.
async fn sync_role(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;

    let budget: jiff::SignedDuration =
        args.budget.parse().context("--budget: a duration such as 10m or 30s")?;
    let budget = std::time::Duration::try_from(budget).context("--budget must be positive")?;
    let config = ctx.load_config()?;
    let store = crate::ledger::open(&ctx.db).await?;
    let mut progress = output::SyncProgress::default();
    let clock = daicho_engine::clock::SystemClock;
    let report =
        daicho_engine::sync::sync_sweep(&store, &config, &clock, args.max, budget, &mut |p| progress.on(p))
            .await?;
    progress.finish();
    if ctx.json {
        output::print_json(&report)?;
    } else {
        output::print(&sync_text(&report))?;
    }
    Ok(if report.failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// A view role's report as text.
pub fn view_text(report: &daicho_engine::view::ViewReport) -> String {
    format!("view: wrote {}", serde_json::to_string(&report.written).unwrap_or_default())
}

/// A sync sweep's report as text.
pub fn sync_text(report: &SyncSweepReport) -> String {
    let mut lines: Vec<String> = report
        .sources
        .iter()
        .map(|r| match &r.error {
            Some(e) => format!("{}: FAILED: {e}", r.source),
            None => format!("{}: {} added, {} updated, {} skipped", r.source, r.added, r.updated, r.skipped),
        })
        .collect();
    lines.push(format!(
        "{} sources synced, {} failed, {} left for the next sweep",
        report.sources.len(),
        report.failed,
        report.truncated
    ));
    lines.join("\n")
}

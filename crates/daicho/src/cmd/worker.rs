//! `daicho worker`: a process that only claims and runs, for adding machines.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use daicho_engine::{Role, RunResult};

use super::Context;
use crate::output;

/// Claim and run ready tasks until stopped (Ctrl-C or SIGTERM): rows a person ticked first, then
/// automatic runs, by the same rules as `daicho sweep`. No scheduler, no UI: start one on every
/// machine that shares a PostgreSQL ledger (`--db postgres://…`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many tasks this worker runs at once.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// How long to wait before looking again when nothing was eligible.
    #[arg(long, default_value = "2s")]
    pub poll: String,
    /// Exit once nothing is left to run (for scripts and tests).
    #[arg(long)]
    pub once: bool,
}

/// Runs `daicho worker`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let poll: jiff::SignedDuration = args.poll.parse().context("--poll: a duration such as 2s or 500ms")?;
    let poll = Duration::try_from(poll).context("--poll must be positive")?;
    let engine = Arc::new(ctx.engine().await?);
    let ran = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let lost = Arc::new(AtomicUsize::new(0));
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency.max(1) {
        let (engine, ran, failed, lost) =
            (Arc::clone(&engine), Arc::clone(&ran), Arc::clone(&failed), Arc::clone(&lost));
        let once = args.once;
        loops.spawn(async move {
            loop {
                let mut any = false;
                for role in [Role::RunRequested, Role::Auto] {
                    let report = engine.sweep(role, 1).await?;
                    lost.fetch_add(report.lost.len(), Ordering::Relaxed);
                    for run in &report.ran {
                        any = true;
                        ran.fetch_add(1, Ordering::Relaxed);
                        if run.result != RunResult::Success {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if report.paused.is_some() {
                        break;
                    }
                }
                if !any {
                    if once {
                        return Ok::<(), daicho_store::StoreError>(());
                    }
                    // Woken early by the ledger's notifications (PostgreSQL), else after `poll`.
                    daicho_store::Store::wait_for_work(engine.store(), poll).await;
                }
            }
        });
    }
    let stop = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        Ok::<(), std::io::Error>(())
    };
    let outcome: anyhow::Result<()> = tokio::select! {
        stopped = stop => {
            stopped?;
            tracing::info!("stopping: runs under way are abandoned and counted as lost after their lease");
            Ok(())
        }
        result = async {
            while let Some(joined) = loops.join_next().await {
                joined.context("a worker loop panicked")??;
            }
            Ok::<(), anyhow::Error>(())
        } => result,
    };
    outcome?;
    let summary = serde_json::json!({
        "ran": ran.load(Ordering::Relaxed),
        "failed": failed.load(Ordering::Relaxed),
        "lost_counted": lost.load(Ordering::Relaxed),
    });
    if ctx.json {
        output::print_json(&summary)?;
    } else {
        output::print(&format!(
            "worker done: {} runs, {} failed, {} lost runs counted",
            summary["ran"], summary["failed"], summary["lost_counted"]
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

//! `daicho worker`: a process that only claims and runs, for adding machines.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use daicho_engine::WorkOptions;

use super::Context;

/// Claim and run ready tasks until stopped (Ctrl-C or SIGTERM): rows a person ticked first, then
/// automatic runs, by the same rules as `daicho sweep`. With `--concurrency N`, up to N runs go
/// at once; claims for free slots and the ends of finished runs are each batched into one
/// commit. No scheduler, no UI: start one on every machine that shares a PostgreSQL ledger
/// (`--db postgres://…`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many tasks this worker runs at once.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// How long to wait before looking again when nothing was eligible.
    #[arg(long, default_value = "2s", value_parser = super::duration)]
    pub poll: Duration,
    /// Exit once nothing is left to run (for scripts and tests).
    #[arg(long)]
    pub once: bool,
}

/// Runs `daicho worker`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    if args.concurrency == 0 {
        anyhow::bail!("--concurrency must be at least 1");
    }
    let engine = Arc::new(ctx.running_engine_patiently(ctx.load_config()?).await?);
    // The operator's stop (SIGINT, SIGTERM) drains the worker through the engine (S14).
    let options = WorkOptions { slots: args.concurrency, poll: args.poll, once: args.once };
    ctx.report(&engine.work(options, std::future::pending::<()>()).await?)?;
    Ok(ExitCode::SUCCESS)
}

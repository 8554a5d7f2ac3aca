//! `daicho sync`: pull every configured source into the ledger (X1); the engine does the work
//! (`daicho_engine::sync`).

use std::process::ExitCode;

use super::Context;
use crate::output;

/// Pull the sources of daicho.toml into the ledger: each source in its own transaction, through
/// the merge rules (rows never deleted, closed rows and people's cells never touched). A source
/// that fails (missing file, malformed line, failing command) is reported with its file, line and
/// reason, leaves its rows as they were, and does not stop the others; the exit code is then 1.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this source (repeatable); all of them by default.
    #[arg(long = "source", value_name = "NAME")]
    pub sources: Vec<String>,
}

/// Runs `daicho sync`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let config = ctx.load_config()?;
    // An unknown name is refused before the ledger is opened.
    daicho_engine::sync::check_names(&config, &args.sources)?;
    let store = ctx.store().await?;
    let mut progress = output::Progress::new("sources", 0);
    let clock = daicho_engine::clock::SystemClock;
    let report =
        daicho_engine::sync::sync(&store, &config, &clock, &args.sources, &mut |p| progress.on(p)).await;
    progress.finish();
    let report = report?;
    ctx.report(&report)?;
    Ok(if report.failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

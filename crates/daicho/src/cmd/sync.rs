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
    let store = crate::ledger::open(&ctx.db).await?;
    let mut progress = output::SyncProgress::default();
    let clock = daicho_engine::clock::SystemClock;
    let report =
        daicho_engine::sync::sync(&store, &config, &clock, &args.sources, &mut |p| progress.on(p)).await?;
    progress.finish();
    if ctx.json {
        output::print_json(&report)?;
    } else if report.sources.is_empty() {
        output::print("no sources configured (add [[source]] tables to daicho.toml)")?;
    } else {
        let lines: Vec<String> = report
            .sources
            .iter()
            .map(|r| match &r.error {
                Some(e) => format!("{}: FAILED: {e}", r.source),
                None => {
                    let mut line = format!(
                        "{}: {} read, {} added, {} updated, {} skipped, {} truncated",
                        r.source, r.read, r.added, r.updated, r.skipped, r.truncated
                    );
                    if !r.ignored.is_empty() {
                        let mut fields: Vec<&str> = r.ignored.iter().map(|i| i.field).collect();
                        fields.sort_unstable();
                        fields.dedup();
                        line.push_str(&format!(
                            ", {} field(s) ignored ({}: only a person writes them)",
                            r.ignored.len(),
                            fields.join(", ")
                        ));
                    }
                    line
                }
            })
            .collect();
        output::print(&lines.join("\n"))?;
    }
    Ok(if report.failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

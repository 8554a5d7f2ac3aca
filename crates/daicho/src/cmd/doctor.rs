//! `daicho doctor`: stuck states found and explained, each with the command that fixes it (F3),
//! by `Engine::doctor`.

use std::process::ExitCode;

use super::Context;
use crate::output;

/// Find stuck states and say how to fix each: the kill switch on, runs whose lease expired (lost
/// runs not yet counted), ready tasks nothing can run (stalled), tasks parked for a person,
/// external tasks waiting for approval, and dependency cycles (only a hand edit of the database
/// can make one). Exit code 1 when something was found.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `daicho doctor`.
pub async fn run(_args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let report = ctx.engine().await?.doctor().await?;
    let findings = &report.findings;
    if ctx.json {
        output::print_json(&report)?;
    } else if findings.is_empty() {
        output::print("nothing stuck")?;
    } else {
        let text: Vec<String> = findings
            .iter()
            .map(|f| {
                let task = f.task.as_deref().map(|t| format!("{t} ")).unwrap_or_default();
                format!("{}: {task}{}\n  fix: {}", f.kind, f.explanation, f.fix)
            })
            .collect();
        output::print(&text.join("\n"))?;
    }
    Ok(if findings.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

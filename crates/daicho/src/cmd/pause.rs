//! `daicho pause` and `daicho resume`: the kill switch (S8).

use std::process::ExitCode;

use daicho_core::Actor;
use daicho_store::Store;

use super::Context;
use crate::output;

/// Turn the kill switch on: every run, sweep and plan does nothing (and says so) until
/// `daicho resume`. A PAUSED file beside the configuration has the same effect.
#[derive(Debug, clap::Args)]
pub struct PauseArgs {
    /// Why (shown to whoever finds it paused).
    #[arg(long, default_value = "")]
    pub reason: String,
}

/// Turn the kill switch off (a PAUSED file, if any, must be removed by hand).
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {}

/// Runs `daicho pause`.
pub async fn pause(args: PauseArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let store = crate::ledger::open(&ctx.db).await?;
    let reason = if args.reason.trim().is_empty() { format!("paused by {}", ctx.user) } else { args.reason };
    store.set_paused(Some(reason.clone()), Actor::Human(ctx.user.clone()), jiff::Timestamp::now()).await?;
    if ctx.json {
        output::print_json(&serde_json::json!({ "paused": true, "reason": reason }))?;
    } else {
        output::print(&format!("paused: {reason}. Nothing runs until `daicho resume`."))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `daicho resume`.
pub async fn resume(_args: ResumeArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let store = crate::ledger::open(&ctx.db).await?;
    store.set_paused(None, Actor::Human(ctx.user.clone()), jiff::Timestamp::now()).await?;
    let file = ctx.pause_file();
    let file_note =
        file.exists().then(|| format!("{} still exists; remove it to resume fully", file.display()));
    if ctx.json {
        output::print_json(&serde_json::json!({ "paused": file_note.is_some(), "note": file_note }))?;
    } else {
        output::print(&file_note.unwrap_or_else(|| "resumed".to_owned()))?;
    }
    Ok(ExitCode::SUCCESS)
}

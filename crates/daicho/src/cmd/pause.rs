//! `daicho pause` and `daicho resume`: the kill switch (S8).

use std::process::ExitCode;

use daicho_store::Store;

use super::Context;

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
    let reason = if args.reason.trim().is_empty() { format!("paused by {}", ctx.user) } else { args.reason };
    ctx.store().await?.set_paused(Some(reason.clone()), ctx.actor()?, jiff::Timestamp::now()).await?;
    let text = format!("paused: {reason}. Nothing runs until `daicho resume`.");
    ctx.emit(&serde_json::json!({ "paused": true, "reason": reason }), text)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `daicho resume`.
pub async fn resume(_args: ResumeArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    ctx.store().await?.set_paused(None, ctx.actor()?, jiff::Timestamp::now()).await?;
    let file = ctx.pause_file();
    let note = file.exists().then(|| format!("{} still exists; remove it to resume fully", file.display()));
    let json = serde_json::json!({ "paused": note.is_some(), "note": note });
    ctx.emit(&json, note.as_deref().unwrap_or("resumed"))?;
    Ok(ExitCode::SUCCESS)
}

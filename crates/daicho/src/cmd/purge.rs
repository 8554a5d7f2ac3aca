//! `daicho purge-source` and `daicho restore` (F2).

use std::process::ExitCode;

use daicho_engine::purge;

use super::Context;

/// Remove the rows of a source that no person and no run has touched (pending, never run, no
/// result, no correction, no person's edit, no row depending on it). A dry run by default: it
/// says how many rows would go and lists every row that stays with its reason. `--apply` deletes
/// them in one transaction, journaled with the full rows, so that `daicho restore` can bring
/// them back.
#[derive(Debug, clap::Args)]
pub struct PurgeArgs {
    /// The source.
    pub source: String,
    /// Delete them (without this, nothing is written).
    #[arg(long)]
    pub apply: bool,
}

/// Bring back the rows `daicho purge-source --apply` removed from a source, as they were (same
/// ids, keys and cells), in one transaction. A row whose key a later sync used again stays out,
/// with the reason.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// The source.
    pub source: String,
}

/// Runs `daicho purge-source`.
pub async fn purge(args: PurgeArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let now = jiff::Timestamp::now();
    ctx.report(
        &purge::purge_source(&ctx.store().await?, &args.source, args.apply, ctx.actor()?, now).await?,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `daicho restore`.
pub async fn restore(args: RestoreArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let now = jiff::Timestamp::now();
    ctx.report(&purge::restore_source(&ctx.store().await?, &args.source, ctx.actor()?, now).await?)?;
    Ok(ExitCode::SUCCESS)
}

//! `daicho purge-source` and `daicho restore` (F2).

use std::process::ExitCode;

use daicho_store::Store;

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

fn reasons(list: &[(daicho_core::TaskId, String)]) -> Vec<serde_json::Value> {
    list.iter().map(|(id, reason)| serde_json::json!({ "id": id.to_string(), "reason": reason })).collect()
}

/// Runs `daicho purge-source`.
pub async fn purge(args: PurgeArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let now = jiff::Timestamp::now();
    let report = ctx.store().await?.purge_source(&args.source, args.apply, ctx.actor(), now).await?;
    if report.purged.is_empty() && report.kept.is_empty() {
        anyhow::bail!("no row of the ledger has the source '{}'", args.source);
    }
    let purged: Vec<String> = report.purged.iter().map(|t| t.id.to_string()).collect();
    let verb = if args.apply { "purged" } else { "would purge" };
    let mut lines = vec![format!("{verb} {} rows of {}: {}", purged.len(), args.source, purged.join(", "))];
    lines.extend(report.kept.iter().map(|(id, reason)| format!("  kept {id}: {reason}")));
    if !args.apply && !purged.is_empty() {
        lines.push(format!("nothing written; `daicho purge-source {} --apply` deletes them", args.source));
    }
    let json = serde_json::json!({
        "source": args.source, "applied": args.apply, "purged": purged, "kept": reasons(&report.kept),
    });
    ctx.emit(&json, lines.join("\n"))?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `daicho restore`.
pub async fn restore(args: RestoreArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let report = ctx.store().await?.restore_source(&args.source, ctx.actor(), jiff::Timestamp::now()).await?;
    if report.restored.is_empty() && report.skipped.is_empty() {
        anyhow::bail!("nothing of the source '{}' is purged: nothing to restore", args.source);
    }
    let restored: Vec<String> = report.restored.iter().map(ToString::to_string).collect();
    let mut lines =
        vec![format!("restored {} rows of {}: {}", restored.len(), args.source, restored.join(", "))];
    lines.extend(report.skipped.iter().map(|(id, reason)| format!("  not restored {id}: {reason}")));
    let json = serde_json::json!({ "source": args.source, "restored": restored, "skipped": reasons(&report.skipped) });
    ctx.emit(&json, lines.join("\n"))?;
    Ok(ExitCode::SUCCESS)
}

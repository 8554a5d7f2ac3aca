//! `daicho init`: create the ledger.

use std::process::ExitCode;

use super::Context;
use crate::output;

/// Create the ledger file (and its directory) if it does not exist yet.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `daicho init`.
pub async fn run(_args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let (_store, created) = crate::ledger::create(&ctx.db).await?;
    if ctx.json {
        output::print_json(
            &serde_json::json!({ "db": crate::ledger::display(&ctx.db), "created": created }),
        )?;
    } else if created {
        output::print(&format!("created the ledger {}", crate::ledger::display(&ctx.db)))?;
    } else {
        output::print(&format!(
            "the ledger {} already exists; nothing changed",
            crate::ledger::display(&ctx.db)
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

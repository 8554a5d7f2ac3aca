//! `daicho log`: a row's journal.

use std::process::ExitCode;

use daicho_core::TaskId;
use daicho_store::{Store, StoreError};

use super::Context;
use crate::wire::JournalJson;

/// Show every change to one task, oldest first: when, who (sync:…, push:…, human:…), and the
/// fields before and after.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The task id, e.g. T-0001.
    pub id: TaskId,
}

/// Runs `daicho log`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let store = ctx.reader().await?;
    let entries = store.journal(args.id).await?;
    if entries.is_empty() && store.get(args.id).await?.is_none() {
        return Err(StoreError::NotFound(args.id).into());
    }
    let json: Vec<JournalJson> = entries.iter().map(JournalJson::from).collect();
    ctx.emit(&json, daicho_engine::table::journal_table(&entries, ctx.ja()))?;
    Ok(ExitCode::SUCCESS)
}

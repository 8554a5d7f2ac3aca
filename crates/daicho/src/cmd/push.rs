//! `daicho push`: a producer registers tasks (X2).

use std::path::PathBuf;
use std::process::ExitCode;

use daicho_core::format::{Format, ItemDefaults};
use daicho_core::{Actor, Item};
use daicho_store::{Batch, Store, UnknownDeps};

use super::Context;
use crate::input::{self, FormatArg};
use crate::output;
use crate::wire::PushJson;

/// Register tasks the moment a producer finds them.
///
/// Reads a JSON array of tasks, a tasks document ({"tasks": […]}) or one task object from a file
/// or standard input, upserts them like a sync (deduplicated, never overwriting), and prints
/// {"added":n,"updated":n,"skipped":n} — or {"error":"…"} with exit code 1, in which case
/// nothing was written. Output is JSON whether or not --json is given.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to read; `-` (the default) reads standard input.
    #[arg(default_value = "-")]
    pub file: PathBuf,
    /// The source of items that name none (発生源; part of the dedupe key).
    #[arg(long, default_value = "push")]
    pub source: String,
    /// The project of items that name none.
    #[arg(long, short, default_value = "")]
    pub project: String,
    /// The input format (default: by file extension, JSON for standard input).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
}

/// Runs `daicho push`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    match push(&args, ctx).await {
        Ok(counts) => {
            output::print_json(&counts)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            let message = format!("{err:#}");
            eprintln!("daicho: error: {message}");
            output::print_json(&serde_json::json!({ "error": message }))?;
            let retryable = err
                .chain()
                .any(|c| c.downcast_ref::<daicho_store::StoreError>().is_some_and(|e| e.is_retryable()));
            Ok(ExitCode::from(if retryable { 75 } else { 1 }))
        }
    }
}

async fn push(args: &Args, ctx: &Context) -> anyhow::Result<PushJson> {
    let store = crate::ledger::open(&ctx.db).await?;
    let (name, bytes) = input::read(&args.file)?;
    let format = input::format_of(args.format, &name, Some(Format::Json))?;
    let defaults = ItemDefaults { source: args.source.clone(), project: args.project.clone() };
    let items: Vec<Item> = input::parse(&name, &bytes, format, &defaults)?;
    let batch = Batch {
        items,
        actor: Actor::Push(args.source.clone()),
        now: jiff::Timestamp::now(),
        file: name,
        unknown_deps: UnknownDeps::Refuse,
    };
    let report = store.upsert(batch).await?;
    for skip in &report.skipped {
        tracing::info!(title = %skip.title, reason = %skip.reason, "skipped");
    }
    Ok(PushJson::from(&report))
}

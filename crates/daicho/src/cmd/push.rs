//! `daicho push`: a producer registers tasks (X2).

use std::path::PathBuf;
use std::process::ExitCode;

use daicho_core::Actor;
use daicho_core::format::{Format, ItemDefaults};
use daicho_engine::input;
use daicho_store::{Batch, Store, UnknownDeps};

use super::{Context, FormatArg};
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
            output::report_error(&err, true);
            Ok(crate::exit_code_of(&err))
        }
    }
}

async fn push(args: &Args, ctx: &Context) -> anyhow::Result<PushJson> {
    let store = ctx.store().await?;
    let defaults = ItemDefaults { source: args.source.clone(), project: args.project.clone() };
    // Parsed again a range at a time: a 200,000-item push is 37 MB of text but 130 MB of items.
    let asked = args.format.map(FormatArg::format);
    let (file, items) = input::read_items(&args.file, asked, Some(Format::Json), &defaults)?;
    let (actor, now, unknown_deps) =
        (Actor::Push(args.source.clone()), jiff::Timestamp::now(), UnknownDeps::Refuse);
    let report = store.upsert(Batch { items, actor, now, file, unknown_deps }).await?;
    for skip in &report.skipped {
        tracing::info!(title = %skip.title, reason = %skip.reason, "skipped");
    }
    Ok(PushJson::from(&report))
}

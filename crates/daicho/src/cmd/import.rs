//! `daicho import`: tasks from files, in one transaction.

use std::path::PathBuf;
use std::process::ExitCode;

use daicho_core::Actor;
use daicho_core::format::ItemDefaults;
use daicho_core::item::Items;
use daicho_engine::input;
use daicho_store::{Batch, Store, UnknownDeps};

use super::{Context, FormatArg};
use crate::output;
use crate::wire::ImportJson;

/// The skipped items a person is shown; `--json` lists them all.
const SKIPS_SHOWN: usize = 100;

/// Import tasks from Markdown, JSON, JSON Lines or CSV files.
///
/// All files are read first and merged in one transaction, so a task list and its done file
/// (tasks.md tasks-done.md) resolve each other's dependencies. Rows already in the ledger are
/// matched by source and normalized title: closed rows are left alone, open rows only get
/// their empty cells filled (with --ledger, also the cells the export marks as a person's,
/// by_person, where no person wrote here). An id in a file addresses a row only with that row's source and
/// title. Any bad line refuses the whole import with file, line and reason, and the ledger is
/// unchanged.
///
/// A file is foreign input unless --ledger says it is an export of your own ledger: a foreign
/// item that sets run, correction, result, run_at or failures is refused (only a person writes
/// them), and its by_person marks are not kept. No import approves an external task.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The files (`-` reads standard input).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The format (default: by file extension).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// The source of items that name none (default: the first file's name without extension).
    #[arg(long)]
    pub source: Option<String>,
    /// The project of items that name none.
    #[arg(long, short, default_value = "")]
    pub project: String,
    /// The files are an export of your own ledger (`daicho export`): keep the fields only a
    /// person writes (run, correction, result, run_at, failures, and by_person: the cells you
    /// wrote, which no source writes again); journaled as you.
    #[arg(long)]
    pub ledger: bool,
}

/// Runs `daicho import`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    // A file whose format cannot be told is a usage error (exit 2), found before the ledger
    // is opened.
    for path in &args.files {
        let name = if path.as_os_str() == "-" { input::STDIN.into() } else { path.to_string_lossy() };
        input::format_of(args.format.map(FormatArg::format), &name, None).map_err(super::usage)?;
    }
    let store = ctx.store().await?;
    let source = args.source.clone().unwrap_or_else(|| input::source_name(&args.files[0]));
    let defaults = ItemDefaults { source: source.clone(), project: args.project.clone() };
    let (mut items, mut names) = (Items::default(), Vec::new());
    let mut progress = output::Progress::new("files", args.files.len() + 1);
    for path in &args.files {
        progress.start(&format!("reading {}", path.display()));
        // Parsed again a range at a time: a million items would be 440 MB.
        let (name, read) = input::read_items(path, args.format.map(FormatArg::format), None, &defaults)?;
        items.append(read);
        names.push(name);
        progress.step();
    }
    progress.start(&format!("writing {} items in one transaction", items.len()));
    // Inside a run the file is the agent's (S13): imported as its push, so it registers no
    // closed work, as `daicho push` does not.
    let actor = match (args.ledger, super::in_run()) {
        (true, _) => ctx.actor()?,
        (false, Some(_)) => Actor::Push(source),
        (false, None) => Actor::Import(source),
    };
    let (now, file, unknown_deps) = (jiff::Timestamp::now(), names.join(", "), UnknownDeps::Refuse);
    let report = store.upsert(Batch { items, actor, now, file, unknown_deps }).await;
    progress.finish();
    let report = report?;
    // Only the form asked for is built: a re-import of a million rows skips a million items.
    let text = || daicho_engine::text::imported(&names.join(", "), &report, SKIPS_SHOWN, ctx.lang);
    ctx.emit_with(|| ImportJson::from(&report), text)?;
    Ok(ExitCode::SUCCESS)
}

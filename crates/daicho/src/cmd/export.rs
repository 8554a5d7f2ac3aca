//! `daicho export`: the ledger as Markdown, JSON or CSV.

use std::io::Write as _;

use anyhow::bail;
use std::path::PathBuf;
use std::process::ExitCode;

use daicho_core::format::{self, Format};
use daicho_store::{ListFilter, Store};

use super::{Context, FormatArg};

/// Rows read and written at a time.
const PAGE: usize = 10_000;

/// Export tasks by id. `daicho import` reads the result back to the same ledger.
///
/// Rows are read and written 10,000 at a time, so memory stays flat however large the ledger;
/// a row changed while the export runs shows as it was when its page was read.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The format (default: by the --out extension, else Markdown; JSON with --json).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Write to this file (atomically) instead of standard output.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Only this project.
    #[arg(long, short)]
    pub project: Option<String>,
    /// Only these statuses (comma separated; `open`, `closed` accepted).
    #[arg(long, short, value_delimiter = ',')]
    pub status: Vec<String>,
    /// CSV only: Japanese column headers and status names.
    #[arg(long)]
    pub ja: bool,
}

/// Runs `daicho export`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let format = match (args.format, &args.out) {
        (Some(FormatArg::Json), None) | (None, None) if ctx.json => Format::Json,
        (Some(_), None) if ctx.json => {
            bail!("--json exports the tasks as JSON; leave out --format, or drop --json")
        }
        (Some(f), _) => f.format(),
        (None, Some(out)) => Format::from_file_name(&out.to_string_lossy()).unwrap_or(Format::Markdown),
        (None, None) => Format::Markdown,
    };
    let statuses =
        daicho_core::Status::parse_filter(args.status.iter().map(String::as_str)).map_err(super::usage)?;
    let store = ctx.reader().await?;
    // Written a page at a time, so a million rows are never held at once: each page is read in
    // id order after the last, and a row written during the export shows as its page found it.
    let mut file = args.out.as_deref().map(daicho_engine::view::AtomicFile::create).transpose()?;
    let mut stdout = std::io::stdout().lock();
    let mut write = |text: String| -> anyhow::Result<()> {
        match &mut file {
            Some(file) => file.write(text.as_bytes())?,
            None => stdout.write_all(text.as_bytes())?,
        }
        Ok(())
    };
    let mut pages = format::Pages::new(format, args.ja);
    write(pages.start())?;
    let mut after = None;
    loop {
        let filter = ListFilter {
            project: args.project.clone(),
            statuses: statuses.clone(),
            after,
            limit: Some(PAGE),
            ..ListFilter::default()
        };
        let tasks = store.list(filter).await?;
        write(pages.page(&tasks))?;
        match tasks.last() {
            Some(last) if tasks.len() == PAGE => after = Some(last.id),
            _ => break,
        }
    }
    write(pages.end())?;
    let (Some(file), Some(path)) = (file, args.out.as_deref()) else {
        stdout.flush()?;
        return Ok(ExitCode::SUCCESS);
    };
    file.finish()?;
    let count = pages.count();
    let json = serde_json::json!({ "out": path.display().to_string(), "tasks": count });
    ctx.emit(&json, format!("wrote {count} tasks to {}", path.display()))?;
    Ok(ExitCode::SUCCESS)
}

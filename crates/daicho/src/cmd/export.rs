//! `daicho export`: the ledger as Markdown, JSON or CSV.

use std::io::Write as _;

use anyhow::bail;
use std::path::PathBuf;
use std::process::ExitCode;

use daicho_core::format::{self, Format};
use daicho_store::{ListFilter, Store};

use super::{Context, FormatArg};

/// Export tasks by id. `daicho import` reads the result back to the same ledger.
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
    let statuses = super::list::parse_statuses(&args.status)?;
    let tasks = ctx
        .reader()
        .await?
        .list(ListFilter { project: args.project, statuses, ..ListFilter::default() })
        .await?;
    let text = match format {
        Format::Markdown => format::markdown::render(&tasks),
        Format::Json => format::json::render(&tasks),
        Format::JsonLines => format::json::render_lines(&tasks),
        Format::Csv => format::csv::render(&tasks, args.ja),
    };
    let Some(path) = &args.out else {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    };
    daicho_engine::view::write_atomically(path, text.as_bytes())?;
    let json = serde_json::json!({ "out": path.display().to_string(), "tasks": tasks.len() });
    ctx.emit(&json, format!("wrote {} tasks to {}", tasks.len(), path.display()))?;
    Ok(ExitCode::SUCCESS)
}

//! `daicho view`: the cross-project view (V1–V5).

use std::path::PathBuf;
use std::process::ExitCode;

use daicho_core::lang::Lang;
use daicho_core::view::CrossView;
use daicho_engine::view::{html, markdown};

use super::Context;
use crate::output;

/// The output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ViewFormat {
    /// A table for a terminal (coloured marks when `colour`).
    Term,
    /// A Markdown document.
    Md,
    /// A standalone HTML page.
    Html,
    /// The view as JSON.
    Json,
}

/// Draws the view.
fn render(view: &CrossView, format: ViewFormat, colour: bool, lang: Lang) -> anyhow::Result<String> {
    Ok(match format {
        ViewFormat::Json => serde_json::to_string_pretty(view)? + "\n",
        ViewFormat::Term => daicho_engine::table::cross_view(view, colour, lang),
        ViewFormat::Md => markdown(view),
        ViewFormat::Html => html(view),
    })
}

/// Show the open work of every project (pending, running, review, needs_human) in one list: by
/// due date (undated last), then id; at most N rows per project, then "… N more in the P ledger";
/// sources with their own dashboard as one count line per project; overdue, review and
/// needs_human rows marked.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The format (default: term; json with --json).
    #[arg(long, value_enum)]
    pub format: Option<ViewFormat>,
    /// At most this many rows per project.
    #[arg(long, default_value_t = 10)]
    pub per_project: usize,
    /// Write to this file (atomically) instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Runs `daicho view`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal as _;

    let config = ctx.load_config()?;
    let today = jiff::Zoned::now().date();
    let view = daicho_engine::view::build(&ctx.reader().await?, &config, args.per_project, today).await?;
    let colour =
        args.out.is_none() && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let format = match (args.format, ctx.json) {
        (None, true) => ViewFormat::Json,
        (None, false) => ViewFormat::Term,
        (Some(format), true) if args.out.is_none() && format != ViewFormat::Json => {
            anyhow::bail!("--json prints the view as JSON; leave out --format, or drop --json")
        }
        (Some(format), _) => format,
    };
    let text = render(&view, format, colour, ctx.lang)?;
    match &args.out {
        Some(path) => {
            daicho_engine::view::write_atomically(path, text.as_bytes())?;
            if ctx.json {
                output::print_json(&serde_json::json!({ "written": path.display().to_string() }))?;
            }
        }
        None => output::print(text.trim_end_matches('\n'))?,
    }
    Ok(ExitCode::SUCCESS)
}

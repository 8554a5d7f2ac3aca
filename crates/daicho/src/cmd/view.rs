//! `daicho view`: the cross-project view (V1–V5).

use std::path::PathBuf;
use std::process::ExitCode;

use super::Context;
use crate::output;
use crate::view::{ViewFormat, render};

/// Show the open work of every project (pending, running, review, needs_human) in one list: by
/// due date (undated last), then id; at most N rows per project, then "… N more in the P ledger";
/// sources with their own dashboard as one count line per project; overdue, review and
/// needs_human rows marked.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The format.
    #[arg(long, value_enum, default_value = "term")]
    pub format: ViewFormat,
    /// At most this many rows per project.
    #[arg(long, default_value_t = 10)]
    pub per_project: usize,
    /// Write to this file (atomically) instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Runs `daicho view`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let config = ctx.load_config()?;
    let store = crate::ledger::open(&ctx.db).await?;
    let text = build(&store, &config, args.format, args.per_project, args.out.is_none()).await?;
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

/// Builds and draws the view of the ledger.
pub async fn build(
    store: &crate::ledger::AnyStore,
    config: &daicho_engine::Config,
    format: ViewFormat,
    per_project: usize,
    to_terminal: bool,
) -> anyhow::Result<String> {
    use std::io::IsTerminal as _;

    let today = jiff::Zoned::now().date();
    let view = daicho_engine::view::build(store, config, per_project, today).await?;
    let colour = to_terminal && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    render(&view, format, colour)
}

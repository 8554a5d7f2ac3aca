//! `daicho graph`: a project's dependency graph as SVG, DOT or Mermaid (V6).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use daicho_engine::graph::{GraphRequest, MAX_NODES, load};

use super::Context;

/// The drawing formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    /// A standalone SVG picture, nodes coloured by state (as the web UI's /p/PROJECT/graph).
    Svg,
    /// Graphviz DOT (`dot -Tpng`).
    Dot,
    /// A Mermaid flowchart, for pasting into Markdown.
    Mermaid,
}

/// Draw a project's dependency graph: tasks left to right in the order their deps allow, nodes
/// coloured by state (pending, ready, running, review, done, dropped, needs_human, awaiting
/// approval), an edge green once its dep is done. A project larger than --max is drawn as its
/// open frontier, the done tasks they wait on folded into counts; what was left out is said on
/// stderr (and in the JSON). With --json, the laid-out graph (nodes, edges, omitted) as JSON.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The project.
    #[arg(long, short)]
    pub project: String,
    /// Only the rows of this source; a plan's goal is `plan:<goal>`.
    #[arg(long)]
    pub source: Option<String>,
    /// The format (default: by the --out extension, else SVG).
    #[arg(long, value_enum)]
    pub format: Option<GraphFormat>,
    /// Write to this file (atomically) instead of standard output.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// At most this many nodes.
    #[arg(long, default_value_t = MAX_NODES as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max: u32,
}

/// Runs `daicho graph`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let request =
        GraphRequest { project: args.project.clone(), source: args.source, max_nodes: args.max as usize };
    let graph = load(&ctx.reader().await?, &request, jiff::Timestamp::now()).await?;
    let omitted = graph.omitted_text(ctx.lang);
    if ctx.json {
        ctx.emit(&graph, "")?;
        return Ok(ExitCode::SUCCESS);
    }
    let by_name = args.out.as_ref().and_then(|out| match out.extension()?.to_str()? {
        "dot" | "gv" => Some(GraphFormat::Dot),
        "mmd" | "mermaid" | "md" => Some(GraphFormat::Mermaid),
        _ => None,
    });
    let text = match args.format.or(by_name).unwrap_or(GraphFormat::Svg) {
        GraphFormat::Svg => graph.svg(&|id| format!("#{id}"), ctx.lang),
        GraphFormat::Dot => graph.dot(&args.project),
        GraphFormat::Mermaid => graph.mermaid(),
    };
    if !omitted.is_empty() {
        eprintln!("daicho: {omitted}");
    }
    match &args.out {
        Some(path) => {
            daicho_engine::view::write_atomically(path, text.as_bytes())?;
            eprintln!("daicho: wrote {} nodes to {}", graph.nodes.len(), path.display());
        }
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

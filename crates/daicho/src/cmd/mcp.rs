//! `daicho mcp`: the MCP tools for coding agents (I4) on stdin/stdout — stdout carries only MCP
//! frames, logs go to stderr — or, with `--http`, over Streamable HTTP at `/mcp` of the web
//! server (the web UI's address and token rules), without running the schedule.

use std::process::ExitCode;

use super::Context;

/// Serve daicho's MCP tools to a coding agent: ready, claim_next, heartbeat, complete, fail,
/// push, show, list. Register it with the agent as a stdio server (`daicho mcp`, with `--db` and
/// `--config` as needed); the README shows a client configuration. Agents never approve
/// external tasks nor write corrections: only people do.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent's name in the journal (`worker:mcp:<name>`); default: the name the MCP client
    /// gives.
    #[arg(long, conflicts_with = "http")]
    pub agent: Option<String>,
    /// Serve over Streamable HTTP at /mcp instead of stdio (with the web UI and API).
    #[arg(long)]
    pub http: bool,
    /// With --http: where and how to serve (as for `daicho serve`).
    #[command(flatten)]
    pub web: super::serve::WebArgs,
}

/// Runs `daicho mcp`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let engine = std::sync::Arc::new(ctx.engine().await?);
    if !args.http {
        daicho_server::mcp::serve_stdio(engine, args.agent).await?;
        return Ok(ExitCode::SUCCESS);
    }
    let server = args.web.start(&engine, ctx.ja(), &std::sync::Arc::default()).await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    server.stop().await?;
    Ok(ExitCode::SUCCESS)
}

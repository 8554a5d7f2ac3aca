//! `daicho serve`: the web UI and HTTP API (I2, I3), and the scheduler daemon (R1, R2). Each
//! `[[schedule]]` of daicho.toml names a role and a cron expression; at each of its times the
//! role runs once, under a lease in the ledger so that two `serve` processes on one ledger never
//! run the same role at the same moment.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;
use daicho_core::lang::Lang;
use daicho_engine::Engine;
use daicho_engine::schedule::{RoleOutcome, RoleRun, ScheduleOptions, ScheduleSink};
use daicho_ledger::AnyStore;

use super::Context;
use crate::output;
use crate::wire;

/// Serve the web UI and the HTTP API (default http://127.0.0.1:7878; docs/api.md) and run the
/// roles of daicho.toml's `[[schedule]]` tables at their cron times (the machine's local time)
/// until stopped (Ctrl-C or SIGTERM). Every role run prints one result line; a role another
/// `serve` holds is skipped with a note. `--now` runs every scheduled role once at start;
/// `--now --once` does only that (no web server), for a one-shot run from cron or a script.
/// Listening on an address other than loopback needs an access token (DAICHO_TOKEN).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run every scheduled role once right away.
    #[arg(long)]
    pub now: bool,
    /// With --now: exit after that first round.
    #[arg(long, requires = "now")]
    pub once: bool,
    #[command(flatten)]
    pub web: WebArgs,
    /// Run the schedule only, without the web UI and API.
    #[arg(long)]
    pub no_web: bool,
}

/// Where and how the web UI, the API and `/mcp` are served (`serve`, `mcp --http`).
#[derive(Debug, clap::Args)]
pub struct WebArgs {
    /// Where the web UI and API listen.
    #[arg(long, env = "DAICHO_BIND", default_value = "127.0.0.1:7878")]
    pub bind: std::net::SocketAddr,
    /// The access token every request must carry (at least 16 characters); required when
    /// --bind is not a loopback address.
    #[arg(long, env = "DAICHO_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A second token, for remote workers and agents (at least 16 characters; needs --token):
    /// it reads, claims, heartbeats, completes, fails and pushes tasks, and serves /mcp, but
    /// acts for no person (no edit, approval, rejection or pause).
    #[arg(long, env = "DAICHO_WORKER_TOKEN", hide_env_values = true)]
    pub worker_token: Option<String>,
    /// The URL people open the web UI at when it is not http://<bind address>, e.g.
    /// https://daicho.example.com behind a TLS proxy: its origin counts as the server's own for
    /// form posts and API writes, and without a token its host is answered besides loopback.
    #[arg(long, env = "DAICHO_PUBLIC_URL")]
    pub public_url: Option<String>,
}

impl WebArgs {
    /// Binds the web UI, API and `/mcp` (refusing a non-loopback address without a token) and
    /// serves them in the background.
    pub async fn start(
        &self,
        engine: &Arc<Engine<AnyStore>>,
        ja: bool,
        metrics: &Arc<daicho_server::Metrics>,
    ) -> anyhow::Result<daicho_server::Running> {
        let options = daicho_server::ServerOptions {
            bind: self.bind,
            token: self.token.clone().filter(|t| !t.is_empty()),
            worker_token: self.worker_token.clone().filter(|t| !t.is_empty()),
            ja,
            public_url: self.public_url.clone().filter(|u| !u.is_empty()),
            ..daicho_server::ServerOptions::default()
        };
        let running = daicho_server::bind(Arc::clone(engine), options, Arc::clone(metrics)).await?.spawn()?;
        let addr = running.local_addr();
        eprintln!("daicho: web UI and API on http://{addr}/ (MCP at http://{addr}/mcp)");
        Ok(running)
    }
}

/// Runs `daicho serve`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let config = ctx.load_config()?;
    let web = !args.no_web && !args.once;
    if config.schedules.is_empty() && !web {
        bail!(
            "nothing to serve: add [[schedule]] tables (role, cron) to the configuration, or serve the web UI"
        );
    }
    // One ledger connection (pool) and one configuration for the web server and the schedule.
    let engine = Arc::new(ctx.running_engine_patiently(config).await?);
    let metrics = Arc::new(daicho_server::Metrics::default());
    // The web server starts first, so that a bad address or a missing token stops everything
    // before any role runs.
    let server = if web { Some(args.web.start(&engine, ctx.ja(), &metrics).await?) } else { None };
    let options = ScheduleOptions { now: args.now, once: args.once, owner: daicho_engine::worker_name() };
    let failed = engine
        .run_schedule(&options, &mut Printer { json: ctx.json, lang: ctx.lang, metrics: &metrics })
        .await;
    if let Some(server) = server {
        server.stop().await?;
    }
    Ok(if args.once && failed? > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Prints every role run (a line, or JSON with `--json`) and counts it in `/metrics`.
struct Printer<'a> {
    json: bool,
    lang: Lang,
    metrics: &'a daicho_server::Metrics,
}

impl ScheduleSink for Printer<'_> {
    fn role(&mut self, run: &RoleRun) {
        let printed = match self.json {
            true => output::print_json(&wire::role_run_json(run)),
            false => output::print(&run.text(self.lang)),
        };
        if let Err(e) = printed {
            tracing::error!(role = %run.role.as_str(), "{e:#}");
        }
        if !matches!(run.outcome, RoleOutcome::Skipped) {
            self.metrics.record_sweep(run.role.as_str(), run.seconds, run.truncated());
        }
    }
}

//! `daicho serve`: the web UI and HTTP API (I2, I3), and the scheduler daemon (R1, R2). Each
//! `[[schedule]]` of daicho.toml names a role and a cron expression; at each of its times the
//! role runs once, under a lease in the ledger so that two `serve` processes on one ledger never
//! run the same role at the same moment.

use anyhow::bail;
use daicho_engine::schedule::{RoleOutcome, RoleRun, ScheduleOptions, ScheduleSink};
use std::process::ExitCode;

use super::Context;
use crate::output;
use crate::wire::SweepJson;

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
    /// Where the web UI and API listen.
    #[arg(long, env = "DAICHO_BIND", default_value = "127.0.0.1:7878")]
    pub bind: std::net::SocketAddr,
    /// The access token every request must carry (at least 16 characters); required when
    /// --bind is not a loopback address.
    #[arg(long, env = "DAICHO_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The URL people open the web UI at when it is not http://<bind address>, e.g.
    /// https://daicho.example.com behind a TLS proxy: its origin counts as the server's own for
    /// form posts and API writes, and without a token its host is answered besides loopback.
    #[arg(long, env = "DAICHO_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Run the schedule only, without the web UI and API.
    #[arg(long)]
    pub no_web: bool,
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
    let engine = std::sync::Arc::new(ctx.running_engine_patiently(config).await?);
    let metrics = std::sync::Arc::new(daicho_server::Metrics::default());
    let owner = daicho_engine::worker_name();
    // The web server starts first, so that a bad address or a missing token stops everything
    // before any role runs.
    let mut server = None;
    if web {
        let (token, public_url) = (args.token.clone(), args.public_url.clone());
        server = Some(start_web(&engine, args.bind, token, public_url, ctx.ja, &metrics).await?);
    }
    let options = ScheduleOptions { now: args.now, once: args.once, owner };
    let mut printer = Printer { json: ctx.json, metrics: &metrics };
    let outcome = engine
        .run_schedule(&options, &mut printer)
        .await
        .map(|failed| if args.once && failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS });
    if let Some((stop, handle)) = server {
        let _ = stop.send(());
        handle.await??;
    }
    Ok(outcome?)
}

/// A running web server: send on the channel to stop it, then await the handle.
pub type WebServer = (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<std::io::Result<()>>);

/// Binds the web UI, API and `/mcp` to `bind` (refusing a non-loopback address without a token)
/// and serves them in the background; `public_url` is the URL people open it at
/// (`--public-url`), if not http://<bind>.
pub async fn start_web(
    engine: &std::sync::Arc<daicho_engine::Engine<crate::ledger::AnyStore>>,
    bind: std::net::SocketAddr,
    token: Option<String>,
    public_url: Option<String>,
    ja: bool,
    metrics: &std::sync::Arc<daicho_server::Metrics>,
) -> anyhow::Result<WebServer> {
    let options = daicho_server::ServerOptions {
        bind,
        token: token.filter(|t| !t.is_empty()),
        ja,
        public_url: public_url.filter(|u| !u.is_empty()),
        ..daicho_server::ServerOptions::default()
    };
    let bound =
        daicho_server::bind(std::sync::Arc::clone(engine), options, std::sync::Arc::clone(metrics)).await?;
    let addr = bound.local_addr()?;
    eprintln!("daicho: web UI and API on http://{addr}/ (MCP at http://{addr}/mcp)");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(bound.serve(async move {
        let _ = stop_rx.await;
    }));
    Ok((stop_tx, handle))
}

/// Prints every role run (a line, or JSON with `--json`) and counts it in `/metrics`.
struct Printer<'a> {
    json: bool,
    metrics: &'a daicho_server::Metrics,
}

impl ScheduleSink for Printer<'_> {
    fn role(&mut self, run: &RoleRun) {
        let name = run.role.as_str();
        let printed = match &run.outcome {
            RoleOutcome::Skipped if self.json => output::print_json(
                &serde_json::json!({ "role": name, "skipped": "another serve holds this role" }),
            ),
            RoleOutcome::Skipped => output::print(&format!("{name}: skipped, another serve holds this role")),
            RoleOutcome::View(report) if self.json => output::print_json(report),
            RoleOutcome::View(report) => output::print(&super::sweep::view_text(report)),
            RoleOutcome::Sync(report) if self.json => output::print_json(report),
            RoleOutcome::Sync(report) => {
                output::print(&format!("sync: {}", super::sweep::sync_text(report).replace('\n', "; ")))
            }
            RoleOutcome::Sweep(report) if self.json => output::print_json(&SweepJson::from(report)),
            RoleOutcome::Sweep(report) => output::print(&format!(
                "{name}: {} ran, {} held, {} queued for approval, {} lost runs counted, {} truncated{}",
                report.ran.len(),
                report.held.len(),
                report.queued.len(),
                report.lost.len(),
                report.truncated,
                report.paused.as_deref().map(|r| format!(" (paused: {r})")).unwrap_or_default()
            )),
        };
        if let Err(e) = printed {
            tracing::error!(role = %name, "{e:#}");
        }
        if !matches!(run.outcome, RoleOutcome::Skipped) {
            self.metrics.record_sweep(name, run.seconds, run.truncated());
        }
    }
}

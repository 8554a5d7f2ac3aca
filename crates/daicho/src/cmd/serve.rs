//! `daicho serve`: the web UI and HTTP API (I2, I3), and the scheduler daemon (R1, R2). Each
//! `[[schedule]]` of daicho.toml names a role and a cron expression; at each of its times the
//! role runs once, under a lease in the ledger so that two `serve` processes on one ledger never
//! run the same role at the same moment.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use daicho_engine::{Role, ScheduleConfig, Stop};
use daicho_store::Store as _;
use jiff::Timestamp;

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
    let (store, config) = (engine.store(), engine.config());
    let metrics = std::sync::Arc::new(daicho_server::Metrics::default());
    let owner = daicho_engine::worker_name();
    // The web server starts first, so that a bad address or a missing token stops everything
    // before any role runs.
    let mut server = None;
    if web {
        let (token, public_url) = (args.token.clone(), args.public_url.clone());
        server = Some(start_web(&engine, args.bind, token, public_url, ctx.ja, &metrics).await?);
    }
    let outcome = schedule_loop(&args, ctx, &engine, store, config, &metrics, &owner).await;
    if let Some((stop, handle)) = server {
        let _ = stop.send(());
        handle.await??;
    }
    outcome
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

/// Runs the schedule (and, with `--now`, a first round) until stopped.
async fn schedule_loop(
    args: &Args,
    ctx: &Context,
    engine: &daicho_engine::Engine<crate::ledger::AnyStore>,
    store: &crate::ledger::AnyStore,
    config: &daicho_engine::Config,
    metrics: &daicho_server::Metrics,
    owner: &str,
) -> anyhow::Result<ExitCode> {
    let mut failed = 0;
    if args.now {
        for schedule in &config.schedules {
            if engine.stop_level() >= Stop::Drain {
                break;
            }
            match run_role(ctx, engine, store, config, metrics, schedule, owner, Timestamp::now()).await {
                Ok(n) => failed += n,
                // One role's failure (the store out of reach, say) does not stop the others.
                Err(e) => {
                    tracing::error!(role = %schedule.role, "{e:#}");
                    failed += 1;
                }
            }
        }
        if args.once {
            return Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS });
        }
    }
    if config.schedules.is_empty() {
        // The web UI only.
        engine.wait_stop(Stop::Drain).await;
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        // An operator's stop (S14): the round under way claims nothing new, its runs drain.
        if engine.stop_level() >= Stop::Drain {
            return Ok(ExitCode::SUCCESS);
        }
        let tz = jiff::tz::TimeZone::system();
        let now = Timestamp::now();
        let local = now.to_zoned(tz.clone()).datetime();
        let next = config
            .schedules
            .iter()
            .filter_map(|s| s.cron.next_after(local).map(|t| (t, s)))
            .min_by_key(|(t, _)| *t);
        let Some((at, _)) = next else { bail!("no schedule has a next time") };
        let when = tz.to_timestamp(at).unwrap_or(now);
        let wait = Duration::try_from(when.duration_since(now)).unwrap_or_default();
        tracing::info!(next = %at, "waiting for the next scheduled role");
        tokio::select! {
            () = engine.wait_stop(Stop::Drain) => return Ok(ExitCode::SUCCESS),
            () = tokio::time::sleep(wait) => {}
        }
        // Every role due at this minute runs, in the file's order.
        for schedule in config.schedules.iter().filter(|s| s.cron.next_after(local) == Some(at)) {
            if let Err(e) = run_role(ctx, engine, store, config, metrics, schedule, owner, when).await {
                tracing::error!(role = %schedule.role, "{e:#}");
            }
        }
    }
}

/// Runs one role, fired at `fired`, under its lease; returns 1 when it reported a failure. Its
/// duration and what it left over go to `/metrics`.
#[allow(clippy::too_many_arguments)]
async fn run_role(
    ctx: &Context,
    engine: &daicho_engine::Engine<crate::ledger::AnyStore>,
    store: &crate::ledger::AnyStore,
    config: &daicho_engine::Config,
    metrics: &daicho_server::Metrics,
    schedule: &ScheduleConfig,
    owner: &str,
    fired: Timestamp,
) -> anyhow::Result<usize> {
    let now = Timestamp::now();
    let until = now + schedule.budget + jiff::SignedDuration::from_mins(1);
    if !store.lease_role(&schedule.role, owner, now, until).await? {
        let note = serde_json::json!({ "role": schedule.role, "skipped": "another serve holds this role" });
        if ctx.json {
            output::print_json(&note)?;
        } else {
            output::print(&format!("{}: skipped, another serve holds this role", schedule.role))?;
        }
        return Ok(0);
    }
    let budget = Duration::try_from(schedule.budget).unwrap_or(Duration::from_secs(1800));
    let started = std::time::Instant::now();
    let outcome = async {
        // (failed, truncated)
        let figures = match schedule.role.as_str() {
            "view" => {
                let report = super::view::write_files(store, config).await?;
                if ctx.json {
                    output::print_json(&report)?;
                } else {
                    output::print(&format!("view: wrote {}", report["written"]))?;
                }
                (0, 0)
            }
            "sync" => {
                let report = super::sweep::sync_sweep(store, config, schedule.max, budget).await?;
                if ctx.json {
                    output::print_json(&report)?;
                } else {
                    output::print(&format!(
                        "sync: {}",
                        super::sweep::sync_text(&report).replace('\n', "; ")
                    ))?;
                }
                let truncated = report["truncated"].as_u64().unwrap_or(0) as usize;
                (usize::from(report["failed"].as_u64().unwrap_or(0) > 0), truncated)
            }
            name => {
                let role = if name == "auto" { Role::Auto } else { Role::RunRequested };
                let deadline = std::time::Instant::now() + budget;
                let report = engine
                    .sweep_within(role, schedule.max.unwrap_or(role.default_max()), Some(deadline))
                    .await?;
                if ctx.json {
                    output::print_json(&SweepJson::from(&report))?;
                } else {
                    output::print(&format!(
                        "{name}: {} ran, {} held, {} queued for approval, {} lost runs counted, {} truncated{}",
                        report.ran.len(),
                        report.held.len(),
                        report.queued.len(),
                        report.lost.len(),
                        report.truncated,
                        report.paused.as_deref().map(|r| format!(" (paused: {r})")).unwrap_or_default()
                    ))?;
                }
                (0, report.truncated)
            }
        };
        anyhow::Ok(figures)
    };
    let result = outcome.await.map(|(failed, truncated)| {
        metrics.record_sweep(&schedule.role, started.elapsed().as_secs_f64(), truncated);
        failed
    });
    // Kept to the end of the minute it fired in (another serve firing at the same minute skips
    // it), then free whatever happened, so the next time is not blocked.
    let now = Timestamp::now();
    store
        .lease_role(&schedule.role, owner, now, (fired + jiff::SignedDuration::from_secs(60)).max(now))
        .await?;
    result
}

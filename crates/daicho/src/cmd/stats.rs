//! `daicho stats`: runs per action, outcomes and tokens (S9).

use std::process::ExitCode;

use anyhow::Context as _;
use daicho_store::Store;
use serde::Serialize;

use super::Context;
use crate::output;

/// Runs per action since a point in time: started, succeeded, failed, running, and the tokens
/// that LLM APIs reported.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Since when: `today` (default), `all`, a duration back such as `7d`, or a date.
    #[arg(long, default_value = "today")]
    pub since: String,
}

#[derive(Debug, Serialize)]
struct StatsJson {
    action: String,
    runs: u64,
    successes: u64,
    failures: u64,
    running: u64,
    tokens_in: u64,
    tokens_out: u64,
}

/// Runs `daicho stats`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let now = jiff::Timestamp::now();
    let since = match args.since.trim() {
        "today" => {
            now.to_zoned(jiff::tz::TimeZone::system()).start_of_day().map(|z| z.timestamp()).unwrap_or(now)
        }
        "all" => jiff::Timestamp::UNIX_EPOCH,
        text => match text.parse::<jiff::Span>() {
            Ok(span) => now
                .to_zoned(jiff::tz::TimeZone::system())
                .checked_sub(span)
                .map(|z| z.timestamp())
                .context("--since reaches too far back")?,
            Err(_) => {
                daicho_core::format::parse_timestamp(text).map_err(anyhow::Error::msg).context("--since")?
            }
        },
    };
    let store = crate::ledger::open(&ctx.db).await?;
    let stats = store.stats(since).await?;
    if ctx.json {
        let json: Vec<StatsJson> = stats
            .iter()
            .map(|s| StatsJson {
                action: s.action.clone(),
                runs: s.runs,
                successes: s.successes,
                failures: s.failures,
                running: s.running,
                tokens_in: s.tokens_in,
                tokens_out: s.tokens_out,
            })
            .collect();
        output::print_json(&json)?;
    } else if stats.is_empty() {
        output::print(&format!("no runs since {since}"))?;
    } else {
        let mut lines = vec![format!("runs since {since}:")];
        for s in &stats {
            lines.push(format!(
                "  {}: {} runs, {} ok, {} failed, {} running; tokens {} in, {} out",
                s.action, s.runs, s.successes, s.failures, s.running, s.tokens_in, s.tokens_out
            ));
        }
        output::print(&lines.join("\n"))?;
    }
    Ok(ExitCode::SUCCESS)
}

//! `daicho stats`: runs per action, outcomes and tokens (S9).

use std::process::ExitCode;

use anyhow::Context as _;
use daicho_core::format::parse_timestamp;
use daicho_store::Store;

use super::Context;
use crate::wire::StatsJson;

/// Runs per action since a point in time: started, succeeded, failed, running, and the tokens
/// that LLM APIs reported.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Since when: `today` (default), `all`, a duration back such as `7d`, or a date.
    #[arg(long, default_value = "today")]
    pub since: String,
}

/// Runs `daicho stats`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let now = jiff::Timestamp::now();
    let local = || now.to_zoned(jiff::tz::TimeZone::system());
    let since = match args.since.trim() {
        "today" => local().start_of_day().map(|z| z.timestamp()).unwrap_or(now),
        "all" => jiff::Timestamp::UNIX_EPOCH,
        text => match text.parse::<jiff::Span>() {
            Ok(span) => {
                local().checked_sub(span).map(|z| z.timestamp()).context("--since reaches too far back")?
            }
            Err(_) => parse_timestamp(text).map_err(anyhow::Error::msg).context("--since")?,
        },
    };
    let stats = ctx.reader().await?.stats(since).await?;
    let mut lines = vec![if stats.is_empty() {
        format!("no runs since {since}")
    } else {
        format!("runs since {since}:")
    }];
    lines.extend(stats.iter().map(|s| {
        let (ok, failed, tokens_in, tokens_out) = (s.successes, s.failures, s.tokens_in, s.tokens_out);
        format!(
            "  {}: {} runs, {ok} ok, {failed} failed, {} running; tokens {tokens_in} in, {tokens_out} out",
            s.action, s.runs, s.running
        )
    }));
    let json: Vec<StatsJson> = stats.iter().map(StatsJson::from).collect();
    ctx.emit(&json, lines.join("\n"))?;
    Ok(ExitCode::SUCCESS)
}

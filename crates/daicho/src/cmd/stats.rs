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
    let ja = ctx.ja();
    let mut lines = vec![match (stats.is_empty(), ja) {
        (true, false) => format!("no runs since {since}"),
        (false, false) => format!("runs since {since}:"),
        (true, true) => format!("{since} 以降の実行はありません"),
        (false, true) => format!("{since} 以降の実行:"),
    }];
    lines.extend(stats.iter().map(|s| {
        let (action, runs, running) = (&s.action, s.runs, s.running);
        let (ok, failed, tokens_in, tokens_out) = (s.successes, s.failures, s.tokens_in, s.tokens_out);
        match ja {
            false => format!(
                "  {action}: {runs} runs, {ok} ok, {failed} failed, {running} running; tokens {tokens_in} in, {tokens_out} out"
            ),
            true => format!(
                "  {action}: 実行 {runs}、成功 {ok}、失敗 {failed}、実行中 {running}; トークン 入力 {tokens_in}、出力 {tokens_out}"
            ),
        }
    }));
    let json: Vec<StatsJson> = stats.iter().map(StatsJson::from).collect();
    ctx.emit(&json, lines.join("\n"))?;
    Ok(ExitCode::SUCCESS)
}

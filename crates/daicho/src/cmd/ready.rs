//! `daicho ready`: the ready set in run order (D1), each row with why it will or will not run (S7).

use std::process::ExitCode;

use daicho_core::lang::Lang;
use daicho_store::Store;

use super::Context;
use crate::output;
use crate::wire::ReadyWhyJson;

/// List the tasks that are ready: pending, every dependency done or dropped, start time reached.
/// Ordered by priority (larger first), then by id. Each row says whether the next automatic
/// sweep (or, for a ticked row, the run-requested sweep) would run it, and if not, why.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Show at most this many.
    #[arg(long, short = 'n', default_value_t = 50)]
    pub limit: usize,
}

/// Runs `daicho ready`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let engine = ctx.reading_engine().await?;
    let ready = engine.store().ready(jiff::Timestamp::now(), args.limit).await?;
    let decisions = engine.explain(&ready.tasks, daicho_engine::Role::Auto).await?;
    let (total, more) = (ready.total, ready.total - ready.tasks.len());
    let text = || match (total, ctx.lang) {
        (0, lang) => lang.pick("nothing is ready", "実行可能なタスクはありません").to_owned(),
        (_, lang) => {
            let tail = match (more, lang) {
                (0, _) => String::new(),
                (more, Lang::En) => format!(" ({more} more; use --limit)"),
                (more, Lang::Ja) => format!(" (ほか {more} 件; --limit で表示)"),
            };
            let count = match lang {
                Lang::En => format!("{total} ready{tail}"),
                Lang::Ja => format!("実行可能 {total} 件{tail}"),
            };
            let reasons: Vec<String> = decisions
                .iter()
                .map(|d| match (d, ctx.lang) {
                    (Ok(action), Lang::En) => format!("runs with {action}"),
                    (Ok(action), Lang::Ja) => format!("{action} で実行します"),
                    (Err(hold), lang) => hold.text(lang),
                })
                .collect();
            format!("{}\n{count}", output::ready_table(&ready.tasks, &reasons, ctx.ja()))
        }
    };
    ctx.emit_with(|| ReadyWhyJson::new(&ready, decisions.clone()), text)?;
    Ok(ExitCode::SUCCESS)
}

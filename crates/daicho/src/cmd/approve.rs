//! `daicho approve`: a person decides on external tasks (S2).

use std::process::ExitCode;

use daicho_core::TaskId;
use daicho_store::Store;

use super::Context;
use crate::wire::TaskJson;

/// Approve external tasks (a mail, an order, a publish): tick their ▶ run box so that the next
/// run-requested sweep (or `daicho run`) runs them; or reject them with --reject REASON (they
/// are dropped, the reason kept as their correction). Without ids, list the approval queue with
/// what each run would do (the action, its command line or endpoint and model) and who queued
/// it; --history lists the decisions made.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The task ids, e.g. T-0042. Omit to list the queue.
    pub ids: Vec<TaskId>,
    /// Reject them instead, with this reason (one reason for all).
    #[arg(long, value_name = "REASON")]
    pub reject: Option<String>,
    /// List the latest decisions (approved or rejected, by whom, why).
    #[arg(long, conflicts_with_all = ["ids", "reject"])]
    pub history: bool,
}

/// Runs `daicho approve`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    if args.history {
        ctx.report(&ctx.reading_engine().await?.decisions(100).await?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.ids.is_empty() {
        if args.reject.is_some() {
            anyhow::bail!("--reject needs the ids of the tasks to reject");
        }
        ctx.report(&ctx.reading_engine().await?.approval_queue().await?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let store = ctx.store().await?;
    let now = jiff::Timestamp::now();
    let (mut json, mut lines) = (Vec::new(), Vec::new());
    for id in args.ids {
        let task = match &args.reject {
            Some(reason) => store.reject(id, reason.clone(), ctx.actor()?, now).await?,
            None => store.approve(id, ctx.actor()?, now).await?,
        };
        lines.push(match (&args.reject, ctx.ja()) {
            (Some(_), false) => format!("rejected {id}: dropped, the reason kept as its correction"),
            (Some(_), true) => format!("{id} を却下しました: 不要にし、理由を修正指示に残しました"),
            (None, false) => format!("approved {id}: the next run-requested sweep runs it"),
            (None, true) => format!("{id} を承認しました: 次の実行依頼の巡回で実行します"),
        });
        json.push(TaskJson::from(&task));
    }
    // One id prints its row as before; several print a list.
    match json.len() {
        1 => ctx.emit(&json[0], lines.join("\n"))?,
        _ => ctx.emit(&json, lines.join("\n"))?,
    }
    Ok(ExitCode::SUCCESS)
}

//! `daicho approve`: a person decides on external tasks (S2).

use std::process::ExitCode;

use daicho_core::TaskId;
use daicho_core::format::clip;
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
        return history(ctx).await;
    }
    if args.ids.is_empty() {
        if args.reject.is_some() {
            anyhow::bail!("--reject needs the ids of the tasks to reject");
        }
        return queue(ctx).await;
    }
    let store = ctx.store().await?;
    let now = jiff::Timestamp::now();
    let (mut json, mut lines) = (Vec::new(), Vec::new());
    for id in args.ids {
        let task = match &args.reject {
            Some(reason) => store.reject(id, reason.clone(), ctx.actor(), now).await?,
            None => store.approve(id, ctx.actor(), now).await?,
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

/// The queue, each with what its run would do.
async fn queue(ctx: &Context) -> anyhow::Result<ExitCode> {
    let engine = ctx.reading_engine().await?;
    let store = engine.store();
    let (mut json, mut lines) = (Vec::new(), Vec::new());
    for queued in store.approvals().await? {
        let Some(task) = store.get(queued.id).await? else { continue };
        let outbound = engine.outbound(&task);
        let does = match outbound.kind {
            "command" => outbound.command.join(" "),
            "llm" => format!("POST {} ({})", outbound.endpoint, outbound.model),
            _ => outbound.problem.clone().unwrap_or_default(),
        };
        let queued_word = ctx.lang.pick("queued", "登録");
        lines.push(format!(
            "{}  {}  [{}] {}  ({queued_word} {} {})",
            queued.id,
            clip(&task.title, 50),
            outbound.action,
            clip(&does, 60),
            queued.queued_at,
            queued.queued_by
        ));
        json.push(serde_json::json!({
            "id": queued.id.to_string(),
            "title": task.title,
            "queued_at": queued.queued_at.to_string(),
            "queued_by": queued.queued_by,
            "outbound": outbound,
        }));
    }
    let empty = ctx.lang.pick("the approval queue is empty", "承認待ちはありません");
    let text = if lines.is_empty() { empty.to_owned() } else { lines.join("\n") };
    ctx.emit(&json, text)?;
    Ok(ExitCode::SUCCESS)
}

/// The latest decisions.
async fn history(ctx: &Context) -> anyhow::Result<ExitCode> {
    let store = ctx.reader().await?;
    let (mut json, mut lines) = (Vec::new(), Vec::new());
    for d in store.decisions(100).await? {
        let reason = if d.reason.is_empty() { String::new() } else { format!(": {}", d.reason) };
        lines.push(format!(
            "{}  {} {} by {}{reason}",
            d.decided_at,
            d.queued.id,
            d.decision.as_str(),
            d.decided_by
        ));
        json.push(serde_json::json!({
            "id": d.queued.id.to_string(),
            "decision": d.decision.as_str(),
            "decided_at": d.decided_at.to_string(),
            "decided_by": d.decided_by,
            "reason": d.reason,
            "queued_at": d.queued.queued_at.to_string(),
            "queued_by": d.queued.queued_by,
        }));
    }
    let empty = ctx.lang.pick("no decisions yet", "判断の記録はまだありません");
    let text = if lines.is_empty() { empty.to_owned() } else { lines.join("\n") };
    ctx.emit(&json, text)?;
    Ok(ExitCode::SUCCESS)
}

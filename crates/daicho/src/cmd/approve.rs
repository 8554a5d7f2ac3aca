//! `daicho approve`: a person approves an external task (S2).

use std::process::ExitCode;

use daicho_core::TaskId;
use daicho_core::format::clip;
use daicho_store::Store;

use super::Context;
use crate::wire::TaskJson;

/// Approve an external task (a mail, an order, a publish): tick its ▶ run box so that the next
/// run-requested sweep (or `daicho run`) runs it. Without arguments, list the approval queue.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The task id, e.g. T-0042. Omit to list the queue.
    pub id: Option<TaskId>,
}

/// Runs `daicho approve`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let store = ctx.store().await?;
    let Some(id) = args.id else {
        let (mut json, mut lines) = (Vec::new(), Vec::new());
        for (id, queued_at) in store.approvals().await? {
            let title = store.get(id).await?.map(|t| t.title).unwrap_or_default();
            let queued = ctx.lang.pick("queued", "登録");
            lines.push(format!("{id}  {}  ({queued} {queued_at})", clip(&title, 60)));
            json.push(serde_json::json!({ "id": id.to_string(), "title": title, "queued_at": queued_at.to_string() }));
        }
        let empty = ctx.lang.pick("the approval queue is empty", "承認待ちはありません");
        let text = if lines.is_empty() { empty.to_owned() } else { lines.join("\n") };
        ctx.emit(&json, text)?;
        return Ok(ExitCode::SUCCESS);
    };
    let task = store.approve(id, ctx.actor(), jiff::Timestamp::now()).await?;
    let text = match ctx.ja() {
        false => format!("approved {id}: the next run-requested sweep runs it"),
        true => format!("{id} を承認しました: 次の実行依頼の巡回で実行します"),
    };
    ctx.emit(&TaskJson::from(&task), text)?;
    Ok(ExitCode::SUCCESS)
}

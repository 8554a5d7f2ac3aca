//! `daicho approve`: a person approves an external task (S2).

use std::process::ExitCode;

use daicho_core::{Actor, TaskId};
use daicho_store::Store;

use super::Context;
use crate::output;
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
    let store = crate::ledger::open(&ctx.db).await?;
    let Some(id) = args.id else {
        let queue = store.approvals().await?;
        let mut rows = Vec::new();
        for (id, queued_at) in &queue {
            let title = store.get(*id).await?.map(|t| t.title).unwrap_or_default();
            rows.push((id.to_string(), title, queued_at.to_string()));
        }
        if ctx.json {
            let json: Vec<_> = rows
                .iter()
                .map(|(id, title, at)| serde_json::json!({ "id": id, "title": title, "queued_at": at }))
                .collect();
            output::print_json(&json)?;
        } else if rows.is_empty() {
            output::print("the approval queue is empty")?;
        } else {
            let lines: Vec<String> = rows
                .iter()
                .map(|(id, title, at)| format!("{id}  {}  (queued {at})", output::cell(title, 60)))
                .collect();
            output::print(&lines.join("\n"))?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    let task = store.approve(id, Actor::Human(ctx.user.clone()), jiff::Timestamp::now()).await?;
    if ctx.json {
        output::print_json(&TaskJson::from(&task))?;
    } else {
        output::print(&format!("approved {id}: the next run-requested sweep runs it"))?;
    }
    Ok(ExitCode::SUCCESS)
}

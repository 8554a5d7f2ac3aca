//! `daicho add`: add one task by hand.

use std::process::ExitCode;

use daicho_core::format::{parse_date, parse_timestamp};
use daicho_core::{Item, Status, Tags};
use daicho_store::{Batch, Store, UnknownDeps};

use super::Context;

/// Add one task. A task with the same source and (normalized) title already in the ledger is
/// not added twice; its empty cells are filled instead.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do (タスク).
    pub title: String,
    /// Details (内容).
    #[arg(long, default_value = "")]
    pub body: String,
    /// Where it came from (発生源); part of the dedupe key.
    #[arg(long, default_value = "manual")]
    pub source: String,
    /// The project (案件).
    #[arg(long, short, default_value = "")]
    pub project: String,
    /// Why it exists: a link or a quote (根拠).
    #[arg(long, default_value = "")]
    pub evidence: String,
    /// Due date, YYYY-MM-DD (期限).
    #[arg(long, value_parser = parse_date)]
    pub due: Option<jiff::civil::Date>,
    /// Who does it (担当).
    #[arg(long, default_value = "")]
    pub assignee: String,
    /// Work type, used for routing (分類).
    #[arg(long = "type", default_value = "")]
    pub work_type: String,
    /// Priority; larger runs first.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i64,
    /// Not ready before this time (RFC 3339 or YYYY-MM-DD).
    #[arg(long, value_parser = parse_timestamp)]
    pub not_before: Option<jiff::Timestamp>,
    /// The executor to run (AI機能); empty = a manual task.
    #[arg(long, default_value = "")]
    pub action: String,
    /// Ids this task waits for (comma separated).
    #[arg(long, value_delimiter = ',')]
    pub deps: Vec<String>,
    /// Tags (comma separated or repeated): ai, external, heavy, or your own.
    #[arg(long = "tag", value_delimiter = ',')]
    pub tags: Vec<String>,
    /// Initial status (default pending); Japanese names are accepted.
    #[arg(long)]
    pub status: Option<Status>,
}

/// Runs `daicho add`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    if args.title.trim().is_empty() {
        anyhow::bail!("the title is empty");
    }
    let item = Item {
        title: args.title,
        body: args.body,
        source: args.source,
        project: args.project,
        evidence: args.evidence,
        due: args.due,
        assignee: args.assignee,
        work_type: args.work_type,
        priority: args.priority,
        not_before: args.not_before,
        action: args.action,
        deps: args.deps,
        tags: args.tags.iter().map(String::as_str).collect::<Tags>(),
        status: args.status,
        // A new row's cells the person wrote, and its action and tags, are theirs (S13).
        by_hand: true,
        ..Item::default()
    };
    let (actor, now, file) = (ctx.actor()?, jiff::Timestamp::now(), "<add>".to_owned());
    let batch = Batch { items: vec![item].into(), actor, now, file, unknown_deps: UnknownDeps::Refuse };
    let report = ctx.store().await?.upsert(batch).await?;
    let (id, added, reason) = match (report.added.first(), report.updated.first(), report.skipped.first()) {
        (Some(id), _, _) => (Some(*id), true, None),
        (None, Some(id), _) => {
            (Some(*id), false, Some("already in the ledger; empty cells filled".to_owned()))
        }
        (None, None, Some(skip)) => (skip.id, false, Some(skip.reason.to_string())),
        _ => (None, false, None),
    };
    let id = id.map(|i| i.to_string());
    let json = serde_json::json!({ "id": id, "added": added, "reason": reason });
    let (id, reason) = (id.unwrap_or_default(), reason.unwrap_or_default());
    ctx.emit(&json, if added { format!("added {id}") } else { format!("not added: {id} {reason}") })?;
    Ok(ExitCode::SUCCESS)
}

//! `daicho add`: add one task by hand.

use std::process::ExitCode;

use anyhow::Context as _;
use daicho_core::format::{parse_date, parse_timestamp};
use daicho_core::{Actor, Item, Status, Tags};
use daicho_store::{Batch, Store, UnknownDeps};

use super::Context;
use crate::output;

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
    #[arg(long)]
    pub due: Option<String>,
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
    #[arg(long)]
    pub not_before: Option<String>,
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
    let store = crate::ledger::open(&ctx.db).await?;
    let item = Item {
        title: args.title,
        body: args.body,
        source: args.source,
        project: args.project,
        evidence: args.evidence,
        due: args.due.as_deref().map(parse_date).transpose().map_err(anyhow::Error::msg).context("--due")?,
        assignee: args.assignee,
        work_type: args.work_type,
        priority: args.priority,
        not_before: args
            .not_before
            .as_deref()
            .map(parse_timestamp)
            .transpose()
            .map_err(anyhow::Error::msg)
            .context("--not-before")?,
        action: args.action,
        deps: args.deps,
        tags: args.tags.iter().map(String::as_str).collect::<Tags>(),
        status: args.status,
        ..Item::default()
    };
    if item.title.trim().is_empty() {
        anyhow::bail!("the title is empty");
    }
    let batch = Batch {
        items: vec![item],
        actor: Actor::Human(ctx.user.clone()),
        now: jiff::Timestamp::now(),
        file: "<add>".to_owned(),
        unknown_deps: UnknownDeps::Refuse,
    };
    let report = store.upsert(batch).await?;
    let (id, added, reason) = match (report.added.first(), report.updated.first(), report.skipped.first()) {
        (Some(id), _, _) => (Some(*id), true, None),
        (None, Some(id), _) => {
            (Some(*id), false, Some("already in the ledger; empty cells filled".to_owned()))
        }
        (None, None, Some(skip)) => (skip.id, false, Some(skip.reason.clone())),
        _ => (None, false, None),
    };
    if ctx.json {
        output::print_json(&serde_json::json!({
            "id": id.map(|i| i.to_string()),
            "added": added,
            "reason": reason,
        }))?;
    } else if added {
        output::print(&format!("added {}", id.map(|i| i.to_string()).unwrap_or_default()))?;
    } else {
        let id = id.map(|i| i.to_string()).unwrap_or_default();
        output::print(&format!("not added: {id} {}", reason.unwrap_or_default()))?;
    }
    Ok(ExitCode::SUCCESS)
}

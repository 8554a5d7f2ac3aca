//! `daicho ready`: the ready set in run order (D1), each row with why it will or will not run (S7).

use std::process::ExitCode;

use daicho_store::Store;
use serde::Serialize;

use super::Context;
use crate::output;
use crate::wire::{ReadyJson, TaskJson};

/// List the tasks that are ready: pending, every dependency done or dropped, start time reached.
/// Ordered by priority (larger first), then by id. Each row says whether the next automatic
/// sweep (or, for a ticked row, the run-requested sweep) would run it, and if not, why.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Show at most this many.
    #[arg(long, short = 'n', default_value_t = 50)]
    pub limit: usize,
}

/// Why a ready row will or will not run.
#[derive(Debug, Serialize)]
struct WhyJson {
    id: String,
    /// Whether a sweep would run it now.
    runs: bool,
    /// The action that would run it.
    action: Option<String>,
    /// The kind of hold (`stalled`, `awaiting_approval`, …) when it will not run.
    hold: Option<&'static str>,
    /// The reason, for a person.
    reason: String,
}

#[derive(Debug, Serialize)]
struct ReadyWhyJson {
    #[serde(flatten)]
    ready: ReadyJson,
    why: Vec<WhyJson>,
}

/// Runs `daicho ready`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let engine = ctx.engine().await?;
    let ready = engine.store().ready(jiff::Timestamp::now(), args.limit).await?;
    let why: Vec<WhyJson> = engine
        .explain(&ready.tasks, daicho_engine::Role::Auto)
        .await?
        .into_iter()
        .zip(&ready.tasks)
        .map(|(decision, task)| match decision {
            Ok(action) => WhyJson {
                id: task.id.to_string(),
                runs: true,
                reason: format!("runs with {action}"),
                action: Some(action),
                hold: None,
            },
            Err(hold) => WhyJson {
                id: task.id.to_string(),
                runs: false,
                action: None,
                hold: Some(hold.kind()),
                reason: hold.to_string(),
            },
        })
        .collect();
    if ctx.json {
        let tasks = ready.tasks.iter().map(TaskJson::from).collect();
        output::print_json(&ReadyWhyJson { ready: ReadyJson { total: ready.total, tasks }, why })?;
    } else if ready.total == 0 {
        output::print("nothing is ready")?;
    } else {
        let reasons: Vec<String> = why.iter().map(|w| w.reason.clone()).collect();
        output::print(&output::ready_table(&ready.tasks, &reasons, ctx.ja))?;
        let more = ready.total - ready.tasks.len();
        let tail = if more > 0 { format!(" ({more} more; use --limit)") } else { String::new() };
        output::print(&format!("{} ready{tail}", ready.total))?;
    }
    Ok(ExitCode::SUCCESS)
}

//! `daicho set`: a person fixes one row (F1): writes, reads back, prints the stored values.

use std::process::ExitCode;

use anyhow::Context as _;
use daicho_core::authority::SourceCell;
use daicho_core::edit::TaskEdit;
use daicho_core::format::{parse_date, parse_timestamp, split_refs};
use daicho_core::{Status, TaskId};

use super::Context;
use crate::output;
use crate::wire::TaskJson;

/// Change one task and print what is stored afterwards (read back from the ledger).
///
/// A person's correction (修正指示) written here is handed to the task's next run; ticking
/// --run asks for that run.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The task id, e.g. T-0001.
    pub id: TaskId,
    /// New status (pending, running, review, done, dropped, needs_human; or 未着手 … 要人手).
    #[arg(long)]
    pub status: Option<Status>,
    /// A correction for the next run (修正指示); "" clears it.
    #[arg(long)]
    pub correction: Option<String>,
    /// Tick the ▶ run checkbox: ask for a run.
    #[arg(long, conflicts_with = "no_run")]
    pub run: bool,
    /// Clear the ▶ run checkbox.
    #[arg(long)]
    pub no_run: bool,
    /// New title (the dedupe key stays, so the source still matches this row).
    #[arg(long)]
    pub title: Option<String>,
    /// New body.
    #[arg(long)]
    pub body: Option<String>,
    /// New evidence.
    #[arg(long)]
    pub evidence: Option<String>,
    /// New project.
    #[arg(long)]
    pub project: Option<String>,
    /// New due date (YYYY-MM-DD); "" clears it.
    #[arg(long)]
    pub due: Option<String>,
    /// New assignee.
    #[arg(long)]
    pub assignee: Option<String>,
    /// New work type.
    #[arg(long = "type")]
    pub work_type: Option<String>,
    /// New priority (larger runs first).
    #[arg(long, allow_negative_numbers = true)]
    pub priority: Option<i64>,
    /// New earliest start (RFC 3339 or YYYY-MM-DD); "" clears it.
    #[arg(long)]
    pub not_before: Option<String>,
    /// New action; "" makes it a manual task.
    #[arg(long)]
    pub action: Option<String>,
    /// Replace the deps (comma separated ids); "" clears them. Cycles and unknown ids are refused.
    #[arg(long)]
    pub deps: Option<String>,
    /// Add tags (comma separated or repeated).
    #[arg(long = "tag", value_delimiter = ',')]
    pub add_tags: Vec<String>,
    /// Remove tags (comma separated or repeated).
    #[arg(long = "untag", value_delimiter = ',')]
    pub remove_tags: Vec<String>,
    /// Count the failures from zero again: a parked (needs_human) task whose cause you fixed
    /// gets its tries back (with --status pending --run, it runs again).
    #[arg(long)]
    pub reset_failures: bool,
    /// Hand cells back to the sources (comma separated: body, tags, action, …): an edit of yours
    /// keeps every sync, push and refresh from writing a cell (`by_person` in show) until then.
    #[arg(long, value_delimiter = ',', value_name = "CELLS")]
    pub give_back: Vec<String>,
}

fn clearable<T>(
    value: Option<&str>,
    parse: impl Fn(&str) -> Result<T, String>,
) -> anyhow::Result<Option<Option<T>>> {
    match value.map(str::trim) {
        None => Ok(None),
        Some("") => Ok(Some(None)),
        Some(text) => Ok(Some(Some(parse(text).map_err(anyhow::Error::msg)?))),
    }
}

/// Builds the edit the arguments ask for.
fn edit_of(args: &Args) -> anyhow::Result<TaskEdit> {
    let deps = match args.deps.as_deref() {
        None => None,
        Some(text) => Some(
            split_refs(text)
                .iter()
                .map(|r| r.parse::<TaskId>().map_err(anyhow::Error::from))
                .collect::<anyhow::Result<Vec<TaskId>>>()
                .context("--deps")?,
        ),
    };
    Ok(TaskEdit {
        status: args.status,
        correction: args.correction.clone(),
        run: (args.run || args.no_run).then_some(args.run),
        title: args.title.clone(),
        body: args.body.clone(),
        evidence: args.evidence.clone(),
        project: args.project.clone(),
        due: clearable(args.due.as_deref(), parse_date).context("--due")?,
        assignee: args.assignee.clone(),
        work_type: args.work_type.clone(),
        priority: args.priority,
        not_before: clearable(args.not_before.as_deref(), parse_timestamp).context("--not-before")?,
        action: args.action.clone(),
        deps,
        add_tags: args.add_tags.clone(),
        remove_tags: args.remove_tags.clone(),
        reset_failures: args.reset_failures,
        give_back: args
            .give_back
            .iter()
            .map(|name| {
                SourceCell::parse(name).ok_or_else(|| {
                    let names: Vec<&str> = SourceCell::ALL.iter().map(|c| c.name()).collect();
                    anyhow::anyhow!("--give-back: no cell '{name}'; the cells are {}", names.join(", "))
                })
            })
            .collect::<anyhow::Result<_>>()?,
    })
}

/// Runs `daicho set`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let edit = edit_of(&args).map_err(super::usage)?;
    if edit.is_empty() {
        let message = "nothing to change; give at least one of --status, --correction, --run, … (see daicho set --help)";
        output::report_error(&anyhow::anyhow!(message), ctx.json);
        return Ok(ExitCode::from(2));
    }
    if edit.title.as_ref().is_some_and(|t| t.trim().is_empty()) {
        return Err(super::usage(anyhow::anyhow!("--title: a title cannot be empty")));
    }
    let (store, actor, now) = (ctx.store().await?, ctx.actor()?, jiff::Timestamp::now());
    let ledger = ctx.db.identity();
    let stored = daicho_engine::edit_as_person(&store, &ledger, args.id, edit, actor, now).await?;
    ctx.emit(&TaskJson::from(&stored), daicho_engine::table::task_detail(&stored, ctx.ja()))?;
    Ok(ExitCode::SUCCESS)
}

//! `daicho run` and `daicho run-heavy`: run one task now.

use std::process::ExitCode;

use daicho_core::TaskId;
use daicho_core::lang::Lang;
use daicho_engine::{RunOne, RunResult};

use super::Context;
use crate::wire::{HeldJson, RunJson};

/// Run one task now. The same rules as a sweep apply: an external task runs only once a person
/// approved it, a heavy one only through `run-heavy`, nothing while paused. Exit 0 when the run
/// succeeded, 1 when it failed or could not run (the reason is printed).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The task id, e.g. T-0042.
    pub id: TaskId,
}

/// Runs `daicho run` (or `run-heavy` with `heavy`).
pub async fn run(args: Args, ctx: &Context, heavy: bool) -> anyhow::Result<ExitCode> {
    // A person's command (S13): it runs a task without its ▶ run or `ai` tag, a heavy one too.
    ctx.actor()?;
    let engine = ctx.running_engine(ctx.load_config()?).await?;
    let ok = match engine.run_task(args.id, heavy).await? {
        RunOne::Ran(report) => {
            ctx.emit(&RunJson::from(&report), report.text(ctx.lang))?;
            report.result == RunResult::Success
        }
        RunOne::Held(held) => {
            let text = match ctx.lang {
                Lang::En => format!("{} did not run: {}", held.id, held.hold),
                Lang::Ja => format!("{} は実行しませんでした: {}", held.id, held.hold.text(ctx.lang)),
            };
            ctx.emit(&HeldJson::from(&held), text)?;
            false
        }
    };
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

//! `daicho show`: one task with every field.

use std::process::ExitCode;

use daicho_core::TaskId;
use daicho_store::{Store, StoreError};

use super::Context;
use crate::wire::TaskJson;

/// Show one task with every field, hidden ones included.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The task id, e.g. T-0001.
    pub id: TaskId,
}

/// Runs `daicho show`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let task = ctx.reader().await?.get(args.id).await?.ok_or(StoreError::NotFound(args.id))?;
    ctx.emit(&TaskJson::from(&task), daicho_engine::table::task_detail(&task, ctx.ja()))?;
    Ok(ExitCode::SUCCESS)
}

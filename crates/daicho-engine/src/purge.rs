//! `purge-source` and `restore` (F2): the store decides which rows go and which stay
//! (`daicho_core::purge`); here a source that names no row is refused, and the outcome is a
//! report that reads to a person and as JSON.

use daicho_core::{Actor, TaskId};
use daicho_store::Store;
use jiff::Timestamp;
use serde::Serialize;

use crate::Error;

/// A row kept (or not restored), with the reason.
#[derive(Clone, Debug, Serialize)]
pub struct Kept {
    /// The row.
    pub id: TaskId,
    /// Why it stays.
    pub reason: String,
}

/// What `purge-source` did, or would do without `apply`.
#[derive(Clone, Debug, Serialize)]
pub struct SourcePurge {
    /// The source.
    pub source: String,
    /// Whether the rows were deleted (else a dry run: nothing written).
    pub applied: bool,
    /// The rows purged (or that would be).
    pub purged: Vec<TaskId>,
    /// The rows kept, each with the reason.
    pub kept: Vec<Kept>,
}

/// What `restore` brought back.
#[derive(Clone, Debug, Serialize)]
pub struct SourceRestore {
    /// The source.
    pub source: String,
    /// The rows brought back.
    pub restored: Vec<TaskId>,
    /// The purged rows not brought back, each with the reason.
    pub skipped: Vec<Kept>,
}

fn kept(list: Vec<(TaskId, String)>) -> Vec<Kept> {
    list.into_iter().map(|(id, reason)| Kept { id, reason }).collect()
}

/// Purges the untouched rows of `source` (a dry run unless `apply`), in one transaction.
///
/// # Errors
/// [`Error::Invalid`] when no row of the ledger has the source; a store error.
pub async fn purge_source(
    store: &impl Store,
    source: &str,
    apply: bool,
    actor: Actor,
    now: Timestamp,
) -> Result<SourcePurge, Error> {
    let report = store.purge_source(source, apply, actor, now).await?;
    if report.purged.is_empty() && report.kept.is_empty() {
        return Err(Error::Invalid(format!("no row of the ledger has the source '{source}'")));
    }
    let purged = report.purged.iter().map(|t| t.id).collect();
    Ok(SourcePurge { source: source.to_owned(), applied: apply, purged, kept: kept(report.kept) })
}

/// Brings back the rows [`purge_source`] removed from `source`, in one transaction.
///
/// # Errors
/// [`Error::Invalid`] when nothing of the source is purged; a store error.
pub async fn restore_source(
    store: &impl Store,
    source: &str,
    actor: Actor,
    now: Timestamp,
) -> Result<SourceRestore, Error> {
    let report = store.restore_source(source, actor, now).await?;
    if report.restored.is_empty() && report.skipped.is_empty() {
        return Err(Error::Invalid(format!(
            "nothing of the source '{source}' is purged: nothing to restore"
        )));
    }
    Ok(SourceRestore { source: source.to_owned(), restored: report.restored, skipped: kept(report.skipped) })
}

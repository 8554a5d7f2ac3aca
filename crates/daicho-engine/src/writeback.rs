//! Writing the ledger back into a Markdown source (X6): the person who keeps working in
//! `tasks.md` sees what ran. Opt-in per source (`write_back = true` with a `done_path`).
//!
//! One write-back is: read the file, pull it (the person's lines come in first), decide the new
//! text in the core ([`daicho_core::format::markdown::write_back`]), and replace the file only if
//! it is still byte for byte what was pulled; when a person changed it meanwhile, pull again and
//! try once more, then report a conflict and leave it. Done lines are appended to the done file
//! first (a line already there is not added twice), then the file is replaced through a
//! temporary file and a rename in its directory, its mode kept. One write per file per call,
//! however many rows changed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use daicho_core::format::markdown::RowState;
use daicho_core::format::{Format, ItemDefaults};
use daicho_store::{ListFilter, Store};
use serde::Serialize;

use crate::clock::Clock;
use crate::sync::SourceReport;
use crate::{Config, Error, SourceConfig, SourceKind};

/// What writing one source back did.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct WriteBackReport {
    /// The Markdown file.
    pub file: String,
    /// Task lines changed in place (checkbox or 状態).
    pub rewritten: usize,
    /// Lines of done rows moved to the done file.
    pub moved: usize,
    /// Whether the files were written (nothing to change writes nothing).
    pub written: bool,
    /// The file kept changing under daicho (a person editing it): nothing was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
}

/// The Markdown file and done file of a source that writes back.
pub fn files(config: &Config, source: &SourceConfig) -> Option<(PathBuf, PathBuf)> {
    match &source.kind {
        SourceKind::File { format: Format::Markdown, path, done: Some(done) } if source.write_back => {
            Some((config.resolve(path), config.resolve(done)))
        }
        _ => None,
    }
}

/// Pulls `source` and writes the ledger back into its file (see the module's docs). `between`
/// runs after each pull, before the file is checked again (tests edit the file there).
///
/// # Errors
///
/// A store error, or [`Error::Write`] when a file cannot be read or written.
pub async fn pull_and_write_back<S: Store>(
    store: &S,
    config: &Config,
    clock: &dyn Clock,
    source: &SourceConfig,
    between: &mut (dyn FnMut() + Send),
) -> Result<(SourceReport, Option<WriteBackReport>), Error> {
    let Some((path, done_path)) = files(config, source) else {
        return Ok((crate::sync::pull_one(store, config, clock, source).await, None));
    };
    let mut report = WriteBackReport { file: path.display().to_string(), ..WriteBackReport::default() };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let before = read(&path).await?;
        let pulled = crate::sync::pull_one(store, config, clock, source).await;
        if pulled.error.is_some() {
            return Ok((pulled, None));
        }
        between();
        let Ok(text) = std::str::from_utf8(before.as_deref().unwrap_or_default()) else {
            return Ok((pulled, None));
        };
        let filter = ListFilter { source: Some(source.name.clone()), ..ListFilter::default() };
        let rows: HashMap<String, RowState> = store
            .list(filter)
            .await?
            .into_iter()
            .map(|t| {
                let link = (source.result_link && is_link(&t.result)).then(|| t.result.trim().to_owned());
                (t.key, RowState { status: t.status, link })
            })
            .collect();
        let defaults = ItemDefaults { source: source.name.clone(), project: source.project.clone() };
        let back = daicho_core::format::markdown::write_back(text, &defaults, &|key| rows.get(key).cloned());
        (report.rewritten, report.moved) = (back.rewritten, back.done.len());
        if back.is_noop() {
            return Ok((pulled, Some(report)));
        }
        // Done lines first: should the file change now, they are in both files for a moment
        // and the next write-back does not add them twice.
        let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
        append_lines(&done_path, &back.done, eol).await?;
        if read(&path).await? != before {
            if attempt == 1 {
                continue;
            }
            report.conflict = Some(format!(
                "{} changed while daicho was writing it back; not written (the next sync tries again)",
                path.display()
            ));
            tracing::warn!(source = %source.name, "{}", report.conflict.as_deref().unwrap_or_default());
            return Ok((pulled, Some(report)));
        }
        let (target, bytes) = (path.clone(), back.text.into_bytes());
        tokio::task::spawn_blocking(move || crate::view::write_atomically(&target, &bytes))
            .await
            .map_err(|e| Error::Invalid(format!("writing {} failed: {e}", path.display())))??;
        report.written = true;
        return Ok((pulled, Some(report)));
    }
}

/// Whether a result is one link (`https://…` or `http://…`, no blanks): what `result_link`
/// writes into the line.
fn is_link(result: &str) -> bool {
    let result = result.trim();
    (result.starts_with("https://") || result.starts_with("http://")) && !result.contains(char::is_whitespace)
}

/// The file's bytes, `None` when it does not exist.
async fn read(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    let owned = path.to_owned();
    let read = tokio::task::spawn_blocking(move || std::fs::read(owned))
        .await
        .map_err(|e| Error::Invalid(format!("reading {} failed: {e}", path.display())))?;
    match read {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(cause) => Err(Error::Write { path: path.display().to_string(), cause }),
    }
}

/// Appends `lines` to the done file (created when missing), leaving out those already in it.
async fn append_lines(path: &Path, lines: &[String], eol: &str) -> Result<(), Error> {
    let existing = read(path).await?.unwrap_or_default();
    let text = String::from_utf8_lossy(&existing).into_owned();
    let present: std::collections::HashSet<&str> = text.lines().map(|l| l.trim_end_matches('\r')).collect();
    let new: Vec<&String> = lines.iter().filter(|l| !present.contains(l.as_str())).collect();
    if new.is_empty() {
        return Ok(());
    }
    let mut out = existing;
    if !out.is_empty() && !out.ends_with(b"\n") {
        out.extend_from_slice(eol.as_bytes());
    }
    for line in new {
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(eol.as_bytes());
    }
    let target = path.to_owned();
    tokio::task::spawn_blocking(move || crate::view::write_atomically(&target, &out))
        .await
        .map_err(|e| Error::Invalid(format!("writing {} failed: {e}", path.display())))?
}

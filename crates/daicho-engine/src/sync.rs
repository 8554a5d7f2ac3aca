//! Pulling the configured sources into the ledger (X1) and the sync role (R1, R3, R4): each
//! source in its own transaction; a failure is reported and the next source goes on.

use std::time::{Duration, Instant};

use daicho_core::Actor;
use daicho_store::{Batch, IgnoredField, SkippedItem, Store, UnknownDeps};
use serde::Serialize;

use crate::clock::Clock;
use crate::{Config, Error, SourceConfig};

/// A skipped item.
#[derive(Debug, Serialize)]
pub struct SkipReport {
    /// Its file, when it came from one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its line in its file.
    pub line: Option<usize>,
    /// Its title.
    pub title: String,
    /// The row it matched.
    pub id: Option<String>,
    /// Why it changed nothing.
    pub reason: String,
}

impl From<&SkippedItem> for SkipReport {
    fn from(s: &SkippedItem) -> SkipReport {
        SkipReport {
            file: s.file.as_deref().map(str::to_owned),
            line: s.line,
            title: s.title.clone(),
            id: s.id.map(|i| i.to_string()),
            reason: s.reason.to_string(),
        }
    }
}

/// A field only a person writes that a pulled source's item carried, not written (S13).
#[derive(Debug, Serialize)]
pub struct IgnoredReport {
    /// The item's line in its file.
    pub line: Option<usize>,
    /// The item's title.
    pub title: String,
    /// The field (`run`, `correction`, `result`, `run_at`, `failures`, `by_person`).
    pub field: &'static str,
}

impl From<&IgnoredField> for IgnoredReport {
    fn from(i: &IgnoredField) -> IgnoredReport {
        IgnoredReport { line: i.line, title: i.title.clone(), field: i.field }
    }
}

/// One source's outcome.
#[derive(Debug, Serialize)]
pub struct SourceReport {
    /// The source's name.
    pub source: String,
    /// Items the source held (before aggregation).
    pub read: usize,
    /// Rows added.
    pub added: usize,
    /// Rows updated.
    pub updated: usize,
    /// Items that changed nothing.
    pub skipped: usize,
    /// Items left for a later sync by a limit (none yet: a source is pulled whole).
    pub truncated: usize,
    /// Why each skipped item changed nothing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skips: Vec<SkipReport>,
    /// Fields only a person writes that the source's items carried: not written (S13).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<IgnoredReport>,
    /// Why the source failed (its rows are unchanged).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A source that writes back (X6): what writing its file did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_back: Option<crate::writeback::WriteBackReport>,
}

impl SourceReport {
    /// An empty report for `source`.
    pub fn new(source: &str) -> SourceReport {
        SourceReport {
            source: source.to_owned(),
            read: 0,
            added: 0,
            updated: 0,
            skipped: 0,
            truncated: 0,
            skips: Vec::new(),
            ignored: Vec::new(),
            error: None,
            write_back: None,
        }
    }
}

/// What `daicho sync` did (fields in the order the JSON has always had).
#[derive(Debug, Serialize)]
pub struct SyncReport {
    /// Sources that failed.
    pub failed: usize,
    /// Every source pulled, in order.
    pub sources: Vec<SourceReport>,
}

/// What one sync sweep did (fields in the order the JSON has always had).
#[derive(Debug, Serialize)]
pub struct SyncSweepReport {
    /// Sources that failed.
    pub failed: usize,
    /// Always `sync`.
    pub role: &'static str,
    /// The sources pulled this time, in order.
    pub sources: Vec<SourceReport>,
    /// Sources left for the next sweep (the `max` or the budget).
    pub truncated: usize,
}

/// Progress of a pull, for a caller that shows it.
#[derive(Clone, Copy, Debug)]
pub enum Progress<'a> {
    /// The sources about to be pulled.
    Total(usize),
    /// This source is under way.
    Start(&'a str),
    /// The source under way is done.
    Step,
}

/// Pulls `sources` in order, each in its own transaction; a failure is recorded and the next
/// source goes on. With a `deadline`, no source is started after it (R4): the ones not reached
/// are left out of the result, for the caller to count.
pub async fn pull_all<S: Store>(
    store: &S,
    config: &Config,
    clock: &dyn Clock,
    sources: &[&SourceConfig],
    deadline: Option<Instant>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Vec<SourceReport> {
    let mut results = Vec::new();
    progress(Progress::Total(sources.len()));
    for source in sources {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        progress(Progress::Start(&source.name));
        results.push(pull_writing_back(store, config, clock, source).await);
        progress(Progress::Step);
    }
    results
}

/// Pulls one source; one that writes back (X6) has the ledger written into its file after.
async fn pull_writing_back<S: Store>(
    store: &S,
    config: &Config,
    clock: &dyn Clock,
    source: &SourceConfig,
) -> SourceReport {
    match crate::writeback::pull_and_write_back(store, config, clock, source, &mut || {}).await {
        Ok((mut report, written)) => {
            report.write_back = written;
            report
        }
        Err(e) => {
            let text = crate::error::chain(&e);
            tracing::warn!(source = %source.name, "write-back failed: {text}");
            let mut report = SourceReport::new(&source.name);
            report.error = Some(format!("write-back: {text}"));
            report
        }
    }
}

pub(crate) async fn pull_one<S: Store>(
    store: &S,
    config: &Config,
    clock: &dyn Clock,
    source: &SourceConfig,
) -> SourceReport {
    let mut result = SourceReport::new(&source.name);
    let outcome = async {
        let pulled = crate::sources::pull(config, source).await?;
        result.read = pulled.read;
        let batch = Batch {
            items: pulled.items.into(),
            actor: Actor::Sync(source.name.clone()),
            now: clock.now(),
            file: pulled.origin,
            unknown_deps: UnknownDeps::Refuse,
        };
        Ok::<_, Error>(store.upsert(batch).await?)
    };
    match outcome.await {
        Ok(report) => {
            result.added = report.added.len();
            result.updated = report.updated.len();
            result.skipped = report.skipped.len();
            result.skips = report.skipped.iter().map(SkipReport::from).collect();
            for ignored in &report.ignored {
                tracing::warn!(
                    source = %source.name,
                    line = ?ignored.line,
                    title = %ignored.title,
                    "field '{}' ignored: only a person writes it (S13)",
                    ignored.field
                );
            }
            result.ignored = report.ignored.iter().map(IgnoredReport::from).collect();
        }
        Err(e) => {
            let text = crate::error::chain(&e);
            tracing::warn!(source = %source.name, "sync failed: {text}");
            result.error = Some(text);
        }
    }
    result
}

/// `daicho sync`: the named sources (all of them when `names` is empty), each in its own
/// transaction. A name the configuration does not know refuses the whole call.
pub async fn sync<S: Store>(
    store: &S,
    config: &Config,
    clock: &dyn Clock,
    names: &[String],
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<SyncReport, Error> {
    check_names(config, names)?;
    let picked: Vec<&SourceConfig> =
        config.sources.iter().filter(|s| names.is_empty() || names.contains(&s.name)).collect();
    let sources = pull_all(store, config, clock, &picked, None, progress).await;
    let failed = sources.iter().filter(|r| r.error.is_some()).count();
    Ok(SyncReport { failed, sources })
}

/// Refuses a source name the configuration does not know, naming the known ones.
///
/// # Errors
///
/// [`Error::Invalid`] for the first unknown name.
pub fn check_names(config: &Config, names: &[String]) -> Result<(), Error> {
    for name in names {
        if config.source(name).is_none() {
            let known: Vec<&str> = config.sources.iter().map(|s| s.name.as_str()).collect();
            return Err(Error::Invalid(format!(
                "no source named '{name}' in the configuration (known: {})",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// One sync sweep (R3, R4): sources round-robin from the persisted cursor, at most `max`, none
/// started after `budget`; what is left is reported as truncated.
pub async fn sync_sweep<S: Store>(
    store: &S,
    config: &Config,
    clock: &dyn Clock,
    max: Option<usize>,
    budget: Duration,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<SyncSweepReport, Error> {
    let names: Vec<String> = config.sources.iter().map(|s| s.name.clone()).collect();
    let cursor = store.cursor("sync").await?;
    let order = daicho_core::schedule::round_robin(&names, cursor.as_deref(), max.unwrap_or(names.len()));
    let picked: Vec<&SourceConfig> = order.iter().map(|&i| &config.sources[i]).collect();
    let deadline = Instant::now() + budget;
    let sources = pull_all(store, config, clock, &picked, Some(deadline), progress).await;
    if let Some(last) = sources.last() {
        store.set_cursor("sync", &last.source).await?;
    }
    let truncated = names.len() - sources.len();
    let failed = sources.iter().filter(|r| r.error.is_some()).count();
    Ok(SyncSweepReport { failed, role: "sync", sources, truncated })
}

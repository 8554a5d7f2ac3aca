//! `daicho sync`: pull every configured source into the ledger (X1).

use std::process::ExitCode;

use anyhow::bail;
use daicho_core::Actor;
use daicho_engine::{Config, SourceConfig};
use daicho_store::{Batch, Store, UnknownDeps};
use serde::Serialize;

use super::Context;
use crate::ledger::AnyStore;
use crate::output;
use crate::wire::{IgnoredJson, SkipJson};

/// Pull the sources of daicho.toml into the ledger: each source in its own transaction, through
/// the merge rules (rows never deleted, closed rows and people's cells never touched). A source
/// that fails (missing file, malformed line, failing command) is reported with its file, line and
/// reason, leaves its rows as they were, and does not stop the others; the exit code is then 1.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this source (repeatable); all of them by default.
    #[arg(long = "source", value_name = "NAME")]
    pub sources: Vec<String>,
}

/// One source's outcome.
#[derive(Debug, Serialize)]
pub struct SourceJson {
    pub source: String,
    /// Items the source held (before aggregation).
    pub read: usize,
    pub added: usize,
    pub updated: usize,
    pub skipped: usize,
    /// Items left for a later sync by a limit (none yet: a source is pulled whole).
    pub truncated: usize,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skips: Vec<SkipJson>,
    /// Fields only a person writes that the source's items carried: not written (S13).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<IgnoredJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Pulls `sources` in order, each in its own transaction; a failure is recorded and the next
/// source goes on. With a `deadline`, no source is started after it (R4): the ones not reached
/// are left out of the result, for the caller to count.
pub async fn pull_all(
    store: &AnyStore,
    config: &Config,
    sources: &[&SourceConfig],
    deadline: Option<std::time::Instant>,
) -> Vec<SourceJson> {
    let mut results = Vec::new();
    let mut progress = output::Progress::new("sources", sources.len());
    for source in sources {
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            break;
        }
        progress.start(&source.name);
        let mut result = SourceJson {
            source: source.name.clone(),
            read: 0,
            added: 0,
            updated: 0,
            skipped: 0,
            truncated: 0,
            skips: Vec::new(),
            ignored: Vec::new(),
            error: None,
        };
        let outcome = async {
            let pulled = daicho_engine::sources::pull(config, source).await?;
            result.read = pulled.read;
            let batch = Batch {
                items: pulled.items,
                actor: Actor::Sync(source.name.clone()),
                now: jiff::Timestamp::now(),
                file: pulled.origin,
                unknown_deps: UnknownDeps::Refuse,
            };
            anyhow::Ok(store.upsert(batch).await?)
        };
        match outcome.await {
            Ok(report) => {
                result.added = report.added.len();
                result.updated = report.updated.len();
                result.skipped = report.skipped.len();
                result.skips = report.skipped.iter().map(SkipJson::from).collect();
                for ignored in &report.ignored {
                    tracing::warn!(
                        source = %source.name,
                        line = ?ignored.line,
                        title = %ignored.title,
                        "field '{}' ignored: only a person writes it (S13)",
                        ignored.field
                    );
                }
                result.ignored = report.ignored.iter().map(IgnoredJson::from).collect();
            }
            Err(e) => {
                tracing::warn!(source = %source.name, "sync failed: {e:#}");
                result.error = Some(format!("{e:#}"));
            }
        }
        results.push(result);
        progress.step();
    }
    progress.finish();
    results
}

/// Runs `daicho sync`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let config = ctx.load_config()?;
    for name in &args.sources {
        if config.source(name).is_none() {
            let known: Vec<&str> = config.sources.iter().map(|s| s.name.as_str()).collect();
            bail!("no source named '{name}' in the configuration (known: {})", known.join(", "));
        }
    }
    let store = crate::ledger::open(&ctx.db).await?;
    let picked: Vec<&SourceConfig> =
        config.sources.iter().filter(|s| args.sources.is_empty() || args.sources.contains(&s.name)).collect();
    let results = pull_all(&store, &config, &picked, None).await;
    let failed = results.iter().filter(|r| r.error.is_some()).count();
    if ctx.json {
        output::print_json(&serde_json::json!({ "sources": results, "failed": failed }))?;
    } else if results.is_empty() {
        output::print("no sources configured (add [[source]] tables to daicho.toml)")?;
    } else {
        let lines: Vec<String> = results
            .iter()
            .map(|r| match &r.error {
                Some(e) => format!("{}: FAILED: {e}", r.source),
                None => {
                    let mut line = format!(
                        "{}: {} read, {} added, {} updated, {} skipped, {} truncated",
                        r.source, r.read, r.added, r.updated, r.skipped, r.truncated
                    );
                    if !r.ignored.is_empty() {
                        let mut fields: Vec<&str> = r.ignored.iter().map(|i| i.field).collect();
                        fields.sort_unstable();
                        fields.dedup();
                        line.push_str(&format!(
                            ", {} field(s) ignored ({}: only a person writes them)",
                            r.ignored.len(),
                            fields.join(", ")
                        ));
                    }
                    line
                }
            })
            .collect();
        output::print(&lines.join("\n"))?;
    }
    Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

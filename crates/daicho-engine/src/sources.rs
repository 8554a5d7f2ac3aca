//! Pulling a configured source (X1): read its file (or run its command), parse it, and collapse
//! it into one row when it is aggregated (M10). Nothing here writes to the ledger: `daicho sync`
//! upserts what this returns, one transaction per source.

use std::path::Path;
use std::time::Duration;

use daicho_core::aggregate::aggregate;
use daicho_core::format::{Format, ItemDefaults};
use daicho_core::mapping::Mapping;
use daicho_core::{InputError, Item};

use crate::config::{Config, SourceConfig, SourceKind};
use crate::input::{self, MAX_INPUT_BYTES};
use crate::runner;

/// What a source gave.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// The items to upsert (one, when aggregated).
    pub items: Vec<Item>,
    /// The files (or command) they came from, for messages.
    pub origin: String,
    /// How many items the source held (before aggregation).
    pub read: usize,
}

/// Reads `source` as configured in `config`.
///
/// # Errors
///
/// An [`InputError`] naming the file (or `<command NAME>`), the line when known and the reason:
/// a missing or unreadable file, invalid UTF-8, a malformed line, a command that fails or times
/// out.
pub async fn pull(config: &Config, source: &SourceConfig) -> Result<Pulled, InputError> {
    let defaults = ItemDefaults { source: source.name.clone(), project: source.project.clone() };
    let (mut items, origin) = match &source.kind {
        SourceKind::File { format, path, done } => {
            let path = config.resolve(path);
            let mut items = read_file(&path, *format, &defaults, source.mapping.as_ref()).await?;
            let mut origin = path.display().to_string();
            // A source that writes back makes its done file with the first done line.
            if let Some(done) = done.as_ref().map(|d| config.resolve(d))
                && (!source.write_back || done.exists())
            {
                items.extend(read_file(&done, *format, &defaults, None).await?);
                origin = format!("{origin}, {}", done.display());
            }
            (items, origin)
        }
        SourceKind::Sheet { path, sheet, header_row } => {
            let path = config.resolve(path);
            let (sheet, header_row, mapping) = (sheet.clone(), *header_row, source.mapping.clone());
            let origin = path.display().to_string();
            let read = move || {
                let (at, table) = crate::sheet::read(&path, sheet.as_deref(), header_row)?;
                match mapping {
                    Some(mapping) => mapping.table_items(&table, &at, &defaults),
                    None => daicho_core::format::csv::items(table, &at, &defaults),
                }
            };
            let items = tokio::task::spawn_blocking(read)
                .await
                .map_err(|e| InputError::new(&origin, None, format!("reading failed: {e}")))??;
            (items, origin)
        }
        SourceKind::Command { argv, timeout } => {
            let name = format!("<command {}>", source.name);
            let timeout = Duration::try_from(*timeout).unwrap_or(Duration::from_secs(300));
            let bytes = run(argv, &config.dir, timeout, &name).await?;
            (input::parse(&name, &bytes, Format::Json, &defaults)?, argv.join(" "))
        }
    };
    let read = items.len();
    if let Some(title) = &source.aggregate {
        items = vec![aggregate(&items, &source.name, &source.project, title, &origin)];
    }
    Ok(Pulled { items, origin, read })
}

async fn read_file(
    path: &Path,
    format: Format,
    defaults: &ItemDefaults,
    mapping: Option<&Mapping>,
) -> Result<Vec<Item>, InputError> {
    let name = path.display().to_string();
    let (path, defaults, mapping) = (path.to_owned(), defaults.clone(), mapping.cloned());
    tokio::task::spawn_blocking(move || match mapping {
        Some(mapping) => input::load_mapped(&path, format, &defaults, &mapping),
        None => input::load(&path, format, &defaults),
    })
    .await
    .map_err(|e| InputError::new(&name, None, format!("reading failed: {e}")))?
}

/// Runs a source's command in `dir` through the one command runner (its whole process group,
/// escaped processes included under the supervisor, is killed at the timeout); its standard
/// output, once it exits successfully.
async fn run(argv: &[String], dir: &Path, timeout: Duration, name: &str) -> Result<Vec<u8>, InputError> {
    let fail = |reason: String| InputError::new(name, None, reason);
    let spec = runner::Spec {
        alive_within: None,
        record_to: None,
        argv,
        dir: Some(dir),
        env: Vec::new(),
        input: Vec::new(),
        timeout,
        stdout_cap: MAX_INPUT_BYTES as usize,
        stderr_cap: 64 << 10,
    };
    let ended = runner::run(spec).await.map_err(|e| match e {
        runner::RunError::TimedOut(_) => {
            fail(format!("timed out after {}s and was killed", timeout.as_secs()))
        }
        e => fail(e.to_string()),
    })?;
    if ended.stdout.total as u64 > MAX_INPUT_BYTES {
        return Err(fail(format!("printed more than {MAX_INPUT_BYTES} bytes")));
    }
    if !ended.status.success() {
        return Err(fail(format!("exited with {}", ended.failure(1))));
    }
    Ok(ended.stdout.kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// X1, S11: a source command that times out goes with every process it started: a
    /// grandchild holding its pipes does not survive (it did when only the child was killed).
    #[tokio::test]
    async fn x1_a_source_command_that_times_out_leaves_no_process_behind() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let text = format!(
            "[[source]]\nname = \"scan\"\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"sleep 60 & echo $! > {}; wait\"]\ntimeout = \"1s\"\n",
            pid_file.display()
        );
        let mut config = Config::parse(&text, "daicho.toml").unwrap();
        config.dir = dir.path().to_owned();
        let source = config.source("scan").unwrap().clone();
        let pulled = tokio::time::timeout(std::time::Duration::from_secs(30), pull(&config, &source)).await;
        let error = pulled.expect("the pull outlived its timeout by 30 s").unwrap_err();
        assert_eq!(error.to_string(), "<command scan>: timed out after 1s and was killed");
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        let gone = (0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(20));
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_or(true, |stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
        });
        assert!(gone, "the grandchild {pid} outlived the source's timeout");
    }
}

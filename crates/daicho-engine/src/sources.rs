//! Pulling a configured source (X1): read its file (or run its command), parse it, and collapse
//! it into one row when it is aggregated (M10). Nothing here writes to the ledger: `daicho sync`
//! upserts what this returns, one transaction per source.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use daicho_core::aggregate::aggregate;
use daicho_core::error::decode_utf8;
use daicho_core::format::{self, Format, ItemDefaults};
use daicho_core::{InputError, Item};
use tokio::io::AsyncReadExt as _;

use crate::config::{Config, SourceConfig, SourceKind};

/// The largest input a source may give (256 MiB).
const MAX_SOURCE_BYTES: u64 = 256 << 20;

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
            let mut items = read_file(&path, *format, &defaults).await?;
            let mut origin = path.display().to_string();
            if let Some(done) = done {
                let done = config.resolve(done);
                items.extend(read_file(&done, *format, &defaults).await?);
                origin = format!("{origin}, {}", done.display());
            }
            (items, origin)
        }
        SourceKind::Command { argv, timeout } => {
            let name = format!("<command {}>", source.name);
            let timeout = Duration::try_from(*timeout).unwrap_or(Duration::from_secs(300));
            let bytes = run(argv, &config.dir, timeout, &name).await?;
            let text = decode_utf8(&bytes, &name)?;
            (format::parse(Format::Json, text, &name, &defaults)?, argv.join(" "))
        }
    };
    let read = items.len();
    if let Some(title) = &source.aggregate {
        items = vec![aggregate(&items, &source.name, &source.project, title, &origin)];
    }
    Ok(Pulled { items, origin, read })
}

async fn read_file(path: &Path, format: Format, defaults: &ItemDefaults) -> Result<Vec<Item>, InputError> {
    let name = path.display().to_string();
    let (path, defaults, file) = (path.to_owned(), defaults.clone(), name.clone());
    let read = move || {
        let unreadable = |e: std::io::Error| InputError::new(&file, None, format!("cannot read: {e}"));
        let size = std::fs::metadata(&path).map_err(unreadable)?.len();
        if size > MAX_SOURCE_BYTES {
            return Err(InputError::new(
                &file,
                None,
                format!("{size} bytes, larger than the limit of {MAX_SOURCE_BYTES}"),
            ));
        }
        let bytes = std::fs::read(&path).map_err(unreadable)?;
        let text = decode_utf8(&bytes, &file)?;
        format::parse(format, text, &file, &defaults)
    };
    tokio::task::spawn_blocking(read)
        .await
        .map_err(|e| InputError::new(&name, None, format!("reading failed: {e}")))?
}

/// Runs a source's command in `dir`; its standard output, once it exits successfully.
async fn run(argv: &[String], dir: &Path, timeout: Duration, name: &str) -> Result<Vec<u8>, InputError> {
    let fail = |reason: String| InputError::new(name, None, reason);
    let mut command = tokio::process::Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if !dir.as_os_str().is_empty() {
        command.current_dir(dir);
    }
    let mut child = command.spawn().map_err(|e| fail(format!("cannot start {}: {e}", argv[0])))?;
    let mut stdout = child.stdout.take().ok_or_else(|| fail("no standard output".into()))?;
    let mut stderr = child.stderr.take().ok_or_else(|| fail("no standard error".into()))?;
    let work = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut out_reader = (&mut stdout).take(MAX_SOURCE_BYTES + 1);
        let mut err_reader = (&mut stderr).take(64 << 10);
        let (read_out, read_err) =
            tokio::join!(out_reader.read_to_end(&mut out), err_reader.read_to_end(&mut err));
        read_out.map_err(|e| fail(format!("cannot read its output: {e}")))?;
        let _ = read_err;
        let status = child.wait().await.map_err(|e| fail(format!("cannot wait for it: {e}")))?;
        Ok::<_, InputError>((status, out, err))
    };
    let (status, out, err) = tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| fail(format!("timed out after {}s and was killed", timeout.as_secs())))??;
    if out.len() as u64 > MAX_SOURCE_BYTES {
        return Err(fail(format!("printed more than {MAX_SOURCE_BYTES} bytes")));
    }
    if !status.success() {
        let err = String::from_utf8_lossy(&err);
        let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        return Err(fail(format!(
            "exited with {status}{}",
            if last.is_empty() { String::new() } else { format!(": {last}") }
        )));
    }
    Ok(out)
}

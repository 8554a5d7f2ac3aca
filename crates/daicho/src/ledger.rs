//! Finding and opening the ledger.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use daicho_sqlite::{SqliteOptions, SqliteStore};

/// The default ledger, relative to the current directory.
pub const DEFAULT_DB: &str = ".daicho/ledger.db";

/// The ledger path: `--db`, else `DAICHO_DB` (both via clap), else `.daicho/ledger.db`.
pub fn path(db: Option<&Path>) -> PathBuf {
    db.map(Path::to_owned).unwrap_or_else(|| PathBuf::from(DEFAULT_DB))
}

fn refuse_urls(path: &Path) -> anyhow::Result<()> {
    let text = path.to_string_lossy();
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        bail!("this daicho has no PostgreSQL backend yet; use a SQLite file path for --db");
    }
    Ok(())
}

/// Opens an existing ledger; a missing file is an error that says how to create it.
pub async fn open(path: &Path) -> anyhow::Result<SqliteStore> {
    refuse_urls(path)?;
    if !path.exists() {
        bail!("no ledger at {}; run `daicho init` first (or pass --db PATH)", path.display());
    }
    SqliteStore::open(path, SqliteOptions::default())
        .await
        .with_context(|| format!("cannot open the ledger {}", path.display()))
}

/// Creates the ledger (and its directory) if needed; returns whether it was created.
pub async fn create(path: &Path) -> anyhow::Result<(SqliteStore, bool)> {
    refuse_urls(path)?;
    let existed = path.exists();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let store = SqliteStore::open(path, SqliteOptions::default())
        .await
        .with_context(|| format!("cannot create the ledger {}", path.display()))?;
    Ok((store, !existed))
}

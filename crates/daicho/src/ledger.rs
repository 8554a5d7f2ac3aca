//! Finding and opening the ledger: a SQLite file (the default) or a PostgreSQL URL.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use daicho_postgres::PgStore;
use daicho_sqlite::{SqliteOptions, SqliteStore};

/// The default ledger, relative to the current directory.
pub const DEFAULT_DB: &str = ".daicho/ledger.db";

/// The ledger path: `--db`, else `DAICHO_DB` (both via clap), else `.daicho/ledger.db`.
pub fn path(db: Option<&Path>) -> PathBuf {
    db.map(Path::to_owned).unwrap_or_else(|| PathBuf::from(DEFAULT_DB))
}

/// The PostgreSQL URL `--db` names, if it names one.
fn postgres_url(path: &Path) -> Option<String> {
    let text = path.to_string_lossy();
    (text.starts_with("postgres://") || text.starts_with("postgresql://")).then(|| text.into_owned())
}

/// This machine's spool of run ends for the ledger (S14): beside a SQLite file
/// (`ledger.db.spool/`); for PostgreSQL under `$XDG_STATE_HOME` (or `~/.local/state`)
/// `/daicho/spool/<host_port_database>`, one directory per database, so an end is only ever
/// recorded into the ledger it came from.
pub fn spool_dir(path: &Path) -> PathBuf {
    let Some(url) = postgres_url(path) else {
        let mut name = path.as_os_str().to_owned();
        name.push(".spool");
        return PathBuf::from(name);
    };
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from(".daicho"));
    // The part after the credentials and before any parameters names the database.
    let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let rest = rest.split('?').next().unwrap_or(rest);
    let name: String = rest.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    state.join("daicho/spool").join(name)
}

/// The ledger's identity on this machine: the SQLite file's absolute path, or the URL without
/// its password (S14: a run's processes are told apart by ledger, task and attempt).
pub fn identity(path: &Path) -> String {
    match postgres_url(path) {
        Some(url) => daicho_postgres::redact(&url),
        None => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned()).display().to_string(),
    }
}

/// How the ledger is named in messages: a path, or a URL without its password.
pub fn display(path: &Path) -> String {
    match postgres_url(path) {
        Some(url) => daicho_postgres::redact(&url),
        None => path.display().to_string(),
    }
}

/// Opens an existing ledger; a missing SQLite file is an error that says how to create it. A
/// PostgreSQL database is migrated if needed. `read_only` (the commands that only read) writes
/// nothing: a SQLite file in a read-only place, or a PostgreSQL ledger through a role that may
/// only read, can still be read (the schema version is checked, not migrated). `inline` (the
/// one-shot commands that run no executor) runs SQLite on the command's own thread.
pub async fn open(path: &Path, read_only: bool, inline: bool) -> anyhow::Result<AnyStore> {
    if let Some(url) = postgres_url(path) {
        let store = if read_only { PgStore::open_read_only(&url).await } else { PgStore::open(&url).await };
        let store = store.with_context(|| format!("cannot open the ledger {}", display(path)))?;
        return Ok(AnyStore::Postgres(store));
    }
    match std::fs::metadata(path) {
        Err(_) => bail!("no ledger at {}; run `daicho init` first (or pass --db PATH)", path.display()),
        // SQLite would take an empty file for an empty database and make it a ledger.
        Ok(m) if m.len() == 0 => {
            bail!("{} is an empty file, not a ledger; `daicho init` makes it one", path.display())
        }
        Ok(m) if m.is_dir() => bail!("{} is a directory, not a ledger (a SQLite file)", path.display()),
        Ok(_) => not_sqlite(path)?,
    }
    let store = SqliteStore::open(path, SqliteOptions { read_only, inline, ..SqliteOptions::default() })
        .await
        .with_context(|| format!("cannot open the ledger {}", path.display()))?;
    Ok(AnyStore::Sqlite(store))
}

/// Creates the ledger (and its directory) if needed; returns whether it was created.
pub async fn create(path: &Path) -> anyhow::Result<(AnyStore, bool)> {
    if let Some(url) = postgres_url(path) {
        let (store, applied) = PgStore::open_reporting(&url)
            .await
            .with_context(|| format!("cannot open the ledger {}", display(path)))?;
        // Created, not upgraded: every migration ran.
        return Ok((AnyStore::Postgres(store), applied == PgStore::schema_version()));
    }
    // An empty file is made a ledger; any other file must be a SQLite database already.
    let existed = std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
    if existed {
        not_sqlite(path)?;
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let store = SqliteStore::open(path, SqliteOptions::default())
        .await
        .with_context(|| format!("cannot create the ledger {}", path.display()))?;
    Ok((AnyStore::Sqlite(store), !existed))
}

/// Refuses a file that is not a SQLite database: SQLite would take a file shorter than its
/// header for an empty database and overwrite it with a ledger.
fn not_sqlite(path: &Path) -> anyhow::Result<()> {
    use std::io::Read as _;
    let mut header = [0u8; 16];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut header));
    match read {
        Ok(()) if &header == b"SQLite format 3\0" => Ok(()),
        Ok(()) => bail!("{} is not a ledger: not a SQLite database; nothing was written", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            bail!("{} is not a ledger: too short for a SQLite database; nothing was written", path.display())
        }
        // Unreadable for another reason (permissions): SQLite's own error says which.
        Err(_) => Ok(()),
    }
}

/// Either backend, behind the one store contract.
#[derive(Clone, Debug)]
pub enum AnyStore {
    /// A SQLite file.
    Sqlite(SqliteStore),
    /// A PostgreSQL database.
    Postgres(PgStore),
}

daicho_store::delegate_store!(AnyStore { Sqlite, Postgres });

//! Finding and opening a daicho ledger by its name — a SQLite file (the default,
//! `.daicho/ledger.db`) or a PostgreSQL URL (`postgres://…`) — behind the one store contract
//! ([`AnyStore`]), and the engines a command runs over it.
//!
//! The rules of opening live here, not in a face: a missing, empty or foreign file is never
//! made a ledger (X4, D3), a read-only look writes nothing, a ledger out of reach is waited for
//! by the long-running commands (S14), and each ledger has its own spool of run ends on this
//! machine.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use daicho_engine::{Config, Engine};
use daicho_postgres::PgStore;
use daicho_sqlite::{SqliteOptions, SqliteStore};
use daicho_store::StoreError;

/// The default ledger, relative to the current directory.
pub const DEFAULT_DB: &str = ".daicho/ledger.db";

/// Why a ledger could not be opened or created.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// No file at the path: `daicho init` makes one.
    #[error("no ledger at {0}; run `daicho init` first (or pass --db PATH)")]
    Missing(String),
    /// An empty file: SQLite would take it for an empty database and make it a ledger.
    #[error("{0} is an empty file, not a ledger; `daicho init` makes it one")]
    Empty(String),
    /// A directory where the file should be.
    #[error("{0} is a directory, not a ledger (a SQLite file)")]
    Directory(String),
    /// A file that is not a SQLite database (X4): nothing is written into it.
    #[error("{0} is not a ledger: not a SQLite database; nothing was written")]
    NotSqlite(String),
    /// A file shorter than a SQLite header (X4): nothing is written into it.
    #[error("{0} is not a ledger: too short for a SQLite database; nothing was written")]
    TooShort(String),
    /// The ledger's directory could not be made.
    #[error("cannot create {0}")]
    CreateDirectory(String, #[source] std::io::Error),
    /// The store refused to open (or to create) the ledger; the store's error says why, and
    /// whether trying again may help.
    #[error("cannot {verb} the ledger {name}")]
    Store {
        /// `open` or `create`.
        verb: &'static str,
        /// The ledger's name as shown ([`Ledger::display`]).
        name: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
}

impl LedgerError {
    /// Whether trying again later may help: the database is out of reach or busy for now.
    pub fn is_retryable(&self) -> bool {
        matches!(self, LedgerError::Store { source, .. } if source.is_retryable())
    }
}

/// How a command opens the ledger.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// Write nothing: a SQLite file in a read-only place, or a PostgreSQL ledger through a role
    /// that may only read, can still be read (the schema version is checked, not migrated).
    pub read_only: bool,
    /// Run SQLite on the caller's thread: the one-shot commands that run no executor, and a
    /// worker with one slot, whose loop awaits nothing else while it reads or writes.
    pub inline: bool,
}

/// A ledger named on the command line (`--db`, `DAICHO_DB`): a SQLite file or a PostgreSQL URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ledger {
    path: PathBuf,
}

impl Ledger {
    /// The ledger `db` names, else [`DEFAULT_DB`].
    pub fn new(db: Option<&Path>) -> Ledger {
        Ledger { path: db.map(Path::to_owned).unwrap_or_else(|| PathBuf::from(DEFAULT_DB)) }
    }

    /// The PostgreSQL URL the name is, if it is one.
    fn postgres_url(&self) -> Option<String> {
        let text = self.path.to_string_lossy();
        (text.starts_with("postgres://") || text.starts_with("postgresql://")).then(|| text.into_owned())
    }

    /// How the ledger is named in messages: a path, or a URL without its password.
    pub fn display(&self) -> String {
        match self.postgres_url() {
            Some(url) => daicho_postgres::redact(&url),
            None => self.path.display().to_string(),
        }
    }

    /// The ledger's identity on this machine: the SQLite file's absolute path, or the URL
    /// without its password (S14: a run's processes are told apart by ledger, task and attempt).
    pub fn identity(&self) -> String {
        match self.postgres_url() {
            Some(url) => daicho_postgres::redact(&url),
            None => {
                std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.clone()).display().to_string()
            }
        }
    }

    /// This machine's spool of run ends for the ledger (S14): beside a SQLite file
    /// (`ledger.db.spool/`); for PostgreSQL under `$XDG_STATE_HOME` (or `~/.local/state`)
    /// `/daicho/spool/<host_port_database>`, one directory per database, so an end is only ever
    /// recorded into the ledger it came from.
    pub fn spool_dir(&self) -> PathBuf {
        let Some(url) = self.postgres_url() else {
            let mut name = self.path.as_os_str().to_owned();
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

    /// Opens an existing ledger with `access`; a missing SQLite file is an error that says how to
    /// create it. A PostgreSQL database is migrated if needed, unless the access is read-only.
    pub async fn open(&self, access: Access) -> Result<AnyStore, LedgerError> {
        let Access { read_only, inline } = access;
        let failed = |source| LedgerError::Store { verb: "open", name: self.display(), source };
        if let Some(url) = self.postgres_url() {
            let store =
                if read_only { PgStore::open_read_only(&url).await } else { PgStore::open(&url).await };
            return Ok(AnyStore::Postgres(store.map_err(failed)?));
        }
        let name = || self.path.display().to_string();
        match std::fs::metadata(&self.path) {
            Err(_) => return Err(LedgerError::Missing(name())),
            Ok(m) if m.len() == 0 => return Err(LedgerError::Empty(name())),
            Ok(m) if m.is_dir() => return Err(LedgerError::Directory(name())),
            Ok(_) => self.refuse_foreign()?,
        }
        let options = SqliteOptions { read_only, inline, ..SqliteOptions::default() };
        Ok(AnyStore::Sqlite(SqliteStore::open(&self.path, options).await.map_err(failed)?))
    }

    /// Creates the ledger (and its directory) if needed; returns it and whether it was created.
    /// An empty file is made a ledger; any other file must be a SQLite database already.
    pub async fn create(&self) -> Result<(AnyStore, bool), LedgerError> {
        if let Some(url) = self.postgres_url() {
            let failed = |source| LedgerError::Store { verb: "open", name: self.display(), source };
            let (store, applied) = PgStore::open_reporting(&url).await.map_err(failed)?;
            // Created, not upgraded: every migration ran.
            return Ok((AnyStore::Postgres(store), applied == PgStore::schema_version()));
        }
        let existed = std::fs::metadata(&self.path).is_ok_and(|m| m.len() > 0);
        if existed {
            self.refuse_foreign()?;
        }
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| LedgerError::CreateDirectory(dir.display().to_string(), e))?;
        }
        let failed = |source| LedgerError::Store { verb: "create", name: self.display(), source };
        let store = SqliteStore::open(&self.path, SqliteOptions::default()).await.map_err(failed)?;
        Ok((AnyStore::Sqlite(store), !existed))
    }

    /// Refuses a file that is not a SQLite database: SQLite would take a file shorter than its
    /// header for an empty database and overwrite it with a ledger.
    fn refuse_foreign(&self) -> Result<(), LedgerError> {
        use std::io::Read as _;
        let mut header = [0u8; 16];
        let read = std::fs::File::open(&self.path).and_then(|mut f| f.read_exact(&mut header));
        let name = || self.path.display().to_string();
        match read {
            Ok(()) if &header == b"SQLite format 3\0" => Ok(()),
            Ok(()) => Err(LedgerError::NotSqlite(name())),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(LedgerError::TooShort(name())),
            // Unreadable for another reason (permissions): SQLite's own error says which.
            Err(_) => Ok(()),
        }
    }

    /// The engine over the ledger opened with `access`, running `config`; `pause_file` is the kill
    /// switch's file.
    pub async fn engine(
        &self,
        config: Config,
        pause_file: PathBuf,
        access: Access,
    ) -> Result<Engine<AnyStore>, LedgerError> {
        Ok(Engine::new(Arc::new(self.open(access).await?), config, Some(pause_file)))
    }

    /// The engine of a command that runs executors (`run`, `sweep`, `worker`, `serve`), under
    /// the operator's stop (S14): the first SIGINT or SIGTERM claims nothing new and lets runs
    /// under way finish for `grace`; then, or at a second signal, they are killed and their
    /// claims returned without a failure; a third signal exits at once. Run ends go through this
    /// machine's spool, so a crash never loses a run that finished. `inline`: SQLite on the
    /// caller's thread ([`Access::inline`]).
    pub async fn running_engine(
        &self,
        config: Config,
        pause_file: PathBuf,
        grace: Duration,
        inline: bool,
    ) -> Result<Engine<AnyStore>, RunningError> {
        daicho_engine::supervise::use_ledger(self.identity());
        let spool = daicho_engine::spool::Spool::new(self.spool_dir());
        let engine = self.engine(config, pause_file, Access { read_only: false, inline }).await?;
        // The operator's stop is installed once the ledger is open: while it is still out of
        // reach, a signal ends the process as it would without daicho's handlers.
        let stop = daicho_engine::operator_stop(grace).map_err(RunningError::Signals)?;
        Ok(engine.with_stop(stop).with_spool(spool))
    }

    /// [`Ledger::running_engine`] for the long-running commands (`worker`, `serve`): a ledger
    /// that is out of reach for now (a terminated or refused connection, a lock held past the
    /// busy timeout) is opened again with backoff instead of ending the process (S14).
    pub async fn running_engine_patiently(
        &self,
        config: Config,
        pause_file: PathBuf,
        grace: Duration,
        inline: bool,
    ) -> Result<Engine<AnyStore>, RunningError> {
        let mut backoff = Duration::from_millis(200);
        loop {
            match self.running_engine(config.clone(), pause_file.clone(), grace, inline).await {
                Err(RunningError::Ledger(e)) if e.is_retryable() => {
                    tracing::warn!("the ledger is unavailable, trying again in {backoff:?}: {e}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
                result => return result,
            }
        }
    }
}

/// Why an engine that runs executors could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunningError {
    /// The ledger could not be opened.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The operator's stop (SIGINT, SIGTERM handlers) could not be installed.
    #[error("cannot install the signal handlers")]
    Signals(#[source] std::io::Error),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// X4, D3: an empty file, a directory, a short file and another program's file are each
    /// refused with a reason, and none of them is written to.
    #[tokio::test]
    async fn x4_a_file_that_is_not_a_ledger_is_never_opened_as_one() {
        let dir = tempfile::tempdir().expect("temp dir");
        let at = |name: &str| Ledger::new(Some(&dir.path().join(name)));
        std::fs::write(dir.path().join("empty"), b"").expect("write");
        std::fs::write(dir.path().join("short"), b"x").expect("write");
        std::fs::write(dir.path().join("notes"), b"these are a person's notes, not a database")
            .expect("write");
        let refused = |result: Result<AnyStore, LedgerError>| result.expect_err("refused").to_string();
        assert!(refused(at("missing").open(Access::default()).await).contains("run `daicho init` first"));
        assert!(refused(at("empty").open(Access::default()).await).contains("is an empty file"));
        assert!(
            refused(Ledger::new(Some(dir.path())).open(Access::default()).await).contains("is a directory")
        );
        assert!(
            refused(at("short").open(Access::default()).await).contains("too short for a SQLite database")
        );
        assert!(refused(at("notes").open(Access::default()).await).contains("not a SQLite database"));
        let create = at("notes").create().await.map(|(_, created)| created);
        assert!(create.expect_err("refused").to_string().contains("not a SQLite database"));
        let notes = std::fs::read(dir.path().join("notes")).expect("read");
        assert_eq!(notes, b"these are a person's notes, not a database", "nothing was written");
        assert_eq!(std::fs::read(dir.path().join("short")).expect("read"), b"x");
    }

    /// X4: `init` makes an empty file (or no file) a ledger, and says so once; a second `create`
    /// finds it and creates nothing.
    #[tokio::test]
    async fn x4_create_makes_a_ledger_once_and_open_finds_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let ledger = Ledger::new(Some(&dir.path().join("deep/er/ledger.db")));
        assert!(ledger.create().await.expect("created").1, "created the first time");
        assert!(!ledger.create().await.expect("found").1, "found the second time");
        ledger.open(Access { read_only: true, inline: true }).await.expect("opens read-only");
        assert_eq!(ledger.spool_dir(), dir.path().join("deep/er/ledger.db.spool"));
    }

    /// S14: a PostgreSQL ledger's spool is named after host, port and database, never the
    /// password, and one directory per database.
    #[test]
    fn s14_a_postgres_ledger_spools_under_its_database_without_the_password() {
        let ledger =
            Ledger::new(Some(Path::new("postgres://me:secret@db.example:5433/work?sslmode=require")));
        let dir = ledger.spool_dir();
        let name = dir.file_name().and_then(|n| n.to_str()).expect("a name");
        assert_eq!(name, "db_example_5433_work");
        assert!(!ledger.display().contains("secret") && !ledger.identity().contains("secret"));
        assert_eq!(Ledger::new(None).display(), DEFAULT_DB);
    }
}

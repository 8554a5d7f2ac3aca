//! The embedded SQLite backend of daicho: one file, nothing to install (the default).
//!
//! The ledger lives in one SQLite file in WAL mode with `synchronous=FULL` by default, so an
//! acknowledged write survives a power loss. Every write method is all-or-nothing with its
//! journal: it runs in a `BEGIN IMMEDIATE` transaction, which the writes of this process that
//! arrive together share, each in a savepoint of its own (group commit, [`commit`]). Blocking
//! SQLite calls run on tokio's blocking threads; a small pool keeps opened connections for reuse.
//!
//! The ready set is an index range scan: each row keeps `unmet_deps`, the number of its deps that
//! are not `done`/`dropped` (a missing dep counts), updated in the same transaction as the
//! change that moves a dep in or out of a satisfying status, and the index
//! `(status, unmet_deps, priority DESC, num)` serves `ready` in run order.

mod commit;
mod purge;
mod rows;
mod runs;
mod schema;

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::c_int;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use daicho_core::dag::{NewDeps, check_new_deps};
use daicho_core::edit::TaskEdit;
use daicho_core::merge::incoming_keys;
use daicho_core::policy::{ClaimScope, FailurePolicy, RunCounts};
use daicho_core::{Actor, Status, Task, TaskId};
use daicho_store::codec::{self, READY_ORDER};
use daicho_store::writes;
use daicho_store::{
    ActionStats, Batch, ClaimOutcome, ClaimRequest, Decided, Decision, Finish, JournalEntry, JournalKind,
    ListFilter, NextClaim, Pick, PurgeReport, Queued, ReadySet, RestoreReport, Result, RunOutcome, RunRecord,
    StatusCount, Store, StoreError, UnknownDeps, UpsertReport,
};
use jiff::Timestamp;
use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction, params};

use crate::rows::{COLUMNS, read_task};

/// How durable each commit is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL`: an acknowledged commit survives power loss (the default).
    #[default]
    Full,
    /// `synchronous=NORMAL`: survives a process crash; the last commits may be lost on power loss.
    Normal,
}

/// Options for opening a ledger.
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// How durable each commit is.
    pub durability: Durability,
    /// How long a writer waits for another writer's lock before failing.
    pub busy_timeout: Duration,
    /// Open for reading only: nothing is created, migrated or written, so a ledger in a
    /// read-only place (a read-only mount, a directory one may not write) can still be read.
    pub read_only: bool,
    /// Run SQLite on the calling thread instead of tokio's blocking threads: for a one-shot
    /// command that is synchronous at heart (`add`, `ready`, `show`, …), so no thread is started
    /// and no call is handed over (I5), and for a worker with one slot, whose loop awaits
    /// nothing else while it reads or writes. Never for a task that shares its thread with
    /// other work (a server, several runs): a call blocks its thread while it waits for the lock.
    pub inline: bool,
}

impl Default for SqliteOptions {
    fn default() -> SqliteOptions {
        SqliteOptions {
            durability: Durability::Full,
            busy_timeout: Duration::from_secs(10),
            read_only: false,
            inline: false,
        }
    }
}

/// A ledger in one SQLite file.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    options: SqliteOptions,
    /// Read-only and opened as an immutable file (see [`SqliteStore::open`]).
    immutable: bool,
    idle: Mutex<Vec<Connection>>,
    /// Writes waiting for their (shared) commit.
    writes: commit::Queue,
    /// The last claim scope's head query ([`Store::claim_next`], [`Store::ready_head`]): a worker
    /// claims with the same scope over and over, and building the statement's text was a few per
    /// cent of a claim.
    head_sql: Mutex<Option<(ClaimScope, Arc<str>)>>,
    /// The WAL file may be larger than [`WAL_TRUNCATE_BYTES`] ([`truncate_a_large_wal`]): each
    /// queued commit looks at its size until it is not. Set when the store is made (another
    /// process may have left it large: its truncation held up by a reader, then the log started
    /// again at the top of the file, and no frame count says so any more), after a commit
    /// outside the queue that left the log large (a migration), and while a truncation is held
    /// up by a reader.
    wal_may_be_large: AtomicBool,
}

/// Starts the leader of the queued writes on a blocking thread when dropped ([`commit`]).
struct Leader(Option<(tokio::runtime::Handle, Arc<Inner>)>);

impl Drop for Leader {
    fn drop(&mut self) {
        let Some((runtime, inner)) = self.0.take() else { return };
        runtime.spawn_blocking(move || lead(&inner));
    }
}

/// Drains the queued writes on a pooled connection ([`commit::Queue::lead`]), on this thread.
fn lead(inner: &Inner) {
    lead_as(inner, false);
}

/// [`lead`]; with `no_wait`, only if the write lock is free now: false when another connection
/// holds it, the writes still queued and the lead still taken ([`commit::Queue::lead_unless_busy`]).
fn lead_as(inner: &Inner, no_wait: bool) -> bool {
    let idle = inner.idle.lock().ok().and_then(|mut idle| idle.pop());
    let connect = || open_connection(&inner.path, &inner.options, inner.immutable);
    let (busy_timeout, wal) = (inner.options.busy_timeout, wal_of(&inner.path));
    let after_commit = |c: &Connection| truncate_a_large_wal(c, &wal, busy_timeout, &inner.wal_may_be_large);
    let (conn, led) = if no_wait {
        inner.writes.lead_unless_busy(idle, connect, after_commit, busy_timeout)
    } else {
        (inner.writes.lead(idle, connect, after_commit), true)
    };
    if let Some(conn) = conn.filter(Connection::is_autocommit)
        && let Ok(mut idle) = inner.idle.lock()
    {
        idle.push(conn);
    }
    led
}

/// Wraps a SQLite error as a store error.
pub(crate) fn backend(error: rusqlite::Error) -> StoreError {
    match &error {
        // Another process held the write lock past the busy timeout: try again later.
        rusqlite::Error::SqliteFailure(e, _)
            if matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) =>
        {
            StoreError::Unavailable(format!("{error} (another process holds the ledger's write lock)"))
        }
        // The disk (or a size limit) is full: the transaction was rolled back, and the same write
        // goes through once space is freed — a worker waits for it with its runs' ends kept,
        // a command exits 75 (try again).
        rusqlite::Error::SqliteFailure(e, _) if e.code == rusqlite::ErrorCode::DiskFull => {
            StoreError::Unavailable(format!(
                "the disk holding the ledger is full ({error}); nothing of this change was written: free some space and try again"
            ))
        }
        _ => StoreError::backend_from("SQLite", error),
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the ledger at `path` and brings its schema up to date.
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`] when the file cannot be opened or migrated.
    pub async fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<SqliteStore> {
        let path = path.as_ref().to_owned();
        let read_only = options.read_only;
        let store = SqliteStore::new(path, options, false);
        if !read_only {
            store.with_conn(schema::migrate).await?;
            return Ok(store);
        }
        match store.with_conn(schema::check_current).await {
            Err(StoreError::Backend { .. }) if store.inner.path.exists() => {
                // A WAL ledger read where its `-shm` file cannot be created (a read-only
                // mount or directory): read it as an immutable file, which nothing can change
                // while it stays there.
                let (path, options) = (store.inner.path.clone(), store.inner.options.clone());
                let store = SqliteStore::new(path, options, true);
                store.with_conn(schema::check_current).await?;
                Ok(store)
            }
            result => result.map(|()| store),
        }
    }

    /// A store over `path`, nothing opened yet.
    fn new(path: PathBuf, options: SqliteOptions, immutable: bool) -> SqliteStore {
        let idle = Mutex::new(Vec::new());
        let (writes, head_sql) = (commit::Queue::default(), Mutex::new(None));
        let wal_may_be_large = AtomicBool::new(true);
        let inner = Inner { path, options, immutable, idle, writes, head_sql, wal_may_be_large };
        SqliteStore { inner: Arc::new(inner) }
    }

    /// The head query of `scope` (in run order, `?1` the time, `?2` the limit), built once for
    /// the scope claimed with last.
    fn head_sql(&self, scope: ClaimScope) -> Arc<str> {
        let mut last = self.inner.head_sql.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*last {
            Some((known, sql)) if *known == scope => Arc::clone(sql),
            _ => {
                let sql: Arc<str> = codec::ready_head_sql("?1", "?2", Some(&scope)).into();
                *last = Some((scope, Arc::clone(&sql)));
                sql
            }
        }
    }

    /// The path of the ledger file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` in a `BEGIN IMMEDIATE` transaction, committed when `f` succeeds; writes that
    /// arrive together share one commit, each in a savepoint of its own ([`commit`]). Answers
    /// only once the commit is durable.
    async fn write<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnMut(&Transaction<'_>) -> Result<R> + Send + 'static,
    {
        self.write_as(false, f).await
    }

    /// [`SqliteStore::write`] in a transaction of its own: for large writes (an upsert, a
    /// purge), so that no small write waits for their commit.
    async fn write_alone<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnMut(&Transaction<'_>) -> Result<R> + Send + 'static,
    {
        self.write_as(true, f).await
    }

    async fn write_as<R, F>(&self, alone: bool, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnMut(&Transaction<'_>) -> Result<R> + Send + 'static,
    {
        let (sender, mut answer) = tokio::sync::oneshot::channel();
        let claim = Arc::new(commit::Claim::default());
        let must_lead =
            self.inner.writes.push(Box::new(commit::Pending::new(f, sender, alone, Arc::clone(&claim))));
        if must_lead && self.inner.options.inline {
            // On this thread while the write lock is free; held by another process, the write
            // waits for it on a blocking thread instead, so that this thread's caller keeps its
            // timers meanwhile (a one-slot worker syncs its spooled ends after a second, S14).
            if !lead_as(&self.inner, true) {
                let inner = Arc::clone(&self.inner);
                tokio::task::spawn_blocking(move || lead(&inner));
            }
        } else if must_lead {
            // Writes issued together with this one (futures joined: a worker's run ends and its
            // next claims) reach the queue during one yield and share this commit. The leader
            // starts after the yield, or when this write is dropped during it, so a write
            // cancelled meanwhile never leaves the queue without one.
            let leader = Leader(Some((tokio::runtime::Handle::current(), Arc::clone(&self.inner))));
            tokio::task::yield_now().await;
            drop(leader);
        }
        let stopped = |_| StoreError::backend("the ledger's writer stopped before answering this write");
        let busy_timeout = self.inner.options.busy_timeout;
        match tokio::time::timeout(busy_timeout, &mut answer).await {
            Ok(answered) => answered.map_err(stopped)?,
            // Still queued behind a long write past the busy timeout: withdrawn, never run.
            Err(_) if claim.withdraw() => Err(StoreError::Unavailable(format!(
                "waited {busy_timeout:?} for the ledger's writer (a long write holds it); nothing was written"
            ))),
            // Running or run: its outcome is known only at its commit.
            Err(_) => answer.await.map_err(stopped)?,
        }
    }

    /// Transactions this store has committed (figures: with [`commit`], several writes share
    /// one).
    pub fn commits(&self) -> u64 {
        self.inner.writes.commits()
    }

    /// Runs `f` in one read transaction (a consistent snapshot).
    async fn read<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<R> + Send + 'static,
    {
        self.with_conn(move |conn| {
            let tx = conn.transaction().map_err(backend)?;
            f(&tx)
        })
        .await
    }

    /// Runs `f` on a pooled connection on a blocking thread.
    async fn with_conn<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let call = move || {
            let taken = inner.idle.lock().map_err(|_| StoreError::backend("connection pool poisoned"))?.pop();
            let mut conn = match taken {
                Some(conn) => conn,
                None => open_connection(&inner.path, &inner.options, inner.immutable)?,
            };
            let result = f(&mut conn);
            // A commit here (a migration) is not the queue's: its frame count is not
            // left for the next queued commit on this thread to take as its own, and a large
            // one has the next queued commit look at the file.
            if WAL_FRAMES.take() > WAL_TRUNCATE_FRAMES {
                inner.wal_may_be_large.store(true, Ordering::Relaxed);
            }
            if conn.is_autocommit()
                && let Ok(mut idle) = inner.idle.lock()
            {
                idle.push(conn);
            }
            result
        };
        if self.inner.options.inline {
            return call();
        }
        tokio::task::spawn_blocking(call)
            .await
            .map_err(|e| StoreError::backend_from("database task failed", e))?
    }
}

/// Records run ends in `tx`, each as [`Store::finish`] does: a stale one gets its own error and
/// writes nothing (but the refused end of a run a person stopped, which clears its fence and is
/// kept); a backend error fails them all.
fn finish_many_in(tx: &Transaction<'_>, finishes: &[Finish]) -> Result<Vec<Result<Task>>> {
    let mut out = Vec::with_capacity(finishes.len());
    for finish in finishes {
        match runs::finish_in(tx, finish) {
            Err(e @ StoreError::Backend { .. }) => return Err(e),
            other => out.push(other),
        }
    }
    Ok(out)
}

/// [`Store::claim_next`] in `tx`, with `sql` the head query of its scope.
fn claim_next_in(
    tx: &Transaction<'_>,
    sql: &str,
    now: Timestamp,
    window: usize,
    limit: usize,
    pick: &mut Pick,
) -> Result<Option<NextClaim>> {
    if let Some(reason) = runs::paused_in(tx)? {
        return Ok(Some(NextClaim { tried: Vec::new(), outcome: ClaimOutcome::Paused(reason) }));
    }
    // The head is read in the claim's own transaction, so the rows read are the rows claimed
    // from (and the run ends committed before it in this transaction have already released
    // their dependents).
    let mut stmt = tx.prepare_cached(sql).map_err(backend)?;
    let mut window = NextClaim::first_window(window, limit);
    loop {
        let head: Vec<Task> = stmt
            .query_map(params![now.as_microsecond(), window as i64], read_task)
            .and_then(|rows| rows.collect::<rusqlite::Result<_>>())
            .map_err(backend)?;
        let tried = pick(&head);
        for request in &tried {
            // The kill switch was looked at above, and the head is this transaction's.
            let before = head.iter().find(|t| t.id == request.id);
            match runs::claim_row_in(tx, request, before)? {
                ClaimOutcome::NotClaimable => {}
                outcome => return Ok(Some(NextClaim { tried, outcome })),
            }
        }
        if !tried.is_empty() {
            return Ok(Some(NextClaim { tried, outcome: ClaimOutcome::NotClaimable }));
        }
        let Some(wider) = NextClaim::wider_window(window, head.len(), limit) else { return Ok(None) };
        window = wider;
    }
}

fn open_connection(path: &Path, options: &SqliteOptions, immutable: bool) -> Result<Connection> {
    let cannot_open = |e| StoreError::backend_from(format_args!("cannot open {}", path.display()), e);
    if options.read_only {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = if immutable {
            let url = url_of(path);
            Connection::open_with_flags(format!("{url}?immutable=1"), flags | OpenFlags::SQLITE_OPEN_URI)
        } else {
            Connection::open_with_flags(path, flags)
        };
        let conn = conn.map_err(cannot_open)?;
        conn.busy_timeout(options.busy_timeout).map_err(backend)?;
        stable_plans(&conn)?;
        return Ok(conn);
    }
    let flags =
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    // A ledger or WAL this connection creates is a new directory entry, which must be durable
    // before the first commit in it is answered (see `sync_new_entries`).
    let wal = wal_of(path);
    let creates = !path.exists() || !wal.exists();
    let conn = Connection::open_with_flags(path, flags).map_err(cannot_open)?;
    conn.busy_timeout(options.busy_timeout).map_err(backend)?;
    // Room for every statement a worker or server uses over and over (rusqlite keeps 16): the
    // claims, finishes, journal, reads and an update per set of changed columns stay prepared.
    conn.set_prepared_statement_cache_capacity(64);
    stable_plans(&conn)?;
    schema::refuse_foreign(&conn)?;
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0)).map_err(backend)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::backend(format!("cannot use WAL mode on {} (got {mode})", path.display())));
    }
    let synchronous = match options.durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", synchronous).map_err(backend)?;
    conn.pragma_update(None, "foreign_keys", "ON").map_err(backend)?;
    // A 16 MiB page cache (allocated only as used; the default is 2 MiB) keeps the hot index
    // pages of a large batch; evicted pages come back from the system's file cache. 64 MiB
    // made a 200,000-item push no faster and cost 48 MB of its peak (I1).
    conn.pragma_update(None, "cache_size", -16384).map_err(backend)?;
    // Checkpoints every 1,000 pages, as SQLite's own automatic checkpoint does, and counts the
    // log's frames for the WAL's upkeep after the commit ([`wal_committed`]).
    conn.wal_hook(Some(wal_committed));
    // No checkpoint when the last connection closes (I5): a one-shot command's change costs the
    // one fsync of its commit, not three more for a checkpoint and the WAL's removal; the WAL
    // is checkpointed at its size limit (above) by whichever process commits then.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
        .map_err(backend)?;
    if creates {
        sync_new_entries(&conn, path, &wal)?;
    }
    Ok(conn)
}

/// Plans that do not depend on the values bound (`SQLITE_DBCONFIG_ENABLE_QPSG`), so a cached
/// statement runs as prepared (I5). Without it SQLite may compare a bound value with the
/// literals of a partial index's condition while planning, marks such a parameter as one the
/// plan depends on, and prepares the statement again at its first step after every new
/// binding: in the worker's claim loop `sqlite3Reprepare` took 8 % of the CPU (1.3 % after).
/// daicho's partial indexes are chosen by literal conditions, never by a bound value.
fn stable_plans(conn: &Connection) -> Result<()> {
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).map_err(backend)?;
    Ok(())
}

/// Makes the directory entries of a ledger file and WAL that `conn` has just created durable.
///
/// SQLite is built without its own directory sync (`SQLITE_DISABLE_DIRSYNC`,
/// `.cargo/config.toml`): it opens the WAL with `O_CREAT` in every process, so it synced the
/// directory at each process's first commit whether or not the file was new — a second fsync
/// for every one-shot `add` or `set` (I5). Here the directory is synced only when the file or
/// its WAL did not exist before this connection, once the WAL exists (a read creates it; on a
/// new file the `journal_mode` switch wrote only the header) and before any commit in it.
fn sync_new_entries(conn: &Connection, path: &Path, wal: &Path) -> Result<()> {
    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(())).map_err(backend)?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let synced = std::fs::File::open(dir).and_then(|d| d.sync_all());
    synced.map_err(|e| {
        StoreError::backend_from(format_args!("cannot sync the directory {}", dir.display()), e)
    })?;
    if !wal.exists() {
        return Err(StoreError::backend(format!("SQLite created no WAL beside {}", path.display())));
    }
    Ok(())
}

/// The write-ahead log beside the ledger file at `path`.
fn wal_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// Checkpoint once the log holds this many frames (SQLite's default, ~4 MiB): under a stream of
/// small commits (claims and run ends) the WAL is then written again from its start once
/// checkpointed, in place, so a commit does not grow the file and its sync writes no inode (I5).
const CHECKPOINT_FRAMES: c_int = 1000;

/// A log of more frames than this (~6 MiB) is checkpointed and truncated by the write that grew
/// it: above what the automatic checkpoint keeps it at under small commits, so only a large
/// write (an import, a push, a sync), or small ones while a reader held the log, truncate it.
const WAL_TRUNCATE_FRAMES: c_int = 1500;

/// The size of a WAL of [`WAL_TRUNCATE_FRAMES`] frames of 4 KiB pages (its header, then each
/// frame's header and page), which [`truncate_a_large_wal`] truncates when it looks at the file.
const WAL_TRUNCATE_BYTES: u64 = 32 + WAL_TRUNCATE_FRAMES as u64 * (24 + 4096);

thread_local! {
    /// The frames in the log after the last commit on this thread ([`wal_committed`]), taken by
    /// the WAL's upkeep that follows the commit on the same thread.
    static WAL_FRAMES: Cell<c_int> = const { Cell::new(0) };
}

/// SQLite's WAL hook, called on the committing thread after each commit that wrote frames,
/// with the number of frames in the log. It replaces SQLite's automatic checkpoint (a WAL
/// hook too, so the two cannot both be set) and does the same: a passive checkpoint once the
/// log holds [`CHECKPOINT_FRAMES`]. It keeps the count for [`truncate_a_large_wal`], which so
/// needs no look at the file: a `stat` of the WAL after every commit made the next write's
/// time stamp a fine-grained one (Linux's multigrain time stamps, as on ext4), so every
/// `fdatasync` wrote the file's inode as well as its pages, a second device write in each
/// commit (a worker's claims: about 20 % slower). Never fails: an error here would fail a
/// statement whose commit has happened.
fn wal_committed(wal: &rusqlite::hooks::Wal, frames: c_int) -> rusqlite::Result<()> {
    WAL_FRAMES.set(frames);
    if frames >= CHECKPOINT_FRAMES {
        // As SQLite's own: a checkpoint that cannot finish now (a reader) is left to a later one.
        let _ = wal.checkpoint();
    }
    Ok(())
}

/// Keeps the WAL small after a large write (an import, a push, a sync) or many small ones (I3):
/// a process that opens the ledger first rebuilds the WAL's index by reading every frame of
/// the log (SQLite resets the shared index when no other connection has it open), so a
/// leftover 85 MB WAL made every `daicho show` read 20,000 frames, about 30 ms. Best effort and
/// never waiting: while a reader (a page of `serve`, another worker) still needs the WAL, the
/// checkpoint gives up at once and a later write tries again, looking at the file's size until
/// a truncation succeeds (`may_be_large`, set too for a store's first commit). Small writes
/// never pay it, so a single `add` stays at one fsync, and after a store's first commit they
/// look at nothing (see [`wal_committed`]).
fn truncate_a_large_wal(
    conn: &Connection,
    wal: &Path,
    busy_timeout: std::time::Duration,
    may_be_large: &AtomicBool,
) {
    let grew = WAL_FRAMES.take() > WAL_TRUNCATE_FRAMES;
    if !grew {
        if !may_be_large.load(Ordering::Relaxed) {
            return;
        }
        if !std::fs::metadata(wal).is_ok_and(|m| m.len() > WAL_TRUNCATE_BYTES) {
            may_be_large.store(false, Ordering::Relaxed);
            return;
        }
    }
    if conn.busy_timeout(std::time::Duration::ZERO).is_err() {
        may_be_large.store(true, Ordering::Relaxed);
        return;
    }
    let done = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0));
    let truncated = matches!(done, Ok(0));
    if !truncated {
        tracing::debug!("the WAL checkpoint was held up by a reader; a later write tries again");
    }
    may_be_large.store(!truncated, Ordering::Relaxed);
    let _ = conn.busy_timeout(busy_timeout);
}

/// A `file:` URI for `path`, its reserved characters percent-encoded.
fn url_of(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut url = String::from("file:");
    for byte in absolute.as_os_str().as_encoded_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                url.push(*byte as char)
            }
            _ => url.push_str(&format!("%{byte:02X}")),
        }
    }
    url
}

impl Store for SqliteStore {
    async fn wait_for_work(&self, timeout: Duration) {
        // One file, no notifications: idle workers poll.
        tokio::time::sleep(timeout).await;
    }

    async fn claim(&self, request: ClaimRequest) -> Result<ClaimOutcome> {
        self.write(move |tx| runs::claim_in(tx, &request)).await
    }

    async fn claim_many(&self, requests: Vec<ClaimRequest>) -> Result<Vec<ClaimOutcome>> {
        self.write(move |tx| requests.iter().map(|r| runs::claim_in(tx, r)).collect()).await
    }

    async fn claim_first(&self, requests: Vec<ClaimRequest>) -> Result<ClaimOutcome> {
        self.write(move |tx| {
            // The kill switch is looked at once for every request (none asked, nothing said).
            if let Some(reason) = runs::paused_in(tx)?.filter(|_| !requests.is_empty()) {
                return Ok(ClaimOutcome::Paused(reason));
            }
            for request in &requests {
                match runs::claim_row_in(tx, request, None)? {
                    ClaimOutcome::NotClaimable => {}
                    decided => return Ok(decided),
                }
            }
            Ok(ClaimOutcome::NotClaimable)
        })
        .await
    }

    async fn claim_next(
        &self,
        now: Timestamp,
        scope: ClaimScope,
        window: usize,
        limit: usize,
        mut pick: Pick,
    ) -> Result<Option<NextClaim>> {
        let sql = self.head_sql(scope);
        self.write(move |tx| claim_next_in(tx, &sql, now, window, limit, &mut pick)).await
    }

    fn claims_one_at_a_time(&self) -> bool {
        true
    }

    async fn finish_many(&self, finishes: Vec<Finish>) -> Result<Vec<Result<Task>>> {
        self.write(move |tx| finish_many_in(tx, &finishes)).await
    }

    async fn finish_and_claim_next(
        &self,
        finishes: Vec<Finish>,
        now: Timestamp,
        scope: ClaimScope,
        window: usize,
        limit: usize,
        mut pick: Pick,
    ) -> (Result<Vec<Result<Task>>>, Result<Option<NextClaim>>) {
        // One write, so one commit and one hand-off to the writer's thread (I5): the ends first,
        // then the head, read after them (so the rows they released are in it), and the claim.
        let (sql, ends) = (self.head_sql(scope), finishes.clone());
        let both = self.write(move |tx| {
            let ends = finish_many_in(tx, &ends)?;
            Ok((ends, claim_next_in(tx, &sql, now, window, limit, &mut pick)?))
        });
        daicho_store::ends_alone_if_failed(self, both.await, finishes).await
    }

    async fn heartbeat(&self, id: TaskId, attempt: u32, worker: &str, until: Timestamp) -> Result<()> {
        let worker = worker.to_owned();
        self.write(move |tx| runs::heartbeat_in(tx, id, attempt, &worker, until)).await
    }

    async fn finish(&self, finish: Finish) -> Result<Task> {
        // As one of many: a refused end of a run a person stopped is written all the same.
        let mut out = self.write(move |tx| finish_many_in(tx, std::slice::from_ref(&finish))).await?;
        out.pop().unwrap_or_else(|| Err(StoreError::backend("no outcome for a finish")))
    }

    async fn expire_leases(&self, now: Timestamp, policy: FailurePolicy) -> Result<Vec<(TaskId, Status)>> {
        self.write(move |tx| runs::expire_in(tx, now, policy)).await
    }

    async fn set_paused(&self, reason: Option<String>, actor: Actor, now: Timestamp) -> Result<()> {
        self.write(move |tx| runs::set_paused_in(tx, reason.as_deref(), &actor, now)).await
    }

    async fn paused(&self) -> Result<Option<String>> {
        self.read(runs::paused_in).await
    }

    async fn lease_role(&self, role: &str, owner: &str, now: Timestamp, until: Timestamp) -> Result<bool> {
        let (name, owner) = (format!("lease:{role}"), owner.to_owned());
        self.write(move |tx| {
            let stored: Option<String> = tx
                .query_row("SELECT value FROM setting WHERE name = ?1", [&name], |r| r.get(0))
                .optional()
                .map_err(backend)?;
            if !daicho_store::role_lease_free(stored.as_deref(), &owner, now) {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO setting (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                [&name, &daicho_store::role_lease_value(&owner, until)],
            )
            .map_err(backend)?;
            Ok(true)
        })
        .await
    }

    async fn purge_source(
        &self,
        source: &str,
        apply: bool,
        actor: Actor,
        now: Timestamp,
    ) -> Result<PurgeReport> {
        let source = source.to_owned();
        self.write_alone(move |tx| purge::purge_in(tx, &source, apply, &actor, now)).await
    }

    async fn restore_source(&self, source: &str, actor: Actor, now: Timestamp) -> Result<RestoreReport> {
        let source = source.to_owned();
        self.write_alone(move |tx| purge::restore_in(tx, &source, &actor, now)).await
    }

    async fn cursor(&self, role: &str) -> Result<Option<String>> {
        let name = format!("cursor:{role}");
        self.read(move |tx| {
            tx.query_row("SELECT value FROM setting WHERE name = ?1", [&name], |r| r.get(0))
                .optional()
                .map_err(backend)
        })
        .await
    }

    async fn set_cursor(&self, role: &str, last: &str) -> Result<()> {
        let (name, last) = (format!("cursor:{role}"), last.to_owned());
        self.write(move |tx| {
            tx.execute(
                "INSERT INTO setting (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                [&name, &last],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn run_counts(&self, since: Timestamp) -> Result<RunCounts> {
        self.read(move |tx| runs::run_counts_in(tx, since)).await
    }

    async fn stats(&self, since: Timestamp) -> Result<Vec<ActionStats>> {
        self.read(move |tx| runs::stats_in(tx, since)).await
    }

    async fn runs(&self, id: TaskId) -> Result<Vec<RunRecord>> {
        self.read(move |tx| runs::runs_in(tx, id)).await
    }

    async fn note_run(&self, id: TaskId, attempt: u32, note: String) -> Result<()> {
        self.write(move |tx| runs::note_in(tx, id, attempt, &note)).await
    }

    async fn queue_approvals(&self, ids: Vec<TaskId>, by: String, now: Timestamp) -> Result<Vec<TaskId>> {
        self.write(move |tx| runs::queue_approvals_in(tx, &ids, &by, now)).await
    }

    async fn approvals(&self) -> Result<Vec<Queued>> {
        self.read(runs::approvals_in).await
    }

    async fn reject(&self, id: TaskId, reason: String, actor: Actor, now: Timestamp) -> Result<Task> {
        let edit = daicho_store::ends::reject_edit(&reason)?;
        self.write(move |tx| {
            let task = edit_in(tx, id, &edit, &actor, now)?;
            runs::decide_in(tx, id, Decision::Rejected, reason.trim(), &actor, now)?;
            Ok(task)
        })
        .await
    }

    async fn decisions(&self, limit: usize) -> Result<Vec<Decided>> {
        self.read(move |tx| runs::decisions_in(tx, limit)).await
    }

    async fn change_mark(&self) -> Result<u64> {
        self.with_conn(|conn| {
            conn.prepare_cached(codec::CHANGE_MARK_SQL)
                .and_then(|mut s| s.query_row([], |r| r.get::<_, i64>(0)))
                .map(|n| n.max(0) as u64)
                .map_err(backend)
        })
        .await
    }

    async fn approve(&self, id: TaskId, actor: Actor, now: Timestamp) -> Result<Task> {
        self.write(move |tx| runs::approve_in(tx, id, &actor, now)).await
    }

    async fn upsert(&self, batch: Batch) -> Result<UpsertReport> {
        self.write_alone(move |tx| upsert_in(tx, &batch)).await
    }

    async fn replan(&self, batch: Batch, retire: Vec<TaskId>) -> Result<UpsertReport> {
        self.write_alone(move |tx| {
            let drop = TaskEdit { status: Some(Status::Dropped), ..TaskEdit::default() };
            for &id in &retire {
                if get_task(tx, id)?.is_some_and(|t| t.status.is_open()) {
                    edit_in(tx, id, &drop, &batch.actor, batch.now)?;
                }
            }
            upsert_in(tx, &batch)
        })
        .await
    }

    async fn get(&self, id: TaskId) -> Result<Option<Task>> {
        self.with_conn(move |conn| get_task(conn, id)).await
    }

    async fn list(&self, filter: ListFilter) -> Result<Vec<Task>> {
        self.with_conn(move |conn| list_in(conn, &filter)).await
    }

    async fn status_counts(&self) -> Result<Vec<StatusCount>> {
        self.read(|tx| {
            let rows: Vec<(String, String, i64)> = tx
                // Kept by triggers with every write (schema 4): a few rows, whatever the ledger's size.
                .prepare_cached("SELECT project, status, n FROM task_count WHERE n > 0")
                .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect())
                .map_err(backend)?;
            Ok(daicho_store::sorted_counts(rows))
        })
        .await
    }

    async fn ready(&self, now: Timestamp, limit: usize) -> Result<ReadySet> {
        self.read(move |tx| {
            let now = now.as_microsecond();
            // The ready condition, counted without walking the set: the rows pending with
            // every dep met (kept by triggers) less those not due yet (their own index).
            let total: i64 = tx
                .prepare_cached(&ready_count_sql())
                .and_then(|mut s| s.query_row([now], |r| r.get(0)))
                .map_err(backend)?;
            let mut stmt = tx
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM task WHERE {} {READY_ORDER} LIMIT ?2",
                    ready_where()
                ))
                .map_err(backend)?;
            let tasks = stmt
                .query_map(params![now, limit as i64], read_task)
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<Task>>>())
                .map_err(backend)?;
            Ok(ReadySet { tasks, total: total as usize })
        })
        .await
    }

    async fn view_head(&self, project: String, exclude: Vec<String>, limit: usize) -> Result<Vec<Task>> {
        self.read(move |tx| {
            let mut stmt = tx.prepare_cached(&codec::view_head_sql("?1", "?2", &exclude)).map_err(backend)?;
            stmt.query_map(params![project, limit as i64], read_task)
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<Task>>>())
                .map_err(backend)
        })
        .await
    }

    async fn ready_head(&self, now: Timestamp, scope: Option<ClaimScope>, limit: usize) -> Result<Vec<Task>> {
        let sql = match scope {
            Some(scope) => self.head_sql(scope),
            None => codec::ready_head_sql("?1", "?2", None).into(),
        };
        self.read(move |tx| {
            let mut stmt = tx.prepare_cached(&sql).map_err(backend)?;
            stmt.query_map(params![now.as_microsecond(), limit as i64], read_task)
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<Task>>>())
                .map_err(backend)
        })
        .await
    }

    async fn edit(&self, id: TaskId, edit: TaskEdit, actor: Actor, now: Timestamp) -> Result<Task> {
        self.write(move |tx| edit_in(tx, id, &edit, &actor, now)).await
    }

    async fn journal(&self, id: TaskId) -> Result<Vec<JournalEntry>> {
        self.with_conn(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT seq, at, task_id, actor, kind, before, after FROM journal WHERE task = ?1 ORDER BY seq",
                )
                .map_err(backend)?;
            let rows = stmt
                .query_map([id.num() as i64], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, String>(6)?,
                    ))
                })
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(backend)?;
            rows.into_iter()
                .map(|(seq, at, task, actor, kind, before, after)| {
                    JournalEntry::from_stored(seq, at, &task, actor, &kind, &before, &after)
                })
                .collect()
        })
        .await
    }
}

/// The size of the ready set ([`codec::ready_count_sql`]); `INDEXED BY` makes a missing
/// `task_not_due` an error, not a walk.
pub fn ready_count_sql() -> String {
    codec::ready_count_sql("?1", "task INDEXED BY task_not_due")
}

/// The ready condition (D1, D5), with `?1` the time in microseconds.
fn ready_where() -> String {
    codec::ready_where("?1")
}

pub(crate) fn get_task(conn: &Connection, id: TaskId) -> Result<Option<Task>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM task WHERE num = ?1"))
        .and_then(|mut s| s.query_row([id.num() as i64], read_task).optional())
        .map_err(backend)
}

fn list_in(conn: &Connection, filter: &ListFilter) -> Result<Vec<Task>> {
    let mut stmt = conn.prepare(&codec::list_sql(filter)).map_err(backend)?;
    stmt.query_map([], read_task).and_then(|rows| rows.collect()).map_err(backend)
}

/// The deps of a row as stored, or `None` when the row does not exist.
fn stored_deps(tx: &Transaction<'_>, id: TaskId) -> Result<Option<Vec<TaskId>>> {
    let text: Option<String> = tx
        .prepare_cached("SELECT deps FROM task WHERE num = ?1")
        .and_then(|mut s| s.query_row([id.num() as i64], |r| r.get(0)).optional())
        .map_err(backend)?;
    Ok(text.map(|t| codec::parse_deps(&t)))
}

/// Runs the DAG check with a lookup into the ledger, turning the first lookup failure into an
/// error. `new_rows` (sorted) are rows the batch adds without deps: they exist, as leaves. With
/// `ledger_is_leaf`, ledger rows are looked up for existence only: the caller has established
/// that no ledger row can reach a changed one, so no cycle can pass through them.
fn check_deps(
    tx: &Transaction<'_>,
    changes: &[NewDeps],
    new_rows: &[TaskId],
    refuse_unknown: bool,
    ledger_is_leaf: bool,
) -> Result<Result<(), daicho_core::dag::DagError>> {
    let mut failure: Option<StoreError> = None;
    let outcome = check_new_deps(changes, refuse_unknown, |id| {
        if new_rows.binary_search(&id).is_ok() {
            return Some(Vec::new());
        }
        let found = if ledger_is_leaf {
            rows::status_of(tx, id).map(|s| s.map(|_| Vec::new())).map_err(backend)
        } else {
            stored_deps(tx, id)
        };
        found.unwrap_or_else(|e| {
            failure.get_or_insert(e);
            None
        })
    });
    match failure {
        Some(e) => Err(e),
        None => Ok(outcome),
    }
}

/// Whether some ledger row waits for one of `ids` (ids it named while they did not exist).
fn anyone_waits_for(tx: &Transaction<'_>, ids: &[TaskId]) -> Result<bool> {
    let (Some(min), Some(max)) = (ids.iter().map(|i| i.num()).min(), ids.iter().map(|i| i.num()).max())
    else {
        return Ok(false);
    };
    let mut probe = tx
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM task_dep WHERE dep BETWEEN ?1 AND ?2)")
        .map_err(backend)?;
    if !probe.query_row([min as i64, max as i64], |r| r.get::<_, bool>(0)).map_err(backend)? {
        return Ok(false);
    }
    for id in ids {
        if probe.query_row([id.num() as i64, id.num() as i64], |r| r.get::<_, bool>(0)).map_err(backend)? {
            return Ok(true);
        }
    }
    Ok(false)
}

fn upsert_in(tx: &Transaction<'_>, batch: &Batch) -> Result<UpsertReport> {
    let started = std::time::Instant::now();
    let next_id: i64 =
        tx.query_row("SELECT value FROM meta WHERE name = 'next_id'", [], |r| r.get(0)).map_err(backend)?;
    // Decided a range at a time, from the rows each range matches by key and by requested id:
    // the matched rows of the whole batch are never held at once.
    let mut decider = batch.decider(next_id as u64)?;
    let mut matched = 0;
    for range in batch.ranges() {
        let items = batch.range(range.clone())?;
        let keys = incoming_keys(&items);
        let ids: Vec<TaskId> =
            items.iter().filter_map(|i| i.ref_id.as_deref().and_then(TaskId::parse)).collect();
        let rows = rows::rows_matching(tx, &ids, keys.iter().flatten().map(String::as_str))?;
        matched += rows.len();
        batch.take(&mut decider, range.start, &items, keys, &rows)?;
    }
    let decided = decider.finish();
    let planned = started.elapsed();

    // The whole batch's edges are checked before anything is written.
    let changes = batch.dep_changes(&decided)?;
    // The ledger was acyclic, so a new cycle needs a path from a ledger row back to a changed
    // row. Without patched deps and without rows that already named a new id, there is none,
    // and the check need not walk the ledger's graph.
    let added = decided.added();
    let ledger_is_leaf = !decided.fills_deps() && !anyone_waits_for(tx, &added)?;
    check_deps(tx, &changes, &added, batch.unknown_deps == UnknownDeps::Refuse, ledger_is_leaf)?
        .map_err(|e| batch.dag_error(e))?;
    drop((changes, added));
    let checked = started.elapsed();

    // Built and written a range at a time: rows of earlier ranges are in the ledger by then, so
    // their statuses are read like any other row's.
    let mut report = UpsertReport::default();
    for range in batch.ranges() {
        let patched = rows::rows_matching(tx, &decided.patched(range.clone()), std::iter::empty())?;
        let before: HashMap<TaskId, Task> = patched.into_iter().map(|t| (t.id, t)).collect();
        let items = batch.range(range.clone())?;
        let plan = decided.plan(range.start, &items, &before, batch.now).map_err(StoreError::NotFound)?;
        let added: Vec<&Task> = plan.add.iter().map(|a| &a.task).collect();
        let statuses = rows::statuses(tx, &writes::outside_deps(&added))?;
        rows::apply_all(tx, writes::plan_upsert(batch, &plan, &before, &statuses))?;
        report.note_plan(range.start, &items, &plan);
    }
    tx.execute(
        "UPDATE meta SET value = ?1 WHERE name = 'next_id'",
        [decided.next_id.max(next_id as u64) as i64],
    )
    .map_err(backend)?;
    tracing::debug!(
        items = batch.items.len(),
        matched,
        decide = ?planned,
        dag_check = ?(checked - planned),
        write = ?(started.elapsed() - checked),
        "upsert"
    );
    Ok(report)
}

fn edit_in(tx: &Transaction<'_>, id: TaskId, edit: &TaskEdit, actor: &Actor, now: Timestamp) -> Result<Task> {
    let before = get_task(tx, id)?.ok_or(StoreError::NotFound(id))?;
    let after = daicho_store::ends::plan_edit(&before, edit, actor, now)?;
    if after.deps != before.deps {
        let change = NewDeps { task: id, deps: after.deps.clone(), origin: None };
        check_deps(tx, &[change], &[], true, false)??;
    }
    rows::apply(
        tx,
        &writes::change_writes(now, &before, &after, &actor.to_string(), JournalKind::Edit, None)?,
    )?;
    if let Some((attempt, error)) = daicho_store::ends::run_stopped_by_edit(&before, &after, actor) {
        runs::close_run(tx, &after, attempt, now, RunOutcome::Interrupted, &error, (None, None))?;
    }
    get_task(tx, id)?.ok_or(StoreError::NotFound(id))
}

/// Whether `ready`'s query is served by the `task_ready` index without a sort (for tests).
pub async fn ready_query_plan(store: &SqliteStore) -> Result<String> {
    store
        .with_conn(|conn| {
            let sql = format!(
                "EXPLAIN QUERY PLAN SELECT {COLUMNS} FROM task WHERE {} {READY_ORDER} LIMIT 10",
                ready_where()
            );
            let mut stmt = conn.prepare(&sql).map_err(backend)?;
            let lines = stmt
                .query_map([0i64], |r| r.get::<_, String>(3))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<String>>>())
                .map_err(backend)?;
            Ok(lines.join("\n"))
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// S14, X4: a full disk is a temporary fault that says what to do, not a backend failure: a
    /// worker waits it out with its runs' ends kept, a command exits 75. SQLite's size limit
    /// (`max_page_count`) fails a write with the same code a full disk gives (`SQLITE_FULL`).
    #[test]
    fn s14_a_full_disk_is_temporary_and_named() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let conn = Connection::open(dir.path().join("full.db")).expect("open");
        conn.execute_batch("CREATE TABLE t (x BLOB)").expect("a table");
        let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0)).expect("pages");
        conn.pragma_update(None, "max_page_count", pages).expect("a size limit");
        let full =
            conn.execute("INSERT INTO t (x) VALUES (zeroblob(100000))", []).expect_err("no room for 100 kB");
        let error = backend(full);
        assert!(error.is_retryable(), "{error:?}");
        let text = error.to_string();
        assert!(
            text.contains("disk holding the ledger is full") && text.contains("free some space"),
            "{text}"
        );
        let count: i64 = conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).expect("count");
        assert_eq!(count, 0, "nothing of the failed write is kept");
    }
}

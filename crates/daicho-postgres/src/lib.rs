//! The PostgreSQL backend of daicho: one ledger shared by workers on many machines.
//!
//! Behaviour is the store contract's, the same as SQLite's (the contract suite runs against
//! both); only the SQL differs. Writes that change the dependency bookkeeping (`upsert`, `edit`,
//! `finish`, `expire_leases`, …) take one transaction-scoped advisory lock, so they are
//! serialized like SQLite's single writer and the `unmet_deps` counters stay exact (the lock is
//! taken before the statements that read under it, so their snapshots hold what a writer that
//! held it committed); rows they rewrite are read `FOR UPDATE`, or (a one-slot worker's end of a
//! run its store claimed) written only if still the version the claim wrote, so a claim (which
//! takes no advisory lock) and a person's edit are never overwritten.
//! Claims lock the rows they take `FOR UPDATE SKIP LOCKED`: a worker never waits behind another
//! claiming the same row, and two workers never both claim it. Claims and run ends are
//! set-based (`runs`): a batch of any size costs the same few round trips and one commit.
//! Instants are stored as integer microseconds, as in SQLite.

mod purge;
mod rows;
mod runs;
mod schema;
mod tx;

use std::collections::{HashMap, HashSet};

use daicho_core::dag::{DagError, NewDeps, check_new_deps};
use daicho_core::edit::TaskEdit;
use daicho_core::merge::incoming_keys;
use daicho_core::policy::{ClaimScope, FailurePolicy, RunCounts};
use daicho_core::{Actor, Status, Task, TaskId};
use daicho_store::codec::{self, READY_ORDER};
use daicho_store::writes::{self, JournalWrite, RowWrite};
use daicho_store::{
    ActionStats, Batch, ClaimOutcome, ClaimRequest, Decided, Decision, Finish, JournalEntry, JournalKind,
    ListFilter, NextClaim, Pick, PurgeReport, Queued, ReadySet, RestoreReport, Result, RunOutcome, RunRecord,
    StatusCount, Store, StoreError, UnknownDeps, UpsertReport,
};
use deadpool_postgres::Pool;
use jiff::Timestamp;

use crate::rows::{COLUMNS, micros, read_task};
use crate::tx::Tx;

/// Rows added by one upsert from which the table statistics are refreshed right after it.
const ANALYZE_AFTER: usize = 1_000;

/// The advisory lock that serializes structural writes.
pub(crate) const WRITE_LOCK: i64 = 0x6461_6963_686f_0001;

/// Wraps a PostgreSQL error as a store error, with the server's own message (severity, SQLSTATE,
/// detail, hint) where there is one; a lost connection, a server shutting down or a refused
/// connection is [`StoreError::Unavailable`]. Connection details (and so passwords) are never
/// part of these messages.
pub(crate) fn backend<E: std::error::Error + Send + Sync + 'static>(error: E) -> StoreError {
    let error: Box<dyn std::error::Error + Send + Sync> = Box::new(error);
    let error = match error.downcast::<tokio_postgres::Error>() {
        Ok(pg) => return pg_error(*pg),
        Err(other) => other,
    };
    match error.downcast::<deadpool_postgres::PoolError>() {
        Ok(pool) => match *pool {
            deadpool_postgres::PoolError::Backend(pg) => pg_error(pg),
            other => StoreError::Unavailable(format!("no PostgreSQL connection: {other}")),
        },
        Err(other) => StoreError::Backend { message: other.to_string(), source: Some(other) },
    }
}

/// A tokio-postgres error as a store error (see [`backend`]).
fn pg_error(error: tokio_postgres::Error) -> StoreError {
    use std::error::Error as _;

    if let Some(db) = error.as_db_error() {
        let mut text = format!("{} {}: {}", db.severity(), db.code().code(), db.message());
        if let Some(detail) = db.detail() {
            text.push_str(&format!(" (detail: {detail})"));
        }
        if let Some(hint) = db.hint() {
            text.push_str(&format!(" (hint: {hint})"));
        }
        let class = db.code().code().get(..2).unwrap_or_default();
        // 08: connection exceptions; 57P01–57P03: admin shutdown, crash shutdown, cannot connect
        // now; 40001/40P01: serialization failure, deadlock; 53: insufficient resources.
        let transient = matches!(class, "08" | "53")
            || matches!(db.code().code(), "57P01" | "57P02" | "57P03" | "40001" | "40P01");
        return if transient {
            StoreError::Unavailable(text)
        } else {
            StoreError::Backend { message: text, source: Some(Box::new(error)) }
        };
    }
    // No server message: the connection itself (closed, refused, timed out, reset) is
    // temporary; anything else (a value that does not convert, say) is not.
    let mut text = error.to_string();
    let mut io = false;
    let mut source = error.source();
    while let Some(cause) = source {
        io |= cause.is::<std::io::Error>();
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    if error.is_closed() || io || text.starts_with("error connecting") || text.contains("timed out") {
        StoreError::Unavailable(text)
    } else {
        StoreError::Backend { message: text, source: Some(Box::new(error)) }
    }
}

/// The connection settings of `url`, with daicho's defaults where the URL sets none (S14): a
/// connect timeout of 10 s, TCP keepalives after 30 s idle, a TCP user timeout of 60 s and a
/// statement timeout of 5 minutes, so a server that stops answering is noticed instead of
/// hanging every command; and a limit of 5 minutes on a session idle inside a transaction, so
/// a client that stops answering is noticed by the server (below).
fn connection_config(url: &str) -> Result<tokio_postgres::Config> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| StoreError::backend_from(format_args!("bad PostgreSQL URL {}", redact(url)), e))?;
    let names = |name: &str| url.contains(&format!("{name}="));
    if !names("connect_timeout") {
        config.connect_timeout(std::time::Duration::from_secs(10));
    }
    if !names("keepalives") && !names("keepalives_idle") {
        config.keepalives(true).keepalives_idle(std::time::Duration::from_secs(30));
    }
    if !names("tcp_user_timeout") {
        config.tcp_user_timeout(std::time::Duration::from_secs(60));
    }
    if !url.contains("statement_timeout") {
        add_option(&mut config, "statement_timeout=300000");
    }
    // I5, S14: a client that stops between two statements of a transaction (a worker suspended
    // with Ctrl-Z, a machine cut off from the network) keeps its locks until the server ends
    // its session, which without this limit is after the server's TCP keepalive (two hours by
    // default). Its locks include the write lock, and a writer waiting for that lock is queued
    // ahead of every later run end, so the whole ledger would wait. daicho's own transactions
    // wait on their client only while it computes between statements (a large merge's plan,
    // seconds); the limit matches the statement timeout.
    if !url.contains("idle_in_transaction_session_timeout") {
        add_option(&mut config, "idle_in_transaction_session_timeout=300000");
    }
    // I5: every statement daicho prepares is planned once per connection, not at each run. With
    // an array of requests or ends as a parameter, PostgreSQL judged each custom plan (an array
    // of one) cheaper than the generic one (ten rows, its guess) and planned the statement again
    // at every execution: a fifth of the server's CPU under a stream of claims. Each statement
    // is a key or index-range lookup shaped for its index, which a generic plan serves the
    // same; a plan made while a table was small is made again when autovacuum analyzes it.
    if !url.contains("plan_cache_mode") {
        add_option(&mut config, "plan_cache_mode=force_generic_plan");
    }
    Ok(config)
}

/// [`connection_config`] for a store that only reads: every session read-only.
fn read_only_config(url: &str) -> Result<tokio_postgres::Config> {
    let mut config = connection_config(url)?;
    add_option(&mut config, "default_transaction_read_only=on");
    Ok(config)
}

/// Adds a server setting (`name=value`) to the options the connections start with.
fn add_option(config: &mut tokio_postgres::Config, setting: &str) {
    let options = config.get_options().unwrap_or_default().to_owned();
    config.options(format!("{options} -c {setting}").trim_start().to_owned());
}

/// A ledger in a PostgreSQL database.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    config: std::sync::Arc<tokio_postgres::Config>,
    /// Notifications of `daicho_ready`, once a worker first waits for work.
    wakeups: std::sync::Arc<tokio::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<()>>>>,
    /// The rows this store's one-slot looks claimed, as their claims wrote them (I5).
    claimed: std::sync::Arc<runs::ClaimedRows>,
}

/// The channel every change that may make work ready is announced on (a hint: workers also poll).
const READY_CHANNEL: &str = "daicho_ready";

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").finish_non_exhaustive()
    }
}

/// A connection URL with its password replaced by `***`, for logs and messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!("{}{}:***{}", &url[..scheme + 3], &userinfo[..colon], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

impl PgStore {
    /// Connects to `url` (`postgres://user:password@host:port/db`) and brings the schema up to
    /// date (migrating once even when many processes start together).
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`] when the URL is invalid, the server cannot be reached, or the
    /// migration fails.
    pub async fn open(url: &str) -> Result<PgStore> {
        Ok(PgStore::open_reporting(url).await?.0)
    }

    /// [`PgStore::open`], also saying how many migrations this call applied.
    ///
    /// # Errors
    ///
    /// As [`PgStore::open`].
    pub async fn open_reporting(url: &str) -> Result<(PgStore, usize)> {
        let config = connection_config(url)?;
        let manager = deadpool_postgres::Manager::new(config.clone(), tokio_postgres::NoTls);
        let pool = Pool::builder(manager).max_size(8).build().map_err(backend)?;
        let store = PgStore {
            pool,
            config: std::sync::Arc::new(config),
            wakeups: Default::default(),
            claimed: Default::default(),
        };
        let mut client = store.client().await?;
        let applied = schema::migrate(&mut client).await?;
        Ok((store, applied))
    }

    /// Opens a ledger for reading only: the schema version is checked, nothing is migrated, and
    /// every session is `default_transaction_read_only`, so a role that may only read (a
    /// reporting replica, a `SELECT`-only user) can list, show and export.
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`] when the database cannot be reached, holds no ledger, or has a
    /// schema version other than this daicho's.
    pub async fn open_read_only(url: &str) -> Result<PgStore> {
        let config = read_only_config(url)?;
        let manager = deadpool_postgres::Manager::new(config.clone(), tokio_postgres::NoTls);
        let pool = Pool::builder(manager).max_size(8).build().map_err(backend)?;
        let store = PgStore {
            pool,
            config: std::sync::Arc::new(config),
            wakeups: Default::default(),
            claimed: Default::default(),
        };
        schema::check_current(&store.client().await?).await?;
        Ok(store)
    }

    /// The number of schema migrations this version knows: [`PgStore::open_reporting`] applied
    /// all of them to a database that had no ledger yet.
    pub fn schema_version() -> usize {
        schema::MIGRATIONS.len()
    }

    /// A connection that LISTENs on the ready channel, feeding `wakeups`.
    async fn listen(&self) -> Result<tokio::sync::mpsc::UnboundedReceiver<()>> {
        let (client, mut connection) = self.config.connect(tokio_postgres::NoTls).await.map_err(backend)?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            // Issue LISTEN while this task drives the connection; keep the client alive after.
            let listen = async {
                let result = client.batch_execute(&format!("LISTEN {READY_CHANNEL}")).await;
                let _ = ready_tx.send(result.map_err(|e| e.to_string()));
                client
            };
            tokio::pin!(listen);
            let mut client_slot = None;
            while client_slot.is_none() {
                tokio::select! {
                    c = &mut listen => client_slot = Some(c),
                    message = std::future::poll_fn(|cx| connection.poll_message(cx)) => {
                        if !matches!(message, Some(Ok(_))) {
                            return;
                        }
                    }
                }
            }
            let _client = client_slot;
            loop {
                match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                    Some(Ok(tokio_postgres::AsyncMessage::Notification(_))) => {
                        if tx.send(()).is_err() {
                            return;
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(_)) | None => return,
                }
            }
        });
        ready_rx
            .await
            .map_err(|_| StoreError::backend("the listener connection closed"))?
            .map_err(|e| StoreError::backend(format!("LISTEN failed: {e}")))?;
        Ok(rx)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(|e| match backend(e) {
            StoreError::Unavailable(text) => {
                StoreError::Unavailable(format!("cannot connect to PostgreSQL: {text}"))
            }
            StoreError::Backend { message, source } => {
                StoreError::Backend { message: format!("cannot connect to PostgreSQL: {message}"), source }
            }
            other => other,
        })
    }
}

/// Runs `$body` in one transaction bound to `$tx` (a [`Tx`]); with `lock`, under the write lock.
/// When `$body` fails (`?` in it returns its error), the transaction is rolled back and the
/// error returned.
macro_rules! in_tx {
    ($self:ident, lock, |$tx:ident| $body:expr) => {
        in_tx!($self, |$tx| {
            write_lock(&$tx).await?;
            $body
        })
    };
    ($self:ident, |$tx:ident| $body:expr) => {{
        let $tx = Tx::begin($self.client().await?).await?;
        match async { Ok::<_, StoreError>($body) }.await {
            Ok(out) => {
                $tx.commit().await?;
                Ok(out)
            }
            Err(e) => {
                // The body's error is the answer; a rollback that fails leaves the transaction
                // unfinished, and its connection is closed when `$tx` is dropped.
                let _ = $tx.rollback().await;
                Err(e)
            }
        }
    }};
}

/// The ready condition (D1, D5), with `$1` the time in microseconds.
fn ready_where() -> String {
    codec::ready_where("$1")
}

impl Store for PgStore {
    async fn wait_for_work(&self, timeout: std::time::Duration) {
        let mut slot = self.wakeups.lock().await;
        if slot.is_none() {
            match self.listen().await {
                Ok(rx) => *slot = Some(rx),
                Err(e) => tracing::warn!("no ready notifications, polling only: {e}"),
            }
        }
        match slot.as_mut() {
            Some(rx) => {
                if let Ok(None) = tokio::time::timeout(timeout, rx.recv()).await {
                    // The listener is gone: listen again next time.
                    *slot = None;
                }
                // Several notifications may have queued up: one look serves them all.
                while rx_try_drain(slot.as_mut()) {}
            }
            None => tokio::time::sleep(timeout).await,
        }
    }

    async fn upsert(&self, batch: Batch) -> Result<UpsertReport> {
        let report: Result<UpsertReport> = in_tx!(self, lock, |tx| {
            let report = upsert_in(&tx, &batch).await?;
            if !report.added.is_empty() {
                notify_ready(&tx).await?;
            }
            report
        });
        let report = report?;
        if report.added.len() >= ANALYZE_AFTER {
            // Fresh statistics, so that the planner knows how many rows are pending now (the
            // server's autovacuum would only notice after a while, or never for a small share).
            let client = self.client().await?;
            client.batch_execute("ANALYZE task, task_dep").await.map_err(backend)?;
        }
        Ok(report)
    }

    async fn replan(&self, batch: Batch, retire: Vec<TaskId>) -> Result<UpsertReport> {
        in_tx!(self, lock, |tx| {
            let drop = TaskEdit { status: Some(Status::Dropped), ..TaskEdit::default() };
            for id in retire {
                if rows::lock_task(&tx, id).await?.is_some_and(|t| t.status.is_open()) {
                    edit_in(&tx, id, &drop, &batch.actor, batch.now).await?;
                }
            }
            let report = upsert_in(&tx, &batch).await?;
            notify_ready(&tx).await?;
            report
        })
    }

    async fn get(&self, id: TaskId) -> Result<Option<Task>> {
        in_tx!(self, |tx| rows::get_task(&tx, id).await?)
    }

    async fn list(&self, filter: ListFilter) -> Result<Vec<Task>> {
        in_tx!(self, |tx| list_in(&tx, &filter).await?)
    }

    async fn status_counts(&self) -> Result<Vec<StatusCount>> {
        in_tx!(self, |tx| {
            let rows = tx
                .query("SELECT project, status, count(*) FROM task GROUP BY project, status", &[])
                .await
                .map_err(backend)?;
            daicho_store::sorted_counts(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect())
        })
    }

    async fn ready(&self, now: Timestamp, limit: usize) -> Result<ReadySet> {
        in_tx!(self, |tx| {
            let now = micros(now);
            // The ready condition, counted without walking the set: the rows pending with
            // every dep met (kept by triggers) less those not due yet (their own index).
            let count = tx.prepare_cached(&codec::ready_count_sql("$1", "task")).await.map_err(backend)?;
            let total: i64 = tx.query_one(&count, &[&now]).await.map_err(backend)?.get(0);
            let rows = tx
                .query(
                    &format!("SELECT {COLUMNS} FROM task WHERE {} {READY_ORDER} LIMIT $2", ready_where()),
                    &[&now, &(limit as i64)],
                )
                .await
                .map_err(backend)?;
            ReadySet { tasks: rows.iter().map(read_task).collect::<Result<_>>()?, total: total as usize }
        })
    }

    async fn view_head(&self, project: String, exclude: Vec<String>, limit: usize) -> Result<Vec<Task>> {
        let client = self.client().await?;
        let stmt =
            client.prepare_cached(&codec::view_head_sql("$1", "$2", &exclude)).await.map_err(backend)?;
        let rows = client.query(&stmt, &[&project, &(limit as i64)]).await.map_err(backend)?;
        rows.iter().map(read_task).collect()
    }

    async fn ready_head(&self, now: Timestamp, scope: Option<ClaimScope>, limit: usize) -> Result<Vec<Task>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(&codec::ready_head_sql("$1", "$2", scope.as_ref()))
            .await
            .map_err(backend)?;
        let rows = client.query(&stmt, &[&micros(now), &(limit as i64)]).await.map_err(backend)?;
        rows.iter().map(read_task).collect()
    }

    async fn edit(&self, id: TaskId, edit: TaskEdit, actor: Actor, now: Timestamp) -> Result<Task> {
        in_tx!(self, lock, |tx| {
            let task = edit_in(&tx, id, &edit, &actor, now).await?;
            notify_ready(&tx).await?;
            task
        })
    }

    async fn journal(&self, id: TaskId) -> Result<Vec<JournalEntry>> {
        in_tx!(self, |tx| {
            let rows = tx
                .query(
                    "SELECT seq, at, task_id, actor, kind, before, after FROM journal WHERE task = $1 ORDER BY seq",
                    &[&(id.num() as i64)],
                )
                .await
                .map_err(backend)?;
            let mut entries = Vec::with_capacity(rows.len());
            for r in rows {
                entries.push(JournalEntry::from_stored(
                    r.get(0),
                    r.get(1),
                    r.get(2),
                    r.get(3),
                    r.get(4),
                    r.get(5),
                    r.get(6),
                )?);
            }
            entries
        })
    }

    async fn claim(&self, request: ClaimRequest) -> Result<ClaimOutcome> {
        let mut outcomes = self.claim_many(vec![request]).await?;
        Ok(outcomes.pop().unwrap_or(ClaimOutcome::NotClaimable))
    }

    async fn claim_many(&self, requests: Vec<ClaimRequest>) -> Result<Vec<ClaimOutcome>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let tx = Tx::begin(self.client().await?).await?;
        runs::claim_and_commit(&tx, &requests, runs::Take::All).await
    }

    async fn claim_first(&self, requests: Vec<ClaimRequest>) -> Result<ClaimOutcome> {
        if requests.is_empty() {
            return Ok(ClaimOutcome::NotClaimable);
        }
        // One statement for all the candidates: a row another worker holds is skipped, not
        // waited for (`FOR UPDATE SKIP LOCKED`), and one taken since is passed over in it.
        let tx = Tx::begin(self.client().await?).await?;
        let mut outcomes = runs::claim_and_commit(&tx, &requests, runs::Take::First).await?;
        Ok(outcomes.pop().unwrap_or(ClaimOutcome::NotClaimable))
    }

    async fn finish_many(&self, finishes: Vec<Finish>) -> Result<Vec<Result<Task>>> {
        if finishes.is_empty() {
            return Ok(Vec::new());
        }
        // The write lock is taken by `finish_many_in` itself, pipelined with its first read.
        in_tx!(self, |tx| runs::finish_many_in(&tx, &finishes).await?)
    }

    async fn claim_next(
        &self,
        now: Timestamp,
        scope: ClaimScope,
        window: usize,
        limit: usize,
        pick: Pick,
    ) -> Result<Option<NextClaim>> {
        // The look and the claim from it in one transaction; a look of one row reads it locked.
        let tx = Tx::pending(self.client().await?);
        Ok(runs::finish_and_claim_next(&tx, &self.claimed, &[], now, &scope, window, limit, pick).await?.1)
    }

    fn claims_one_at_a_time(&self) -> bool {
        // A look of one row reads it locked, passing over rows other looks hold
        // (`runs::finish_and_claim_next`).
        true
    }

    async fn finish_and_claim_next(
        &self,
        finishes: Vec<Finish>,
        now: Timestamp,
        scope: ClaimScope,
        window: usize,
        limit: usize,
        pick: Pick,
    ) -> (Result<Vec<Result<Task>>>, Result<Option<NextClaim>>) {
        // One transaction, one commit: the ends first (under the shared write lock), then the
        // head, read after them, and the claim from it.
        let both = async {
            let tx = Tx::pending(self.client().await?);
            runs::finish_and_claim_next(&tx, &self.claimed, &finishes, now, &scope, window, limit, pick).await
        };
        daicho_store::ends_alone_if_failed(self, both.await, finishes).await
    }

    async fn heartbeat(&self, id: TaskId, attempt: u32, worker: &str, until: Timestamp) -> Result<()> {
        let worker = worker.to_owned();
        // The row changes: an end planned on the row as claimed would be refused by its guard.
        self.claimed.forget(id);
        in_tx!(self, |tx| {
            let changed = tx
                .execute(
                    "UPDATE task SET lease_expires_at = $4 WHERE num = $1 AND attempt = $2 AND lease_owner = $3 \
                     AND status = 'running'",
                    &[&(id.num() as i64), &(attempt as i32), &worker, &micros(until)],
                )
                .await
                .map_err(backend)?;
            if changed == 0 {
                return Err(StoreError::LeaseLost { id, attempt });
            }
        })
    }

    async fn finish(&self, finish: Finish) -> Result<Task> {
        let mut out = self.finish_many(vec![finish]).await?;
        out.pop().unwrap_or_else(|| Err(StoreError::backend("no outcome for a finish")))
    }

    async fn expire_leases(&self, now: Timestamp, policy: FailurePolicy) -> Result<Vec<(TaskId, Status)>> {
        in_tx!(self, |tx| {
            write_lock_shared(&tx).await?;
            runs::expire_in(&tx, now, policy).await?
        })
    }

    async fn set_paused(&self, reason: Option<String>, actor: Actor, now: Timestamp) -> Result<()> {
        in_tx!(self, lock, |tx| {
            let before = paused_in(&tx).await?;
            match &reason {
                Some(reason) => tx
                    .execute(
                        "INSERT INTO setting (name, value) VALUES ('paused', $1) \
                         ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
                        &[reason],
                    )
                    .await
                    .map_err(backend)?,
                None => {
                    tx.execute("DELETE FROM setting WHERE name = 'paused'", &[]).await.map_err(backend)?
                }
            };
            if before != reason {
                let kind = if reason.is_some() { JournalKind::Pause } else { JournalKind::Resume };
                let b = serde_json::json!({ "paused": before }).to_string();
                let a = serde_json::json!({ "paused": reason }).to_string();
                let entry = JournalWrite::event(now, &actor.to_string(), kind, b, a);
                rows::apply(&tx, &[RowWrite::Journal(entry)]).await?;
                notify_ready(&tx).await?;
            }
        })
    }

    async fn lease_role(&self, role: &str, owner: &str, now: Timestamp, until: Timestamp) -> Result<bool> {
        let name = format!("lease:{role}");
        in_tx!(self, lock, |tx| {
            let stored: Option<String> = tx
                .query_opt("SELECT value FROM setting WHERE name = $1", &[&name])
                .await
                .map_err(backend)?
                .map(|r| r.get(0));
            if !daicho_store::role_lease_free(stored.as_deref(), owner, now) {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO setting (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
                &[&name, &daicho_store::role_lease_value(owner, until)],
            )
            .await
            .map_err(backend)?;
            true
        })
    }

    async fn purge_source(
        &self,
        source: &str,
        apply: bool,
        actor: Actor,
        now: Timestamp,
    ) -> Result<PurgeReport> {
        in_tx!(self, lock, |tx| purge::purge_in(&tx, source, apply, &actor, now).await?)
    }

    async fn restore_source(&self, source: &str, actor: Actor, now: Timestamp) -> Result<RestoreReport> {
        in_tx!(self, lock, |tx| {
            let report = purge::restore_in(&tx, source, &actor, now).await?;
            notify_ready(&tx).await?;
            report
        })
    }

    async fn cursor(&self, role: &str) -> Result<Option<String>> {
        let client = self.client().await?;
        let row = client
            .query_opt("SELECT value FROM setting WHERE name = $1", &[&format!("cursor:{role}")])
            .await
            .map_err(backend)?;
        Ok(row.map(|r| r.get(0)))
    }

    async fn set_cursor(&self, role: &str, last: &str) -> Result<()> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO setting (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
                &[&format!("cursor:{role}"), &last],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn paused(&self) -> Result<Option<String>> {
        in_tx!(self, |tx| paused_in(&tx).await?)
    }

    async fn run_counts(&self, since: Timestamp) -> Result<RunCounts> {
        in_tx!(self, |tx| {
            // The instant written into the statement, not bound: how many runs a range holds
            // decides the plan (an index range for today's, a pass over all for "since the
            // first"), and a session's plans are generic ([`connection_config`]).
            let rows = tx
                .query(
                    &format!(
                        "SELECT action, count(*) FROM run WHERE started >= {} GROUP BY action",
                        micros(since)
                    ),
                    &[],
                )
                .await
                .map_err(backend)?;
            let mut counts = RunCounts::default();
            for r in rows {
                let n: i64 = r.get(1);
                counts.total += n as u32;
                counts.by_action.insert(r.get(0), n as u32);
            }
            counts
        })
    }

    async fn stats(&self, since: Timestamp) -> Result<Vec<ActionStats>> {
        in_tx!(self, |tx| {
            // Since the first run: the ended runs' counts kept by their run ends (`run_count`),
            // summed over their shards, and the runs under way from their own index; not a pass
            // over the whole run history.
            let from = micros(since);
            let rows = match daicho_store::codec::stats_all_time(since) {
                true => tx.query(
                    "SELECT action, sum(runs)::BIGINT, sum(successes)::BIGINT, sum(failures)::BIGINT, \
                     sum(running)::BIGINT, sum(tokens_in)::BIGINT, sum(tokens_out)::BIGINT FROM ( \
                     SELECT action, runs, successes, failures, running, tokens_in, tokens_out \
                     FROM run_count UNION ALL SELECT action, count(*), 0, 0, count(*), \
                     coalesce(sum(tokens_in), 0)::BIGINT, coalesce(sum(tokens_out), 0)::BIGINT FROM run \
                     WHERE outcome = 'running' GROUP BY action) AS c \
                     GROUP BY action HAVING sum(runs) > 0 ORDER BY action",
                    &[],
                )
                .await,
                // The instant written in, as in `run_counts`.
                false => tx.query(
                    &format!(
                        "SELECT action, count(*), count(*) FILTER (WHERE outcome = 'success'), \
                         count(*) FILTER (WHERE outcome IN ('failure', 'timeout', 'lost')), \
                         count(*) FILTER (WHERE outcome = 'running'), coalesce(sum(tokens_in), 0)::BIGINT, \
                         coalesce(sum(tokens_out), 0)::BIGINT FROM run WHERE started >= {from} GROUP BY action \
                         ORDER BY action"
                    ),
                    &[],
                )
                .await,
            }
            .map_err(backend)?;
            rows.iter()
                .map(|r| ActionStats {
                    action: r.get(0),
                    runs: r.get::<_, i64>(1) as u64,
                    successes: r.get::<_, i64>(2) as u64,
                    failures: r.get::<_, i64>(3) as u64,
                    running: r.get::<_, i64>(4) as u64,
                    tokens_in: r.get::<_, i64>(5) as u64,
                    tokens_out: r.get::<_, i64>(6) as u64,
                })
                .collect()
        })
    }

    async fn runs(&self, id: TaskId) -> Result<Vec<RunRecord>> {
        in_tx!(self, |tx| {
            let rows = tx
                .query(
                    "SELECT attempt, worker, action, started, finished, outcome, error, tokens_in, tokens_out, \
                     idempotency_key, note FROM run WHERE task = $1 ORDER BY attempt",
                    &[&(id.num() as i64)],
                )
                .await
                .map_err(backend)?;
            let time = |v: i64| Timestamp::from_microsecond(v).map_err(backend);
            let mut out = Vec::with_capacity(rows.len());
            for r in rows {
                out.push(RunRecord {
                    task: id,
                    attempt: r.get::<_, i32>(0) as u32,
                    worker: r.get(1),
                    action: r.get(2),
                    started: time(r.get(3))?,
                    finished: r.get::<_, Option<i64>>(4).map(time).transpose()?,
                    outcome: {
                        let word: &str = r.get(5);
                        RunOutcome::parse(word)
                            .ok_or_else(|| StoreError::backend(format!("bad run outcome '{word}'")))?
                    },
                    error: r.get(6),
                    tokens_in: r.get::<_, Option<i64>>(7).map(|t| t as u64),
                    tokens_out: r.get::<_, Option<i64>>(8).map(|t| t as u64),
                    idempotency_key: r.get(9),
                    note: r.get(10),
                });
            }
            out
        })
    }

    async fn note_run(&self, id: TaskId, attempt: u32, note: String) -> Result<()> {
        in_tx!(self, |tx| {
            tx.execute(
                "UPDATE run SET note = CASE WHEN note = '' THEN $3 ELSE note || chr(10) || $3 END \
                 WHERE task = $1 AND attempt = $2",
                &[&(id.num() as i64), &(attempt as i32), &note],
            )
            .await
            .map_err(backend)?;
        })
    }

    async fn queue_approvals(&self, ids: Vec<TaskId>, by: String, now: Timestamp) -> Result<Vec<TaskId>> {
        in_tx!(self, |tx| {
            let mut queued = Vec::new();
            for id in &ids {
                let n = tx
                    .execute(
                        "INSERT INTO approval (task, queued_at, queued_by) VALUES ($1, $2, $3) \
                         ON CONFLICT (task) DO UPDATE SET queued_at = EXCLUDED.queued_at, \
                         queued_by = EXCLUDED.queued_by, decided_at = NULL, decided_by = NULL, decision = NULL, \
                         reason = '' WHERE approval.decided_at IS NOT NULL \
                         AND NOT EXISTS (SELECT 1 FROM task WHERE num = EXCLUDED.task AND approved_by <> '')",
                        &[&(id.num() as i64), &micros(now), &by],
                    )
                    .await
                    .map_err(backend)?;
                if n > 0 {
                    queued.push(*id);
                }
            }
            queued
        })
    }

    async fn approvals(&self) -> Result<Vec<Queued>> {
        in_tx!(self, |tx| {
            let rows = tx
                .query(
                    "SELECT a.task, t.id_width, a.queued_at, a.queued_by FROM approval a JOIN task t ON t.num = a.task \
                     WHERE a.decided_at IS NULL AND t.status = 'pending' ORDER BY a.queued_at, a.task",
                    &[],
                )
                .await
                .map_err(backend)?;
            let mut out = Vec::new();
            for r in rows {
                let id = TaskId::with_width(r.get::<_, i64>(0) as u64, r.get::<_, i32>(1) as u8);
                let queued_at = Timestamp::from_microsecond(r.get(2)).map_err(backend)?;
                out.push(Queued { id, queued_at, queued_by: r.get(3) });
            }
            out
        })
    }

    async fn change_mark(&self) -> Result<u64> {
        in_tx!(self, |tx| {
            let n: i64 = tx.query_one(codec::CHANGE_MARK_SQL, &[]).await.map_err(backend)?.get(0);
            n.max(0) as u64
        })
    }

    async fn reject(&self, id: TaskId, reason: String, actor: Actor, now: Timestamp) -> Result<Task> {
        let edit = daicho_store::ends::reject_edit(&reason)?;
        in_tx!(self, lock, |tx| {
            let task = edit_in(&tx, id, &edit, &actor, now).await?;
            decide(&tx, id, Decision::Rejected, reason.trim(), &actor, now).await?;
            notify_ready(&tx).await?;
            task
        })
    }

    async fn decisions(&self, limit: usize) -> Result<Vec<Decided>> {
        in_tx!(self, |tx| {
            let rows = tx
                .query(
                    "SELECT a.task, t.id_width, a.queued_at, a.queued_by, a.decided_at, coalesce(a.decided_by, ''), \
                     a.decision, a.reason FROM approval a JOIN task t ON t.num = a.task \
                     WHERE a.decided_at IS NOT NULL ORDER BY a.decided_at DESC, a.task DESC LIMIT $1",
                    &[&(limit as i64)],
                )
                .await
                .map_err(backend)?;
            let mut out = Vec::new();
            for r in rows {
                let id = TaskId::with_width(r.get::<_, i64>(0) as u64, r.get::<_, i32>(1) as u8);
                let queued_at = Timestamp::from_microsecond(r.get(2)).map_err(backend)?;
                out.push(Decided {
                    queued: Queued { id, queued_at, queued_by: r.get(3) },
                    decided_at: Timestamp::from_microsecond(r.get(4)).map_err(backend)?,
                    decided_by: r.get(5),
                    decision: Decision::parse(r.get::<_, Option<String>>(6).as_deref()),
                    reason: r.get(7),
                });
            }
            out
        })
    }

    async fn approve(&self, id: TaskId, actor: Actor, now: Timestamp) -> Result<Task> {
        in_tx!(self, lock, |tx| {
            let before = rows::lock_task(&tx, id).await?.ok_or(StoreError::NotFound(id))?;
            let unmet: i32 = tx
                .query_one("SELECT unmet_deps FROM task WHERE num = $1", &[&(id.num() as i64)])
                .await
                .map_err(backend)?
                .get(0);
            let after = daicho_store::ends::plan_approve(&before, unmet.max(0) as u32, &actor, now)?;
            let mut writes = Vec::new();
            if after != before {
                writes.push(RowWrite::update(&before, &after));
            }
            decide(&tx, id, Decision::Approved, "", &actor, now).await?;
            let actor = actor.to_string();
            writes.push(RowWrite::Journal(JournalWrite::change(
                now,
                &before,
                &after,
                &actor,
                JournalKind::Approve,
                None,
            )?));
            rows::apply(&tx, &writes).await?;
            notify_ready(&tx).await?;
            rows::get_task(&tx, id).await?.ok_or(StoreError::NotFound(id))?
        })
    }
}

/// Records a person's decision on a task's queue entry (created if it was never queued).
async fn decide(
    tx: &Tx,
    id: TaskId,
    decision: Decision,
    reason: &str,
    actor: &Actor,
    now: Timestamp,
) -> Result<()> {
    tx.execute(
        &codec::decide_sql(|n| format!("${n}")),
        &[&(id.num() as i64), &micros(now), &actor.to_string(), &decision.as_str(), &reason],
    )
    .await
    .map_err(backend)?;
    Ok(())
}

fn rx_try_drain(rx: Option<&mut tokio::sync::mpsc::UnboundedReceiver<()>>) -> bool {
    rx.is_some_and(|rx| rx.try_recv().is_ok())
}

/// Takes the write lock (until the transaction ends).
async fn write_lock(tx: &Tx) -> Result<()> {
    advisory(tx, "SELECT pg_advisory_xact_lock($1)").await
}

/// Takes the write lock shared (until the transaction ends), for run ends and lost runs (I5):
/// they change no edge and move dependents' `unmet_deps` only by relative updates under row
/// locks, so they may run side by side (and their commits share WAL flushes), while any write
/// that reads the dependency bookkeeping to decide (an upsert, an edit) still waits for them and
/// they for it.
pub(crate) async fn write_lock_shared(tx: &Tx) -> Result<()> {
    advisory(tx, WRITE_LOCK_SHARED).await
}

/// The statement of [`write_lock_shared`].
pub(crate) const WRITE_LOCK_SHARED: &str = "SELECT pg_advisory_xact_lock_shared($1)";

/// Takes the write lock as `sql` says (exclusive or shared).
async fn advisory(tx: &Tx, sql: &str) -> Result<()> {
    let lock = tx.prepare_cached(sql).await.map_err(backend)?;
    tx.execute(&lock, &[&WRITE_LOCK]).await.map_err(backend)?;
    Ok(())
}

/// The statement of [`notify_ready`].
pub(crate) const NOTIFY: &str = "SELECT pg_notify($1, '')";

/// Announces (at commit) that work may have become ready.
async fn notify_ready(tx: &Tx) -> Result<()> {
    let stmt = tx.prepare_cached(NOTIFY).await.map_err(backend)?;
    tx.execute(&stmt, &[&READY_CHANNEL]).await.map_err(backend)?;
    Ok(())
}

/// The statement of [`paused_in`].
pub(crate) const PAUSED: &str = "SELECT value FROM setting WHERE name = 'paused'";

/// The kill switch's reason, when it is on.
async fn paused_in(tx: &Tx) -> Result<Option<String>> {
    let stmt = tx.prepare_cached(PAUSED).await.map_err(backend)?;
    Ok(tx.query_opt(&stmt, &[]).await.map_err(backend)?.map(|r| r.get(0)))
}

async fn list_in(tx: &Tx, filter: &ListFilter) -> Result<Vec<Task>> {
    let rows = tx.query(&codec::list_sql(filter), &[]).await.map_err(backend)?;
    rows.iter().map(read_task).collect()
}

/// The deps of the ledger rows reachable from `changes` (or only whether the rows exist, with
/// `leaf`), loaded level by level, then the pure DAG check over them.
async fn check_deps(
    tx: &Tx,
    changes: &[NewDeps],
    new_rows: &[TaskId],
    refuse_unknown: bool,
    leaf: bool,
) -> Result<std::result::Result<(), DagError>> {
    let mut overlay: HashSet<TaskId> = changes.iter().map(|c| c.task).collect();
    overlay.extend(changes.iter().flat_map(|c| &c.deps).filter(|d| new_rows.binary_search(d).is_ok()));
    let mut known: HashMap<TaskId, Vec<TaskId>> = HashMap::new();
    let mut missing: HashSet<TaskId> = HashSet::new();
    let mut frontier: Vec<i64> = changes
        .iter()
        .flat_map(|c| c.deps.iter())
        .filter(|d| !overlay.contains(d))
        .map(|d| d.num() as i64)
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    while !frontier.is_empty() {
        let rows = tx
            .query("SELECT num, deps FROM task WHERE num = ANY($1)", &[&frontier])
            .await
            .map_err(backend)?;
        let mut found: HashSet<i64> = HashSet::new();
        let mut next: HashSet<i64> = HashSet::new();
        for r in rows {
            let num: i64 = r.get(0);
            found.insert(num);
            let deps = if leaf { Vec::new() } else { codec::parse_deps(r.get(1)) };
            for d in &deps {
                if !overlay.contains(d) && !known.contains_key(d) && !missing.contains(d) {
                    next.insert(d.num() as i64);
                }
            }
            known.insert(TaskId::new(num as u64), deps);
        }
        for num in &frontier {
            if !found.contains(num) {
                missing.insert(TaskId::new(*num as u64));
            }
        }
        next.retain(|n| !found.contains(n));
        frontier = next.into_iter().filter(|n| !known.contains_key(&TaskId::new(*n as u64))).collect();
    }
    Ok(check_new_deps(changes, refuse_unknown, |id| {
        if new_rows.binary_search(&id).is_ok() { Some(Vec::new()) } else { known.get(&id).cloned() }
    }))
}

/// Whether some ledger row waits for one of `ids`.
async fn anyone_waits_for(tx: &Tx, ids: &[TaskId]) -> Result<bool> {
    if ids.is_empty() {
        return Ok(false);
    }
    let nums: Vec<i64> = ids.iter().map(|i| i.num() as i64).collect();
    let row = tx
        .query_one("SELECT EXISTS (SELECT 1 FROM task_dep WHERE dep = ANY($1))", &[&nums])
        .await
        .map_err(backend)?;
    Ok(row.get(0))
}

async fn upsert_in(tx: &Tx, batch: &Batch) -> Result<UpsertReport> {
    let next_id: i64 =
        tx.query_one("SELECT value FROM meta WHERE name = 'next_id'", &[]).await.map_err(backend)?.get(0);
    // Decided a range at a time, from the rows each range matches by key and by requested id:
    // the matched rows of the whole batch are never held at once.
    let mut decider = batch.decider(next_id as u64)?;
    for range in batch.ranges() {
        let items = batch.range(range.clone())?;
        let keys = incoming_keys(&items);
        let wanted_keys: Vec<&str> =
            keys.iter().flatten().map(String::as_str).collect::<HashSet<_>>().into_iter().collect();
        let wanted_ids: Vec<TaskId> = items
            .iter()
            .filter_map(|i| i.ref_id.as_deref().and_then(TaskId::parse))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let rows = rows::rows_matching(tx, &wanted_ids, &wanted_keys).await?;
        drop(wanted_keys);
        batch.take(&mut decider, range.start, &items, keys, &rows)?;
    }
    let decided = decider.finish();
    // The whole batch's edges are checked before anything is written.
    let changes = batch.dep_changes(&decided)?;
    let added = decided.added();
    let leaf = !decided.fills_deps() && !anyone_waits_for(tx, &added).await?;
    check_deps(tx, &changes, &added, batch.unknown_deps == UnknownDeps::Refuse, leaf)
        .await?
        .map_err(|e| batch.dag_error(e))?;
    drop((changes, added));

    // Built and written a range at a time (rows of earlier ranges are in the ledger by then).
    let mut report = UpsertReport::default();
    for range in batch.ranges() {
        // The patched rows read locked, as they are now: a claim (which takes no write lock)
        // may have changed one since it was matched, and a patch must not write back its old
        // run columns.
        let patched: Vec<i64> = decided.patched(range.clone()).iter().map(|id| id.num() as i64).collect();
        let fresh = if patched.is_empty() { HashMap::new() } else { runs::lock_rows(tx, &patched).await? };
        let items = batch.range(range.clone())?;
        let plan = decided.plan(range.start, &items, &fresh, batch.now).map_err(StoreError::NotFound)?;
        let added: Vec<&Task> = plan.add.iter().map(|a| &a.task).collect();
        let statuses = rows::statuses(tx, &writes::outside_deps(&added)).await?;
        rows::apply_all(tx, writes::plan_upsert(batch, &plan, &fresh, &statuses)).await?;
        report.note_plan(range.start, &items, &plan);
    }
    tx.execute(
        "UPDATE meta SET value = $1 WHERE name = 'next_id'",
        &[&(decided.next_id.max(next_id as u64) as i64)],
    )
    .await
    .map_err(backend)?;
    Ok(report)
}

async fn edit_in(tx: &Tx, id: TaskId, edit: &TaskEdit, actor: &Actor, now: Timestamp) -> Result<Task> {
    let before = rows::lock_task(tx, id).await?.ok_or(StoreError::NotFound(id))?;
    let after = daicho_store::ends::plan_edit(&before, edit, actor, now)?;
    if after.deps != before.deps {
        let change = NewDeps { task: id, deps: after.deps.clone(), origin: None };
        check_deps(tx, &[change], &[], true, false).await??;
    }
    rows::apply(
        tx,
        &writes::change_writes(now, &before, &after, &actor.to_string(), JournalKind::Edit, None)?,
    )
    .await?;
    if let Some((attempt, error)) = daicho_store::ends::run_stopped_by_edit(&before, &after, actor) {
        runs::close_stopped_run(tx, id, attempt, now, &error).await?;
    }
    rows::get_task(tx, id).await?.ok_or(StoreError::NotFound(id))
}

/// The test server's URL (`DAICHO_TEST_PG`, default the local server), or `None` when
/// `DAICHO_SKIP_PG=1` says to skip the tests that need it (CI never sets it).
#[cfg(test)]
pub(crate) fn test_server() -> Option<String> {
    if std::env::var("DAICHO_SKIP_PG").is_ok_and(|v| v == "1") {
        return None;
    }
    Some(
        std::env::var("DAICHO_TEST_PG")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned()),
    )
}

#[cfg(test)]
mod tests {
    /// I5, S14: daicho's sessions plan each statement once, give up on a statement after 5
    /// minutes and are ended by the server after 5 minutes idle inside a transaction, the
    /// read-only ones too (their own setting once replaced the others); a setting the URL names
    /// is the URL's. Read from the server's side of real sessions.
    #[tokio::test]
    async fn i5_s14_sessions_start_with_daichos_settings_unless_the_url_names_them() {
        let Some(url) = super::test_server() else { return };
        let join = if url.contains('?') { '&' } else { '?' };
        let named = format!("{url}{join}options=-c%20plan_cache_mode%3Dauto");
        let cases = [
            (super::connection_config(&url), "force_generic_plan", "off"),
            (super::read_only_config(&url), "force_generic_plan", "on"),
            (super::connection_config(&named), "auto", "off"),
        ];
        for (config, plan, read_only) in cases {
            let (client, connection) =
                config.expect("a config").connect(tokio_postgres::NoTls).await.unwrap_or_else(|e| {
                    panic!("PostgreSQL at {url} is not reachable ({e}); set DAICHO_SKIP_PG=1 to skip")
                });
            let task = tokio::spawn(connection);
            let mut seen = Vec::new();
            for name in [
                "plan_cache_mode",
                "statement_timeout",
                "idle_in_transaction_session_timeout",
                "default_transaction_read_only",
            ] {
                let row = client.query_one(&format!("SHOW {name}"), &[]).await.expect("SHOW");
                seen.push(row.get::<_, String>(0));
            }
            assert_eq!(seen, [plan, "5min", "5min", read_only], "a session's settings");
            drop(client);
            let _ = task.await;
        }
    }

    /// I5, S14: a client that stops answering inside a transaction (a worker suspended with
    /// Ctrl-Z, a machine cut off from the network) does not hold the write lock for good. The
    /// server ends its session once it has been idle in its transaction for daicho's limit (named
    /// by the URL here: one second; 5 minutes by default, checked above), so a writer waiting for
    /// the lock goes on; the stalled transaction's next statement fails as retryable and commits
    /// nothing; and the pool's next session is a live one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn i5_s14_a_client_stalled_inside_a_transaction_does_not_hold_the_write_lock_for_good() {
        use std::time::{Duration, Instant};

        use crate::tx::Tx;

        let Some(server) = super::test_server() else { return };
        // A database of its own: the write lock is an advisory lock, one per database.
        let db = Database::fresh(&server, "stall");
        let url = format!("{}?options=-c%20idle_in_transaction_session_timeout%3D1000", db.url);
        let config = super::connection_config(&url).expect("a config");
        let manager = deadpool_postgres::Manager::new(config, tokio_postgres::NoTls);
        let pool = deadpool_postgres::Pool::builder(manager).max_size(2).build().expect("a pool");
        let stalled = Tx::pending(pool.get().await.expect("a connection"));
        stalled.first_sharing_write_lock(async { Ok(()) }).await.expect("the write lock, shared");
        // Idle in its transaction from here on.
        let started = Instant::now();
        // A writer takes the lock exclusively, as an upsert or an edit does, while the first
        // transaction's client says nothing more.
        let writer = Tx::pending(pool.get().await.expect("a connection"));
        let took =
            tokio::time::timeout(Duration::from_secs(30), writer.first(super::write_lock(&writer))).await;
        let waited = started.elapsed();
        took.expect("the writer got the write lock once the stalled session was ended")
            .expect("the write lock");
        assert!(
            waited >= Duration::from_millis(800),
            "the writer waited for the stalled session ({waited:?})"
        );
        writer.commit().await.expect("the writer commits");
        let ended = stalled.commit().await.expect_err("the stalled transaction was ended by the server");
        assert!(ended.is_retryable(), "a stalled session's end is retryable: {ended}");
        drop(stalled);
        let next = pool.get().await.expect("a connection");
        next.query_one("SELECT 1", &[]).await.expect("the pool's next session answers");
        drop(next);
        drop(pool);
        drop(db);
    }

    /// A database of its own on the test server for a unit test, dropped with it (also when
    /// the test fails).
    struct Database {
        server: String,
        name: String,
        url: String,
    }

    impl Database {
        fn fresh(server: &str, what: &str) -> Database {
            let name = format!("daicho_unit_{what}_{}", std::process::id());
            let base = server.rsplit_once('/').map_or(server, |(base, _)| base);
            let db = Database { server: server.to_owned(), url: format!("{base}/{name}"), name };
            db.admin(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", db.name));
            db.admin(&format!("CREATE DATABASE {}", db.name));
            db
        }

        /// Runs `sql` on a connection and a thread of its own (usable from `Drop` too).
        fn admin(&self, sql: &str) {
            let (server, sql) = (self.server.clone(), sql.to_owned());
            let run = move || {
                let runtime =
                    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
                runtime.block_on(async {
                    let (client, connection) =
                        tokio_postgres::connect(&server, tokio_postgres::NoTls).await.unwrap_or_else(|e| {
                            panic!(
                                "PostgreSQL at {server} is not reachable ({e}); set DAICHO_SKIP_PG=1 to skip"
                            )
                        });
                    let task = tokio::spawn(connection);
                    client.batch_execute(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
                    drop(client);
                    let _ = task.await;
                });
            };
            std::thread::spawn(run).join().expect("admin thread");
        }
    }

    impl Drop for Database {
        fn drop(&mut self) {
            self.admin(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

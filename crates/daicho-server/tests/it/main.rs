//! Tests of the web UI and the HTTP API against a real SQLite ledger and a real server on an
//! ephemeral loopback port; the browser tests drive a real headless Chromium.

mod api;
mod authority;
mod browser;
mod chrome;
mod concurrency;
mod guard;

use std::sync::Arc;

use daicho_core::{Actor, Item};
use daicho_engine::{Config, Engine};
use daicho_server::{Metrics, ServerOptions};
use daicho_sqlite::{SqliteOptions, SqliteStore};
use daicho_store::{Batch, Store, UnknownDeps};

/// Actions of the test ledger: `work` runs automatically (an `ai` task) and ends in `review`;
/// `publish` is external (needs a person's approval); `render` is heavy.
pub const CONFIG: &str = r#"
[policy]
lease = "30s"

[[action]]
name = "work"
kind = "command"
command = ["true"]
auto = true

[[action]]
name = "finish"
kind = "command"
command = ["true"]
auto = true
on_success = "done"

[[action]]
name = "publish"
kind = "command"
command = ["true"]
external = true

[[action]]
name = "render"
kind = "command"
command = ["true"]
auto = true
heavy = true

[[action]]
name = "mail"
kind = "llm"
base_url = "http://127.0.0.1:9/v1"
model = "mail-writer"
prompt = "Write to the client about: {title}\n{body}"
external = true
types = ["mail"]
"#;

/// A server on a fresh ledger, stopped when dropped.
#[derive(Debug)]
pub struct TestServer {
    pub base: String,
    pub store: Arc<SqliteStore>,
    pub client: reqwest::Client,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl TestServer {
    /// Starts a server with `options` (its address replaced by an ephemeral loopback port).
    pub async fn start(options: ServerOptions) -> TestServer {
        TestServer::start_with(options, SqliteOptions::default()).await
    }

    /// [`TestServer::start`] on a ledger opened with `sqlite` (a short busy timeout, say).
    pub async fn start_with(options: ServerOptions, sqlite: SqliteOptions) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(SqliteStore::open(dir.path().join("ledger.db"), sqlite).await.expect("open"));
        let config = Config::parse(CONFIG, "test.toml").expect("config");
        let engine = Arc::new(Engine::new(Arc::clone(&store), config, None));
        let options = ServerOptions { bind: "127.0.0.1:0".parse().expect("addr"), ..options };
        // One scheduled role run, so that /metrics shows the role families with samples.
        let metrics = Metrics::default();
        metrics.record_sweep("auto", 0.25, 2);
        let bound = daicho_server::bind(engine, options, Arc::new(metrics)).await.expect("bind");
        let base = format!("http://{}", bound.local_addr().expect("addr"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(bound.serve(async move {
            let _ = stopped.await;
        }));
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client =
            reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
        TestServer { base, store, client, _dir: dir, stop: Some(stop) }
    }

    /// A person sets a row's status.
    pub async fn set_status(&self, id: daicho_core::TaskId, status: daicho_core::Status) {
        let edit = daicho_core::edit::TaskEdit { status: Some(status), ..Default::default() };
        self.store.edit(id, edit, Actor::Human("p".into()), jiff::Timestamp::now()).await.expect("edit");
    }

    /// Queues rows for approval as the run-requested sweep would.
    pub async fn queue(&self, ids: Vec<daicho_core::TaskId>) {
        self.store
            .queue_approvals(ids, "sweep:run-requested".into(), jiff::Timestamp::now())
            .await
            .expect("queue");
    }

    /// A worker claims a row at `now` (a five-minute lease); the claim must succeed.
    pub async fn claim(&self, id: daicho_core::TaskId, worker: &str, now: jiff::Timestamp) {
        let claim = daicho_store::ClaimRequest {
            id,
            worker: worker.into(),
            action: "work".into(),
            now,
            lease: jiff::SignedDuration::from_mins(5),
            require_run: false,
            require_approval: false,
        };
        let claimed = self.store.claim(claim).await.expect("claim");
        assert!(matches!(claimed, daicho_store::ClaimOutcome::Claimed(_)), "{claimed:?}");
    }

    /// Upserts items as a producer would.
    pub async fn push(&self, items: Vec<Item>) -> Vec<daicho_core::TaskId> {
        self.upsert(items, Actor::Push("test".into())).await
    }

    /// Upserts items as a person's import of an exported ledger would: they may carry a result,
    /// a correction or ▶ run (S13).
    pub async fn seed(&self, items: Vec<Item>) -> Vec<daicho_core::TaskId> {
        self.upsert(items, Actor::Human("seed".into())).await
    }

    async fn upsert(&self, items: Vec<Item>, actor: Actor) -> Vec<daicho_core::TaskId> {
        let batch = Batch {
            items: items.into(),
            actor,
            now: jiff::Timestamp::now(),
            file: "test".into(),
            unknown_deps: UnknownDeps::Refuse,
        };
        self.store.upsert(batch).await.expect("upsert").added
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// An item with an action and tags.
pub fn item(title: &str, project: &str, action: &str, tags: &str) -> Item {
    let mut item = Item::new(title, "test");
    item.project = project.into();
    item.action = action.into();
    item.tags = daicho_core::Tags::parse_list(tags);
    item
}

/// The whole ledger as text: every row in full (as JSON), every row's journal and runs, the
/// approval queue and the kill switch. Two equal snapshots mean nothing was written between them.
pub async fn ledger_snapshot(store: &SqliteStore) -> String {
    use std::fmt::Write as _;

    let mut out = String::new();
    for task in store.list(daicho_store::ListFilter::default()).await.expect("list") {
        let _ = writeln!(out, "{}", serde_json::to_string(&task).expect("row as JSON"));
        let _ = writeln!(out, "{:?}", store.journal(task.id).await.expect("journal"));
        let _ = writeln!(out, "{:?}", store.runs(task.id).await.expect("runs"));
    }
    let _ = writeln!(out, "approvals {:?}", store.approvals().await.expect("approvals"));
    let _ = writeln!(out, "paused {:?}", store.paused().await.expect("paused"));
    out
}

/// The CSRF token the server's pages embed (as a person's browser has it).
pub async fn page_csrf(server: &TestServer) -> String {
    let page = server.client.get(server.url("/")).send().await.expect("get").text().await.expect("text");
    page.split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("csrf in the page")
        .to_owned()
}

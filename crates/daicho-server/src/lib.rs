//! The faces of daicho over HTTP, served by `daicho serve` (I2, I3).
//!
//! - The web UI ([`ui`]): the cross view, one ledger per project where a person changes only
//!   `status`, `correction` and the ▶ run box, the approval queue, a task page with its journal
//!   and runs, the kill switch. Plain HTML forms: it works without JavaScript.
//! - The JSON API ([`api`]) under `/api/v1`: list, show, ready with reasons, push (X2), patch,
//!   approve, and `claim` / `heartbeat` / `complete` / `fail` for remote workers, every write
//!   after a claim fenced by its attempt.
//! - `/metrics` ([`metrics`]) in the Prometheus text format.
//! - `/mcp` ([`mcp`]): the MCP tools over Streamable HTTP.
//!
//! Security ([`security`]): every request passes one guard. A non-loopback address is refused
//! without an access token, which every request must then carry; without a token, requests
//! naming a host other than loopback or the public URL's are refused (DNS rebinding). No page of
//! another origin can act for the person (S13): state-changing requests that a browser marks as
//! coming from another site or origin are refused, API writes must be JSON, and every form
//! carries a CSRF token. Every response forbids scripts from elsewhere and framing; every text
//! is escaped by the templates; request bodies are capped; `/api` answers every error as JSON.

pub mod api;
mod labels;
pub mod mcp;
pub mod metrics;
mod security;
mod ui;
pub mod wire;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use daicho_engine::Engine;
use daicho_store::Store;

pub use metrics::Metrics;

/// How the server runs.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Where to listen (default `127.0.0.1:7878`).
    pub bind: SocketAddr,
    /// The access token every request must carry (required for a non-loopback address).
    pub token: Option<String>,
    /// A second token, for workers and agents: it reads and claims, heartbeats, completes,
    /// fails and pushes tasks, but acts for no person (S13). Needs `token`.
    pub worker_token: Option<String>,
    /// Japanese labels (locale `ja`).
    pub ja: bool,
    /// The largest request body accepted, in bytes.
    pub body_limit: usize,
    /// The URL people open the server at when it is not `http://<the Host they send>`, such as
    /// `https://daicho.example.com` behind a TLS proxy (`--public-url`, `DAICHO_PUBLIC_URL`).
    /// Its origin counts as the server's own for the cross-origin check, and without a token its
    /// host is answered besides loopback.
    pub public_url: Option<String>,
}

impl Default for ServerOptions {
    fn default() -> ServerOptions {
        ServerOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 7878)),
            token: None,
            worker_token: None,
            ja: false,
            body_limit: 1024 * 1024,
            public_url: None,
        }
    }
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A non-loopback address without an access token.
    #[error(
        "refusing to listen on {0} without an access token: anyone who can reach it could run tasks; \
         set DAICHO_TOKEN (or --token), or listen on 127.0.0.1"
    )]
    NeedsToken(SocketAddr),
    /// The access token is too short to protect anything.
    #[error("the access token must have at least 16 characters")]
    WeakToken,
    /// A worker token without an access token: every request on loopback would act for a
    /// person all the same.
    #[error(
        "a worker token needs an access token (--token, DAICHO_TOKEN) for the people: without it, any request \
         on loopback acts for a person"
    )]
    WorkerTokenAlone,
    /// The worker token is the access token, or too short.
    #[error("the worker token must have at least 16 characters and differ from the access token")]
    WeakWorkerToken,
    /// The public URL is not an `http` or `https` origin.
    #[error("the public URL must be http(s)://host[:port], without a path: '{0}'")]
    BadPublicUrl(String),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The reason.
        source: std::io::Error,
    },
}

/// What every handler shares.
#[derive(Debug)]
pub struct AppState<S> {
    engine: Arc<Engine<S>>,
    options: ServerOptions,
    /// The CSRF token of this process: embedded in every form, checked on every form post. A
    /// page of another origin cannot read it (same-origin policy), so it cannot forge a post.
    csrf: String,
    /// What the guard checks every request against (the token, the public URL's origin).
    rules: security::Rules,
    metrics: Arc<Metrics>,
    /// Turns true when the server stops taking requests: endless responses (the pages' live
    /// `/events`) end then, so a graceful stop does not wait on an open browser tab.
    closing: tokio::sync::watch::Receiver<bool>,
}

impl<S> AppState<S> {
    fn store(&self) -> &S
    where
        S: Store + 'static,
    {
        self.engine.store()
    }

    /// A person's edit of a row from the web UI or the API, made as `daicho set` makes it: where
    /// this server runs tasks of a named ledger, the run of a daicho gone from this machine that
    /// the edit stops has its leftovers killed and its fence cleared at once
    /// ([`daicho_engine::edit_as_person`], S14).
    async fn edit_as_person(
        &self,
        id: daicho_core::TaskId,
        edit: daicho_core::edit::TaskEdit,
        actor: daicho_core::Actor,
    ) -> Result<daicho_core::Task, daicho_store::StoreError>
    where
        S: Store + 'static,
    {
        let now = jiff::Timestamp::now();
        match daicho_engine::supervise::ledger() {
            Some(ledger) => daicho_engine::edit_as_person(self.store(), ledger, id, edit, actor, now).await,
            None => self.store().edit(id, edit, actor, now).await,
        }
    }
}

/// A server bound to its address, not yet serving.
#[derive(Debug)]
pub struct Bound {
    listener: tokio::net::TcpListener,
    router: Router,
    closing: tokio::sync::watch::Sender<bool>,
}

/// Checks the options, then binds the address. A non-loopback address needs an access token
/// (I2).
///
/// # Errors
///
/// [`ServerError::NeedsToken`], [`ServerError::WeakToken`] or [`ServerError::Bind`].
pub async fn bind<S: Store + 'static>(
    engine: Arc<Engine<S>>,
    options: ServerOptions,
    metrics: Arc<Metrics>,
) -> Result<Bound, ServerError> {
    match &options.token {
        None if !options.bind.ip().is_loopback() => return Err(ServerError::NeedsToken(options.bind)),
        Some(token) if token.chars().count() < 16 => return Err(ServerError::WeakToken),
        _ => {}
    }
    match (&options.worker_token, &options.token) {
        (Some(_), None) => return Err(ServerError::WorkerTokenAlone),
        (Some(worker), Some(token)) if worker.chars().count() < 16 || worker == token => {
            return Err(ServerError::WeakWorkerToken);
        }
        _ => {}
    }
    let public = match options.public_url.as_deref().filter(|u| !u.trim().is_empty()) {
        Some(url) => {
            Some(security::SiteOrigin::public_url(url).ok_or_else(|| ServerError::BadPublicUrl(url.into()))?)
        }
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(options.bind)
        .await
        .map_err(|source| ServerError::Bind { addr: options.bind, source })?;
    let rules = security::Rules::new(options.token.clone(), options.worker_token.clone(), public);
    let (closing, closing_rx) = tokio::sync::watch::channel(false);
    let csrf = security::random_token();
    let state = Arc::new(AppState { engine, csrf, rules, options, metrics, closing: closing_rx });
    Ok(Bound { listener, router: router(state), closing })
}

impl Bound {
    /// The address actually bound (port 0 picks a free one).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves; requests under way are finished first.
    ///
    /// # Errors
    ///
    /// An I/O error of the listener.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
        let closing = self.closing;
        let shutdown = async move {
            shutdown.await;
            let _ = closing.send(true);
        };
        axum::serve(self.listener, self.router).with_graceful_shutdown(shutdown).await
    }

    /// Serves in the background until [`Running::stop`].
    ///
    /// # Errors
    ///
    /// An I/O error reading the bound address.
    pub fn spawn(self) -> std::io::Result<Running> {
        let addr = self.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(self.serve(async move {
            let _ = stopped.await;
        }));
        Ok(Running { addr, stop, handle })
    }
}

/// A server serving in the background ([`Bound::spawn`]).
#[derive(Debug)]
pub struct Running {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops taking requests and returns once those under way are answered.
    ///
    /// # Errors
    ///
    /// The listener's I/O error, if serving failed.
    pub async fn stop(self) -> std::io::Result<()> {
        let _ = self.stop.send(());
        self.handle.await.map_err(std::io::Error::other)?
    }
}

/// Every route, and the answer for every other path, behind the guard and the body limit.
///
/// The guard wraps the whole router as one service, not each route: every request passes it
/// exactly once, whether a route matches, the method is wrong (405) or nothing matches (404).
fn router<S: Store + 'static>(state: Arc<AppState<S>>) -> Router {
    let limit = state.options.body_limit;
    let routes = Router::new()
        .merge(ui::routes::<S>())
        .merge(api::routes::<S>())
        .route("/metrics", axum::routing::get(metrics::handler::<S>))
        .route("/login", axum::routing::get(security::login::<S>))
        .nest_service("/mcp", mcp::http_service(Arc::clone(&state.engine)))
        .fallback(security::not_found)
        .with_state(Arc::clone(&state));
    Router::new()
        .fallback_service(routes)
        .layer(axum::middleware::from_fn_with_state(state, security::guard::<S>))
        .layer(DefaultBodyLimit::max(limit))
}

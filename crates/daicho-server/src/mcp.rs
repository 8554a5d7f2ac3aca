//! The MCP server (I4): coding agents take ready work, report results and register the tasks
//! they find, under the same rules as every executor. `daicho mcp` serves it on stdio; `daicho
//! serve` (and `daicho mcp --http`) at `/mcp` over Streamable HTTP, behind the web server's
//! access guard.
//!
//! Answers are token-frugal JSON: short keys, no empty fields, long text cut with a marker that
//! says how to fetch the rest. No tool approves an external task or writes `correction`: only a
//! person does that. Every write after a claim names the claim's attempt (fencing).

use std::sync::Arc;

use daicho_core::{Status, Task, TaskId};
use daicho_engine::Engine;
use daicho_engine::remote::{ClaimFilter, NextClaim};
use daicho_store::{ListFilter, Store, StoreError};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{Peer, RoleServer, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// Text longer than this is cut in answers (`show` with `full: true` gives it whole).
const CUT: usize = 600;

/// The MCP tools over one engine.
#[derive(Debug)]
pub struct DaichoMcp<S> {
    engine: Arc<Engine<S>>,
    /// The agent's name as configured (`daicho mcp --agent`); else the client's own name.
    agent: Option<String>,
    tool_router: ToolRouter<Self>,
}

impl<S> Clone for DaichoMcp<S> {
    fn clone(&self) -> Self {
        DaichoMcp {
            engine: Arc::clone(&self.engine),
            agent: self.agent.clone(),
            tool_router: self.tool_router.clone(),
        }
    }
}

/// Serves the tools on stdin/stdout until the client closes the stream.
///
/// # Errors
///
/// The MCP handshake or the transport failed.
pub async fn serve_stdio<S: Store + 'static>(
    engine: Arc<Engine<S>>,
    agent: Option<String>,
) -> std::io::Result<()> {
    use rmcp::ServiceExt as _;

    let service = DaichoMcp::new(engine, agent)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| std::io::Error::other(format!("MCP handshake failed: {e}")))?;
    service.waiting().await.map_err(|e| std::io::Error::other(format!("MCP server stopped: {e}")))?;
    Ok(())
}

/// The Streamable HTTP service of the tools, for the web server's `/mcp`.
///
/// rmcp's own `Host` allow-list is off: the web server's guard decides which hosts are answered,
/// by one rule for every route (with a token any host, the token being the guard; without one,
/// loopback and the public URL's host), and refuses cross-origin writes before rmcp sees them.
pub(crate) fn http_service<S: Store + 'static>(
    engine: Arc<Engine<S>>,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    DaichoMcp<S>,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    let tools = DaichoMcp::new(engine, None);
    let config = rmcp::transport::streamable_http_server::StreamableHttpServerConfig::default()
        .disable_allowed_hosts();
    rmcp::transport::streamable_http_server::StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::default(),
        config,
    )
}

/// An answer: compact JSON as text.
fn answer(value: Value) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(value.to_string())])
}

/// A refusal the agent reads (a tool error, not a protocol error).
fn refusal(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

fn store_refusal(e: StoreError) -> CallToolResult {
    match e {
        StoreError::LeaseLost { id, attempt } => refusal(format!(
            "lease lost: {id} attempt {attempt} is no longer your run (it expired and was counted, or was \
             claimed again); stop working on it and do not report it again"
        )),
        other => refusal(other.to_string()),
    }
}

fn parse_id(text: &str) -> Result<TaskId, CallToolResult> {
    TaskId::parse(text).ok_or_else(|| refusal(format!("'{text}' is not a task id (T-0001)")))
}

/// Cuts long text, saying how much is left and how to get it.
fn cut(text: &str, id: TaskId, full: bool) -> String {
    let count = text.chars().count();
    if full || count <= CUT {
        return text.to_owned();
    }
    let head: String = text.chars().take(CUT).collect();
    format!("{head}…[cut: {} more chars; call show with id={id} full=true]", count - CUT)
}

/// A task with its non-empty fields only.
fn compact(task: &Task, full: bool) -> Value {
    let mut m = Map::new();
    let mut put = |key: &str, value: Value| {
        let empty = match &value {
            Value::String(s) => s.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::Null => true,
            Value::Number(n) => n.as_i64() == Some(0),
            Value::Bool(b) => !b,
            Value::Object(_) => false,
        };
        if !empty {
            m.insert(key.to_owned(), value);
        }
    };
    put("id", json!(task.id.to_string()));
    put("status", json!(task.status.as_str()));
    put("title", json!(task.title));
    put("project", json!(task.project));
    put("body", json!(cut(&task.body, task.id, full)));
    put("source", json!(task.source));
    put("evidence", json!(cut(&task.evidence, task.id, full)));
    put("due", json!(task.due.map(|d| d.to_string())));
    put("assignee", json!(task.assignee));
    put("type", json!(task.work_type));
    put("priority", json!(task.priority));
    put("action", json!(task.action));
    put("result", json!(cut(&task.result, task.id, full)));
    put("correction", json!(cut(&task.correction, task.id, full)));
    put("deps", json!(task.deps.iter().map(ToString::to_string).collect::<Vec<_>>()));
    put("tags", json!(task.tags.iter().collect::<Vec<_>>()));
    put("failures", json!(task.failures));
    put("attempt", json!(task.attempt));
    put("run", json!(task.run));
    Value::Object(m)
}

/// Parameters of `ready`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadyParams {
    /// Only this project.
    pub project: Option<String>,
    /// At most this many (default 20).
    pub limit: Option<usize>,
}

/// Parameters of `claim_next`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimParams {
    /// Only a task of this project.
    pub project: Option<String>,
    /// Only a task this action runs.
    pub action: Option<String>,
}

/// Parameters of `heartbeat`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatParams {
    /// The claimed task's id.
    pub id: String,
    /// The attempt claim_next returned.
    pub attempt: u32,
}

/// Parameters of `complete`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteParams {
    /// The claimed task's id.
    pub id: String,
    /// The attempt claim_next returned.
    pub attempt: u32,
    /// What the work produced, for the person who reviews it.
    pub result: String,
    /// Tasks found while working (each {"title", "body"?, "deps"?, "tags"?, …}); registered
    /// after the result, never undoing it.
    pub tasks: Option<Vec<Value>>,
}

/// Parameters of `fail`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FailParams {
    /// The claimed task's id.
    pub id: String,
    /// The attempt claim_next returned.
    pub attempt: u32,
    /// What went wrong.
    pub error: String,
}

/// Parameters of `push`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PushParams {
    /// The tasks (each {"title", "body"?, "project"?, "deps"?, "tags"?, "due"?, …}).
    pub tasks: Vec<Value>,
    /// Where they come from (part of the dedupe key; default: this agent's name).
    pub source: Option<String>,
    /// Their project, when they do not name one.
    pub project: Option<String>,
}

/// Parameters of `show`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowParams {
    /// The task's id (T-0001).
    pub id: String,
    /// Every text whole (default: long text is cut).
    pub full: Option<bool>,
}

/// Parameters of `list`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only this project.
    pub project: Option<String>,
    /// Only this status: pending, running, review, done, dropped, needs_human, or open.
    pub status: Option<String>,
    /// At most this many (default 50, at most 500).
    pub limit: Option<usize>,
    /// Only ids after this one (the `next` of the previous page).
    pub after: Option<String>,
}

impl<S: Store + 'static> DaichoMcp<S> {
    /// The tools over `engine`; `agent` names the agent in the journal (default: the MCP
    /// client's name).
    pub fn new(engine: Arc<Engine<S>>, agent: Option<String>) -> DaichoMcp<S> {
        DaichoMcp { engine, agent, tool_router: Self::tool_router() }
    }

    /// The worker name runs are claimed under: `mcp:<agent>`.
    fn worker(&self, peer: &Peer<RoleServer>) -> String {
        let name = self.agent.clone().or_else(|| peer.peer_info().map(|i| i.client_info.name.clone()));
        let name: String =
            name.unwrap_or_else(|| "agent".to_owned()).chars().filter(|c| !c.is_control()).take(60).collect();
        format!("mcp:{name}")
    }
}

#[tool_router]
impl<S: Store + 'static> DaichoMcp<S> {
    /// `ready`.
    #[tool(
        description = "List tasks that are ready now (every dependency done), in run order. Call it to see \
        what work exists before claiming, or to explain why nothing was claimed. Each row: id, t (title), \
        p (project), a (action), and why (only when it will not run: the reason, e.g. awaiting approval, \
        heavy, no ai tag). total = ready tasks in all. Read-only."
    )]
    async fn ready(&self, Parameters(p): Parameters<ReadyParams>) -> CallToolResult {
        let limit = p.limit.unwrap_or(20).clamp(1, 200);
        let store = self.engine.store();
        let scan = if p.project.is_some() { 2_000 } else { limit };
        let ready = match store.ready(jiff::Timestamp::now(), scan).await {
            Ok(r) => r,
            Err(e) => return store_refusal(e),
        };
        let tasks: Vec<Task> = ready
            .tasks
            .into_iter()
            .filter(|t| p.project.as_ref().is_none_or(|project| *project == t.project))
            .take(limit)
            .collect();
        let decisions = match self.engine.explain(&tasks, daicho_engine::Role::Auto).await {
            Ok(d) => d,
            Err(e) => return store_refusal(e),
        };
        let rows: Vec<Value> = tasks
            .iter()
            .zip(decisions)
            .map(|(t, decision)| {
                let mut row = json!({ "id": t.id.to_string(), "t": t.title });
                if !t.project.is_empty() {
                    row["p"] = json!(t.project);
                }
                match decision {
                    Ok(action) => row["a"] = json!(action),
                    Err(hold) => row["why"] = json!(hold.to_string()),
                }
                row
            })
            .collect();
        answer(json!({ "total": ready.total, "tasks": rows }))
    }

    /// `claim_next`.
    #[tool(
        description = "Claim the next ready task you may run, before starting any work on it. Returns the \
        task (with the person's correction, which you must follow first, and its evidence), the action, the \
        attempt, the idempotency key (pass it to any outside system so a repeat after a crash is recognised) \
        and lease_until. While working, call heartbeat before lease_until; when done call complete, or fail \
        if you could not do it. Returns {\"none\": n} when nothing is claimable (n = ready tasks held back), \
        or {\"paused\": reason} when a person stopped all runs: then do not work on the ledger. Heavy tasks \
        and external tasks awaiting a person's approval are never handed out."
    )]
    async fn claim_next(
        &self,
        Parameters(p): Parameters<ClaimParams>,
        peer: Peer<RoleServer>,
    ) -> CallToolResult {
        let filter = ClaimFilter { worker: self.worker(&peer), project: p.project, action: p.action };
        match self.engine.claim_next(&filter).await {
            Ok(NextClaim::Claimed(c)) => {
                let mut task = compact(&c.task, false);
                task["action"] = json!(c.action);
                task["attempt"] = json!(c.task.attempt);
                task["key"] = json!(c.idempotency_key);
                task["lease_until"] = json!(c.lease_expires_at.to_string());
                answer(task)
            }
            Ok(NextClaim::Nothing { held }) => answer(json!({ "none": held })),
            Ok(NextClaim::Paused(reason)) => answer(json!({ "paused": reason })),
            Err(e) => store_refusal(e),
        }
    }

    /// `heartbeat`.
    #[tool(description = "Extend the lease of a task you claimed; call it before lease_until while you are \
        still working (every third of the lease is safe). If it says the lease is lost, stop: the run is no \
        longer yours. Then report its end with complete or fail (refused, none of it recorded): when a person \
        moved the task meanwhile, that lets it run again at once instead of when the lease runs out.")]
    async fn heartbeat(
        &self,
        Parameters(p): Parameters<HeartbeatParams>,
        peer: Peer<RoleServer>,
    ) -> CallToolResult {
        let id = match parse_id(&p.id) {
            Ok(id) => id,
            Err(refused) => return refused,
        };
        match self.engine.heartbeat_remote(id, p.attempt, &self.worker(&peer)).await {
            Ok(until) => answer(json!({ "lease_until": until.to_string() })),
            Err(e) => store_refusal(e),
        }
    }

    /// `complete`.
    #[tool(description = "Report that you finished a task you claimed: the result text (what you did and \
        where it is), and optionally tasks you found that someone should do. The task goes to review (a \
        person checks it) or done. Call it once per claim, with the attempt claim_next gave.")]
    async fn complete(
        &self,
        Parameters(p): Parameters<CompleteParams>,
        peer: Peer<RoleServer>,
    ) -> CallToolResult {
        let id = match parse_id(&p.id) {
            Ok(id) => id,
            Err(refused) => return refused,
        };
        let found = p.tasks.map(Value::Array);
        match self.engine.complete_remote(id, p.attempt, &self.worker(&peer), p.result, found, None).await {
            Ok(end) => {
                let mut out = json!({ "id": id.to_string(), "status": end.task.status.as_str() });
                if let Some((added, updated, skipped)) = end.pushed {
                    out["pushed"] = json!({ "added": added, "updated": updated, "skipped": skipped });
                }
                if let Some(error) = end.push_error {
                    out["push_error"] = json!(error);
                }
                answer(out)
            }
            Err(e) => store_refusal(e),
        }
    }

    /// `fail`.
    #[tool(
        description = "Report that you could not finish a task you claimed, with the error. The failure is \
        counted and the task goes back to pending (after 3 failures, to a person). Do not retry it yourself."
    )]
    async fn fail(&self, Parameters(p): Parameters<FailParams>, peer: Peer<RoleServer>) -> CallToolResult {
        let id = match parse_id(&p.id) {
            Ok(id) => id,
            Err(refused) => return refused,
        };
        match self.engine.fail_remote(id, p.attempt, &self.worker(&peer), p.error).await {
            Ok(task) => answer(json!({
                "id": id.to_string(), "status": task.status.as_str(), "failures": task.failures
            })),
            Err(e) => store_refusal(e),
        }
    }

    /// `push`.
    #[tool(
        description = "Register tasks you discovered (outside a claim, or in bulk). The same task pushed \
        again (same source and title) is not added twice. Returns counts of added, updated and skipped."
    )]
    async fn push(&self, Parameters(p): Parameters<PushParams>, peer: Peer<RoleServer>) -> CallToolResult {
        let source = p.source.unwrap_or_else(|| self.worker(&peer));
        let text = Value::Array(p.tasks).to_string();
        let pushed = crate::api::push_items(
            self.engine.store(),
            &text,
            "<push tool>",
            source,
            p.project.unwrap_or_default(),
        );
        match pushed.await {
            Ok(r) => answer(
                json!({ "added": r.added.len(), "updated": r.updated.len(), "skipped": r.skipped.len(),
                "ids": r.added.iter().map(ToString::to_string).collect::<Vec<_>>() }),
            ),
            Err(e) => store_refusal(e),
        }
    }

    /// `show`.
    #[tool(description = "Show one task: every non-empty field. Long text is cut with a marker; call again \
        with full=true to get it whole.")]
    async fn show(&self, Parameters(p): Parameters<ShowParams>) -> CallToolResult {
        let id = match parse_id(&p.id) {
            Ok(id) => id,
            Err(refused) => return refused,
        };
        match self.engine.store().get(id).await {
            Ok(Some(task)) => answer(compact(&task, p.full.unwrap_or(false))),
            Ok(None) => refusal(format!("no task {id}")),
            Err(e) => store_refusal(e),
        }
    }

    /// `list`.
    #[tool(description = "List tasks by id, optionally of one project and status (open = pending, running, \
        review). Each row: id, s (status), t (title). next = pass as after for the next page. Read-only.")]
    async fn list(&self, Parameters(p): Parameters<ListParams>) -> CallToolResult {
        let statuses = match p.status.as_deref() {
            None => Vec::new(),
            Some("open") => vec![Status::Pending, Status::Running, Status::Review],
            Some(name) => match Status::parse(name) {
                Some(status) => vec![status],
                None => return refusal(format!("unknown status '{name}'")),
            },
        };
        let after = match p.after.as_deref().map(parse_id).transpose() {
            Ok(after) => after,
            Err(refused) => return refused,
        };
        let limit = p.limit.unwrap_or(50).clamp(1, 500);
        let filter = ListFilter {
            project: p.project,
            statuses,
            after,
            limit: Some(limit + 1),
            ..ListFilter::default()
        };
        let mut tasks = match self.engine.store().list(filter).await {
            Ok(tasks) => tasks,
            Err(e) => return store_refusal(e),
        };
        let more = tasks.len() > limit;
        tasks.truncate(limit);
        let rows: Vec<Value> = tasks
            .iter()
            .map(|t| json!({ "id": t.id.to_string(), "s": t.status.as_str(), "t": t.title }))
            .collect();
        let mut out = json!({ "tasks": rows });
        if more && let Some(last) = tasks.last() {
            out["next"] = json!(last.id.to_string());
        }
        answer(out)
    }
}

#[tool_handler]
impl<S: Store + 'static> ServerHandler for DaichoMcp<S> {
    fn get_info(&self) -> ServerConfig {
        let daicho = Implementation::new("daicho", env!("CARGO_PKG_VERSION")).with_title("daicho (台帳)");
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(daicho)
            .with_instructions(
                "daicho is a task ledger. Loop: claim_next → do the work (follow the correction first) → \
             heartbeat while it takes long → complete (or fail). Register tasks you find with push or in \
             complete's tasks. Only a person approves external tasks or writes corrections.",
            )
    }
}

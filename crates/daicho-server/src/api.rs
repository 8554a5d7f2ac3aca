//! The HTTP JSON API (I3) under `/api/v1`; `docs/api.md` documents it.
//!
//! For people and tools: list, show, ready (with reasons), the cross view, push (X2), patch
//! (only `status`, `correction`, `run`) and approve. For remote workers: `claim`, then
//! `heartbeat`, `complete` or `fail` naming the claim's attempt and worker — a write of a claim
//! that is no longer current (finished, expired and counted, claimed again) is refused with
//! 409 and changes nothing.
//!
//! Errors are `{"error": "…"}` with 400 (bad input), 401/403 (access, or a write from another
//! origin), 404 (no such task or path), 405 (wrong method), 409 (conflict or lost lease), 413
//! (body too large), 415 (not JSON), 422 (unknown or ill-typed fields) or 500; the guard turns
//! the plain-text rejections of axum's extractors into this shape.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use daicho_core::edit::TaskEdit;
use daicho_core::format::ItemDefaults;
use daicho_core::view::ViewOptions;
use daicho_core::{Actor, Status, TaskId};
use daicho_engine::remote::{ClaimFilter, NextClaim};
use daicho_store::{Batch, ListFilter, Store, StoreError, UnknownDeps};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::AppState;
use crate::wire::{JournalJson, PushJson, ReadyWhyJson, RunRecordJson, TaskJson};

/// The API's routes.
pub(crate) fn routes<S: Store + 'static>() -> Router<Arc<AppState<S>>> {
    Router::new()
        .route("/api/v1/tasks", get(list::<S>))
        .route("/api/v1/tasks/{id}", get(show::<S>).patch(patch::<S>))
        .route("/api/v1/tasks/{id}/approve", post(approve::<S>))
        .route("/api/v1/tasks/{id}/reject", post(reject::<S>))
        .route("/api/v1/approvals", get(approvals::<S>))
        .route("/api/v1/tasks/{id}/heartbeat", post(heartbeat::<S>))
        .route("/api/v1/tasks/{id}/complete", post(complete::<S>))
        .route("/api/v1/tasks/{id}/fail", post(fail::<S>))
        .route("/api/v1/ready", get(ready::<S>))
        .route("/api/v1/view", get(view::<S>))
        .route("/api/v1/push", post(push::<S>))
        .route("/api/v1/claim", post(claim::<S>))
}

/// An API error: a status and a message for a person.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl ApiError {
    pub(crate) fn bad(message: impl Into<String>) -> ApiError {
        ApiError { status: StatusCode::BAD_REQUEST, message: message.into() }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        let status = match &e {
            StoreError::NotFound(_) => StatusCode::NOT_FOUND,
            StoreError::InvalidInput(_) | StoreError::Dag(_) => StatusCode::BAD_REQUEST,
            StoreError::Conflict(_) | StoreError::LeaseLost { .. } => StatusCode::CONFLICT,
            StoreError::Refused(daicho_core::authority::Refusal::NotReady { .. }) => StatusCode::CONFLICT,
            StoreError::Refused(_) => StatusCode::FORBIDDEN,
            // Temporary (S14): a dropped connection, a lock held too long, a full disk; the
            // same request may be sent again.
            StoreError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!("api: {e}");
        } else if status == StatusCode::SERVICE_UNAVAILABLE {
            tracing::warn!("api: {e}");
        }
        ApiError { status, message: e.to_string() }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(e: JsonRejection) -> ApiError {
        ApiError { status: e.status(), message: e.body_text() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "error": self.message }))).into_response()
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;

fn task_id(text: &str) -> Result<TaskId, ApiError> {
    TaskId::parse(text).ok_or_else(|| ApiError::bad(format!("'{text}' is not a task id (T-0001)")))
}

fn parse_status(text: &str) -> Result<Status, ApiError> {
    Status::parse(text).ok_or_else(|| {
        let known: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
        ApiError::bad(format!("unknown status '{text}' (known: {})", known.join(", ")))
    })
}

/// Query of `GET /api/v1/tasks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    project: Option<String>,
    /// Comma-separated statuses (Japanese names accepted; `open` = pending, running, review).
    status: Option<String>,
    source: Option<String>,
    tag: Option<String>,
    /// Only the tasks that wait on this one.
    waiting_on: Option<String>,
    /// The last id of the previous page.
    after: Option<String>,
    /// At most this many (default 100, at most 1,000).
    limit: Option<usize>,
}

/// A page of tasks.
#[derive(Debug, Serialize)]
pub(crate) struct TaskPage {
    tasks: Vec<TaskJson>,
    /// Pass as `after` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_after: Option<String>,
}

async fn list<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Query(query): Query<ListQuery>,
) -> ApiResult<TaskPage> {
    let mut statuses = Vec::new();
    for name in query.status.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
        if name == "open" {
            statuses.extend([Status::Pending, Status::Running, Status::Review]);
        } else {
            statuses.push(parse_status(name)?);
        }
    }
    let limit = query.limit.unwrap_or(100).clamp(1, 1000);
    let filter = ListFilter {
        project: query.project,
        statuses,
        source: query.source,
        tag: query.tag,
        waiting_on: query.waiting_on.as_deref().map(task_id).transpose()?,
        after: query.after.as_deref().map(task_id).transpose()?,
        limit: Some(limit + 1),
        ..ListFilter::default()
    };
    let mut tasks = state.store().list(filter).await?;
    let next_after = (tasks.len() > limit).then(|| {
        tasks.truncate(limit);
        tasks.last().map(|t| t.id.to_string())
    });
    Ok(Json(TaskPage { tasks: tasks.iter().map(TaskJson::from).collect(), next_after: next_after.flatten() }))
}

/// One task with its journal and runs.
#[derive(Debug, Serialize)]
pub(crate) struct TaskDetail {
    task: TaskJson,
    journal: Vec<JournalJson>,
    runs: Vec<RunRecordJson>,
}

async fn show<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<String>,
) -> ApiResult<TaskDetail> {
    let id = task_id(&id)?;
    let store = state.store();
    let task = store.get(id).await?.ok_or(StoreError::NotFound(id))?;
    let journal = store.journal(id).await?;
    let runs = store.runs(id).await?;
    Ok(Json(TaskDetail {
        task: TaskJson::from(&task),
        journal: journal.iter().map(JournalJson::from).collect(),
        runs: runs.iter().map(RunRecordJson::from).collect(),
    }))
}

/// Body of `PATCH /api/v1/tasks/{id}`: the only fields a person changes here.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PatchBody {
    status: Option<String>,
    correction: Option<String>,
    run: Option<bool>,
    /// Who is changing it (journaled as `human:<by>`; default `api`).
    by: Option<String>,
}

/// A person's edit as the web UI and the API accept it: status (never `running`, which only a
/// claim sets), correction, run.
pub(crate) fn person_edit(
    status: Option<&str>,
    correction: Option<String>,
    run: Option<bool>,
) -> Result<TaskEdit, ApiError> {
    let status = status.map(parse_status).transpose()?;
    if status == Some(Status::Running) {
        return Err(ApiError::bad("status 'running' is set by a claim only"));
    }
    if correction.as_ref().is_some_and(|c| c.chars().count() > 20_000) {
        return Err(ApiError::bad("correction is longer than 20,000 characters"));
    }
    Ok(TaskEdit { status, correction, run, ..TaskEdit::default() })
}

fn human(by: Option<String>, default: &str) -> Result<Actor, ApiError> {
    let name = by.unwrap_or_else(|| default.to_owned());
    let name = name.trim();
    if name.is_empty() || name.len() > 100 || name.chars().any(char::is_control) {
        return Err(ApiError::bad("'by' must be a name of 1 to 100 characters"));
    }
    Ok(Actor::Human(name.to_owned()))
}

async fn patch<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<String>,
    body: Result<Json<PatchBody>, JsonRejection>,
) -> ApiResult<TaskJson> {
    let id = task_id(&id)?;
    let Json(body) = body?;
    let edit = person_edit(body.status.as_deref(), body.correction, body.run)?;
    let actor = human(body.by, "api")?;
    let task = state.edit_as_person(id, edit, actor).await?;
    Ok(Json(TaskJson::from(&task)))
}

/// Body of `POST /api/v1/tasks/{id}/approve`: a JSON object, `{}` or `{"by": "hanako"}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApproveBody {
    by: Option<String>,
}

async fn approve<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<String>,
    body: Result<Json<serde_json::Map<String, Value>>, JsonRejection>,
) -> ApiResult<TaskJson> {
    let id = task_id(&id)?;
    // A JSON object is required (`{}` at least): an approval never comes from an empty post.
    let Json(body) = body?;
    let body: ApproveBody = serde_json::from_value(Value::Object(body))
        .map_err(|e| ApiError { status: StatusCode::UNPROCESSABLE_ENTITY, message: e.to_string() })?;
    let actor = human(body.by, "api")?;
    let task = state.store().approve(id, actor, jiff::Timestamp::now()).await?;
    Ok(Json(TaskJson::from(&task)))
}

/// Body of `POST /api/v1/tasks/{id}/reject`: the reason (required) and who rejects.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RejectBody {
    reason: String,
    by: Option<String>,
}

/// A person rejects an external task (S2, S13): dropped, the reason kept as its correction.
async fn reject<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<String>,
    body: Result<Json<RejectBody>, JsonRejection>,
) -> ApiResult<TaskJson> {
    let id = task_id(&id)?;
    let Json(body) = body?;
    let actor = human(body.by, "api")?;
    let task = state.store().reject(id, body.reason, actor, jiff::Timestamp::now()).await?;
    Ok(Json(TaskJson::from(&task)))
}

/// Query of `GET /api/v1/approvals`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovalsQuery {
    decisions: Option<usize>,
}

/// The approval queue with what each run would do, and the latest decisions (S2): what the
/// approvals page and `daicho approve` show.
#[derive(Debug, Serialize)]
pub(crate) struct ApprovalsJson {
    queue: daicho_engine::outbound::ApprovalQueue,
    decisions: daicho_engine::outbound::Decisions,
}

async fn approvals<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Query(query): Query<ApprovalsQuery>,
) -> ApiResult<ApprovalsJson> {
    let queue = state.engine.approval_queue().await?;
    let decisions = state.engine.decisions(query.decisions.unwrap_or(20).min(100)).await?;
    Ok(Json(ApprovalsJson { queue, decisions }))
}

/// Query of `GET /api/v1/ready`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadyQuery {
    limit: Option<usize>,
}

async fn ready<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Query(query): Query<ReadyQuery>,
) -> ApiResult<ReadyWhyJson> {
    let ready = state.store().ready(jiff::Timestamp::now(), query.limit.unwrap_or(50).min(1000)).await?;
    let decisions = state.engine.explain(&ready.tasks, daicho_engine::Role::Auto).await?;
    Ok(Json(ReadyWhyJson::new(&ready, decisions)))
}

/// Query of `GET /api/v1/view`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ViewQuery {
    per_project: Option<usize>,
}

/// The cross view (V1–V4) of the ledger.
pub(crate) async fn build_view<S: Store + 'static>(
    state: &AppState<S>,
    per_project: Option<usize>,
) -> Result<daicho_core::view::CrossView, StoreError> {
    let config = state.engine.config();
    let dashboard_sources: BTreeSet<String> =
        config.sources.iter().filter(|s| s.dashboard).map(|s| s.name.clone()).collect();
    let options = ViewOptions {
        per_project: per_project.unwrap_or(config.view.per_project),
        today: jiff::Zoned::now().date(),
        dashboard_sources,
    };
    daicho_store::cross_view(state.store(), options).await
}

async fn view<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Query(query): Query<ViewQuery>,
) -> ApiResult<daicho_core::view::CrossView> {
    Ok(Json(build_view(&state, query.per_project).await?))
}

/// Query of `POST /api/v1/push`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PushQuery {
    /// The producer (part of the dedupe key); default `api`.
    source: Option<String>,
    /// The default project of the items.
    project: Option<String>,
}

/// X2: the body is a tasks.json document, an item array or one item, as `daicho push` reads.
async fn push<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Query(query): Query<PushQuery>,
    body: String,
) -> ApiResult<PushJson> {
    let source = query.source.unwrap_or_else(|| "api".to_owned());
    let report =
        push_items(state.store(), &body, "<request body>", source, query.project.unwrap_or_default()).await?;
    Ok(Json(PushJson::from(&report)))
}

/// X2 for the API and the MCP tools: parses `text` as `daicho push` reads JSON (naming `file` in
/// errors) and upserts the items as pushed by `source`, refusing unknown deps.
///
/// # Errors
///
/// [`StoreError::InvalidInput`] naming the line, or the upsert's error; nothing is stored then.
pub(crate) async fn push_items<S: Store>(
    store: &S,
    text: &str,
    file: &str,
    source: String,
    project: String,
) -> Result<daicho_store::UpsertReport, StoreError> {
    let defaults = ItemDefaults { source: source.clone(), project };
    let items = daicho_core::format::json::parse(text, file, &defaults)?;
    let batch = Batch {
        items: items.into(),
        actor: Actor::Push(source),
        now: jiff::Timestamp::now(),
        file: file.to_owned(),
        unknown_deps: UnknownDeps::Refuse,
    };
    store.upsert(batch).await
}

/// Body of `POST /api/v1/claim`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClaimBody {
    /// The worker's name; it must name itself again on heartbeat, complete and fail.
    worker: String,
    project: Option<String>,
    action: Option<String>,
}

/// What a claim got: `claimed` with the task and what the run needs, `nothing`, or `paused`.
#[derive(Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub(crate) enum ClaimJson {
    Claimed {
        task: Box<TaskJson>,
        action: String,
        attempt: u32,
        idempotency_key: String,
        correction: Option<String>,
        lease_expires_at: String,
    },
    Nothing {
        /// Ready tasks matching the filter that may not run now (see `GET /api/v1/ready`).
        held: usize,
    },
    Paused {
        reason: String,
    },
}

fn worker_name(name: &str) -> Result<String, ApiError> {
    let name = name.trim();
    if name.is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
        return Err(ApiError::bad("'worker' must be a name of 1 to 200 characters"));
    }
    Ok(name.to_owned())
}

async fn claim<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    body: Result<Json<ClaimBody>, JsonRejection>,
) -> ApiResult<ClaimJson> {
    let Json(body) = body?;
    let filter =
        ClaimFilter { worker: worker_name(&body.worker)?, project: body.project, action: body.action };
    Ok(Json(match state.engine.claim_next(&filter).await? {
        NextClaim::Claimed(c) => ClaimJson::Claimed {
            attempt: c.task.attempt,
            task: Box::new(TaskJson::from(&c.task)),
            action: c.action,
            idempotency_key: c.idempotency_key,
            correction: c.correction,
            lease_expires_at: c.lease_expires_at.to_string(),
        },
        NextClaim::Nothing { held } => ClaimJson::Nothing { held },
        NextClaim::Paused(reason) => ClaimJson::Paused { reason },
    }))
}

/// Body of `POST /api/v1/tasks/{id}/heartbeat`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HeartbeatBody {
    worker: String,
    attempt: u32,
}

async fn heartbeat<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<String>,
    body: Result<Json<HeartbeatBody>, JsonRejection>,
) -> ApiResult<Value> {
    let id = task_id(&id)?;
    let Json(body) = body?;
    let until = state.engine.heartbeat_remote(id, body.attempt, &worker_name(&body.worker)?).await?;
    Ok(Json(json!({ "lease_expires_at": until.to_string() })))
}

/// Body of `POST /api/v1/tasks/{id}/complete`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompleteBody {
    worker: String,
    attempt: u32,
    #[serde(default)]
    result: String,
    /// Found tasks (X2), as a command executor's `tasks`.
    tasks: Option<Value>,
    tokens_in: Option<u64>,
    tokens_out: Option<u64>,
}

/// The row after a recorded end, and what happened to found tasks.
#[derive(Debug, Serialize)]
pub(crate) struct EndJson {
    task: TaskJson,
    #[serde(skip_serializing_if = "Option::is_none")]
    pushed: Option<PushJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    push_error: Option<String>,
}

async fn complete<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<String>,
    body: Result<Json<CompleteBody>, JsonRejection>,
) -> ApiResult<EndJson> {
    let id = task_id(&id)?;
    let Json(body) = body?;
    let tokens = match (body.tokens_in, body.tokens_out) {
        (None, None) => None,
        (i, o) => Some((i.unwrap_or(0), o.unwrap_or(0))),
    };
    let worker = worker_name(&body.worker)?;
    let end =
        state.engine.complete_remote(id, body.attempt, &worker, body.result, body.tasks, tokens).await?;
    Ok(Json(EndJson {
        task: TaskJson::from(&end.task),
        pushed: end.pushed.map(|(added, updated, skipped)| PushJson { added, updated, skipped }),
        push_error: end.push_error,
    }))
}

/// Body of `POST /api/v1/tasks/{id}/fail`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FailBody {
    worker: String,
    attempt: u32,
    error: String,
}

async fn fail<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<String>,
    body: Result<Json<FailBody>, JsonRejection>,
) -> ApiResult<EndJson> {
    let id = task_id(&id)?;
    let Json(body) = body?;
    let task = state.engine.fail_remote(id, body.attempt, &worker_name(&body.worker)?, body.error).await?;
    Ok(Json(EndJson { task: TaskJson::from(&task), pushed: None, push_error: None }))
}

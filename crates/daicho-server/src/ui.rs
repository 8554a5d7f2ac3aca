//! The web UI (I2): plain HTML pages and forms, no JavaScript. Askama templates escape every
//! text they print; the data the templates get is prepared here.
//!
//! - `/` the cross view (V1–V4) and the projects with counts per status;
//! - `/p/{project}` one project's ledger: the columns a person works with (every column with
//!   `cols=all`), filters (status, assignee, type, tag, source, overdue, text), sorts (id, due,
//!   priority, updated) and keyset pages of 200 rows, all in the URL; a person changes only
//!   `status`, `correction` and the ▶ run box;
//! - `/p/{project}/graph` its dependency graph as SVG (V6), nodes coloured by state, each linking
//!   to its task; `?source=plan:<goal>` draws one plan;
//! - `/approvals` the approval queue: per task what approving lets go out (the action, its
//!   command line or endpoint, model and message, the body, evidence and the results of the
//!   tasks it waits on), who queued it and when; approve (ticks ▶ run) or reject (`dropped`, the
//!   reason kept as the row's correction), one at a time or several with one reason; the
//!   history of decisions;
//! - `/t/{id}` one task: its fields, the last error, what it waits on and what waits on it, its
//!   approval, the fixes of a parked task (retry with the failures counted from zero, or drop),
//!   its runs and its journal in words (bookkeeping behind a toggle);
//! - the kill switch: a banner while paused, pause and resume forms.
//!
//! Every form posts its CSRF token; changes are journaled as `human:web`.

use std::sync::Arc;

use askama::Template;
use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use daicho_core::edit::TaskEdit;
use daicho_core::view::{Mark, dashboard_text_in, more_text_in};
use daicho_core::{Actor, Status, Task, TaskId};
use daicho_store::{ListFilter, StatusCount, Store, StoreError};
use serde::Deserialize;

use crate::labels::{Labels, for_locale};
use crate::security::{csrf_ok, safe_back};
use crate::{AppState, api};

/// The UI's routes.
pub(crate) fn routes<S: Store + 'static>() -> Router<Arc<AppState<S>>> {
    Router::new()
        .route("/", get(index::<S>))
        .route("/p/{project}", get(ledger::<S>))
        .route("/p/{project}/graph", get(graph_page::<S>))
        .route("/approvals", get(approvals::<S>))
        .route("/t/{id}", get(task_page::<S>))
        .route("/t/{id}/edit", post(edit::<S>))
        .route("/t/{id}/fix", post(fix::<S>))
        .route("/t/{id}/approve", post(approve::<S>))
        .route("/t/{id}/reject", post(reject::<S>))
        .route("/approvals/decide", post(decide::<S>))
        .route("/pause", post(pause::<S>))
        .route("/resume", post(resume::<S>))
        .route("/daicho.css", get(stylesheet))
        .route("/daicho.js", get(script))
        .route("/events", get(events::<S>))
}

/// The pages' one stylesheet: the content security policy allows no inline style.
async fn stylesheet() -> Response {
    let headers = [(header::CONTENT_TYPE, "text/css; charset=utf-8"), (header::CACHE_CONTROL, "max-age=300")];
    (headers, include_str!("../assets/daicho.css")).into_response()
}

/// The pages' one script, a progressive enhancement: open pages follow the ledger (every form
/// works without it).
async fn script() -> Response {
    let headers =
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8"), (header::CACHE_CONTROL, "max-age=300")];
    (headers, include_str!("../assets/daicho.js")).into_response()
}

/// How often `/events` looks at the ledger's change mark.
const EVENTS_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// `/events`: server-sent events for open pages (I2) — `change` whenever the ledger's change
/// mark moves (a sync, a run, a person's edit anywhere), so the page can update without the
/// person reloading it. The mark is two index lookups, looked at once a second per open page.
async fn events<S: Store + 'static>(State(state): State<Arc<AppState<S>>>) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let first = state.store().change_mark().await.ok();
    let closing = state.closing.clone();
    let stream =
        futures_util::stream::unfold((state, first, closing), |(state, mut seen, mut closing)| async move {
            loop {
                // The server stopping ends the stream (and the response) at once.
                tokio::select! {
                    () = tokio::time::sleep(EVENTS_POLL) => {}
                    _ = closing.wait_for(|closing| *closing) => return None,
                }
                // A ledger out of reach for a moment is no change; the next look tries again.
                let Ok(mark) = state.store().change_mark().await else { continue };
                if seen.is_some_and(|s| s != mark) {
                    seen = Some(mark);
                    let event = Event::default().event("change").data(mark.to_string());
                    return Some((Ok::<_, std::convert::Infallible>(event), (state, seen, closing)));
                }
                seen = Some(mark);
            }
        });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

/// Rows of a ledger page.
const PAGE_ROWS: usize = 200;

/// The person a web form acts as.
fn web_actor() -> Actor {
    Actor::Human("web".to_owned())
}

/// A page that failed: a plain-text message with its status.
#[derive(Debug)]
struct PageError(StatusCode, String);

impl From<StoreError> for PageError {
    /// The API's status for the error (404, 400, 409, 500, 503), as plain text.
    fn from(e: StoreError) -> PageError {
        PageError::from(api::ApiError::from(e))
    }
}

impl From<api::ApiError> for PageError {
    fn from(e: api::ApiError) -> PageError {
        PageError(e.status, e.message)
    }
}

impl From<askama::Error> for PageError {
    fn from(e: askama::Error) -> PageError {
        PageError(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot draw the page: {e}"))
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        (self.0, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], format!("{}\n", self.1))
            .into_response()
    }
}

type PageResult = Result<Response, PageError>;

fn html(template: &impl Template) -> PageResult {
    Ok(Html(template.render()?).into_response())
}

/// Percent-encodes a path segment.
fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A time as a person reads it: local date and minute.
fn when(t: jiff::Timestamp) -> String {
    t.to_zoned(jiff::tz::TimeZone::system()).strftime("%Y-%m-%d %H:%M").to_string()
}

fn task_href(id: &str) -> String {
    format!("/t/{}", segment(id))
}

fn project_href(project: &str) -> String {
    format!("/p/{}", segment(project))
}

/// The column headers, in English or Japanese (SPEC §1).
#[derive(Debug)]
struct Columns {
    id: &'static str,
    status: &'static str,
    run: &'static str,
    title: &'static str,
    body: &'static str,
    source: &'static str,
    evidence: &'static str,
    due: &'static str,
    assignee: &'static str,
    work_type: &'static str,
    priority: &'static str,
    not_before: &'static str,
    action: &'static str,
    result: &'static str,
    run_at: &'static str,
    correction: &'static str,
    deps: &'static str,
    tags: &'static str,
    failures: &'static str,
}

impl Columns {
    fn new(ja: bool) -> Columns {
        let h = |name: &str| {
            daicho_core::format::csv::COLUMNS
                .iter()
                .find(|(en, _)| *en == name)
                .map_or("", |(en, jp)| if ja { jp } else { en })
        };
        Columns {
            id: h("id"),
            status: h("status"),
            run: h("run"),
            title: h("title"),
            body: h("body"),
            source: h("source"),
            evidence: h("evidence"),
            due: h("due"),
            assignee: h("assignee"),
            work_type: h("type"),
            priority: h("priority"),
            not_before: h("not_before"),
            action: h("action"),
            result: h("result"),
            run_at: h("run_at"),
            correction: h("correction"),
            deps: h("deps"),
            tags: h("tags"),
            failures: h("failures"),
        }
    }
}

/// A link in the header.
#[derive(Debug)]
struct NavProject {
    name: String,
    href: String,
}

/// What every page shows around its content.
#[derive(Debug)]
struct Chrome {
    l: &'static Labels,
    title: String,
    csrf: String,
    paused: Option<String>,
    approvals: usize,
    projects: Vec<NavProject>,
}

/// The page's surroundings; `counts` are the ledger's status counts (one scan per page, which the
/// page may use too).
async fn chrome<S: Store + 'static>(
    state: &AppState<S>,
    title: String,
    counts: &[StatusCount],
) -> Result<Chrome, StoreError> {
    let mut projects: Vec<NavProject> = Vec::new();
    for c in counts {
        if projects.last().is_none_or(|p| p.name != c.project) {
            projects.push(NavProject { href: project_href(&c.project), name: c.project.clone() });
        }
    }
    Ok(Chrome {
        l: for_locale(state.options.ja),
        title,
        csrf: state.csrf.clone(),
        paused: state.engine.paused().await?,
        approvals: state.store().approvals().await?.len(),
        projects,
    })
}

fn mark_words(marks: &[Mark], l: &Labels, ja: bool) -> (String, String) {
    let class = marks
        .iter()
        .map(|m| match m {
            Mark::Overdue => "overdue",
            Mark::Review => "review",
            Mark::NeedsHuman => "needs_human",
        })
        .collect::<Vec<_>>()
        .join(" ");
    let words = marks
        .iter()
        .map(|m| match m {
            Mark::Overdue => l.overdue,
            Mark::Review => Status::Review.label(ja),
            Mark::NeedsHuman => Status::NeedsHuman.label(ja),
        })
        .collect::<Vec<_>>()
        .join(" ");
    (class, words)
}

/// One row of the cross view.
#[derive(Debug)]
struct ViewRowHtml {
    id: String,
    href: String,
    project: String,
    project_href: String,
    status: &'static str,
    due: String,
    title: String,
    assignee: String,
    class: String,
    marks: String,
}

/// A "… N more" line with its link.
#[derive(Debug)]
struct MoreHtml {
    text: String,
    href: String,
}

/// A project's counts per status.
#[derive(Debug)]
struct ProjectCounts {
    name: String,
    href: String,
    counts: Vec<u64>,
}

#[derive(Template)]
#[template(path = "index.html")]
struct IndexPage {
    page: Chrome,
    columns: Columns,
    rows: Vec<ViewRowHtml>,
    dashboards: Vec<String>,
    more: Vec<MoreHtml>,
    status_heads: Vec<&'static str>,
    counts: Vec<ProjectCounts>,
}

async fn index<S: Store + 'static>(State(state): State<Arc<AppState<S>>>) -> PageResult {
    let ja = state.options.ja;
    let lang = if ja { daicho_core::lang::Lang::Ja } else { daicho_core::lang::Lang::En };
    let status_counts = state.store().status_counts().await?;
    let page = chrome(&state, for_locale(ja).open_work.to_owned(), &status_counts).await?;
    let view = api::build_view(&state, None).await?;
    let rows = view
        .rows
        .iter()
        .map(|r| {
            let (class, marks) = mark_words(&r.marks, page.l, ja);
            ViewRowHtml {
                href: task_href(&r.id),
                id: r.id.clone(),
                project_href: project_href(&r.project),
                project: r.project.clone(),
                status: r.status.label(ja),
                due: r.due.map(|d| d.to_string()).unwrap_or_default(),
                title: r.title.clone(),
                assignee: r.assignee.clone(),
                class,
                marks,
            }
        })
        .collect();
    let mut counts: Vec<ProjectCounts> = Vec::new();
    for c in &status_counts {
        if counts.last().is_none_or(|p| p.name != c.project) {
            counts.push(ProjectCounts {
                href: project_href(&c.project),
                name: c.project.clone(),
                counts: vec![0; Status::ALL.len()],
            });
        }
        if let (Some(last), Some(i)) = (counts.last_mut(), Status::ALL.iter().position(|s| *s == c.status)) {
            last.counts[i] = c.count;
        }
    }
    html(&IndexPage {
        columns: Columns::new(ja),
        rows,
        dashboards: view.dashboards.iter().map(|d| dashboard_text_in(d, lang)).collect(),
        more: view
            .more
            .iter()
            .map(|m| MoreHtml {
                text: more_text_in(m, lang),
                href: format!("{}?status=open&sort=due", project_href(&m.project)),
            })
            .collect(),
        status_heads: Status::ALL.iter().map(|s| s.label(ja)).collect(),
        counts,
        page,
    })
}

/// A status choice of an edit form.
#[derive(Debug)]
struct StatusOption {
    value: &'static str,
    label: &'static str,
    selected: bool,
    disabled: bool,
}

/// A ledger row as a page shows it.
#[derive(Debug)]
struct RowHtml {
    id: String,
    href: String,
    form: String,
    edit_action: String,
    class: String,
    marks: String,
    status_options: Vec<StatusOption>,
    /// The status the page shows (`pending`, …), for the form's `status_was`.
    status_value: &'static str,
    run: bool,
    title: String,
    body: String,
    source: String,
    evidence: String,
    evidence_href: Option<String>,
    due: String,
    assignee: String,
    work_type: String,
    priority: i64,
    not_before: String,
    action: String,
    result: String,
    run_at: String,
    correction: String,
    deps: Vec<(String, String)>,
    tags: String,
    failures: u32,
}

/// Long text cut for a table cell; the task page shows it whole.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

fn row_html(task: &Task, today: jiff::civil::Date, l: &Labels, ja: bool, whole: bool) -> RowHtml {
    let marks = daicho_core::view::marks_of(task, today);
    let (class, marks) = mark_words(&marks, l, ja);
    let id = task.id.to_string();
    let long = |text: &str| if whole { text.to_owned() } else { cut(text, 160) };
    let evidence_href = (task.evidence.starts_with("https://") || task.evidence.starts_with("http://"))
        .then(|| task.evidence.clone());
    RowHtml {
        href: task_href(&id),
        form: format!("edit-{id}"),
        edit_action: format!("{}/edit", task_href(&id)),
        class,
        marks,
        status_options: Status::ALL
            .iter()
            .filter(|s| **s != Status::Running || task.status == Status::Running)
            .map(|s| StatusOption {
                value: s.as_str(),
                label: s.label(ja),
                selected: *s == task.status,
                disabled: *s == Status::Running,
            })
            .collect(),
        status_value: task.status.as_str(),
        run: task.run,
        title: task.title.clone(),
        body: long(&task.body),
        source: task.source.clone(),
        evidence: long(&task.evidence),
        evidence_href,
        due: task.due.map(|d| d.to_string()).unwrap_or_default(),
        assignee: task.assignee.clone(),
        work_type: task.work_type.clone(),
        priority: task.priority,
        not_before: task.not_before.map(when).unwrap_or_default(),
        action: task.action.clone(),
        result: long(&task.result),
        run_at: task.run_at.map(when).unwrap_or_default(),
        correction: task.correction.clone(),
        deps: task.deps.iter().map(|d| (d.to_string(), task_href(&d.to_string()))).collect(),
        tags: task.tags.iter().collect::<Vec<_>>().join(", "),
        failures: task.failures,
        id,
    }
}

#[derive(Template)]
#[template(path = "ledger.html")]
struct LedgerPage {
    page: Chrome,
    columns: Columns,
    project: String,
    total: u64,
    rows: Vec<RowHtml>,
    back: String,
    next_href: Option<String>,
    graph_href: String,
    /// The filters as given, to fill the form again.
    query: LedgerQuery,
    /// Every column, not only the ones a person works with.
    all_columns: bool,
    /// The same view with the other column set.
    columns_href: String,
    status_choices: Vec<(String, String)>,
    sort_choices: Vec<(&'static str, &'static str)>,
    filtered: bool,
}

impl LedgerPage {
    /// The project's ledger without filters.
    fn ledger_href(&self) -> String {
        project_href(&self.project)
    }
}

/// The ledger page's query: filters, sort, keyset page and column set, all in the URL so a view
/// can be bookmarked.
#[derive(Clone, Debug, Default, Deserialize)]
struct LedgerQuery {
    #[serde(default)]
    status: String,
    #[serde(default)]
    assignee: String,
    #[serde(default, rename = "type")]
    work_type: String,
    #[serde(default)]
    tag: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    q: String,
    #[serde(default)]
    overdue: String,
    #[serde(default)]
    sort: String,
    #[serde(default)]
    cols: String,
    after: Option<String>,
}

impl LedgerQuery {
    /// The query string of this view (without `after` unless given), `?…` or empty.
    fn href(&self, project: &str, after: Option<&str>, cols: &str) -> String {
        let pairs = [
            ("status", self.status.as_str()),
            ("assignee", &self.assignee),
            ("type", &self.work_type),
            ("tag", &self.tag),
            ("source", &self.source),
            ("q", &self.q),
            ("overdue", &self.overdue),
            ("sort", &self.sort),
            ("cols", cols),
            ("after", after.unwrap_or_default()),
        ];
        let query: Vec<String> = pairs
            .iter()
            .filter(|(_, v)| !v.trim().is_empty())
            .map(|(k, v)| format!("{k}={}", segment(v.trim())))
            .collect();
        match query.is_empty() {
            true => project_href(project),
            false => format!("{}?{}", project_href(project), query.join("&")),
        }
    }

    /// The store's filter for a page of `project`.
    fn filter(&self, project: &str, today: jiff::civil::Date) -> Result<ListFilter, PageError> {
        let bad =
            |what: &str, value: &str| PageError(StatusCode::BAD_REQUEST, format!("'{value}' is not {what}"));
        let text = |v: &str| Some(v.trim().to_owned()).filter(|v| !v.is_empty());
        let mut statuses =
            Status::parse_filter(self.status.split(',')).map_err(|e| bad("a status", e.0.trim()))?;
        let overdue = !self.overdue.trim().is_empty();
        if overdue && statuses.is_empty() {
            statuses.extend(Status::ALL.into_iter().filter(|s| s.is_open()));
        }
        let order = match self.sort.trim() {
            "" => daicho_store::ListOrder::Id,
            name => daicho_store::ListOrder::parse(name)
                .ok_or_else(|| bad("a sort (id, due, priority, updated)", name))?,
        };
        let after = match self.after.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
            Some(text) => Some(TaskId::parse(text).ok_or_else(|| bad("a task id", text))?),
            None => None,
        };
        Ok(ListFilter {
            project: Some(project.to_owned()),
            statuses,
            source: text(&self.source),
            tag: text(&self.tag),
            assignee: text(&self.assignee),
            work_type: text(&self.work_type),
            text: text(&self.q),
            due_before: overdue.then_some(today),
            order,
            after,
            limit: Some(PAGE_ROWS + 1),
            ..ListFilter::default()
        })
    }

    fn is_filtered(&self) -> bool {
        [&self.status, &self.assignee, &self.work_type, &self.tag, &self.source, &self.q, &self.overdue]
            .iter()
            .any(|v| !v.trim().is_empty())
    }
}

async fn ledger<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Path(project): Path<String>,
    Query(query): Query<LedgerQuery>,
) -> PageResult {
    let ja = state.options.ja;
    let status_counts = state.store().status_counts().await?;
    let page = chrome(&state, format!("{project} {}", for_locale(ja).ledger), &status_counts).await?;
    let total: u64 = status_counts.iter().filter(|c| c.project == project).map(|c| c.count).sum();
    if total == 0 {
        return Err(PageError(StatusCode::NOT_FOUND, format!("no project '{project}'")));
    }
    let today = jiff::Zoned::now().date();
    let filter = query.filter(&project, today)?;
    let mut tasks = state.store().list(filter).await?;
    let all_columns = query.cols.trim() == "all";
    let cols = if all_columns { "all" } else { "" };
    let next_href = (tasks.len() > PAGE_ROWS).then(|| {
        tasks.truncate(PAGE_ROWS);
        query.href(&project, tasks.last().map(|t| t.id.to_string()).as_deref(), cols)
    });
    let l = page.l;
    let mut status_choices =
        vec![("open".to_owned(), l.open.to_owned()), ("closed".to_owned(), l.closed.to_owned())];
    status_choices.extend(Status::ALL.iter().map(|s| (s.as_str().to_owned(), s.label(ja).to_owned())));
    let sort_choices = vec![
        ("id", l.sort_id),
        ("due", l.sort_due),
        ("priority", l.sort_priority),
        ("updated", l.sort_updated),
    ];
    html(&LedgerPage {
        columns: Columns::new(ja),
        rows: tasks.iter().map(|t| row_html(t, today, l, ja, false)).collect(),
        graph_href: format!("{}/graph", project_href(&project)),
        back: query.href(&project, query.after.as_deref(), cols),
        columns_href: query.href(&project, query.after.as_deref(), if all_columns { "" } else { "all" }),
        filtered: query.is_filtered(),
        project,
        total,
        next_href,
        page,
        query,
        all_columns,
        status_choices,
        sort_choices,
    })
}

/// `/p/{project}/graph`'s query: one source (a plan's `plan:<goal>`), at most `max` nodes.
#[derive(Debug, Deserialize)]
struct GraphQuery {
    source: Option<String>,
    max: Option<usize>,
}

/// A state in the graph's legend.
#[derive(Debug)]
struct LegendHtml {
    fill: &'static str,
    label: &'static str,
}

#[derive(Template)]
#[template(path = "graph.html")]
struct GraphPage {
    page: Chrome,
    project: String,
    ledger_href: String,
    source: Option<String>,
    nodes: usize,
    omitted: String,
    legend: Vec<LegendHtml>,
    /// The drawing, made by `daicho_core::graph` (which escapes every text in it).
    svg: String,
}

async fn graph_page<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Path(project): Path<String>,
    Query(query): Query<GraphQuery>,
) -> PageResult {
    use daicho_engine::graph::{GraphRequest, MAX_NODES, load};
    let ja = state.options.ja;
    let lang = if ja { daicho_core::lang::Lang::Ja } else { daicho_core::lang::Lang::En };
    let page =
        chrome(&state, format!("{project} {}", for_locale(ja).graph), &state.store().status_counts().await?)
            .await?;
    let source = query.source.filter(|s| !s.is_empty());
    let request = GraphRequest {
        project: project.clone(),
        source: source.clone(),
        max_nodes: query.max.unwrap_or(MAX_NODES).clamp(1, 2_000),
    };
    let graph = load(state.store(), &request, jiff::Timestamp::now()).await.map_err(|e| match e {
        daicho_engine::Error::Invalid(message) => PageError(StatusCode::NOT_FOUND, message),
        daicho_engine::Error::Store(e) => PageError::from(e),
        other => PageError(StatusCode::INTERNAL_SERVER_ERROR, other.to_string()),
    })?;
    let legend = daicho_core::graph::NodeState::ALL
        .into_iter()
        .map(|s| LegendHtml { fill: s.colours().0, label: s.label(lang) })
        .collect();
    html(&GraphPage {
        page,
        ledger_href: project_href(&project),
        project,
        source,
        nodes: graph.nodes.len(),
        omitted: graph.omitted_text(lang),
        legend,
        svg: graph.svg(&|id| task_href(&id.to_string()), lang),
    })
}

/// A queued external task, with what approving it lets go out (S2).
#[derive(Debug)]
struct ApprovalHtml {
    id: String,
    href: String,
    project: String,
    title: String,
    body: String,
    evidence: String,
    correction: String,
    /// The action's name and kind (`command`, `llm`), or why none would run it.
    action: String,
    /// The command line, or the endpoint and model.
    target: String,
    /// What an `llm` action would post as its message.
    message: String,
    /// The results of the tasks it waits on: the draft that goes out.
    deps: Vec<DepHtml>,
    queued_at: String,
    queued_by: String,
    approve_action: String,
    reject_action: String,
}

/// A task an approval waits on, with its result.
#[derive(Debug)]
struct DepHtml {
    id: String,
    href: String,
    title: String,
    status: String,
    result: String,
}

/// A past decision.
#[derive(Debug)]
struct DecisionHtml {
    id: String,
    href: String,
    title: String,
    decision: String,
    class: &'static str,
    by: String,
    at: String,
    reason: String,
    queued_by: String,
}

#[derive(Template)]
#[template(path = "approvals.html")]
struct ApprovalsPage {
    page: Chrome,
    columns: Columns,
    rows: Vec<ApprovalHtml>,
    history: Vec<DecisionHtml>,
}

/// Decisions the approval page lists.
const HISTORY_ROWS: usize = 50;
/// A result of a dep shown whole up to this many characters (the task page has all of it).
const RESULT_CHARS: usize = 2_000;

/// Shell-quotes a word for showing a command line (only where a reader needs it).
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c) || !c.is_ascii());
    if plain { word.to_owned() } else { format!("'{}'", word.replace('\'', "'\\''")) }
}

async fn approvals<S: Store + 'static>(State(state): State<Arc<AppState<S>>>) -> PageResult {
    let ja = state.options.ja;
    let l = for_locale(ja);
    let page = chrome(&state, l.approvals.to_owned(), &state.store().status_counts().await?).await?;
    let mut rows = Vec::new();
    for awaiting in state.engine.approval_queue().await?.0 {
        let (task, outbound) = (awaiting.task, awaiting.outbound);
        let id = task.id;
        let action = match (&outbound.problem, outbound.kind) {
            (Some(problem), _) => problem.clone(),
            (None, "manual") => l.manual.to_owned(),
            (None, kind) => format!("{} ({kind})", outbound.action),
        };
        let target = match outbound.kind {
            "command" => outbound.command.iter().map(|w| shell_word(w)).collect::<Vec<_>>().join(" "),
            "llm" => format!("POST {} · model {}", outbound.endpoint, outbound.model),
            _ => String::new(),
        };
        let mut deps = Vec::new();
        for dep in &task.deps {
            let Some(d) = state.store().get(*dep).await? else { continue };
            deps.push(DepHtml {
                id: d.id.to_string(),
                href: task_href(&d.id.to_string()),
                title: d.title,
                status: d.status.label(ja).to_owned(),
                result: cut(&d.result, RESULT_CHARS),
            });
        }
        let href = task_href(&id.to_string());
        rows.push(ApprovalHtml {
            id: id.to_string(),
            approve_action: format!("{href}/approve"),
            reject_action: format!("{href}/reject"),
            href,
            project: task.project,
            title: task.title,
            body: task.body,
            evidence: task.evidence,
            correction: task.correction,
            action,
            target,
            message: outbound.message,
            deps,
            queued_at: when(awaiting.queued_at),
            queued_by: awaiting.queued_by,
        });
    }
    let mut history = Vec::new();
    for d in state.engine.decisions(HISTORY_ROWS).await?.0 {
        let id = d.id;
        let title = state.store().get(id).await?.map(|t| t.title).unwrap_or_default();
        let (decision, class) = match d.decided {
            daicho_store::Decision::Approved => (l.approved, "approved"),
            daicho_store::Decision::Rejected => (l.rejected, "rejected"),
        };
        history.push(DecisionHtml {
            id: id.to_string(),
            href: task_href(&id.to_string()),
            title,
            decision: decision.to_owned(),
            class,
            by: d.decided_by,
            at: when(d.decided_at),
            reason: d.reason,
            queued_by: d.queued_by,
        });
    }
    html(&ApprovalsPage { page, columns: Columns::new(ja), rows, history })
}

/// A journal entry as the task page shows it.
#[derive(Debug)]
struct JournalHtml {
    at: String,
    actor: String,
    kind: &'static str,
    /// The fields a person works with, in words.
    change: String,
    /// The bookkeeping (lease, attempt, key, times), behind a toggle.
    internal: String,
}

/// A run as the task page shows it.
#[derive(Debug)]
struct RunHtml {
    attempt: u32,
    worker: String,
    action: String,
    started: String,
    ended: String,
    duration: String,
    outcome: String,
    class: &'static str,
    tokens: String,
    error: String,
}

#[derive(Template)]
#[template(path = "task.html")]
struct TaskPage {
    page: Chrome,
    columns: Columns,
    r: RowHtml,
    fields: Vec<(&'static str, String)>,
    /// The last run's error while the task is not done with it.
    last_error: Option<String>,
    /// Where the task stands with a person's approval, if anywhere.
    approval: String,
    /// A parked task: the fixes a person has.
    parked: bool,
    fix_action: String,
    waits_on: Vec<DepHtml>,
    waited_by: Vec<DepHtml>,
    journal: Vec<JournalHtml>,
    runs: Vec<RunHtml>,
}

/// Bookkeeping fields of a row: in the journal, shown only when asked for.
const INTERNAL_FIELDS: [&str; 6] = ["lease", "attempt", "key", "updated_at", "created_at", "id"];

/// A journal field's name in the person's language (the ledger's column names).
fn field_label(field: &str, ja: bool) -> String {
    let column = match field {
        "work_type" => "type",
        other => other,
    };
    if let Some((en, jp)) = daicho_core::format::csv::COLUMNS.iter().find(|(en, _)| *en == column) {
        return if ja { (*jp).to_owned() } else { (*en).to_owned() };
    }
    let words = match field {
        "approved_by" => ("approved by", "承認者"),
        "attempt" => ("attempt", "試行"),
        "lease" => ("lease", "リース"),
        "key" => ("key", "キー"),
        "updated_at" => ("updated", "更新日時"),
        "created_at" => ("created", "作成日時"),
        other => (other, other),
    };
    if ja { words.1.to_owned() } else { words.0.to_owned() }
}

/// A journal value in words: text as it is, lists joined, nothing as a dash.
fn value_text(value: &serde_json::Value, ja: bool) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "—".to_owned(),
        Value::String(s) if s.is_empty() => "—".to_owned(),
        Value::String(s) => cut(s, 300),
        Value::Bool(true) => if ja { "オン" } else { "on" }.to_owned(),
        Value::Bool(false) => if ja { "オフ" } else { "off" }.to_owned(),
        Value::Array(items) if items.is_empty() => "—".to_owned(),
        Value::Array(items) => items.iter().map(|v| value_text(v, ja)).collect::<Vec<_>>().join(", "),
        other => cut(&other.to_string(), 300),
    }
}

/// A run outcome in the person's language.
fn outcome_label(outcome: daicho_store::RunOutcome, ja: bool) -> &'static str {
    use daicho_store::RunOutcome as O;
    if !ja {
        return outcome.as_str();
    }
    match outcome {
        O::Running => "実行中",
        O::Success => "成功",
        O::Failure => "失敗",
        O::Timeout => "時間切れ",
        O::Lost => "喪失",
        O::Interrupted => "中断",
    }
}

/// A journal kind in the person's language.
fn kind_label(kind: daicho_store::JournalKind, ja: bool) -> &'static str {
    use daicho_store::JournalKind as K;
    if !ja {
        return kind.as_str();
    }
    match kind {
        K::Add => "追加",
        K::Patch => "同期で更新",
        K::Edit => "人が変更",
        K::Purge => "削除",
        K::Restore => "復元",
        K::Claim => "実行開始",
        K::Finish => "実行完了",
        K::Fail => "実行失敗",
        K::Interrupted => "中断",
        K::Lost => "実行が失われた",
        K::Approve => "承認",
        K::Pause => "一時停止",
        K::Resume => "再開",
    }
}

/// An entry's changes, in words: the fields a person works with, and the bookkeeping apart.
fn change_text(entry: &daicho_store::JournalEntry, ja: bool) -> (String, String) {
    let (mut shown, mut internal) = (Vec::new(), Vec::new());
    // A status in the person's words (`未着手`, not `pending`).
    let value_text = |key: &str, value: &serde_json::Value, ja: bool| match value.as_str() {
        Some(word) if key == "status" => {
            word.parse::<Status>().map_or_else(|_| word.to_owned(), |s| s.label(ja).to_owned())
        }
        _ => value_text(value, ja),
    };
    for (key, after) in &entry.after {
        let line = match entry.before.get(key) {
            Some(before) => {
                let (before, after) = (value_text(key, before, ja), value_text(key, after, ja));
                format!("{}: {before} → {after}", field_label(key, ja))
            }
            // A new row: only what it has.
            None if after.is_null()
                || after.as_str() == Some("")
                || after.as_array().is_some_and(Vec::is_empty) =>
            {
                continue;
            }
            None => format!("{}: {}", field_label(key, ja), value_text(key, after, ja)),
        };
        if INTERNAL_FIELDS.contains(&key.as_str()) { internal.push(line) } else { shown.push(line) }
    }
    (shown.join("\n"), internal.join("\n"))
}

/// `H:MM:SS` (or `M:SS`) between two times.
fn duration_text(from: jiff::Timestamp, to: jiff::Timestamp) -> String {
    let secs = to.duration_since(from).as_secs().max(0);
    match secs {
        s if s >= 3600 => format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60),
        s => format!("{}:{:02}", s / 60, s % 60),
    }
}

async fn dep_rows<S: Store + 'static>(
    state: &AppState<S>,
    ids: &[TaskId],
    ja: bool,
) -> Result<Vec<DepHtml>, StoreError> {
    let mut out = Vec::new();
    for id in ids {
        if let Some(d) = state.store().get(*id).await? {
            out.push(dep_html(&d, ja));
        }
    }
    Ok(out)
}

fn dep_html(d: &Task, ja: bool) -> DepHtml {
    DepHtml {
        id: d.id.to_string(),
        href: task_href(&d.id.to_string()),
        title: d.title.clone(),
        status: d.status.label(ja).to_owned(),
        result: String::new(),
    }
}

/// Rows listed as waiting on a task.
const WAITED_BY_ROWS: usize = 50;

async fn task_page<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<String>,
) -> PageResult {
    let ja = state.options.ja;
    let id = TaskId::parse(&id)
        .ok_or_else(|| PageError(StatusCode::BAD_REQUEST, format!("'{id}' is not a task id (T-0001)")))?;
    let task = state.store().get(id).await?.ok_or(StoreError::NotFound(id))?;
    let page = chrome(&state, format!("{id} {}", task.title), &state.store().status_counts().await?).await?;
    let l = page.l;
    let columns = Columns::new(ja);
    let r = row_html(&task, jiff::Zoned::now().date(), l, ja, true);
    let fields = vec![
        (l.project, task.project.clone()),
        (columns.status, task.status.label(ja).to_owned()),
        (columns.body, r.body.clone()),
        (columns.source, r.source.clone()),
        (columns.evidence, r.evidence.clone()),
        (columns.due, r.due.clone()),
        (columns.assignee, r.assignee.clone()),
        (columns.work_type, r.work_type.clone()),
        (columns.priority, r.priority.to_string()),
        (columns.not_before, r.not_before.clone()),
        (columns.action, r.action.clone()),
        (columns.result, r.result.clone()),
        (columns.run_at, r.run_at.clone()),
        (columns.tags, r.tags.clone()),
        (columns.failures, task.failures.to_string()),
    ];
    let journal = state
        .store()
        .journal(id)
        .await?
        .iter()
        .rev()
        .map(|e| {
            let (change, internal) = change_text(e, ja);
            JournalHtml {
                at: when(e.at),
                actor: e.actor.clone(),
                kind: kind_label(e.kind, ja),
                change,
                internal,
            }
        })
        .collect();
    let records = state.store().runs(id).await?;
    let last_error = records
        .last()
        .filter(|run| !run.error.is_empty() && task.status != Status::Done && task.status != Status::Dropped)
        .map(|run| format!("{} {} · {}", l.attempt, run.attempt, run.error));
    let runs = records
        .into_iter()
        .rev()
        .map(|run| {
            let tokens = match (run.tokens_in, run.tokens_out) {
                (None, None) => String::new(),
                (i, o) => format!("{} / {}", i.unwrap_or(0), o.unwrap_or(0)),
            };
            let class = match run.outcome.as_str() {
                "success" => "success",
                "running" => "running",
                _ => "failed",
            };
            RunHtml {
                attempt: run.attempt,
                worker: run.worker,
                action: run.action,
                started: when(run.started),
                ended: run.finished.map(when).unwrap_or_default(),
                duration: run.finished.map(|f| duration_text(run.started, f)).unwrap_or_default(),
                outcome: outcome_label(run.outcome, ja).to_owned(),
                class,
                tokens,
                error: run.error,
            }
        })
        .collect();
    let queued = state.store().approvals().await?.into_iter().find(|q| q.id == id);
    let approval = match (queued, task.approved_by.is_empty()) {
        (_, false) => format!("{} {}", l.approved_by_note, task.approved_by),
        (Some(q), true) => {
            format!("{} {} ({} {})", l.awaiting_since, when(q.queued_at), l.queued_by, q.queued_by)
        }
        (None, true) => String::new(),
    };
    let waits_on = dep_rows(&state, &task.deps, ja).await?;
    let filter = ListFilter { waiting_on: Some(id), limit: Some(WAITED_BY_ROWS), ..ListFilter::default() };
    let waited_by = state.store().list(filter).await?.iter().map(|t| dep_html(t, ja)).collect();
    let fix_action = format!("{}/fix", task_href(&id.to_string()));
    let parked = task.status == Status::NeedsHuman;
    html(&TaskPage {
        page,
        columns,
        r,
        fields,
        last_error,
        approval,
        parked,
        fix_action,
        waits_on,
        waited_by,
        journal,
        runs,
    })
}

/// The fixes of a parked task: `retry` (failures from zero, pending, ▶ run) or `drop`.
#[derive(Debug, Deserialize)]
struct FixForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    fix: String,
}

async fn fix<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<String>,
    Form(form): Form<FixForm>,
) -> PageResult {
    check_csrf(&state, &form.csrf)?;
    let id = form_task_id(&id)?;
    let edit = match form.fix.as_str() {
        "retry" => TaskEdit {
            status: Some(Status::Pending),
            run: Some(true),
            reset_failures: true,
            ..TaskEdit::default()
        },
        "drop" => TaskEdit { status: Some(Status::Dropped), run: Some(false), ..TaskEdit::default() },
        other => {
            return Err(PageError(StatusCode::BAD_REQUEST, format!("'{other}' is not a fix (retry, drop)")));
        }
    };
    state.edit_as_person(id, edit, web_actor()).await?;
    Ok(Redirect::to(&task_href(&id.to_string())).into_response())
}

/// Where to go after a form: the page it came from when that is a path on this site
/// ([`safe_back`]), else `fallback` (the page the form is on, or `/`).
fn back_to(back: &str, fallback: String) -> Redirect {
    Redirect::to(&safe_back(back).unwrap_or(fallback))
}

/// Refuses a form without this process's CSRF token.
fn check_csrf<S>(state: &AppState<S>, given: &str) -> Result<(), PageError> {
    if csrf_ok(state, given) {
        Ok(())
    } else {
        Err(PageError(
            StatusCode::FORBIDDEN,
            "refused: the form's CSRF token is missing or wrong; reload the page and try again".into(),
        ))
    }
}

fn form_task_id(text: &str) -> Result<TaskId, PageError> {
    TaskId::parse(text)
        .ok_or_else(|| PageError(StatusCode::BAD_REQUEST, format!("'{text}' is not a task id")))
}

/// The edit form of a row: status, correction, the ▶ run box (absent = unticked), and what the
/// page showed for each (`*_was`), so that only what the person changed is written: a row that
/// moved on meanwhile (a worker claimed it, say) is not set back by a save of another field.
#[derive(Debug, Deserialize)]
struct EditForm {
    #[serde(default)]
    csrf: String,
    status: Option<String>,
    correction: Option<String>,
    run: Option<String>,
    status_was: Option<String>,
    correction_was: Option<String>,
    run_was: Option<String>,
    #[serde(default)]
    back: String,
}

impl EditForm {
    /// The fields the person changed on the page (all given fields when the page's values are
    /// not in the form).
    fn changes(self) -> (Option<String>, Option<String>, Option<bool>) {
        let unix = |text: String| text.replace("\r\n", "\n");
        let status = match (self.status, self.status_was) {
            (Some(now), Some(was)) if now == was => None,
            (status, _) => status,
        };
        let correction = match (self.correction.map(unix), self.correction_was.map(unix)) {
            (Some(now), Some(was)) if now == was => None,
            (correction, _) => correction,
        };
        let run = self.run.is_some();
        let run = match self.run_was.as_deref() {
            Some(was) if (was == "on") == run => None,
            _ => Some(run),
        };
        (status, correction, run)
    }
}

async fn edit<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<String>,
    Form(mut form): Form<EditForm>,
) -> PageResult {
    check_csrf(&state, &form.csrf)?;
    let id = form_task_id(&id)?;
    let back = std::mem::take(&mut form.back);
    let (status, correction, run) = form.changes();
    let edit = api::person_edit(status.as_deref(), correction, run)?;
    // The store writes only what differs: an unchanged form writes no journal entry.
    state.edit_as_person(id, edit, web_actor()).await?;
    Ok(back_to(&back, task_href(&id.to_string())).into_response())
}

/// A form with only its CSRF token and where to go back to.
#[derive(Debug, Deserialize)]
struct PlainForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    back: String,
    #[serde(default)]
    reason: String,
}

async fn approve<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<String>,
    Form(form): Form<PlainForm>,
) -> PageResult {
    check_csrf(&state, &form.csrf)?;
    let id = form_task_id(&id)?;
    state.store().approve(id, web_actor(), jiff::Timestamp::now()).await?;
    Ok(back_to(&form.back, "/approvals".to_owned()).into_response())
}

async fn reject<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<String>,
    Form(form): Form<PlainForm>,
) -> PageResult {
    check_csrf(&state, &form.csrf)?;
    let id = form_task_id(&id)?;
    let reason = form.reason.trim();
    if reason.is_empty() {
        return Err(PageError(StatusCode::BAD_REQUEST, "a rejection needs a reason".into()));
    }
    state.store().reject(id, reason.to_owned(), web_actor(), jiff::Timestamp::now()).await?;
    Ok(back_to(&form.back, "/approvals".to_owned()).into_response())
}

/// The approval page's form for several tasks at once: a `pick-T-…` box per task, one
/// `decision` (`approve` or `reject`) and one reason for all of them.
async fn decide<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Form(form): Form<std::collections::BTreeMap<String, String>>,
) -> PageResult {
    let field = |name: &str| form.get(name).map(String::as_str).unwrap_or_default();
    check_csrf(&state, field("csrf"))?;
    let mut ids = Vec::new();
    for name in form.keys().filter_map(|k| k.strip_prefix("pick-")) {
        ids.push(form_task_id(name)?);
    }
    if ids.is_empty() {
        return Err(PageError(StatusCode::BAD_REQUEST, "no task was picked".into()));
    }
    let reason = field("reason").trim().to_owned();
    let now = jiff::Timestamp::now();
    match field("decision") {
        "approve" => {
            for id in ids {
                state.store().approve(id, web_actor(), now).await?;
            }
        }
        "reject" if reason.is_empty() => {
            return Err(PageError(StatusCode::BAD_REQUEST, "a rejection needs a reason".into()));
        }
        "reject" => {
            for id in ids {
                state.store().reject(id, reason.clone(), web_actor(), now).await?;
            }
        }
        other => {
            return Err(PageError(StatusCode::BAD_REQUEST, format!("'{other}' is not a decision")));
        }
    }
    Ok(back_to(field("back"), "/approvals".to_owned()).into_response())
}

async fn pause<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Form(form): Form<PlainForm>,
) -> PageResult {
    check_csrf(&state, &form.csrf)?;
    let reason = match form.reason.trim() {
        "" => "paused from the web UI".to_owned(),
        r => r.to_owned(),
    };
    state.store().set_paused(Some(reason), web_actor(), jiff::Timestamp::now()).await?;
    Ok(back_to(&form.back, "/".to_owned()).into_response())
}

async fn resume<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Form(form): Form<PlainForm>,
) -> PageResult {
    check_csrf(&state, &form.csrf)?;
    state.store().set_paused(None, web_actor(), jiff::Timestamp::now()).await?;
    Ok(back_to(&form.back, "/".to_owned()).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i2_path_segments_are_encoded() {
        assert_eq!(segment("PJ-01"), "PJ-01");
        assert_eq!(segment("a b/c?"), "a%20b%2Fc%3F");
        assert_eq!(segment("案件"), "%E6%A1%88%E4%BB%B6");
    }

    #[test]
    fn i2_redirects_stay_on_this_site() {
        let location =
            |r: Redirect| r.into_response().headers()[header::LOCATION].to_str().expect("ascii").to_owned();
        assert_eq!(location(back_to("/p/PJ-01", "/".into())), "/p/PJ-01");
        assert_eq!(location(back_to("//evil.example/", "/".into())), "/");
        assert_eq!(location(back_to("https://evil.example/", "/t/T-1".into())), "/t/T-1");
        assert_eq!(location(back_to("/\t/evil.example", "/approvals".into())), "/approvals");
        assert_eq!(location(back_to("/\n/x", "/".into())), "/");
    }
}

//! The one mapping between [`Task`] and the `task` table's columns, and the SQL text both
//! backends share (the column lists, the row writes, the ready condition), parameterised by the
//! backend's placeholder syntax (`?1` for SQLite, `$1` for PostgreSQL). Pure: no I/O.

use daicho_core::authority::PersonCells;
use daicho_core::policy::{ClaimScope, Mode};
use daicho_core::task::{Lease, TAG_AI, TAG_EXTERNAL, TAG_HEAVY};
use daicho_core::{Status, Tags, Task, TaskId};
use jiff::Timestamp;

/// One column value of a `task` row, typed as the PostgreSQL schema declares it (SQLite stores
/// every integer alike).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cell {
    /// `INT`.
    Int(i32),
    /// `BIGINT` (instants are microseconds since the epoch), maybe NULL.
    BigInt(Option<i64>),
    /// `TEXT`, maybe NULL.
    Text(Option<String>),
    /// `BOOLEAN`.
    Bool(bool),
}

/// The type of a column, for reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellKind {
    /// `INT`.
    Int,
    /// `BIGINT`, maybe NULL.
    BigInt,
    /// `TEXT`, maybe NULL.
    Text,
    /// `BOOLEAN`.
    Bool,
}

/// The columns of `task` that make a [`Task`], with their types, in the order of [`COLUMNS`].
pub const TASK_COLUMNS: [(&str, CellKind); 30] = [
    ("num", CellKind::BigInt),
    ("id_width", CellKind::Int),
    ("project", CellKind::Text),
    ("status", CellKind::Text),
    ("run", CellKind::Bool),
    ("title", CellKind::Text),
    ("body", CellKind::Text),
    ("source", CellKind::Text),
    ("evidence", CellKind::Text),
    ("due", CellKind::Text),
    ("assignee", CellKind::Text),
    ("work_type", CellKind::Text),
    ("priority", CellKind::BigInt),
    ("not_before", CellKind::BigInt),
    ("action", CellKind::Text),
    ("result", CellKind::Text),
    ("run_at", CellKind::BigInt),
    ("correction", CellKind::Text),
    ("deps", CellKind::Text),
    ("tags", CellKind::Text),
    ("key", CellKind::Text),
    ("failures", CellKind::Int),
    ("refresh", CellKind::Bool),
    ("attempt", CellKind::Int),
    ("lease_owner", CellKind::Text),
    ("lease_expires_at", CellKind::BigInt),
    ("created_at", CellKind::BigInt),
    ("updated_at", CellKind::BigInt),
    ("approved_by", CellKind::Text),
    ("person_cells", CellKind::Int),
];

/// The names of [`TASK_COLUMNS`], comma-separated, for `SELECT {COLUMNS} FROM task`.
pub const COLUMNS: &str = "num, id_width, project, status, run, title, body, source, evidence, due, \
    assignee, work_type, priority, not_before, action, result, run_at, correction, deps, tags, key, \
    failures, refresh, attempt, lease_owner, lease_expires_at, created_at, updated_at, approved_by, \
    person_cells";

/// A backend's placeholder for the `n`th parameter (1-based).
pub type Placeholder = fn(usize) -> String;

/// The ready condition (D1, D5) over the `task` table, `now` being the placeholder of the time in
/// microseconds: pending, no unmet deps, `not_before` passed. The one definition both backends'
/// `ready`, `ready_head` and claims use; the index `task_ready` serves it.
pub fn ready_where(now: &str) -> String {
    format!("status = 'pending' AND unmet_deps = 0 AND (not_before IS NULL OR not_before <= {now})")
}

/// The claim's condition (S1, S2, S13, S14) over the `task` table: ready at `now`
/// ([`ready_where`]), no run of it possibly still alive ([`unfenced_where`]), with ▶ run ticked
/// when `require_run` holds and a person's approval recorded when `require_approval` holds (both
/// placeholders of booleans, or columns of them). The one definition every claim statement of
/// both backends uses.
pub fn claimable_where(now: &str, require_run: &str, require_approval: &str) -> String {
    format!(
        "{} AND {} AND (NOT {require_run} OR run) AND (NOT {require_approval} OR (run AND approved_by <> ''))",
        ready_where(now),
        unfenced_where(now)
    )
}

/// No earlier run of the row may still be alive at `now` (S14): it has no lease, or its lease has
/// run out. A `pending` row keeps its lease only as a fence, after a person moved it out of
/// `running` and until its worker has stopped that run ([`daicho_core::policy::previous_run`]).
pub fn unfenced_where(now: &str) -> String {
    format!("(lease_expires_at IS NULL OR lease_expires_at <= {now})")
}

/// The size of the ready set, `now` being the placeholder of the time in microseconds: the rows
/// pending with every dep met (kept in `ready_count` by each backend's triggers, one row or
/// several shards) less those not due yet, read from the partial index `task_not_due` (`from`
/// names the table, with an index hint where the backend takes one). Both backends use this text.
pub fn ready_count_sql(now: &str, from: &str) -> String {
    format!(
        "SELECT CAST((SELECT sum(n) FROM ready_count) - (SELECT count(*) FROM {from} WHERE status = 'pending' \
         AND unmet_deps = 0 AND not_before IS NOT NULL AND not_before > {now}) AS BIGINT)"
    )
}

/// Run order: priority (larger first), then id. Served by the index `task_ready`.
pub const READY_ORDER: &str = "ORDER BY priority DESC, num";

/// The rows of the ready set a claim may take (S2, S5, S6, S9, S12; I5): `scope`'s rule
/// ([`ClaimScope::admits`]) as an SQL condition over the `task` table, its names written as
/// quoted literals. With the ready condition it lets a claim find the one row it may run
/// behind any number it may not. Both backends use this text; `FALSE` when nothing is in scope.
pub fn scope_where(scope: &ClaimScope) -> String {
    if scope.is_empty() {
        return "1 = 0".to_owned();
    }
    let list = |values: &[String]| values.iter().map(|v| quote(v)).collect::<Vec<_>>().join(", ");
    let tagged = |tag: &str| format!("(',' || tags || ',') LIKE '%,{tag},%'");
    let approved = "(run AND approved_by <> '')";
    let judged = |mode: Mode| {
        let routes: Vec<String> = scope
            .routes
            .iter()
            .filter(|route| scope.awaiting_approval || mode != Mode::Auto || route.auto)
            .map(|route| {
                let mut by = vec![format!("action = {}", quote(&route.name))];
                let mut unnamed = Vec::new();
                if !route.types.is_empty() {
                    unnamed.push(format!("(work_type <> '' AND work_type IN ({}))", list(&route.types)));
                }
                if !route.assignees.is_empty() {
                    unnamed.push(format!("(assignee <> '' AND assignee IN ({}))", list(&route.assignees)));
                }
                if !unnamed.is_empty() {
                    by.push(format!("(action = '' AND ({}))", unnamed.join(" OR ")));
                }
                let mut all = vec![format!("({})", by.join(" OR "))];
                if scope.awaiting_approval {
                    if !route.external {
                        all.push(tagged(TAG_EXTERNAL));
                    }
                } else {
                    if mode == Mode::Auto {
                        all.push(tagged(TAG_AI));
                    }
                    all.push(if route.external {
                        approved.to_owned()
                    } else {
                        format!("(NOT {} OR {approved})", tagged(TAG_EXTERNAL))
                    });
                }
                format!("({})", all.join(" AND "))
            })
            .collect();
        match routes.is_empty() {
            true => "1 = 0".to_owned(),
            // The tag test last: SQLite evaluates terms in order, and the cheap ones rule out
            // most rows first (100,000 held rows: 118 → 69 ms).
            false => format!("(({}) AND NOT {})", routes.join(" OR "), tagged(TAG_HEAVY)),
        }
    };
    let mut parts = Vec::new();
    if let Some(mode) = scope.ticked {
        parts.push(format!("(run AND {})", judged(mode)));
    }
    if let Some(mode) = scope.unticked {
        parts.push(format!("(NOT run AND {})", judged(mode)));
    }
    let mut rows = format!("({})", parts.join(" OR "));
    if scope.awaiting_approval {
        // Not queued now; a decision already spent (the approved run claimed) or withdrawn (the
        // row changed since) leaves the row waiting for a new one.
        rows = format!(
            "({rows} AND NOT {approved} AND NOT EXISTS \
             (SELECT 1 FROM approval WHERE approval.task = task.num AND approval.decided_at IS NULL))"
        );
    }
    match &scope.project {
        Some(project) => format!("(project = {} AND {rows})", quote(project)),
        None => rows,
    }
}

/// The head of the ready set, in run order, `now` and `limit` being placeholders: every ready
/// row, or only those `scope` admits that no earlier run may still hold ([`unfenced_where`]):
/// the rows a claim may take.
pub fn ready_head_sql(now: &str, limit: &str, scope: Option<&ClaimScope>) -> String {
    let scope =
        scope.map(|s| format!(" AND {} AND {}", scope_where(s), unfenced_where(now))).unwrap_or_default();
    format!("SELECT {COLUMNS} FROM task WHERE {}{scope} {READY_ORDER} LIMIT {limit}", ready_where(now))
}

/// The open statuses of the cross view (V1), as an SQL list; the partial index `task_view` is
/// declared over the same list.
pub const VIEW_OPEN: &str = "('pending', 'running', 'review', 'needs_human')";

/// The first open rows of one project in the cross view's order (due date, undated last, then
/// id; V1, V3), rows of the `exclude`d (dashboard) sources left out; `project` and `limit` are
/// placeholders. The index `task_view` serves it, so it reads about `limit` rows.
pub fn view_head_sql(project: &str, limit: &str, exclude: &[String]) -> String {
    let exclude = match exclude.is_empty() {
        true => String::new(),
        false => format!(
            " AND source NOT IN ({})",
            exclude.iter().map(|s| quote(s)).collect::<Vec<_>>().join(", ")
        ),
    };
    format!(
        "SELECT {COLUMNS} FROM task WHERE project = {project} AND status IN {VIEW_OPEN}{exclude} \
         ORDER BY (due IS NULL), due, num LIMIT {limit}"
    )
}

/// A string as an SQL literal: single quotes doubled (both backends read standard strings).
/// The `SELECT` of [`crate::Store::list`] for `filter`, the same on both backends: every value is
/// an escaped literal, the order ends with the id, and a keyset page starts after the row
/// `after` in that order (its sort key read by a subquery, so the caller passes only its id).
pub fn list_sql(filter: &crate::ListFilter) -> String {
    use crate::ListOrder;

    let mut conds: Vec<String> = Vec::new();
    if let Some(project) = &filter.project {
        conds.push(format!("project = {}", quote(project)));
    }
    if !filter.statuses.is_empty() {
        let words: Vec<String> = filter.statuses.iter().map(|s| quote(s.as_str())).collect();
        // On keyset pages `status || ''` keeps SQLite off the status index, which would sort
        // every matching row for each page; the pages walk the order's index instead.
        let column = if filter.after.is_some() { "(status || '')" } else { "status" };
        conds.push(format!("{column} IN ({})", words.join(", ")));
    }
    if let Some(source) = &filter.source {
        // The key is `source|title`: a source's rows are a range of the key index.
        let source = source.trim();
        conds.push(format!(
            "key >= {} AND key < {} AND source = {}",
            quote(&format!("{source}|")),
            quote(&format!("{source}}}")),
            quote(source)
        ));
    }
    if let Some(tag) = &filter.tag {
        conds.push(format!(
            "(',' || tags || ',') LIKE {}",
            quote(&format!("%,{},%", tag.trim().to_lowercase()))
        ));
    }
    if let Some(dep) = filter.waiting_on {
        conds.push(format!("num IN (SELECT task FROM task_dep WHERE dep = {})", dep.num()));
    }
    if let Some(assignee) = &filter.assignee {
        conds.push(format!("assignee = {}", quote(assignee)));
    }
    if let Some(work_type) = &filter.work_type {
        conds.push(format!("work_type = {}", quote(work_type)));
    }
    if let Some(text) = filter.text.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        let escaped: String = text
            .to_lowercase()
            .chars()
            .flat_map(|c| match c {
                '%' | '_' | '\\' => vec!['\\', c],
                c => vec![c],
            })
            .collect();
        let pattern = quote(&format!("%{escaped}%"));
        conds.push(format!(
            "(lower(title) LIKE {pattern} ESCAPE '\\' OR lower(body) LIKE {pattern} ESCAPE '\\')"
        ));
    }
    if let Some(day) = filter.due_before {
        conds.push(format!("due IS NOT NULL AND due < {}", quote(&day.to_string())));
    }
    // The sort key and its direction; the id breaks ties, ascending.
    let (key, descending) = match filter.order {
        ListOrder::Id => (None, false),
        ListOrder::Due => (Some("coalesce(due, '9999-12-31')"), false),
        ListOrder::Priority => (Some("priority"), true),
        ListOrder::Updated => (Some("updated_at"), true),
    };
    if let Some(after) = filter.after {
        let num = after.num();
        conds.push(match key {
            None => format!("num > {num}"),
            Some(key) => {
                let cursor = format!("(SELECT {key} FROM task WHERE num = {num})");
                let beyond = if descending { "<" } else { ">" };
                format!("({key} {beyond} {cursor} OR ({key} = {cursor} AND num > {num}))")
            }
        });
    }
    let mut sql = format!("SELECT {COLUMNS} FROM task");
    if !conds.is_empty() {
        sql.push_str(&format!(" WHERE {}", conds.join(" AND ")));
    }
    match key {
        None => sql.push_str(" ORDER BY num"),
        Some(key) => {
            sql.push_str(&format!(" ORDER BY {key} {}, num", if descending { "DESC" } else { "ASC" }))
        }
    }
    if let Some(limit) = filter.limit {
        sql.push_str(&format!(" LIMIT {limit}"));
    }
    sql
}

/// Records a person's decision on a task's approval entry (made if the task was never queued):
/// parameters task, time, person, decision, reason.
pub fn decide_sql(mark: Placeholder) -> String {
    let [task, at, by, decision, reason] = [1, 2, 3, 4, 5].map(mark);
    format!(
        "INSERT INTO approval (task, queued_at, decided_at, decided_by, decision, reason) \
         VALUES ({task}, {at}, {at}, {by}, {decision}, {reason}) ON CONFLICT (task) DO UPDATE SET \
         decided_at = excluded.decided_at, decided_by = excluded.decided_by, decision = excluded.decision, \
         reason = excluded.reason"
    )
}

/// [`crate::Store::change_mark`]: the journal's last sequence number plus the approval queue's
/// entries ever made (both only grow; a decision is journaled).
pub const CHANGE_MARK_SQL: &str =
    "SELECT (SELECT coalesce(max(seq), 0) FROM journal) + (SELECT count(*) FROM approval)";

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The statuses that satisfy a dependency, as an SQL list: `('done', 'dropped')`.
pub fn satisfying_statuses() -> String {
    let words: Vec<String> =
        Status::ALL.into_iter().filter(|s| s.satisfies_deps()).map(|s| format!("'{}'", s.as_str())).collect();
    format!("({})", words.join(", "))
}

/// Inserts a row: the [`encode`]d cells, then its count of unmet deps.
pub fn insert_sql(mark: Placeholder) -> String {
    let marks: Vec<String> = (1..=TASK_COLUMNS.len() + 1).map(mark).collect();
    format!("INSERT INTO task ({COLUMNS}, unmet_deps) VALUES ({})", marks.join(", "))
}

/// A set of [`TASK_COLUMNS`] (by index): the cells an update writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Columns(u32);

// A column's place in the set is a bit of a `u32`.
const _: () = assert!(TASK_COLUMNS.len() <= 32);

impl Columns {
    /// Every column but `num` (which picks the row and never changes).
    pub const ALL: Columns = Columns(((1u32 << TASK_COLUMNS.len()) - 1) & !1);

    /// Whether no column is in the set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The indices into [`TASK_COLUMNS`], in order.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        (1..TASK_COLUMNS.len()).filter(move |i| self.0 & (1 << i) != 0)
    }
}

/// Writes `columns` of an existing row, with [`update_of`]'s cells as parameters: the first, `num`,
/// picks the row. Only the cells that changed are written, so that an index over columns that
/// did not change (the key, the project, the view's order) is not rewritten, and a commit
/// touches fewer pages (I5).
pub fn update_sql(columns: Columns, mark: Placeholder) -> String {
    let sets: Vec<String> =
        columns.iter().enumerate().map(|(n, i)| format!("{} = {}", TASK_COLUMNS[i].0, mark(n + 2))).collect();
    format!("UPDATE task SET {} WHERE num = {}", sets.join(", "), mark(1))
}

/// The update of a row from `before` to `after`: the columns whose cells differ (`num` never
/// counts: it picks the row), and the parameters of [`update_sql`] for them — the row's `num`,
/// then those cells in order. Each version is encoded once.
pub fn update_of(before: &Task, after: &Task) -> (Columns, Vec<Cell>) {
    let mut set = 0u32;
    let mut cells = vec![Cell::BigInt(Some(after.id.num() as i64))];
    for (i, (old, new)) in encode(before).into_iter().zip(encode(after)).enumerate().skip(1) {
        if old != new {
            set |= 1 << i;
            cells.push(new);
        }
    }
    (Columns(set), cells)
}

/// Sets a row's `unmet_deps` from its edges: deps missing or not `done`/`dropped`. `id` is the
/// placeholder of the row's number.
pub fn recount_sql(id: &str) -> String {
    format!(
        "UPDATE task SET unmet_deps = (SELECT count(*) FROM task_dep d LEFT JOIN task t ON t.num = d.dep \
         WHERE d.task = {id} AND (t.status IS NULL OR t.status NOT IN {})) WHERE num = {id}",
        satisfying_statuses()
    )
}

/// Adds a delta (`delta`) to `unmet_deps` of every row that waits for a row (`id`).
pub fn shift_sql(id: &str, delta: &str) -> String {
    format!(
        "UPDATE task SET unmet_deps = unmet_deps + {delta} WHERE num IN (SELECT task FROM task_dep WHERE dep = {id})"
    )
}

/// The deps column: display ids separated by commas (`T-500,T-0001`).
pub fn deps_text(deps: &[TaskId]) -> String {
    deps.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

/// Parses the deps column; ids that do not parse are skipped (the column is only written here).
pub fn parse_deps(text: &str) -> Vec<TaskId> {
    text.split(',').filter_map(TaskId::parse).collect()
}

fn micros(t: Timestamp) -> i64 {
    t.as_microsecond()
}

fn text(s: &str) -> Cell {
    Cell::Text(Some(s.to_owned()))
}

/// The cells of a row, in the order of [`TASK_COLUMNS`].
pub fn encode(t: &Task) -> Vec<Cell> {
    vec![
        Cell::BigInt(Some(t.id.num() as i64)),
        Cell::Int(i32::from(t.id.width())),
        text(&t.project),
        text(t.status.as_str()),
        Cell::Bool(t.run),
        text(&t.title),
        text(&t.body),
        text(&t.source),
        text(&t.evidence),
        Cell::Text(t.due.map(|d| d.to_string())),
        text(&t.assignee),
        text(&t.work_type),
        Cell::BigInt(Some(t.priority)),
        Cell::BigInt(t.not_before.map(micros)),
        text(&t.action),
        text(&t.result),
        Cell::BigInt(t.run_at.map(micros)),
        text(&t.correction),
        Cell::Text(Some(deps_text(&t.deps))),
        Cell::Text(Some(t.tags.to_list())),
        text(&t.key),
        Cell::Int(t.failures as i32),
        Cell::Bool(t.refresh),
        Cell::Int(t.attempt as i32),
        Cell::Text(t.lease.as_ref().map(|l| l.owner.clone())),
        Cell::BigInt(t.lease.as_ref().map(|l| micros(l.expires_at))),
        Cell::BigInt(Some(micros(t.created_at))),
        Cell::BigInt(Some(micros(t.updated_at))),
        text(&t.approved_by),
        Cell::Int(i32::from(t.person_cells.bits())),
    ]
}

/// `task` as the ledger gives it back once written: its times to the microsecond, the columns'
/// precision, everything else as it is. A write that knows the row it wrote returns this instead
/// of reading the row again (`decode(encode(t)) == as_stored(t)`, a test holds it).
pub fn as_stored(mut task: Task) -> Task {
    let stored = |t: Timestamp| Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t);
    task.not_before = task.not_before.map(stored);
    task.run_at = task.run_at.map(stored);
    task.created_at = stored(task.created_at);
    task.updated_at = stored(task.updated_at);
    if let Some(lease) = &mut task.lease {
        lease.expires_at = stored(lease.expires_at);
    }
    task
}

/// A row read as [`TASK_COLUMNS`] cells, as a [`Task`].
///
/// # Errors
///
/// What is wrong with the row (a bad status, date or time, a cell of the wrong type), for the
/// backend's error.
pub fn decode(cells: Vec<Cell>) -> Result<Task, String> {
    if cells.len() != TASK_COLUMNS.len() {
        return Err(format!("a task row of {} cells", cells.len()));
    }
    let mut cells = cells.into_iter().zip(TASK_COLUMNS).map(|(cell, (name, _))| (name, cell));
    let mut next = || cells.next().expect("counted above");
    let int = |(name, cell): (&str, Cell)| match cell {
        Cell::Int(v) => Ok(i64::from(v)),
        Cell::BigInt(Some(v)) => Ok(v),
        other => Err(format!("bad {name} {other:?}")),
    };
    let big = |(name, cell): (&str, Cell)| match cell {
        Cell::BigInt(v) => Ok(v),
        Cell::Int(v) => Ok(Some(i64::from(v))),
        other => Err(format!("bad {name} {other:?}")),
    };
    let opt_text = |(name, cell): (&str, Cell)| match cell {
        Cell::Text(v) => Ok(v),
        other => Err(format!("bad {name} {other:?}")),
    };
    let text = |c: (&str, Cell)| opt_text(c).map(Option::unwrap_or_default);
    let boolean = |(name, cell): (&str, Cell)| match cell {
        Cell::Bool(v) => Ok(v),
        Cell::Int(v) => Ok(v != 0),
        Cell::BigInt(Some(v)) => Ok(v != 0),
        other => Err(format!("bad {name} {other:?}")),
    };
    let time = |v: i64| Timestamp::from_microsecond(v).map_err(|e| format!("bad time {v}: {e}"));
    let opt_time = |v: Option<i64>| v.map(time).transpose();

    let num = int(next())?;
    let width = int(next())?;
    let project = text(next())?;
    let status = text(next())?;
    let run = boolean(next())?;
    let title = text(next())?;
    let body = text(next())?;
    let source = text(next())?;
    let evidence = text(next())?;
    let due = opt_text(next())?;
    let assignee = text(next())?;
    let work_type = text(next())?;
    let priority = int(next())?;
    let not_before = opt_time(big(next())?)?;
    let action = text(next())?;
    let result = text(next())?;
    let run_at = opt_time(big(next())?)?;
    let correction = text(next())?;
    let deps = parse_deps(&text(next())?);
    let tags = Tags::parse_list(&text(next())?);
    let key = text(next())?;
    let failures = int(next())?;
    let refresh = boolean(next())?;
    let attempt = int(next())?;
    let lease_owner = opt_text(next())?;
    let lease_expires_at = opt_time(big(next())?)?;
    let created_at = opt_time(big(next())?)?.unwrap_or_default();
    let updated_at = opt_time(big(next())?)?.unwrap_or_default();
    let approved_by = text(next())?;
    let person_cells = PersonCells::from_bits(u16::try_from(int(next())?).unwrap_or(0));
    Ok(Task {
        id: TaskId::with_width(num as u64, width.clamp(1, 20) as u8),
        project,
        status: Status::parse(&status).ok_or_else(|| format!("bad status '{status}'"))?,
        run,
        title,
        body,
        source,
        evidence,
        due: due.map(|d| d.parse().map_err(|_| format!("bad date '{d}'"))).transpose()?,
        assignee,
        work_type,
        priority,
        not_before,
        action,
        result,
        run_at,
        correction,
        deps,
        tags,
        key,
        failures: failures.max(0) as u32,
        refresh,
        attempt: attempt.max(0) as u32,
        lease: match (lease_owner, lease_expires_at) {
            (Some(owner), Some(expires_at)) => Some(Lease { owner, expires_at }),
            _ => None,
        },
        created_at,
        updated_at,
        approved_by,
        person_cells,
    })
}

/// Whether `stats(since)` asks for every run since the first (`since` at or before the epoch:
/// `/metrics`, `stats --since all`), which each backend answers from the per-action counts it
/// keeps with the run records instead of a pass over the whole run history.
pub fn stats_all_time(since: Timestamp) -> bool {
    since <= Timestamp::UNIX_EPOCH
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;

    #[test]
    fn a_row_round_trips_through_its_cells() {
        let now = Timestamp::from_second(1_700_000_000).expect("time");
        let mut task = Task::new(TaskId::with_width(500, 3), "write", "src", now);
        task.due = Some("2026-03-01".parse().expect("date"));
        task.deps = vec![TaskId::new(1), TaskId::with_width(7, 2)];
        task.tags = Tags::parse_list("ai,heavy");
        task.status = Status::Running;
        task.attempt = 3;
        task.lease = Some(Lease { owner: "w".into(), expires_at: now + SignedDuration::from_mins(5) });
        let cells = encode(&task);
        assert_eq!(cells.len(), TASK_COLUMNS.len());
        assert_eq!(decode(cells).expect("decodes"), task);
        let names: Vec<&str> = TASK_COLUMNS.iter().map(|(n, _)| *n).collect();
        assert_eq!(names.join(", "), COLUMNS.split_whitespace().collect::<Vec<_>>().join(" "));
    }

    /// I5: a row with times finer than a microsecond comes back from its cells as `as_stored`
    /// gives it, every time field truncated, nothing else touched.
    #[test]
    fn i5_a_row_as_stored_is_the_row_its_cells_give_back() {
        let now =
            Timestamp::from_second(1_700_000_000).expect("time") + SignedDuration::from_nanos(123_456_789);
        let mut task = Task::new(TaskId::with_width(9, 4), "write", "src", now);
        task.not_before = Some(now + SignedDuration::from_nanos(1_001));
        task.run_at = Some(now + SignedDuration::from_nanos(999));
        task.updated_at = now + SignedDuration::from_nanos(5);
        task.lease = Some(Lease { owner: "w".into(), expires_at: now + SignedDuration::from_nanos(7_777) });
        task.deps = vec![TaskId::new(3)];
        task.tags = Tags::parse_list("ai");
        let back = decode(encode(&task)).expect("decodes");
        assert_ne!(back, task, "the nanoseconds are not kept");
        assert_eq!(as_stored(task.clone()), back);
        assert_eq!(back.created_at.subsec_nanosecond(), 123_456_000);
        assert_eq!(as_stored(back.clone()), back, "a stored row is stored already");
    }

    /// I5: an update writes only the cells that changed, and writing them over the row before
    /// gives the row after, cell for cell.
    #[test]
    fn i5_an_update_writes_the_changed_cells_only() {
        let now = Timestamp::from_second(1_700_000_000).expect("time");
        let mut before = Task::new(TaskId::new(42), "write", "src", now);
        before.status = Status::Running;
        before.attempt = 2;
        before.lease = Some(Lease { owner: "w".into(), expires_at: now + SignedDuration::from_mins(5) });
        let mut after = before.clone();
        after.status = Status::Done;
        after.result = "ok".into();
        after.lease = None;
        after.updated_at = now + SignedDuration::from_secs(1);
        let (columns, cells) = update_of(&before, &after);
        let names: Vec<&str> = columns.iter().map(|i| TASK_COLUMNS[i].0).collect();
        assert_eq!(names, ["status", "result", "lease_owner", "lease_expires_at", "updated_at"]);
        assert_eq!(
            update_sql(columns, |n| format!("${n}")),
            "UPDATE task SET status = $2, result = $3, lease_owner = $4, lease_expires_at = $5, \
             updated_at = $6 WHERE num = $1"
        );
        assert_eq!(cells.len(), 1 + names.len());
        assert_eq!(cells[0], Cell::BigInt(Some(42)));
        let mut row = encode(&before);
        for (i, cell) in columns.iter().zip(cells.into_iter().skip(1)) {
            row[i] = cell;
        }
        assert_eq!(decode(row).expect("decodes"), after);
        assert!(update_of(&after, &after).0.is_empty());
        assert_eq!(Columns::ALL.iter().count(), TASK_COLUMNS.len() - 1);
    }

    #[test]
    fn d1_the_ready_condition_and_the_shared_statements_are_one_text_per_placeholder_syntax() {
        assert_eq!(
            ready_where("$1"),
            "status = 'pending' AND unmet_deps = 0 AND (not_before IS NULL OR not_before <= $1)"
        );
        assert_eq!(satisfying_statuses(), "('done', 'dropped')");
        let update = update_sql(Columns::ALL, |n| format!("?{n}"));
        assert!(update.starts_with("UPDATE task SET id_width = ?2, project = ?3"), "{update}");
        assert!(update.ends_with("approved_by = ?29, person_cells = ?30 WHERE num = ?1"), "{update}");
        assert!(insert_sql(|n| format!("${n}")).ends_with("$30, $31)"));
    }
}

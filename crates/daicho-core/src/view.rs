//! The cross-project view (V1–V5): what is left to do in every project, in one list.
//!
//! Pure: the rows, today's date and the dashboard sources are arguments. Renderers (terminal,
//! Markdown, HTML, JSON) live at the edges and draw exactly what this builds, so a cut is never
//! silent: every project over its cap gets a "… N more" line with the right count.

use crate::lang::Lang;
use std::collections::{BTreeMap, BTreeSet};

use jiff::civil::Date;
use serde::Serialize;

use crate::task::{Status, Task};

/// How the view is built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewOptions {
    /// At most this many rows per project (V3).
    pub per_project: usize,
    /// Today, for overdue marks.
    pub today: Date,
    /// Sources that have a dashboard of their own: counted per project, not listed (V2).
    pub dashboard_sources: BTreeSet<String>,
}

/// Why a row stands out (V4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    /// Past its due date.
    Overdue,
    /// Waiting for a person's review.
    Review,
    /// Parked for a person after failures (or set so).
    NeedsHuman,
}

/// One listed row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ViewRow {
    /// `T-0042`.
    pub id: String,
    /// Its project.
    pub project: String,
    /// Its status.
    pub status: Status,
    /// Its title.
    pub title: String,
    /// Its due date, if any.
    pub due: Option<Date>,
    /// Who does it.
    pub assignee: String,
    /// What makes it stand out, most urgent first.
    pub marks: Vec<Mark>,
}

/// A dashboard source's open rows in one project (V2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DashboardLine {
    /// The project.
    pub project: String,
    /// The source.
    pub source: String,
    /// Its open rows there.
    pub open: usize,
}

/// Rows of a project left out by the cap (V3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MoreLine {
    /// The project.
    pub project: String,
    /// How many of its rows are not listed.
    pub more: usize,
}

/// The whole view.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CrossView {
    /// Listed rows: by due date (undated last), then id (V1).
    pub rows: Vec<ViewRow>,
    /// Dashboard counts, by project then source.
    pub dashboards: Vec<DashboardLine>,
    /// Projects over the cap, by project.
    pub more: Vec<MoreLine>,
}

/// Whether a row is open work for the view: pending, running, review or needs_human.
pub fn is_open_work(status: Status) -> bool {
    matches!(status, Status::Pending | Status::Running | Status::Review | Status::NeedsHuman)
}

/// Builds the view from any rows (closed ones are left out).
pub fn cross_view(tasks: &[Task], options: &ViewOptions) -> CrossView {
    let mut builder = ViewBuilder::new(options.clone());
    for task in tasks {
        builder.add(task);
    }
    builder.finish()
}

/// One project's part of the view as a store reads it without walking its rows (V1–V3): how
/// many open rows it has outside the dashboard sources, and its first rows in the view's order.
#[derive(Clone, Debug)]
pub struct ProjectHead {
    /// The project.
    pub project: String,
    /// Its open rows outside the dashboard sources.
    pub open: usize,
    /// Its first open rows (at least `per_project` of them when it has that many).
    pub rows: Vec<Task>,
}

/// The view from each project's head and the dashboard counts: what [`cross_view`] gives over
/// every row, built from what an index gives (a few rows per project and counts).
pub fn from_heads(heads: &[ProjectHead], dashboards: Vec<DashboardLine>, options: &ViewOptions) -> CrossView {
    let mut view = CrossView::default();
    for head in heads {
        let mut rows: Vec<ViewRow> = head
            .rows
            .iter()
            .filter(|t| is_open_work(t.status) && !options.dashboard_sources.contains(&t.source))
            .map(|t| row(t, options.today))
            .collect();
        rows.sort_by_key(view_order);
        rows.truncate(options.per_project);
        if head.open > rows.len() {
            view.more.push(MoreLine { project: head.project.clone(), more: head.open - rows.len() });
        }
        view.rows.extend(rows);
    }
    view.rows.sort_by_key(view_order);
    view.more.sort_by(|a, b| a.project.cmp(&b.project));
    view.dashboards = dashboards.into_iter().filter(|d| d.open > 0).collect();
    view.dashboards.sort_by(|a, b| (&a.project, &a.source).cmp(&(&b.project, &b.source)));
    view
}

/// Builds the view from rows given one at a time, keeping at most twice the cap per project in
/// memory: a ledger of any size is read in pages and never held whole.
#[derive(Clone, Debug)]
pub struct ViewBuilder {
    options: ViewOptions,
    /// Per project: open rows seen, and the best ones so far (at most `2 × per_project`).
    by_project: BTreeMap<String, (usize, Vec<ViewRow>)>,
    dashboards: BTreeMap<(String, String), usize>,
}

/// The view's order: by due date (undated last), then id.
fn view_order(row: &ViewRow) -> (bool, Option<Date>, Option<u64>) {
    (row.due.is_none(), row.due, crate::TaskId::parse(&row.id).map(|i| i.num()))
}

impl ViewBuilder {
    /// An empty view.
    pub fn new(options: ViewOptions) -> ViewBuilder {
        ViewBuilder { options, by_project: BTreeMap::new(), dashboards: BTreeMap::new() }
    }

    /// Takes one row into account (a closed row is ignored).
    pub fn add(&mut self, task: &Task) {
        if !is_open_work(task.status) {
            return;
        }
        if self.options.dashboard_sources.contains(&task.source) {
            *self.dashboards.entry((task.project.clone(), task.source.clone())).or_insert(0) += 1;
            return;
        }
        let cap = self.options.per_project;
        let (seen, kept) = self.by_project.entry(task.project.clone()).or_default();
        *seen += 1;
        kept.push(row(task, self.options.today));
        if kept.len() > cap.saturating_mul(2).max(1) {
            kept.sort_by_key(view_order);
            kept.truncate(cap);
        }
    }

    /// The view: at most `per_project` rows per project, then a counted "… N more" line.
    pub fn finish(self) -> CrossView {
        let mut view = CrossView::default();
        for (project, (seen, mut kept)) in self.by_project {
            kept.sort_by_key(view_order);
            kept.truncate(self.options.per_project);
            if seen > kept.len() {
                view.more.push(MoreLine { project, more: seen - kept.len() });
            }
            view.rows.extend(kept);
        }
        view.rows.sort_by_key(view_order);
        view.dashboards = self
            .dashboards
            .into_iter()
            .map(|((project, source), open)| DashboardLine { project, source, open })
            .collect();
        view
    }
}

/// What makes a row stand out (V4), most urgent first: overdue (open work past its due date),
/// then `needs_human` or `review`. Closed rows are never overdue.
pub fn marks_of(task: &Task, today: Date) -> Vec<Mark> {
    let mut marks = Vec::new();
    if is_open_work(task.status) && task.due.is_some_and(|d| d < today) {
        marks.push(Mark::Overdue);
    }
    match task.status {
        Status::NeedsHuman => marks.push(Mark::NeedsHuman),
        Status::Review => marks.push(Mark::Review),
        _ => {}
    }
    marks
}

fn row(task: &Task, today: Date) -> ViewRow {
    let marks = marks_of(task, today);
    ViewRow {
        id: task.id.to_string(),
        project: task.project.clone(),
        status: task.status,
        title: task.title.clone(),
        due: task.due,
        assignee: task.assignee.clone(),
        marks,
    }
}

/// The count line of a dashboard source (V2): "support: 4 open in inbox (its own dashboard)".
pub fn dashboard_text(line: &DashboardLine) -> String {
    dashboard_text_in(line, Lang::En)
}

/// A dashboard line (V2) in `lang`.
pub fn dashboard_text_in(line: &DashboardLine, lang: Lang) -> String {
    match lang {
        Lang::En => format!("{}: {} open in {} (its own dashboard)", line.project, line.open, line.source),
        Lang::Ja => format!("{}: {} に未完了 {} 件 (専用の一覧)", line.project, line.source, line.open),
    }
}

/// The "… N more in the P ledger" line of V3.
pub fn more_text(line: &MoreLine) -> String {
    more_text_in(line, Lang::En)
}

/// The "… N more in the P ledger" line of V3 in `lang`.
pub fn more_text_in(line: &MoreLine, lang: Lang) -> String {
    match lang {
        Lang::En => {
            let project = if line.project.is_empty() { "(no project)" } else { &line.project };
            format!("… {} more in the {project} ledger", line.more)
        }
        Lang::Ja => {
            let project = if line.project.is_empty() { "(案件なし)" } else { &line.project };
            format!("… {project} の台帳にあと {} 件", line.more)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TaskId;
    use jiff::civil::date;

    fn task(n: u64, project: &str, status: Status, due: Option<Date>) -> Task {
        let mut t = Task::new(TaskId::new(n), &format!("task {n}"), "src", jiff::Timestamp::UNIX_EPOCH);
        t.project = project.to_owned();
        t.status = status;
        t.due = due;
        t
    }

    fn options(per_project: usize) -> ViewOptions {
        ViewOptions { per_project, today: date(2026, 11, 30), dashboard_sources: BTreeSet::new() }
    }

    #[test]
    fn v1_open_work_by_due_date_undated_last_then_id() {
        let tasks = [
            task(1, "a", Status::Pending, None),
            task(2, "b", Status::Done, Some(date(2026, 1, 1))),
            task(3, "b", Status::Running, Some(date(2026, 12, 24))),
            task(4, "a", Status::Review, Some(date(2026, 12, 1))),
            task(5, "c", Status::NeedsHuman, None),
            task(6, "c", Status::Dropped, None),
            task(7, "a", Status::Pending, Some(date(2026, 12, 1))),
        ];
        let view = cross_view(&tasks, &options(10));
        let ids: Vec<&str> = view.rows.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["T-0004", "T-0007", "T-0003", "T-0001", "T-0005"]);
        assert!(view.more.is_empty());
    }

    #[test]
    fn v3_v4_the_cap_is_counted_and_urgent_rows_are_marked() {
        let mut tasks: Vec<Task> = (1..=13).map(|n| task(n, "PJ-03", Status::Pending, None)).collect();
        tasks.push(task(20, "PJ-03", Status::Review, Some(date(2026, 11, 1))));
        tasks.push(task(21, "PJ-04", Status::NeedsHuman, None));
        let view = cross_view(&tasks, &options(10));
        assert_eq!(view.rows.iter().filter(|r| r.project == "PJ-03").count(), 10);
        assert_eq!(view.more, [MoreLine { project: "PJ-03".into(), more: 4 }]);
        assert_eq!(more_text(&view.more[0]), "… 4 more in the PJ-03 ledger");
        assert_eq!(view.rows[0].marks, [Mark::Overdue, Mark::Review], "the overdue review leads");
        let parked = view.rows.iter().find(|r| r.id == "T-0021").expect("listed");
        assert_eq!(parked.marks, [Mark::NeedsHuman]);
    }

    #[test]
    fn v3_the_bounded_builder_equals_sorting_everything() {
        // Rows in a scrambled order, several projects, small caps: the builder (which keeps at
        // most twice the cap per project) gives what sorting all rows at once gives.
        let mut seed: u64 = 0x9e37_79b9;
        let mut next = move |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for cap in [0, 1, 2, 3, 10] {
            let tasks: Vec<Task> = (1..=300)
                .map(|n| {
                    let due = (next(3) > 0).then(|| date(2026, 1 + next(12) as i8, 1 + next(28) as i8));
                    task(
                        1 + next(1000) * 1000 + n,
                        ["A", "B", "C"][next(3) as usize],
                        Status::ALL[next(6) as usize],
                        due,
                    )
                })
                .collect();
            let view = cross_view(&tasks, &options(cap));
            let mut want_rows = Vec::new();
            let mut want_more = Vec::new();
            for project in ["A", "B", "C"] {
                let mut open: Vec<&Task> =
                    tasks.iter().filter(|t| t.project == project && is_open_work(t.status)).collect();
                open.sort_by_key(|t| (t.due.is_none(), t.due, t.id));
                if open.len() > cap {
                    want_more.push((project.to_owned(), open.len() - cap));
                }
                want_rows.extend(open.into_iter().take(cap).map(|t| t.id.to_string()));
            }
            let mut got: Vec<String> = view.rows.iter().map(|r| r.id.clone()).collect();
            got.sort();
            want_rows.sort();
            assert_eq!(got, want_rows, "cap {cap}");
            let more: Vec<(String, usize)> = view.more.iter().map(|m| (m.project.clone(), m.more)).collect();
            assert_eq!(more, want_more, "cap {cap}");
            // Built from each project's head and count, as a store reads them: the same view.
            let heads: Vec<ProjectHead> = ["A", "B", "C"]
                .into_iter()
                .map(|project| {
                    let mut open: Vec<Task> = tasks
                        .iter()
                        .filter(|t| t.project == project && is_open_work(t.status))
                        .cloned()
                        .collect();
                    open.sort_by_key(|t| (t.due.is_none(), t.due, t.id));
                    let count = open.len();
                    open.truncate(cap);
                    ProjectHead { project: project.to_owned(), open: count, rows: open }
                })
                .filter(|h| h.open > 0)
                .collect();
            assert_eq!(from_heads(&heads, Vec::new(), &options(cap)), view, "cap {cap}");
        }
    }

    #[test]
    fn v4_closed_rows_are_never_overdue() {
        let today = date(2026, 11, 30);
        let late = Some(date(2026, 11, 1));
        assert_eq!(marks_of(&task(1, "P", Status::Pending, late), today), [Mark::Overdue]);
        assert_eq!(
            marks_of(&task(2, "P", Status::NeedsHuman, late), today),
            [Mark::Overdue, Mark::NeedsHuman]
        );
        assert!(marks_of(&task(3, "P", Status::Done, late), today).is_empty());
        assert!(marks_of(&task(4, "P", Status::Dropped, late), today).is_empty());
        assert_eq!(marks_of(&task(5, "P", Status::Review, None), today), [Mark::Review]);
    }

    #[test]
    fn v2_dashboard_sources_are_one_count_per_project() {
        let mut tasks: Vec<Task> = (1..=5).map(|n| task(n, "support", Status::Pending, None)).collect();
        tasks[4].project = "sales".into();
        for t in &mut tasks {
            t.source = "inbox".into();
        }
        tasks.push(task(9, "support", Status::Pending, None));
        let mut opts = options(10);
        opts.dashboard_sources.insert("inbox".into());
        let view = cross_view(&tasks, &opts);
        assert_eq!(view.rows.len(), 1);
        assert_eq!(
            view.dashboards,
            [
                DashboardLine { project: "sales".into(), source: "inbox".into(), open: 1 },
                DashboardLine { project: "support".into(), source: "inbox".into(), open: 4 },
            ]
        );
    }
}

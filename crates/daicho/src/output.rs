//! Printing results: tables for people, JSON for machines, errors on stderr.

use std::io::Write as _;

use comfy_table::{ContentArrangement, LineStyle, Table, TableStyle, presets};
use daicho_core::Task;
use daicho_store::JournalEntry;
use serde::Serialize;

/// Whether labels are shown in Japanese: `DAICHO_LANG`, `LC_ALL`, `LC_MESSAGES` or `LANG`
/// starting with `ja`.
pub fn locale_is_ja() -> bool {
    ["DAICHO_LANG", "LC_ALL", "LC_MESSAGES", "LANG"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .is_some_and(|v| v.starts_with("ja"))
}

/// Writes text to stdout; a closed pipe surfaces as an error that `main` treats as quiet.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

/// Writes a value as JSON on one line of stdout.
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    print(&serde_json::to_string(value)?)
}

/// Progress of long work on the terminal: a bar on stderr when stderr is a terminal, nothing on a
/// pipe or a file (so scripts and logs stay clean).
#[derive(Debug)]
pub struct Progress {
    what: &'static str,
    total: usize,
    done: usize,
    on: bool,
}

impl Progress {
    /// Progress over `total` steps of `what` (`sources`, `files`).
    pub fn new(what: &'static str, total: usize) -> Progress {
        use std::io::IsTerminal as _;
        Progress { what, total, done: 0, on: std::io::stderr().is_terminal() }
    }

    /// Shows that the next step, `label`, is under way.
    pub fn start(&mut self, label: &str) {
        if !self.on {
            return;
        }
        let width = 24;
        let filled = (self.done * width).checked_div(self.total).unwrap_or(width);
        let bar = format!("{}{}", "#".repeat(filled), "-".repeat(width - filled));
        eprint!("\r\x1b[2K[{bar}] {}/{} {}: {}", self.done, self.total, self.what, cell(label, 40));
    }

    /// Marks the current step done.
    pub fn step(&mut self) {
        self.done += 1;
    }

    /// Clears the bar.
    pub fn finish(self) {
        if self.on {
            eprint!("\r\x1b[2K");
        }
    }
}

/// A [`Progress`] bar over the sources of a sync, fed by the engine's progress events.
#[derive(Debug, Default)]
pub struct SyncProgress(Option<Progress>);

impl SyncProgress {
    /// Takes one event.
    pub fn on(&mut self, event: daicho_engine::sync::Progress<'_>) {
        use daicho_engine::sync::Progress as P;
        match (event, &mut self.0) {
            (P::Total(total), _) => self.0 = Some(Progress::new("sources", total)),
            (P::Start(label), Some(bar)) => bar.start(label),
            (P::Step, Some(bar)) => bar.step(),
            _ => {}
        }
    }

    /// Clears the bar.
    pub fn finish(self) {
        if let Some(bar) = self.0 {
            bar.finish();
        }
    }
}

/// Whether an error is a closed stdout (`daicho list | head`): exit quietly then.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Reports an error once: on stderr, and as `{"error": …}` on stdout with `--json`.
pub fn report_error(err: &anyhow::Error, json: bool) {
    let message = format!("{err:#}");
    eprintln!("daicho: error: {message}");
    if json {
        let _ = print_json(&serde_json::json!({ "error": message }));
    }
}

/// Shortens text for a table cell: the first line, at most `max` characters.
pub fn cell(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    let mut out: String = first.chars().take(max).collect();
    if first.chars().count() > max || text.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}

/// A dense table: one line under the header, no lines between rows.
pub const DENSE: TableStyle = TableStyle::new().header_separator(LineStyle::none().fill('─').junction('─'));

pub fn table(header: Vec<&str>, style: TableStyle) -> Table {
    let mut table = Table::new();
    table.load_style(style).set_content_arrangement(ContentArrangement::Dynamic);
    table.set_header(header);
    table
}

/// A table of tasks in the column order of the ledger.
pub fn task_table(tasks: &[Task], ja: bool) -> String {
    let header = if ja {
        vec![
            "タスクID",
            "状態",
            "▶",
            "タスク",
            "発生源",
            "期限",
            "担当",
            "分類",
            "優先度",
            "AI機能",
            "依存",
            "タグ",
            "案件",
        ]
    } else {
        vec![
            "id", "status", "run", "title", "source", "due", "assignee", "type", "prio", "action", "deps",
            "tags", "project",
        ]
    };
    let mut t = table(header, DENSE);
    for task in tasks {
        let deps: Vec<String> = task.deps.iter().map(ToString::to_string).collect();
        t.add_row(vec![
            task.id.to_string(),
            task.status.label(ja).to_owned(),
            if task.run { "▶".to_owned() } else { String::new() },
            cell(&task.title, 60),
            cell(&task.source, 20),
            task.due.map(|d| d.to_string()).unwrap_or_default(),
            cell(&task.assignee, 16),
            cell(&task.work_type, 16),
            if task.priority == 0 { String::new() } else { task.priority.to_string() },
            cell(&task.action, 16),
            cell(&deps.join(","), 30),
            task.tags.to_list(),
            cell(&task.project, 16),
        ]);
    }
    t.to_string()
}

/// The ready table: run order, with why each row will or will not run.
pub fn ready_table(tasks: &[Task], reasons: &[String], ja: bool) -> String {
    let header = if ja {
        vec!["タスクID", "優先度", "タスク", "分類", "担当", "AI機能", "タグ", "案件", "実行可否"]
    } else {
        vec!["id", "prio", "title", "type", "assignee", "action", "tags", "project", "why"]
    };
    let mut t = table(header, DENSE);
    for (task, reason) in tasks.iter().zip(reasons) {
        t.add_row(vec![
            task.id.to_string(),
            if task.priority == 0 { String::new() } else { task.priority.to_string() },
            cell(&task.title, 50),
            cell(&task.work_type, 16),
            cell(&task.assignee, 16),
            cell(&task.action, 16),
            task.tags.to_list(),
            cell(&task.project, 16),
            reason.clone(),
        ]);
    }
    t.to_string()
}

/// Every field of one task, one per line.
pub fn task_detail(task: &Task, ja: bool) -> String {
    let time = |t: Option<jiff::Timestamp>| t.map(|t| t.to_string()).unwrap_or_default();
    let deps: Vec<String> = task.deps.iter().map(ToString::to_string).collect();
    let rows: Vec<(&str, &str, String)> = vec![
        ("id", "タスクID", task.id.to_string()),
        ("project", "案件", task.project.clone()),
        ("status", "状態", task.status.label(ja).to_owned()),
        ("run", "▶AI実行", task.run.to_string()),
        ("title", "タスク", task.title.clone()),
        ("body", "内容", task.body.clone()),
        ("source", "発生源", task.source.clone()),
        ("evidence", "根拠", task.evidence.clone()),
        ("due", "期限", task.due.map(|d| d.to_string()).unwrap_or_default()),
        ("assignee", "担当", task.assignee.clone()),
        ("type", "分類", task.work_type.clone()),
        ("priority", "優先度", task.priority.to_string()),
        ("not_before", "開始", time(task.not_before)),
        ("action", "AI機能", task.action.clone()),
        ("result", "実行結果", task.result.clone()),
        ("run_at", "実行日時", time(task.run_at)),
        ("correction", "修正指示", task.correction.clone()),
        ("deps", "依存", deps.join(", ")),
        ("tags", "タグ", task.tags.to_list()),
        ("failures", "失敗回数", task.failures.to_string()),
        ("attempt", "試行", task.attempt.to_string()),
        ("refresh", "集約", task.refresh.to_string()),
        ("key", "キー", task.key.clone()),
        (
            "lease",
            "リース",
            task.lease.as_ref().map(|l| format!("{} until {}", l.owner, l.expires_at)).unwrap_or_default(),
        ),
        ("updated_at", "更新日時", task.updated_at.to_string()),
    ];
    let width =
        rows.iter().map(|(en, jp, _)| if ja { jp.chars().count() * 2 } else { en.len() }).max().unwrap_or(0);
    let mut out = String::new();
    for (en, jp, value) in rows {
        let label = if ja { jp } else { en };
        let pad = width - if ja { label.chars().count() * 2 } else { label.len() };
        let value = value.replace('\n', &format!("\n{}", " ".repeat(width + 2)));
        out.push_str(&format!("{label}{}  {value}\n", " ".repeat(pad)));
    }
    out
}

/// A table of journal entries.
pub fn journal_table(entries: &[JournalEntry]) -> String {
    let mut t = table(vec!["seq", "at", "actor", "kind", "changes"], presets::UTF8_HORIZONTAL_ONLY);
    for e in entries {
        let changes: Vec<String> = if e.kind == "add" {
            vec![format!("created: {}", e.after.get("title").and_then(|v| v.as_str()).unwrap_or_default())]
        } else {
            e.after
                .iter()
                .map(|(field, after)| {
                    let before = e.before.get(field).cloned().unwrap_or_default();
                    format!("{field}: {} → {}", cell(&before.to_string(), 40), cell(&after.to_string(), 40))
                })
                .collect()
        };
        t.add_row(vec![
            e.seq.to_string(),
            e.at.to_string(),
            e.actor.clone(),
            e.kind.to_string(),
            changes.join("\n"),
        ]);
    }
    t.to_string()
}

/// One line about a run, for people.
pub fn run_line(run: &daicho_engine::RunReport) -> String {
    use daicho_engine::RunResult;
    let status = run.status.map(|s| s.to_string()).unwrap_or_else(|| "unchanged".to_owned());
    let mut line = match run.result {
        RunResult::Success => {
            format!("ran {} with {} (attempt {}): success, now {status}", run.id, run.action, run.attempt)
        }
        RunResult::Failure | RunResult::Timeout => format!(
            "ran {} with {} (attempt {}): {}, now {status}: {}",
            run.id,
            run.action,
            run.attempt,
            if run.result == RunResult::Timeout { "timed out" } else { "failed" },
            run.error.as_deref().unwrap_or_default()
        ),
        RunResult::LeaseLost => {
            format!(
                "ran {} with {} (attempt {}): lease lost, result not recorded",
                run.id, run.action, run.attempt
            )
        }
        RunResult::Interrupted => format!(
            "ran {} with {} (attempt {}): interrupted by the operator, now {status} (no failure counted)",
            run.id, run.action, run.attempt
        ),
    };
    if let Some((added, updated, skipped)) = run.pushed {
        line.push_str(&format!("; found tasks: {added} added, {updated} updated, {skipped} skipped"));
    }
    if let Some(error) = &run.push_error {
        line.push_str(&format!("; found tasks not pushed: {error}"));
    }
    line
}

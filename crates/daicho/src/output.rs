//! Printing results: tables for people, JSON for machines, errors on stderr.

use std::io::Write as _;

use comfy_table::{ContentArrangement, LineStyle, Table, TableStyle, presets};
use daicho_core::Task;
use daicho_core::format::clip;
use daicho_core::format::csv::{self, COLUMNS};
use daicho_core::lang::Lang;
use daicho_store::JournalEntry;
use serde::Serialize;

/// The language of messages: the first of `DAICHO_LANG`, `LC_ALL`, `LC_MESSAGES` and `LANG` that
/// is set; Japanese when it starts with `ja`.
pub fn locale() -> Lang {
    ["DAICHO_LANG", "LC_ALL", "LC_MESSAGES", "LANG"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .map_or(Lang::En, |v| Lang::of_locale(&v))
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
    // Written as it is serialized: a large result is never held as one string too.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    serde_json::to_writer(&mut out, value).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
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
        if self.on {
            let width = 24;
            let filled = (self.done * width).checked_div(self.total).unwrap_or(width).min(width);
            let bar = format!("{}{}", "#".repeat(filled), "-".repeat(width - filled));
            eprint!("\r\x1b[2K[{bar}] {}/{} {}: {}", self.done, self.total, self.what, clip(label, 40));
        }
    }

    /// Marks the current step done.
    pub fn step(&mut self) {
        self.done += 1;
    }

    /// Takes one of the engine's sync progress events.
    pub fn on(&mut self, event: daicho_engine::sync::Progress<'_>) {
        use daicho_engine::sync::Progress as P;
        match event {
            P::Total(total) => self.total = total,
            P::Start(label) => self.start(label),
            P::Step => self.step(),
        }
    }

    /// Clears the bar.
    pub fn finish(self) {
        if self.on {
            eprint!("\r\x1b[2K");
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

/// A dense table: one line under the header, no lines between rows.
pub const DENSE: TableStyle = TableStyle::new().header_separator(LineStyle::none().fill('─').junction('─'));

pub fn table(header: Vec<&str>, style: TableStyle) -> Table {
    let mut table = Table::new();
    table.load_style(style).set_content_arrangement(ContentArrangement::Dynamic);
    table.set_header(header);
    table
}

/// The ledger columns `list` shows (indices into [`COLUMNS`]) and the width each is clipped to.
const LISTED: [(usize, usize); 13] = [
    (0, 12),
    (1, 12),
    (2, 1),
    (3, 60),
    (5, 20),
    (7, 10),
    (8, 16),
    (9, 16),
    (10, 8),
    (12, 16),
    (16, 30),
    (17, 30),
    (18, 16),
];

/// The ledger columns `ready` shows, before its `why` column.
const READY: [(usize, usize); 8] =
    [(0, 12), (10, 8), (3, 50), (9, 16), (8, 16), (12, 16), (17, 30), (18, 16)];

/// A table of tasks with the ledger's `columns` (in the ledger's words: Japanese when `ja`) and,
/// when given, one more column with a value per task.
fn tasks_table(
    tasks: &[Task],
    ja: bool,
    columns: &[(usize, usize)],
    extra: Option<(&str, &[String])>,
) -> String {
    let mut header: Vec<&str> =
        columns.iter().map(|&(i, _)| if ja { COLUMNS[i].1 } else { COLUMNS[i].0 }).collect();
    header.extend(extra.map(|(name, _)| name));
    let rows = tasks.iter().enumerate().map(|(row, task)| {
        let cells = csv::cells(task, ja);
        let mut shown: Vec<String> = columns
            .iter()
            .map(|&(i, width)| match (COLUMNS[i].0, cells[i].as_str()) {
                ("run", "true") => "▶".to_owned(),
                ("run", _) | ("priority", "0") => String::new(),
                (_, text) => clip(text, width),
            })
            .collect();
        shown.extend(extra.and_then(|(_, values)| values.get(row).cloned()));
        shown
    });
    // A terminal may be too narrow: comfy-table wraps the cells to fit it. Elsewhere (a pipe, a
    // file) the same layout is written directly, without comfy-table's bookkeeping per cell.
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        let mut t = table(header, DENSE);
        t.add_rows(rows);
        t.to_string()
    } else {
        dense(&header, &rows.collect::<Vec<_>>())
    }
}

/// The [`DENSE`] table as comfy-table lays it out when it need not fit a terminal, byte for byte
/// (a test compares them): each column as wide as its widest line (display width; at least
/// one), a space of padding on each side, a space between columns, a line of `─` under the
/// header, a cell's lines one under the other, missing lines and cells as spaces.
fn dense(header: &[&str], rows: &[Vec<String>]) -> String {
    use unicode_width::UnicodeWidthStr as _;
    let columns = rows.iter().map(Vec::len).fold(header.len(), usize::max);
    // comfy-table gives an empty column one space of content.
    let mut widths = vec![1; columns];
    let mut measure = |cells: &mut dyn Iterator<Item = &str>| {
        for (width, cell) in widths.iter_mut().zip(cells) {
            *width = cell.split('\n').map(|line| line.width()).fold(*width, usize::max);
        }
    };
    measure(&mut header.iter().copied());
    for row in rows {
        measure(&mut row.iter().map(String::as_str));
    }
    let mut out = String::new();
    let push_row = |out: &mut String, cells: &[&str]| {
        let lines: Vec<Vec<&str>> = cells.iter().map(|cell| cell.split('\n').collect()).collect();
        let height = lines.iter().map(Vec::len).max().unwrap_or(0).max(1);
        for at in 0..height {
            if !out.is_empty() {
                out.push('\n');
            }
            for (column, &width) in widths.iter().enumerate() {
                if column > 0 {
                    out.push(' ');
                }
                match lines.get(column).and_then(|cell| cell.get(at)) {
                    Some(line) => {
                        out.push(' ');
                        out.push_str(line);
                        out.extend(std::iter::repeat_n(' ', width - line.width() + 1));
                    }
                    None => out.extend(std::iter::repeat_n(' ', width + 2)),
                }
            }
        }
    };
    push_row(&mut out, header);
    out.push('\n');
    let rule = widths.iter().map(|w| "─".repeat(w + 2)).collect::<Vec<_>>().join("─");
    out.push_str(&rule);
    for row in rows {
        push_row(&mut out, &row.iter().map(String::as_str).collect::<Vec<_>>());
    }
    out
}

/// A table of tasks in the column order of the ledger.
pub fn task_table(tasks: &[Task], ja: bool) -> String {
    tasks_table(tasks, ja, &LISTED, None)
}

/// The ready table: run order, with why each row will or will not run.
pub fn ready_table(tasks: &[Task], reasons: &[String], ja: bool) -> String {
    tasks_table(tasks, ja, &READY, Some((if ja { "実行可否" } else { "why" }, reasons)))
}

/// Every field of one task, one per line: the ledger's columns, then the bookkeeping.
pub fn task_detail(task: &Task, ja: bool) -> String {
    let lease = task.lease.as_ref().map(|l| format!("{} until {}", l.owner, l.expires_at));
    let more = [
        (("attempt", "試行"), task.attempt.to_string()),
        (("key", "キー"), task.key.clone()),
        (("lease", "リース"), lease.unwrap_or_default()),
        (("by_person", "人が記入"), task.person_cells.to_string()),
        (("updated_at", "更新日時"), task.updated_at.to_string()),
    ];
    let rows: Vec<((&str, &str), String)> =
        COLUMNS.into_iter().zip(csv::cells(task, ja)).chain(more).collect();
    // Aligned by display width: a Japanese character takes two columns, `▶` and ASCII one.
    let width_of = |(en, jp): (&str, &str)| unicode_width::UnicodeWidthStr::width(if ja { jp } else { en });
    let width = rows.iter().map(|(label, _)| width_of(*label)).max().unwrap_or(0);
    let mut out = String::new();
    for (label, value) in rows {
        let pad = " ".repeat(width - width_of(label));
        let value = value.replace('\n', &format!("\n{}", " ".repeat(width + 2)));
        out.push_str(&format!("{}{pad}  {value}\n", if ja { label.1 } else { label.0 }));
    }
    out
}

/// A table of journal entries.
pub fn journal_table(entries: &[JournalEntry], ja: bool) -> String {
    let header = if ja {
        vec!["番号", "日時", "変更者", "種類", "変更"]
    } else {
        vec!["seq", "at", "actor", "kind", "changes"]
    };
    let mut t = table(header, presets::UTF8_HORIZONTAL_ONLY);
    let created = if ja { "作成" } else { "created" };
    for e in entries {
        let changes: Vec<String> = if e.kind == "add" {
            vec![format!("{created}: {}", e.after.get("title").and_then(|v| v.as_str()).unwrap_or_default())]
        } else {
            e.after
                .iter()
                .map(|(field, after)| {
                    let before = e.before.get(field).cloned().unwrap_or_default();
                    format!("{field}: {} → {}", clip(&before.to_string(), 40), clip(&after.to_string(), 40))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// comfy-table's own rendering of the dense table, as a pipe or a file gets it.
    fn comfy(header: &[&str], rows: &[Vec<String>]) -> String {
        let mut t = table(header.to_vec(), DENSE);
        t.force_no_tty();
        t.add_rows(rows.iter().cloned());
        t.to_string()
    }

    /// I1: `dense` prints what comfy-table prints, byte for byte, for tables of ASCII, Japanese
    /// (two columns a character), `▶`, emoji, empty cells, cells of several lines and rows
    /// shorter than the header.
    #[test]
    fn i1_the_dense_table_is_comfy_tables_layout() {
        let words =
            ["", "a", "T-0001", "調査/記事", "▶", "⚠️対外", "two\nlines", "x y  z", "ﾊﾟｰｻｰ", "three\n\nlines"];
        let mut seed: u64 = 42;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        for case in 0..400 {
            let columns = 1 + next(5);
            let header: Vec<&str> = (0..columns).map(|_| words[next(words.len())]).collect();
            let rows: Vec<Vec<String>> = (0..next(6))
                .map(|_| {
                    let len = if next(4) == 0 { next(columns + 1) } else { columns };
                    (0..len).map(|_| words[next(words.len())].repeat(1 + next(3))).collect()
                })
                .collect();
            assert_eq!(dense(&header, &rows), comfy(&header, &rows), "case {case}: {header:?} {rows:?}");
        }
    }
}

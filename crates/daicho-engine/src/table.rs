//! Tables for a person at a terminal or reading a pipe: the ledger's rows (`list`, `ready`),
//! one row's every field (`show`), a row's journal (`log`) and the cross view (`view`), in the
//! ledger's words in either language. Pure text: the caller says whether it goes to a terminal
//! (where comfy-table wraps cells to fit) or elsewhere (the same layout written directly).

use comfy_table::{ContentArrangement, LineStyle, Table, TableStyle, presets};
use daicho_core::Task;
use daicho_core::format::clip;
use daicho_core::format::csv::{self, COLUMNS};
use daicho_core::lang::Lang;
use daicho_core::policy::Hold;
use daicho_core::view::{CrossView, Mark, dashboard_text_in, more_text_in};
use daicho_store::{JournalEntry, ReadySet};

use crate::view::{due, marks};

/// A dense table: one line under the header, no lines between rows.
pub const DENSE: TableStyle = TableStyle::new().header_separator(LineStyle::none().fill('─').junction('─'));

/// An empty table with `header` in `style`, laid out to fit a terminal.
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
    terminal: bool,
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
    if terminal {
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

/// A table of tasks in the column order of the ledger (`terminal`: wrapped to fit one).
pub fn task_table(tasks: &[Task], ja: bool, terminal: bool) -> String {
    tasks_table(tasks, ja, terminal, &LISTED, None)
}

/// The ready table: run order, with why each row will or will not run.
pub fn ready_table(tasks: &[Task], reasons: &[String], ja: bool, terminal: bool) -> String {
    tasks_table(tasks, ja, terminal, &READY, Some((if ja { "実行可否" } else { "why" }, reasons)))
}

/// Why a ready row will or will not run, in `lang`: the action that runs it, or what holds it.
pub fn why(decision: &Result<String, Hold>, lang: Lang) -> String {
    match (decision, lang) {
        (Ok(action), Lang::En) => format!("runs with {action}"),
        (Ok(action), Lang::Ja) => format!("{action} で実行します"),
        (Err(hold), lang) => hold.text(lang),
    }
}

/// The ready set as `daicho ready` prints it: the [`ready_table`] of the listed rows with why
/// each will or will not run, then how many are ready and how many more were not listed.
pub fn ready(ready: &ReadySet, decisions: &[Result<String, Hold>], lang: Lang, terminal: bool) -> String {
    let (total, more) = (ready.total, ready.total - ready.tasks.len());
    if total == 0 {
        return lang.pick("nothing is ready", "実行可能なタスクはありません").to_owned();
    }
    let tail = match (more, lang) {
        (0, _) => String::new(),
        (more, Lang::En) => format!(" ({more} more; use --limit)"),
        (more, Lang::Ja) => format!(" (ほか {more} 件; --limit で表示)"),
    };
    let count = match lang {
        Lang::En => format!("{total} ready{tail}"),
        Lang::Ja => format!("実行可能 {total} 件{tail}"),
    };
    let reasons: Vec<String> = decisions.iter().map(|d| why(d, lang)).collect();
    format!("{}\n{count}", ready_table(&ready.tasks, &reasons, lang.is_ja(), terminal))
}

/// Every field of one task, one per line: the ledger's columns, then the bookkeeping.
pub fn task_detail(task: &Task, ja: bool) -> String {
    let lease = task.lease.as_ref().map(|l| format!("{} until {}", l.owner, l.expires_at));
    let more = [
        (("attempt", "試行"), task.attempt.to_string()),
        (("key", "キー"), task.key.clone()),
        (("lease", "リース"), lease.unwrap_or_default()),
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

/// The cross view as a terminal table (V5), its marks in colour when `colour` (V4), then the
/// dashboards' count lines and the "… N more" lines (V2, V3).
pub fn cross_view(view: &CrossView, colour: bool, lang: Lang) -> String {
    let ja = lang.is_ja();
    let header = if ja {
        vec!["", "タスクID", "案件", "状態", "期限", "タスク", "担当"]
    } else {
        vec!["", "id", "project", "status", "due", "title", "assignee"]
    };
    let mut table = table(header, DENSE);
    for row in &view.rows {
        let mut flag = if ja {
            let word = |m: &Mark| match m {
                Mark::Overdue => "期限切れ",
                Mark::Review => "確認待ち",
                Mark::NeedsHuman => "要人手",
            };
            row.marks.iter().map(word).collect::<Vec<_>>().join(" ")
        } else {
            marks(&row.marks)
        };
        if colour && !row.marks.is_empty() {
            let code = match row.marks[0] {
                Mark::Overdue => "31",
                Mark::NeedsHuman => "35",
                Mark::Review => "33",
            };
            flag = format!("\x1b[1;{code}m{flag}\x1b[0m");
        }
        table.add_row(vec![
            flag,
            row.id.clone(),
            row.project.clone(),
            row.status.label(ja).to_owned(),
            due(row.due),
            daicho_core::format::clip(&row.title, 60),
            row.assignee.clone(),
        ]);
    }
    let mut out = match view.rows.is_empty() {
        true => format!("{}\n", lang.pick("no open work", "未完了の作業はありません")),
        false => format!("{table}\n"),
    };
    for d in &view.dashboards {
        out.push_str(&dashboard_text_in(d, lang));
        out.push('\n');
    }
    for more in &view.more {
        out.push_str(&more_text_in(more, lang));
        out.push('\n');
    }
    out
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

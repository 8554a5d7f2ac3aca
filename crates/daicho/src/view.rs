//! Drawing the cross-project view (V5): terminal, Markdown, HTML, JSON. Each draws every row,
//! dashboard count and "… N more" line that `daicho_core::view::cross_view` built.

use daicho_core::view::{CrossView, Mark, dashboard_text, more_text};

use crate::output;

/// The output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ViewFormat {
    /// A table for a terminal (coloured marks when `colour`).
    Term,
    /// A Markdown document.
    Md,
    /// A standalone HTML page.
    Html,
    /// The view as JSON.
    Json,
}

fn mark_word(mark: Mark) -> &'static str {
    match mark {
        Mark::Overdue => "overdue",
        Mark::Review => "review",
        Mark::NeedsHuman => "needs_human",
    }
}

fn marks(marks: &[Mark]) -> String {
    marks.iter().map(|m| mark_word(*m)).collect::<Vec<_>>().join(" ")
}

fn due(d: Option<jiff::civil::Date>) -> String {
    d.map(|d| d.to_string()).unwrap_or_default()
}

/// Draws the view.
pub fn render(view: &CrossView, format: ViewFormat, colour: bool) -> anyhow::Result<String> {
    Ok(match format {
        ViewFormat::Json => serde_json::to_string_pretty(view)? + "\n",
        ViewFormat::Term => term(view, colour),
        ViewFormat::Md => markdown(view),
        ViewFormat::Html => html(view),
    })
}

fn term(view: &CrossView, colour: bool) -> String {
    let mut table =
        output::table(vec!["", "id", "project", "status", "due", "title", "assignee"], output::DENSE);
    for row in &view.rows {
        let mut flag = marks(&row.marks);
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
            row.status.as_str().to_owned(),
            due(row.due),
            output::cell(&row.title, 60),
            row.assignee.clone(),
        ]);
    }
    let mut out = if view.rows.is_empty() { "no open work\n".to_owned() } else { format!("{table}\n") };
    for d in &view.dashboards {
        out.push_str(&dashboard_text(d));
        out.push('\n');
    }
    for more in &view.more {
        out.push_str(&more_text(more));
        out.push('\n');
    }
    out
}

/// A Markdown table cell: pipes and backslashes escaped, HTML neutralised (Markdown renderers
/// pass raw HTML through), one line.
fn md_cell(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

fn markdown(view: &CrossView) -> String {
    let mut out = String::from("# Open work\n\n");
    if view.rows.is_empty() {
        out.push_str("No open work.\n");
    } else {
        out.push_str("| | id | project | status | due | title | assignee |\n|---|---|---|---|---|---|---|\n");
        for row in &view.rows {
            let flag =
                row.marks.iter().map(|m| format!("**{}**", mark_word(*m))).collect::<Vec<_>>().join(" ");
            out.push_str(&format!(
                "| {flag} | {} | {} | {} | {} | {} | {} |\n",
                row.id,
                md_cell(&row.project),
                row.status.as_str(),
                due(row.due),
                md_cell(&row.title),
                md_cell(&row.assignee)
            ));
        }
    }
    if !view.dashboards.is_empty() || !view.more.is_empty() {
        out.push('\n');
    }
    for d in &view.dashboards {
        out.push_str(&format!("- {}\n", md_cell(&dashboard_text(d))));
    }
    for more in &view.more {
        out.push_str(&format!("- {}\n", md_cell(&more_text(more))));
    }
    out
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}\
th,td{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}\
tr.overdue td{background:#fde8e8}tr.review td{background:#fff6d6}tr.needs_human td{background:#f1e4fb}\
.mark{font-weight:bold;white-space:nowrap}.more,.dashboard{color:#444}";

fn html(view: &CrossView) -> String {
    let mut out = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Open work</title><style>{STYLE}</style></head><body>\n<h1>Open work</h1>\n"
    );
    if view.rows.is_empty() {
        out.push_str("<p>No open work.</p>\n");
    } else {
        out.push_str("<table>\n<thead><tr><th></th><th>id</th><th>project</th><th>status</th><th>due</th><th>title</th><th>assignee</th></tr></thead>\n<tbody>\n");
        for row in &view.rows {
            let class = row.marks.iter().map(|m| mark_word(*m)).collect::<Vec<_>>().join(" ");
            out.push_str(&format!(
                "<tr class=\"{class}\"><td class=\"mark\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                escape(&marks(&row.marks)),
                escape(&row.id),
                escape(&row.project),
                row.status.as_str(),
                due(row.due),
                escape(&row.title),
                escape(&row.assignee)
            ));
        }
        out.push_str("</tbody>\n</table>\n");
    }
    for d in &view.dashboards {
        out.push_str(&format!("<p class=\"dashboard\">{}</p>\n", escape(&dashboard_text(d))));
    }
    for more in &view.more {
        out.push_str(&format!("<p class=\"more\">{}</p>\n", escape(&more_text(more))));
    }
    out.push_str("</body></html>\n");
    out
}

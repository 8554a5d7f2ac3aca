//! Drawing the cross-project view (V5): terminal and JSON here, Markdown and HTML by the engine
//! (`daicho_engine::view`, which the view role writes with). Each draws every row, dashboard
//! count and "… N more" line that `daicho_core::view::cross_view` built.

use daicho_core::lang::Lang;
use daicho_core::view::{CrossView, Mark, dashboard_text_in, more_text_in};
use daicho_engine::view::{due, html, markdown, marks};

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

/// Draws the view.
pub fn render(view: &CrossView, format: ViewFormat, colour: bool, lang: Lang) -> anyhow::Result<String> {
    Ok(match format {
        ViewFormat::Json => serde_json::to_string_pretty(view)? + "\n",
        ViewFormat::Term => term(view, colour, lang),
        ViewFormat::Md => markdown(view),
        ViewFormat::Html => html(view),
    })
}

fn term(view: &CrossView, colour: bool, lang: Lang) -> String {
    let ja = lang.is_ja();
    let header = if ja {
        vec!["", "タスクID", "案件", "状態", "期限", "タスク", "担当"]
    } else {
        vec!["", "id", "project", "status", "due", "title", "assignee"]
    };
    let mut table = output::table(header, output::DENSE);
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

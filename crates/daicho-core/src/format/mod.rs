//! Parsers and renderers of the ledger's file formats, on strings (X3, X4).
//!
//! Every parser returns [`Item`]s or an [`InputError`] that names the file, the line and the
//! reason; every renderer writes what its parser reads back to the same ledger.

pub mod csv;
pub mod json;
pub mod markdown;

use jiff::Timestamp;
use jiff::civil::Date;

use crate::error::{InputError, MAX_FIELD_BYTES};
use crate::item::Item;

/// The file formats daicho reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The Markdown task-line format (X3).
    Markdown,
    /// A tasks.json document or a plain item array.
    Json,
    /// JSON Lines: one item object per line.
    JsonLines,
    /// CSV with the ledger's columns.
    Csv,
}

impl Format {
    /// The format a file name suggests (`.md`, `.json`, `.csv`).
    pub fn from_file_name(name: &str) -> Option<Format> {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".md") || lower.ends_with(".markdown") {
            Some(Format::Markdown)
        } else if lower.ends_with(".jsonl") || lower.ends_with(".ndjson") {
            Some(Format::JsonLines)
        } else if lower.ends_with(".json") {
            Some(Format::Json)
        } else if lower.ends_with(".csv") {
            Some(Format::Csv)
        } else {
            None
        }
    }
}

/// Values that items without their own `source` or `project` take.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ItemDefaults {
    /// The source of items that name none.
    pub source: String,
    /// The project of items that name none.
    pub project: String,
}

/// Parses any format.
///
/// # Errors
///
/// The format's [`InputError`].
pub fn parse(
    format: Format,
    text: &str,
    file: &str,
    defaults: &ItemDefaults,
) -> Result<Vec<Item>, InputError> {
    match format {
        Format::Markdown => markdown::parse(text, file, defaults),
        Format::Json => json::parse(text, file, defaults),
        Format::JsonLines => json::parse_lines(text, file, defaults),
        Format::Csv => csv::parse(text, file, defaults),
    }
}

/// Fills defaults into a parsed item and checks its field sizes.
pub(crate) fn finish_item(mut item: Item, defaults: &ItemDefaults, file: &str) -> Result<Item, InputError> {
    item.file = Some(std::sync::Arc::from(file));
    if item.source.trim().is_empty() {
        item.source = defaults.source.clone();
    }
    if item.project.trim().is_empty() {
        item.project = defaults.project.clone();
    }
    let fields = [
        ("title", &item.title),
        ("body", &item.body),
        ("source", &item.source),
        ("evidence", &item.evidence),
        ("assignee", &item.assignee),
        ("type", &item.work_type),
        ("action", &item.action),
        ("result", &item.result),
        ("correction", &item.correction),
        ("project", &item.project),
    ];
    for (name, value) in fields {
        if value.len() > MAX_FIELD_BYTES {
            return Err(InputError::new(
                file,
                item.line,
                format!("field '{name}' is {} bytes, over the limit of {MAX_FIELD_BYTES} bytes", value.len()),
            ));
        }
    }
    Ok(item)
}

/// Parses a due date: `2026-12-01` or `2026/12/01`.
pub fn parse_date(text: &str) -> Result<Date, String> {
    let text = text.trim();
    text.replace('/', "-")
        .parse::<Date>()
        .map_err(|_| format!("'{text}' is not a date (expected YYYY-MM-DD)"))
}

/// Parses a point in time: RFC 3339 (`2026-12-01T09:00:00Z`), or a date meaning its start in UTC.
pub fn parse_timestamp(text: &str) -> Result<Timestamp, String> {
    let text = text.trim();
    if let Ok(ts) = text.parse::<Timestamp>() {
        return Ok(ts);
    }
    parse_date(text)
        .ok()
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC).ok())
        .map(|z| z.timestamp())
        .ok_or_else(|| format!("'{text}' is not a time (expected RFC 3339, e.g. 2026-12-01T09:00:00Z)"))
}

/// Parses a checkbox cell: true, false, yes, no, 1, 0, x, ✓, ☑, ☐ or blank.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_lowercase().as_str() {
        "true" | "yes" | "1" | "x" | "✓" | "✔" | "☑" | "on" => Ok(true),
        "false" | "no" | "0" | "" | "☐" | "off" => Ok(false),
        other => Err(format!("'{other}' is not a checkbox value (true or false)")),
    }
}

/// Escapes text for HTML and XML (SVG) content and attribute values: the five markup characters
/// as entities, and control characters other than tab and line breaks (which XML forbids) as
/// spaces.
pub fn escape_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Shortens text for one line of a table or a message: its first line, at most `max`
/// characters, with `…` when anything was cut.
pub fn clip(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    let mut out: String = first.chars().take(max).collect();
    if first.chars().count() > max || text.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}

/// Splits a list of dependency references: `T-0001, T-0002` (commas, 、 or blanks).
pub fn split_refs(text: &str) -> Vec<String> {
    text.split(|c: char| c == ',' || c == '、' || c.is_whitespace())
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clip_keeps_the_first_line_and_counts_characters_not_bytes() {
        assert_eq!(clip("短いタイトル", 6), "短いタイトル");
        assert_eq!(clip("確認事項に回答をもらう", 4), "確認事項…");
        assert_eq!(clip("first\nsecond", 40), "first…");
        assert_eq!(clip("", 5), "");
    }
}

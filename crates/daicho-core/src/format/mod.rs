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
use crate::item::{Item, Items};
use crate::task::Task;

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

/// Reads an input's items as [`parse`] does — every item checked, any error returned before
/// anything is kept — into [`Items`]: JSON, JSON Lines and CSV stay as their text with where
/// each item starts and are parsed again a range at a time ([`ItemText`]), so that a
/// million-row input is never held as a million `Item`s; Markdown, whose lines depend on the
/// lines before them, is held parsed.
///
/// # Errors
///
/// The format's [`InputError`].
pub fn read_items(
    format: Format,
    text: String,
    file: &str,
    defaults: &ItemDefaults,
) -> Result<Items, InputError> {
    Ok(match index_items(format, &text, file, defaults)? {
        Indexed::Held(items) => Items::from(items),
        Indexed::Text(index) => {
            let mut items = Items::default();
            items.push_text(index.with_text(Box::new(text)));
            items
        }
    })
}

/// What [`index_items`] found in an input.
#[derive(Debug)]
pub enum Indexed {
    /// The items, parsed (Markdown).
    Held(Vec<Item>),
    /// Where each item stands in the text, to read it again ([`TextIndex::with_text`]).
    Text(TextIndex),
}

/// Checks every item of an input as [`parse`] does and notes where each stands, so that the
/// text can be kept elsewhere (a file read again, [`Text`]) and its items parsed again a range
/// at a time.
///
/// # Errors
///
/// The format's [`InputError`].
pub fn index_items(
    format: Format,
    text: &str,
    file: &str,
    defaults: &ItemDefaults,
) -> Result<Indexed, InputError> {
    let mut spans = Vec::new();
    let mut span = |at, item: Item| spans.push(Span { at, line: item.line.unwrap_or(0) });
    let (shape, defaults) = match format {
        Format::Markdown => return markdown::parse(text, file, defaults).map(Indexed::Held),
        Format::Json => (Shape::Json, json::each_item(text, file, defaults, &mut span)?),
        Format::JsonLines => {
            json::each_line_item(text, file, defaults, &mut span)?;
            (Shape::Json, defaults.clone())
        }
        Format::Csv => (Shape::Csv(csv::each_item(text, file, defaults, &mut span)?), defaults.clone()),
    };
    spans.shrink_to_fit();
    Ok(Indexed::Text(TextIndex { file: file.to_owned(), defaults, shape, spans, len: text.len() }))
}

/// Where each item of a checked input stands ([`index_items`]).
#[derive(Debug)]
pub struct TextIndex {
    file: String,
    defaults: ItemDefaults,
    shape: Shape,
    spans: Vec<Span>,
    len: usize,
}

impl TextIndex {
    /// The byte offset at which each item starts, in order.
    pub fn starts(&self) -> impl Iterator<Item = usize> + '_ {
        self.spans.iter().map(|s| s.at)
    }

    /// The items, read again from `text`: the text indexed, as it was.
    pub fn with_text(self, text: Box<dyn Text>) -> ItemText {
        ItemText { text, index: self }
    }
}

/// The text of an input whose items are read again a range at a time: held in memory, or a
/// file read again (the engine's), which must give back the bytes that were checked.
pub trait Text: Send + Sync + std::fmt::Debug {
    /// The bytes at `range` (which begins and ends at an item's start or the text's end).
    ///
    /// # Errors
    ///
    /// The text can no longer be read, or it changed since it was checked.
    fn get(&self, range: std::ops::Range<usize>) -> Result<std::borrow::Cow<'_, str>, InputError>;
}

impl Text for String {
    fn get(&self, range: std::ops::Range<usize>) -> Result<std::borrow::Cow<'_, str>, InputError> {
        Ok(std::borrow::Cow::Borrowed(&self[range]))
    }
}

/// An input kept as its text, with the byte offset and line of each of its items, which are
/// parsed again when asked for ([`read_items`]). The text was checked whole when it was read.
#[derive(Debug)]
pub struct ItemText {
    text: Box<dyn Text>,
    index: TextIndex,
}

/// How an item of an [`ItemText`] is read at its offset.
#[derive(Debug)]
enum Shape {
    /// One JSON object (an element of an array, or a line of JSON Lines).
    Json,
    /// One CSV record whose cells fill these columns.
    Csv(Vec<&'static str>),
}

#[derive(Clone, Copy, Debug)]
struct Span {
    at: usize,
    line: usize,
}

impl ItemText {
    /// The number of items.
    pub fn len(&self) -> usize {
        self.index.spans.len()
    }

    /// Whether it holds no item.
    pub fn is_empty(&self) -> bool {
        self.index.spans.is_empty()
    }

    /// The items at `range`, parsed again.
    ///
    /// # Errors
    ///
    /// The text no longer reads as it did (a file changed since), or an item no longer parses
    /// (a defect, since the text was checked whole).
    pub fn items(&self, range: std::ops::Range<usize>) -> Result<Vec<Item>, InputError> {
        let TextIndex { file, defaults, shape, spans, len } = &self.index;
        let Some(first) = spans.get(range.start).filter(|_| !range.is_empty()) else {
            return Ok(Vec::new());
        };
        let end = spans.get(range.end).map_or(*len, |s| s.at);
        let text = self.text.get(first.at..end)?;
        spans[range]
            .iter()
            .map(|&Span { at, line }| match shape {
                Shape::Json => json::item_at(&text[at - first.at..], line, file, defaults),
                Shape::Csv(columns) => csv::item_at(&text[at - first.at..], line, columns, file, defaults)?
                    .ok_or_else(|| InputError::new(file, Some(line), "the row read again is blank")),
            })
            .collect()
    }
}

/// Renders tasks in a format a page at a time, so that an export of a million rows never holds
/// them all: [`Pages::start`], then [`Pages::page`] for each page in order, then [`Pages::end`]
/// give exactly what the format's `render` gives for all the pages' tasks at once.
#[derive(Debug)]
pub struct Pages {
    format: Format,
    ja: bool,
    count: usize,
}

impl Pages {
    /// Pages in `format` (CSV with Japanese headers when `ja`).
    pub fn new(format: Format, ja: bool) -> Pages {
        Pages { format, ja, count: 0 }
    }

    /// What comes before the first task.
    pub fn start(&self) -> String {
        match self.format {
            Format::Markdown | Format::JsonLines => String::new(),
            Format::Json => json::DOCUMENT_START.to_owned(),
            Format::Csv => csv::render_header(self.ja),
        }
    }

    /// The next page's tasks.
    pub fn page(&mut self, tasks: &[Task]) -> String {
        let text = match self.format {
            Format::Markdown => markdown::render(tasks),
            Format::JsonLines => json::render_lines(tasks),
            Format::Csv => csv::render_rows(tasks, self.ja),
            Format::Json => {
                let mut text = String::new();
                json::render_page(tasks, self.count == 0, &mut text);
                text
            }
        };
        self.count += tasks.len();
        text
    }

    /// What comes after the last task.
    pub fn end(&self) -> String {
        match self.format {
            Format::Json => json::document_end(self.count > 0).to_owned(),
            Format::Markdown | Format::JsonLines | Format::Csv => String::new(),
        }
    }

    /// The tasks rendered so far.
    pub fn count(&self) -> usize {
        self.count
    }
}

/// The items a reader (`each_item` of a format) hands out, collected.
pub(crate) fn collect<T>(
    read: impl FnOnce(&mut dyn FnMut(usize, Item)) -> Result<T, InputError>,
) -> Result<Vec<Item>, InputError> {
    let mut items = Vec::new();
    read(&mut |_, item| items.push(item))?;
    Ok(items)
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
    use super::{Format, ItemDefaults, clip, parse, read_items};

    /// I1: items kept as text and read again, in any cut into ranges, are exactly the items
    /// the format's parser gives: byte order marks, CRLF lines, quoted line breaks, blank rows,
    /// a document's own defaults, an item's own file and line.
    #[test]
    fn i1_items_read_again_from_their_text_are_the_parsed_items() {
        let defaults = ItemDefaults { source: "src".into(), project: "PJ-00".into() };
        let cases = [
            (
                Format::JsonLines,
                "\u{feff}{\"id\":\"t1\",\"title\":\"one\"}\r\n\r\n{\"title\":\"two\",\"deps\":[\"t1\"],\"due\":\"2026-12-01\"}\r\n  {\"title\":\"three\", \"tags\": \"a, b\"}  \n",
            ),
            (
                Format::Json,
                "[\n {\"id\": \"t1\", \"title\": \"one\"},\n\n {\"title\": \"two\",\n  \"deps\": [\"t1\"]}, {\"title\":\"three\",\"priority\":3}\n]",
            ),
            (
                Format::Json,
                "{\"goal\": \"g\", \"project\": \"PJ-07\", \"source\": \"doc\", \"tasks\": [{\"title\": \"one\"}, {\"title\": \"two\", \"project\": \"PJ-08\"}]}",
            ),
            (Format::Json, "{\"title\": \"alone\"}"),
            (
                Format::Csv,
                "\u{feff}id,title,body,deps,project\r\nt1,one,\"a body\r\nover two lines\",,\r\n,,,,\r\nt2,\"two, with a comma\",,t1,PJ-09\r\nt3,three,,\"t1,t2\",",
            ),
            (Format::Csv, "タスクID,タスク,状態\nt1,一つ目,未着手\n\nt2,二つ目,完了\n"),
        ];
        for (format, text) in cases {
            let parsed = parse(format, text, "in", &defaults).expect("parses");
            let items = read_items(format, text.to_owned(), "in", &defaults).expect("reads");
            assert!(!parsed.is_empty(), "{text}");
            assert_eq!(items.len(), parsed.len(), "{text}");
            for step in 1..=parsed.len() {
                let mut again = Vec::new();
                for start in (0..parsed.len()).step_by(step) {
                    let range = start..(start + step).min(parsed.len());
                    again.extend(items.range(range).expect("reads again").iter().cloned());
                }
                assert_eq!(again, parsed, "{format:?} in ranges of {step}: {text}");
            }
            assert_eq!(items.get(parsed.len() - 1).as_ref(), parsed.last());
            assert_eq!(items.get(parsed.len()), None);
        }
        // Markdown is held parsed, and the same.
        let md = "- [ ] one\n  - [ ] two\n";
        let items = read_items(Format::Markdown, md.to_owned(), "in.md", &defaults).expect("reads");
        assert_eq!(
            items.range(0..2).expect("held").to_vec(),
            parse(Format::Markdown, md, "in.md", &defaults).unwrap()
        );
    }

    /// I1: an export written a page at a time is byte for byte the export of all its tasks at
    /// once, in every format and any cut into pages; the JSON document is the one serde_json
    /// prints for the whole list.
    #[test]
    fn i1_pages_render_what_the_whole_export_gives() {
        use super::{Pages, csv, json, markdown};
        use crate::id::TaskId;
        use crate::task::{Status, Tags, Task};

        let now = jiff::Timestamp::UNIX_EPOCH;
        let tasks: Vec<Task> = (1..=7u64)
            .map(|n| {
                let mut t = Task::new(TaskId::new(n), &format!("タスク {n}, \"quoted\""), "src", now);
                t.body = format!("line one\nline two of {n}\r\n\tend");
                t.deps = (1..n).step_by(2).map(TaskId::new).collect();
                t.tags = ["ops", "確認"].into_iter().take(n as usize % 3).collect::<Tags>();
                t.status = Status::ALL[n as usize % Status::ALL.len()];
                t
            })
            .collect();
        #[derive(serde::Serialize)]
        struct Document<'a> {
            tasks: Vec<super::json::ExportTask<'a>>,
        }
        for count in 0..=tasks.len() {
            let tasks = &tasks[..count];
            let document = Document { tasks: tasks.iter().map(super::json::export_task).collect() };
            let pretty = serde_json::to_string_pretty(&document).unwrap() + "\n";
            assert_eq!(json::render(tasks), pretty, "{count} tasks");
            for format in [Format::Json, Format::JsonLines, Format::Csv, Format::Markdown] {
                let whole = match format {
                    Format::Json => json::render(tasks),
                    Format::JsonLines => json::render_lines(tasks),
                    Format::Csv => csv::render(tasks, true),
                    Format::Markdown => markdown::render(tasks),
                };
                for size in 1..=3 {
                    let mut pages = Pages::new(format, true);
                    let mut text = pages.start();
                    for page in tasks.chunks(size) {
                        text.push_str(&pages.page(page));
                    }
                    text.push_str(&pages.end());
                    assert_eq!(text, whole, "{format:?}, {count} tasks in pages of {size}");
                    assert_eq!(pages.count(), count);
                }
            }
        }
    }

    /// Bad input is refused when it is read, with the same error the parser gives.
    #[test]
    fn i1_bad_input_is_refused_before_it_is_kept() {
        let defaults = ItemDefaults::default();
        let cases = [
            (Format::JsonLines, "{\"title\":\"one\"}\n{\"title\":\"two\"} x\n"),
            (Format::JsonLines, "{\"title\":\"one\"}\n{\"title\":\"two\",\"colour\":1}\n"),
            (Format::Json, "[{\"title\":\"one\"},\n{\"title\":\"two\",\"due\":\"soon\"}]"),
            (Format::Csv, "title,status\ntwo,未回答\n"),
            (Format::Csv, "title,body\none,\"unterminated\n"),
        ];
        for (format, text) in cases {
            let parsed = parse(format, text, "in", &defaults).expect_err("refused");
            let read = read_items(format, text.to_owned(), "in", &defaults).expect_err("refused");
            assert_eq!(read, parsed, "{text}");
            assert_eq!(read.line, Some(2), "{text}: {read}");
        }
    }

    #[test]
    fn clip_keeps_the_first_line_and_counts_characters_not_bytes() {
        assert_eq!(clip("短いタイトル", 6), "短いタイトル");
        assert_eq!(clip("確認事項に回答をもらう", 4), "確認事項…");
        assert_eq!(clip("first\nsecond", 40), "first…");
        assert_eq!(clip("", 5), "");
    }
}

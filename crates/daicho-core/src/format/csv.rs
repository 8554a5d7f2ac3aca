//! CSV with the ledger's columns, English or Japanese headers.
//!
//! Columns, in the order a person sees them: `id, status, run, title, body, source, evidence,
//! due, assignee, type, priority, not_before, action, result, run_at, correction, deps, tags,
//! project, failures, refresh, by_person`. Japanese headers (`タスクID, 状態, ▶AI実行, タスク, 内容,
//! 発生源, 根拠, 期限, 担当, 分類, 優先度, 開始, AI機能, 実行結果, 実行日時, 修正指示, 依存, タグ,
//! 案件, 失敗回数, 集約, 人が記入`) are accepted too. `by_person` names the cells a person wrote
//! (S13), comma separated. Only `title` is required; columns may come in any order.
//! A row with neither id nor title is a blank line and is ignored (M9).

use crate::error::InputError;
use crate::format::{ItemDefaults, finish_item, parse_bool, parse_date, parse_timestamp, split_refs};
use crate::item::Item;
use crate::task::{Status, Tags, Task};

/// The columns, in order, with their English and Japanese headers.
pub const COLUMNS: [(&str, &str); 22] = [
    ("id", "タスクID"),
    ("status", "状態"),
    ("run", "▶AI実行"),
    ("title", "タスク"),
    ("body", "内容"),
    ("source", "発生源"),
    ("evidence", "根拠"),
    ("due", "期限"),
    ("assignee", "担当"),
    ("type", "分類"),
    ("priority", "優先度"),
    ("not_before", "開始"),
    ("action", "AI機能"),
    ("result", "実行結果"),
    ("run_at", "実行日時"),
    ("correction", "修正指示"),
    ("deps", "依存"),
    ("tags", "タグ"),
    ("project", "案件"),
    ("failures", "失敗回数"),
    ("refresh", "集約"),
    ("by_person", "人が記入"),
];

/// Other spellings a header may use.
const ALIASES: [(&str, &str); 6] = [
    ("AI実行", "run"),
    ("▶", "run"),
    ("PJ", "project"),
    ("ID", "id"),
    ("開始日時", "not_before"),
    ("AI実行済", "status"),
];

fn column_of(header: &str) -> Option<&'static str> {
    let header = header.trim().trim_start_matches('\u{feff}');
    COLUMNS
        .iter()
        .find(|(en, ja)| en.eq_ignore_ascii_case(header) || *ja == header)
        .map(|(en, _)| *en)
        .or_else(|| ALIASES.iter().find(|(alias, _)| alias.eq_ignore_ascii_case(header)).map(|(_, en)| *en))
}

/// A CSV table as read, before its columns mean anything: the header and every row with the
/// line it starts on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// The header's cells.
    pub header: Vec<String>,
    /// The header's line.
    pub header_line: usize,
    /// The rows below it.
    pub rows: Vec<Row>,
}

/// One row of a [`Table`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Row {
    /// The 1-based line the row starts on.
    pub line: usize,
    /// Its cells, as many as the header's.
    pub cells: Vec<String>,
}

/// Reads CSV with a header row into a [`Table`]: a UTF-8 byte order mark skipped, lines counted
/// as an editor does (CRLF too), an unterminated quote refused.
///
/// # Errors
///
/// An [`InputError`] for an unterminated quote or a row with the wrong number of fields, at the
/// line where it stands.
pub fn table(text: &str, file: &str) -> Result<Table, InputError> {
    let mut rows = Vec::new();
    let (header, ()) = each_record(
        text,
        file,
        |_| Ok(()),
        |(), line, _, record| {
            rows.push(Row { line, cells: record.iter().map(str::to_owned).collect() });
            Ok(())
        },
    )?;
    Ok(Table { header, header_line: 1, rows })
}

/// Reads CSV as [`table`] does, one record at a time: `header` sees the header's cells first,
/// then `each` every record with what `header` made of them, its line and the byte offset it
/// starts at in `text`. Returns the header's cells and what `header` made.
fn each_record<H>(
    text: &str,
    file: &str,
    header: impl FnOnce(&[String]) -> Result<H, InputError>,
    mut each: impl FnMut(&H, usize, usize, &::csv::StringRecord) -> Result<(), InputError>,
) -> Result<(Vec<String>, H), InputError> {
    let whole = text.len();
    let text = crate::error::without_bom(text);
    let bom = whole - text.len();
    if let Some((line, reason)) = quote_error(text) {
        return Err(InputError::new(file, Some(line), reason));
    }
    let mut reader =
        ::csv::ReaderBuilder::new().has_headers(true).flexible(false).from_reader(text.as_bytes());
    // Lines are counted from byte offsets, so CRLF files number their lines as an editor does.
    let mut lines = Lines { text: text.as_bytes(), offset: 0, line: 1 };
    let csv_error = |e: ::csv::Error| {
        let line = e.position().map(|p| Lines::of(text.as_bytes(), p.byte() as usize)).unwrap_or(1);
        let reason = match e.kind() {
            ::csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
                format!("row has {len} fields but the header has {expected_len}")
            }
            _ => format!("invalid CSV: {e}"),
        };
        InputError::new(file, Some(line), reason)
    };
    let cells: Vec<String> = reader.headers().map_err(csv_error)?.iter().map(str::to_owned).collect();
    let made = header(&cells)?;
    let mut record = ::csv::StringRecord::new();
    while reader.read_record(&mut record).map_err(csv_error)? {
        let line = record.position().map(|p| lines.at(p.byte() as usize)).unwrap_or(0);
        each(&made, line, bom + lines.offset, &record)?;
    }
    Ok((cells, made))
}

/// Parses CSV with the ledger's columns (English or Japanese headers).
///
/// # Errors
///
/// An [`InputError`] for an unknown or duplicated column, a missing `title` column, a row with
/// the wrong number of fields, or a bad value, at the line where it stands.
pub fn parse(text: &str, file: &str, defaults: &ItemDefaults) -> Result<Vec<Item>, InputError> {
    crate::format::collect(|each| each_item(text, file, defaults, each))
}

/// Reads CSV as [`parse`] does and hands each item, with the byte offset of its record in
/// `text`, to `each`; returns the column each cell of a record fills,
/// which [`item_at`] needs to read an item again.
///
/// # Errors
///
/// As [`parse`].
pub(crate) fn each_item(
    text: &str,
    file: &str,
    defaults: &ItemDefaults,
    mut each: impl FnMut(usize, Item),
) -> Result<Vec<&'static str>, InputError> {
    let (_, columns) = each_record(
        text,
        file,
        |header| columns_of(header, file, Some(1)),
        |columns, line, at, record| {
            if let Some(item) = row_item(columns, line, record.iter(), file, defaults)? {
                each(at, item);
            }
            Ok(())
        },
    )?;
    Ok(columns)
}

/// The item of the record that starts `text`, on line `line`, its cells filling `columns`;
/// `None` for a blank row.
///
/// # Errors
///
/// An [`InputError`] at the line: bad CSV or a bad value.
pub(crate) fn item_at(
    text: &str,
    line: usize,
    columns: &[&'static str],
    file: &str,
    defaults: &ItemDefaults,
) -> Result<Option<Item>, InputError> {
    let mut reader =
        ::csv::ReaderBuilder::new().has_headers(false).flexible(false).from_reader(text.as_bytes());
    let mut record = ::csv::StringRecord::new();
    match reader.read_record(&mut record) {
        Ok(true) => row_item(columns, line, record.iter(), file, defaults),
        Ok(false) => Err(InputError::new(file, Some(line), "no record at this line")),
        Err(e) => Err(InputError::new(file, Some(line), format!("invalid CSV: {e}"))),
    }
}

/// The ledger column each header cell names.
fn columns_of(header: &[String], file: &str, at: Option<usize>) -> Result<Vec<&'static str>, InputError> {
    let mut columns: Vec<&'static str> = Vec::with_capacity(header.len());
    for header in header {
        let column = column_of(header)
            .ok_or_else(|| InputError::new(file, at, format!("unknown column '{header}'")))?;
        if columns.contains(&column) {
            return Err(InputError::new(file, at, format!("column '{column}' appears twice")));
        }
        columns.push(column);
    }
    if !columns.contains(&"title") {
        return Err(InputError::new(file, at, "missing column 'title' (タスク)"));
    }
    Ok(columns)
}

/// The item of one row whose cells fill `columns`; `None` for a blank row (M9).
fn row_item<'c>(
    columns: &[&'static str],
    line: usize,
    cells: impl Iterator<Item = &'c str>,
    file: &str,
    defaults: &ItemDefaults,
) -> Result<Option<Item>, InputError> {
    let mut item = Item { line: Some(line), ..Item::default() };
    for (column, value) in columns.iter().zip(cells) {
        set_column(&mut item, column, value)
            .map_err(|reason| InputError::new(file, Some(line), format!("column '{column}': {reason}")))?;
    }
    if item.is_blank() {
        return Ok(None);
    }
    if item.title.trim().is_empty() {
        return Err(InputError::new(file, Some(line), "empty title"));
    }
    finish_item(item, defaults, file).map(Some)
}

/// The items of a table whose header names the ledger's columns (a CSV file, a spreadsheet).
///
/// # Errors
///
/// As [`parse`].
pub fn items(table: Table, file: &str, defaults: &ItemDefaults) -> Result<Vec<Item>, InputError> {
    let columns = columns_of(&table.header, file, Some(table.header_line))?;
    let mut items = Vec::new();
    for row in table.rows {
        items.extend(row_item(&columns, row.line, row.cells.iter().map(String::as_str), file, defaults)?);
    }
    Ok(items)
}

/// The line a byte offset stands on, counted forward: records come in increasing order, so each
/// byte is counted once.
struct Lines<'a> {
    text: &'a [u8],
    offset: usize,
    line: usize,
}

impl Lines<'_> {
    fn at(&mut self, byte: usize) -> usize {
        let mut byte = byte.min(self.text.len());
        // The reader ends a record at `\r`, so in a CRLF file the next one "starts" at the `\n`:
        // a record never starts with a line break, so the line is the one after it.
        while matches!(self.text.get(byte), Some(b'\r' | b'\n')) {
            byte += 1;
        }
        if byte < self.offset {
            (self.offset, self.line) = (0, 1);
        }
        self.line += self.text[self.offset..byte].iter().filter(|&&b| b == b'\n').count();
        self.offset = byte;
        self.line
    }

    fn of(text: &[u8], byte: usize) -> usize {
        Lines { text, offset: 0, line: 1 }.at(byte)
    }
}

/// The line and reason of a quoted field the CSV reader would mangle, if there is one (RFC
/// 4180): one that never closes (the reader would take the rest of the file as its value), and
/// text after a closing quote before the delimiter or the line's end (`"a"b` would read `ab`,
/// `"a"b"c` would read `ab"c`). A quote opens a field only at the field's start; inside one,
/// `""` is a quote character; a quote inside an unquoted field is text.
fn quote_error(text: &str) -> Option<(usize, &'static str)> {
    let (mut line, mut opened_at) = (1, 0);
    let (mut quoted, mut field_start, mut closed) = (false, true, false);
    let mut bytes = text.bytes().peekable();
    while let Some(b) = bytes.next() {
        if quoted {
            if b == b'"' {
                if bytes.peek() == Some(&b'"') {
                    bytes.next();
                } else {
                    (quoted, closed) = (false, true);
                }
            }
        } else if closed && !matches!(b, b',' | b'\n' | b'\r') {
            return Some((
                line,
                "stray quote: text after the closing quote of a quoted field (a quote inside one is written \"\")",
            ));
        } else if b == b'"' && field_start {
            (quoted, opened_at) = (true, line);
        }
        if b == b'\n' {
            line += 1;
        }
        if !quoted && b != b'"' {
            closed = false;
        }
        field_start = !quoted && matches!(b, b',' | b'\n' | b'\r');
    }
    quoted.then_some((opened_at, "unterminated quote: the quoted field opened here never closes"))
}

/// Sets a ledger column of an item from a cell.
pub(crate) fn set_column(item: &mut Item, column: &str, value: &str) -> Result<(), String> {
    let trimmed = value.trim();
    match column {
        "id" => item.ref_id = (!trimmed.is_empty()).then(|| trimmed.to_owned()),
        "status" if !trimmed.is_empty() => {
            item.status = Some(Status::parse(trimmed).ok_or_else(|| format!("'{trimmed}' is not a status"))?);
        }
        "run" => item.run = parse_bool(trimmed)?,
        "title" => item.title = value.to_owned(),
        "body" => item.body = value.to_owned(),
        "source" => item.source = value.to_owned(),
        "evidence" => item.evidence = value.to_owned(),
        "due" if !trimmed.is_empty() => item.due = Some(parse_date(trimmed)?),
        "assignee" => item.assignee = value.to_owned(),
        "type" => item.work_type = value.to_owned(),
        "priority" if !trimmed.is_empty() => {
            item.priority = trimmed.parse().map_err(|_| format!("'{trimmed}' is not an integer"))?;
        }
        "not_before" if !trimmed.is_empty() => item.not_before = Some(parse_timestamp(trimmed)?),
        "action" => item.action = value.to_owned(),
        "result" => item.result = value.to_owned(),
        "run_at" if !trimmed.is_empty() => item.run_at = Some(parse_timestamp(trimmed)?),
        "correction" => item.correction = value.to_owned(),
        "deps" => item.deps = split_refs(trimmed),
        "tags" => item.tags = Tags::parse_list(trimmed),
        "project" => item.project = value.to_owned(),
        "failures" if !trimmed.is_empty() => {
            item.failures = trimmed.parse().map_err(|_| format!("'{trimmed}' is not a count"))?;
        }
        "refresh" => item.refresh = parse_bool(trimmed)?,
        "by_person" => item.person_cells = crate::authority::PersonCells::parse_names([trimmed])?,
        _ => {}
    }
    Ok(())
}

/// A task's cells in the order of [`COLUMNS`], as CSV holds them and a person reads them:
/// status names in Japanese when `ja`, deps comma separated, empty for no value.
pub fn cells(t: &Task, ja: bool) -> [String; COLUMNS.len()] {
    let deps: Vec<String> = t.deps.iter().map(ToString::to_string).collect();
    [
        t.id.to_string(),
        t.status.label(ja).to_owned(),
        t.run.to_string(),
        t.title.clone(),
        t.body.clone(),
        t.source.clone(),
        t.evidence.clone(),
        t.due.map(|d| d.to_string()).unwrap_or_default(),
        t.assignee.clone(),
        t.work_type.clone(),
        t.priority.to_string(),
        t.not_before.map(|x| x.to_string()).unwrap_or_default(),
        t.action.clone(),
        t.result.clone(),
        t.run_at.map(|x| x.to_string()).unwrap_or_default(),
        t.correction.clone(),
        deps.join(","),
        t.tags.to_list(),
        t.project.clone(),
        t.failures.to_string(),
        t.refresh.to_string(),
        t.person_cells.to_string(),
    ]
}

/// Renders tasks as CSV with every column; Japanese headers and status names when `ja`.
pub fn render(tasks: &[Task], ja: bool) -> String {
    let mut text = render_header(ja);
    text.push_str(&render_rows(tasks, ja));
    text
}

/// The header line of [`render`].
pub(crate) fn render_header(ja: bool) -> String {
    let header: Vec<&str> = COLUMNS.iter().map(|(en, jp)| if ja { *jp } else { *en }).collect();
    write_records(std::iter::once(header))
}

/// The lines of [`render`] after its header.
pub(crate) fn render_rows(tasks: &[Task], ja: bool) -> String {
    write_records(tasks.iter().map(|t| cells(t, ja)))
}

fn write_records<R: IntoIterator<Item = S>, S: AsRef<[u8]>>(records: impl Iterator<Item = R>) -> String {
    let mut writer = ::csv::WriterBuilder::new().from_writer(Vec::new());
    for record in records {
        writer.write_record(record).expect("writing to memory");
    }
    String::from_utf8(writer.into_inner().expect("writing to memory")).expect("CSV of UTF-8 fields")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> ItemDefaults {
        ItemDefaults { source: "sheet".into(), project: "PJ".into() }
    }

    #[test]
    fn x1_japanese_headers_are_read() {
        let text = "\u{feff}タスクID,状態,▶AI実行,タスク,依存,タグ\nT-0001,完了,FALSE,土台,,ai\nT-0002,未着手,TRUE,パーサー,T-0001,\n";
        let items = parse(text, "s.csv", &defaults()).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].status, Some(Status::Done));
        assert!(items[1].run);
        assert_eq!(items[1].deps, ["T-0001"]);
        assert_eq!((items[1].source.as_str(), items[1].project.as_str()), ("sheet", "PJ"));
        assert_eq!(items[1].line, Some(3));
    }

    #[test]
    fn m9_rows_without_id_and_title_are_blank_lines() {
        // A checkbox written into an empty row must not become a task (seeds/000 §10).
        let text = "id,run,title\n,FALSE,\n,,\nT-1,false,real\n";
        let items = parse(text, "s.csv", &defaults()).unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].title, "real");
    }

    #[test]
    fn x4_bad_csv_names_line_and_reason() {
        let cases = [
            ("id,status\nT-1,pending\n", 1, "missing column 'title'"),
            ("id,title,colour\n", 1, "unknown column 'colour'"),
            ("id,title\nT-1,a\nT-2,b,extra\n", 3, "row has 3 fields but the header has 2"),
            ("title,status\na,pending\nb,finished\n", 3, "not a status"),
            ("title,due\na,next week\n", 2, "not a date"),
            ("title,title\n", 1, "appears twice"),
        ];
        for (text, line, reason) in cases {
            let err = parse(text, "in.csv", &defaults()).unwrap_err();
            assert!(err.reason.contains(reason), "{text:?}: {err}");
            assert_eq!(err.line, Some(line), "{text:?}: {err}");
        }
    }

    #[test]
    fn x4_crlf_files_name_the_right_line() {
        let text = "title,status\r\na,pending\r\nb,pending\r\nc,finished\r\n";
        let err = parse(text, "s.csv", &defaults()).unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        let ok = parse("title\r\na\r\n\"two\r\nlines\"\r\nc\r\n", "s.csv", &defaults()).unwrap();
        let lines: Vec<Option<usize>> = ok.iter().map(|i| i.line).collect();
        assert_eq!(lines, [Some(2), Some(3), Some(5)], "a quoted line break counts as a line");
    }

    #[test]
    fn x4_an_unterminated_quote_is_refused_at_its_line() {
        let err =
            parse("id,title\nT-0,fine\nT-1,\"unterminated\nT-2,more\n", "s.csv", &defaults()).unwrap_err();
        assert_eq!(err.to_string(), "s.csv:3: unterminated quote: the quoted field opened here never closes");
        // Doubled quotes inside a quoted field, and a quote inside an unquoted one, are fine.
        let ok = parse("title,body\n\"say \"\"hi\"\"\",5\" tall\n", "s.csv", &defaults()).unwrap();
        assert_eq!((ok[0].title.as_str(), ok[0].body.as_str()), ("say \"hi\"", "5\" tall"));
    }

    #[test]
    fn x4_text_after_a_closing_quote_is_refused_at_its_line() {
        let cases = [
            ("title,body\n\"a\"b\"c,x\n", 2),
            ("title\n\"ok\"x\n", 2),
            ("title\nfine\n\"ok\" \n", 3),
            ("title,body\r\nfine,x\r\n\"two\r\nlines\"x,y\r\n", 4),
            ("title,body\na,\"b\"\"\"c\n", 2),
        ];
        for (text, line) in cases {
            let err = parse(text, "s.csv", &defaults()).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "s.csv:{line}: stray quote: text after the closing quote of a quoted field (a quote inside one is written \"\")"
                ),
                "{text:?}"
            );
            assert!(table(text, "s.csv").is_err(), "{text:?}");
        }
        // Quoted fields that close before their delimiter, the line end or the file's end are fine.
        let ok =
            parse("title,body\n\"x\",\"a\"\"b\"\n\"c, d\",\"\"\r\n\"e\",f", "s.csv", &defaults()).unwrap();
        let cells: Vec<(&str, &str)> = ok.iter().map(|i| (i.title.as_str(), i.body.as_str())).collect();
        assert_eq!(cells, [("x", "a\"b"), ("c, d", ""), ("e", "f")]);
    }
}

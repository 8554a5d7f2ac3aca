//! X5: a source as people keep it. A sheet, a JSON export or a JSON Lines feed has columns of its
//! own (`id, question, status, 回答期限`); a source's mapping says which column fills which ledger
//! field, which rows are tasks (a filter on a column's values), and how a title or body is
//! written from a row's columns (templates). Pure: records in, items out.

use std::fmt;

use serde_json::Value;

use crate::error::InputError;
use crate::format::{ItemDefaults, csv, finish_item};
use crate::item::Item;

/// The ledger fields a source may fill (`fields = { title = "question" }`).
pub const FIELDS: [&str; 14] = [
    "id",
    "title",
    "body",
    "evidence",
    "due",
    "assignee",
    "type",
    "priority",
    "not_before",
    "action",
    "deps",
    "tags",
    "project",
    "status",
];

/// The fields only a person writes (S13): no source fills them.
pub const PERSON_ONLY: [&str; 6] = ["run", "correction", "result", "run_at", "failures", "by_person"];

/// Why a mapping is not valid (a configuration error: the caller names the source and file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MappingError(pub String);

impl fmt::Display for MappingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A template over a row's columns: `{question} に回答をもらう`; `{{` and `}}` are braces. In
/// JSON sources a placeholder may be a JSON Pointer: `{/fields/summary}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    text: String,
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    Column(String),
}

impl Template {
    /// Parses a template.
    ///
    /// # Errors
    ///
    /// A brace that opens no placeholder or closes none, or an empty placeholder.
    pub fn parse(text: &str) -> Result<Template, MappingError> {
        let bad = |why: &str| MappingError(format!("template '{text}': {why}"));
        let (mut parts, mut literal) = (Vec::new(), String::new());
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    literal.push('}');
                }
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some('{') | None => {
                                return Err(bad("a '{' is never closed (write '{{' for a brace)"));
                            }
                            Some(c) => name.push(c),
                        }
                    }
                    let name = name.trim();
                    if name.is_empty() {
                        return Err(bad("an empty placeholder '{}'"));
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Column(name.to_owned()));
                }
                '}' => return Err(bad("a '}' closes nothing (write '}}' for a brace)")),
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Template { text: text.to_owned(), parts })
    }

    /// The columns the template reads.
    pub fn columns(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Column(c) => Some(c.as_str()),
            Part::Text(_) => None,
        })
    }

    /// The text with each placeholder replaced by `value(column)` (empty when it has none).
    pub fn render(&self, value: impl Fn(&str) -> Option<String>) -> String {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.clone(),
                Part::Column(c) => value(c).unwrap_or_default(),
            })
            .collect()
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// How a source's records become items.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mapping {
    /// Ledger field ← source column (or JSON Pointer), in the order given.
    pub fields: Vec<(String, String)>,
    /// Keep only records whose column holds one of these values (every condition must hold).
    pub filter: Vec<(String, Vec<String>)>,
    /// The title, written from the record's columns (instead of `fields.title`).
    pub title: Option<Template>,
    /// The body, written from the record's columns (instead of `fields.body`).
    pub body: Option<Template>,
}

impl Mapping {
    /// Builds a mapping and checks it: every field a ledger field a source may fill, every
    /// template well formed, and a title from somewhere.
    ///
    /// # Errors
    ///
    /// A [`MappingError`] saying what is wrong.
    pub fn new(
        fields: Vec<(String, String)>,
        filter: Vec<(String, Vec<String>)>,
        title: Option<&str>,
        body: Option<&str>,
    ) -> Result<Mapping, MappingError> {
        for (field, column) in &fields {
            if PERSON_ONLY.contains(&field.as_str()) {
                return Err(MappingError(format!(
                    "fields.{field}: only a person writes '{field}'; a source cannot fill it"
                )));
            }
            if !FIELDS.contains(&field.as_str()) {
                return Err(MappingError(format!(
                    "fields.{field}: not a ledger field (one of: {})",
                    FIELDS.join(", ")
                )));
            }
            if column.trim().is_empty() {
                return Err(MappingError(format!("fields.{field}: names no column")));
            }
        }
        for (column, values) in &filter {
            if values.is_empty() {
                return Err(MappingError(format!("where.{column}: lists no value, so no row would be kept")));
            }
        }
        let title = title.map(Template::parse).transpose()?;
        let body = body.map(Template::parse).transpose()?;
        if title.is_none() && !fields.iter().any(|(f, _)| f == "title") {
            return Err(MappingError(
                "no title: map a column with fields = { title = \"COLUMN\" } or write a title template"
                    .into(),
            ));
        }
        Ok(Mapping { fields, filter, title, body })
    }

    /// Every column the mapping reads, each with where it is named (`fields.title`, `where`,
    /// `title`), in order.
    pub fn columns(&self) -> Vec<(&str, String)> {
        let mut out: Vec<(&str, String)> =
            self.fields.iter().map(|(field, column)| (column.as_str(), format!("fields.{field}"))).collect();
        out.extend(self.filter.iter().map(|(column, _)| (column.as_str(), "where".to_owned())));
        for (name, template) in [("title", &self.title), ("body", &self.body)] {
            if let Some(t) = template {
                out.extend(t.columns().map(|c| (c, format!("the {name} template"))));
            }
        }
        out
    }

    /// Checks that a table's header has every column the mapping reads (CSV, spreadsheets).
    ///
    /// # Errors
    ///
    /// An [`InputError`] at the header's line naming the first missing column, where it is
    /// named and the columns the header has.
    pub fn check_header(&self, header: &[String], file: &str, line: usize) -> Result<(), InputError> {
        for (column, named_in) in self.columns() {
            if !header.iter().any(|h| h.trim() == column) {
                let has: Vec<&str> = header.iter().map(|h| h.trim()).collect();
                return Err(InputError::new(
                    file,
                    Some(line),
                    format!(
                        "column '{column}' ({named_in}) is not in the header (its columns: {})",
                        has.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The items of a table's rows: rows the filter keeps, blank rows skipped.
    ///
    /// # Errors
    ///
    /// An [`InputError`] at the row's line: a value a field cannot hold, or an empty title.
    pub fn table_items(
        &self,
        table: &csv::Table,
        file: &str,
        defaults: &ItemDefaults,
    ) -> Result<Vec<Item>, InputError> {
        self.check_header(&table.header, file, table.header_line)?;
        let mut items = Vec::new();
        for row in &table.rows {
            let value = |column: &str| {
                let i = table.header.iter().position(|h| h.trim() == column)?;
                row.cells.get(i).cloned()
            };
            if row.cells.iter().all(|c| c.trim().is_empty()) {
                continue;
            }
            if let Some(item) = self.item(value, Some(row.line), file, defaults)? {
                items.push(item);
            }
        }
        Ok(items)
    }

    /// The items of JSON records (an array's elements, or JSON Lines with their lines): records
    /// the filter keeps. A key a record lacks is an empty value.
    ///
    /// # Errors
    ///
    /// An [`InputError`] naming the record: not an object, a value a field cannot hold, or an
    /// empty title.
    pub fn json_items(
        &self,
        records: &[(Option<usize>, Value)],
        file: &str,
        defaults: &ItemDefaults,
    ) -> Result<Vec<Item>, InputError> {
        let mut items = Vec::new();
        for (index, (line, record)) in records.iter().enumerate() {
            if !record.is_object() {
                let at = line.map_or_else(|| format!("item {}: ", index + 1), |_| String::new());
                return Err(InputError::new(file, *line, format!("{at}not an object")));
            }
            let value = |column: &str| json_value(record, column);
            let item = self.item(value, *line, file, defaults).map_err(|mut e| {
                if line.is_none() {
                    e.reason = format!("item {}: {}", index + 1, e.reason);
                }
                e
            })?;
            items.extend(item);
        }
        Ok(items)
    }

    /// One record's item, or `None` when the filter leaves it out.
    fn item(
        &self,
        value: impl Fn(&str) -> Option<String>,
        line: Option<usize>,
        file: &str,
        defaults: &ItemDefaults,
    ) -> Result<Option<Item>, InputError> {
        let keep = self.filter.iter().all(|(column, values)| {
            let v = value(column).unwrap_or_default();
            values.iter().any(|want| want.trim() == v.trim())
        });
        if !keep {
            return Ok(None);
        }
        let mut item = Item { line, ..Item::default() };
        for (field, column) in &self.fields {
            let v = value(column).unwrap_or_default();
            csv::set_column(&mut item, field, &v).map_err(|reason| {
                InputError::new(file, line, format!("column '{column}' (fields.{field}): {reason}"))
            })?;
        }
        if let Some(template) = &self.title {
            item.title = template.render(&value);
        }
        if let Some(template) = &self.body {
            item.body = template.render(&value);
        }
        if item.title.trim().is_empty() {
            let from = match &self.title {
                Some(t) => format!(
                    "the title template '{t}' over columns {}",
                    t.columns().collect::<Vec<_>>().join(", ")
                ),
                None => {
                    let column =
                        self.fields.iter().find(|(f, _)| f == "title").map_or("", |(_, c)| c.as_str());
                    format!("column '{column}' (fields.title)")
                }
            };
            return Err(InputError::new(
                file,
                line,
                format!("empty title: {from} gives nothing for this row"),
            ));
        }
        finish_item(item, defaults, file).map(Some)
    }
}

/// A JSON record's value for a column: a top-level key, or a JSON Pointer (`/fields/summary`).
/// Strings as they are, numbers and booleans as text, `null` as nothing, arrays as their
/// elements joined by `, `, objects as JSON.
pub fn json_value(record: &Value, column: &str) -> Option<String> {
    let value = if column.starts_with('/') { record.pointer(column) } else { record.get(column) }?;
    Some(json_text(value))
}

fn json_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Bool(_) | Value::Number(_) | Value::Object(_) => value.to_string(),
        Value::Array(items) => items.iter().map(json_text).collect::<Vec<_>>().join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(fields: &[(&str, &str)], filter: &[(&str, &[&str])], title: Option<&str>) -> Mapping {
        Mapping::new(
            fields.iter().map(|(f, c)| ((*f).to_owned(), (*c).to_owned())).collect(),
            filter
                .iter()
                .map(|(c, v)| ((*c).to_owned(), v.iter().map(|s| (*s).to_owned()).collect()))
                .collect(),
            title,
            None,
        )
        .unwrap()
    }

    fn table(text: &str) -> csv::Table {
        csv::table(text, "questions.csv").unwrap()
    }

    fn defaults() -> ItemDefaults {
        ItemDefaults { source: "questions".into(), project: "PJ-01".into() }
    }

    /// X5: the seeds' confirmation sheet: its own columns, only unanswered rows, a templated title.
    #[test]
    fn x5_a_sheet_with_its_own_columns_becomes_tasks_for_the_rows_the_filter_keeps() {
        let text = "id,question,status,回答期限\nQ-1,仕様は?,未回答,2026-12-10\nQ-2,納期は?,回答済,\nQ-3,予算は?,保留,\n,,,\n";
        let m = Mapping::new(
            vec![("id".into(), "id".into()), ("due".into(), "回答期限".into())],
            vec![("status".into(), vec!["未回答".into(), "保留".into()])],
            Some("{question} に回答をもらう"),
            Some("{id}: {question}"),
        )
        .unwrap();
        let items = m.table_items(&table(text), "questions.csv", &defaults()).unwrap();
        let titles: Vec<&str> = items.iter().map(|i| i.title.as_str()).collect();
        assert_eq!(titles, ["仕様は? に回答をもらう", "予算は? に回答をもらう"]);
        assert_eq!(items[0].body, "Q-1: 仕様は?");
        assert_eq!(items[0].due.map(|d| d.to_string()).as_deref(), Some("2026-12-10"));
        assert_eq!(items[0].ref_id.as_deref(), Some("Q-1"));
        assert_eq!(
            (items[1].line, items[1].source.as_str(), items[1].project.as_str()),
            (Some(4), "questions", "PJ-01")
        );
    }

    /// X5: a column the header lacks is named with where it is used and the columns there are.
    #[test]
    fn x5_a_column_the_header_lacks_is_refused_naming_it() {
        let m = mapping(&[("title", "question")], &[("state", &["open"])], None);
        let err = m.table_items(&table("id,question\n1,a\n"), "questions.csv", &defaults()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "questions.csv:1: column 'state' (where) is not in the header (its columns: id, question)"
        );
        let m = mapping(&[], &[], Some("{質問} を確認"));
        let err = m.table_items(&table("id,question\n1,a\n"), "questions.csv", &defaults()).unwrap_err();
        assert!(err.to_string().contains("column '質問' (the title template)"), "{err}");
    }

    /// X5: a row whose title comes out empty is refused at its line, naming the template.
    #[test]
    fn x5_an_empty_title_is_refused_at_its_row() {
        let m = mapping(&[], &[], Some("{question}"));
        let err = m.table_items(&table("id,question\n1,a\n2,\n"), "questions.csv", &defaults()).unwrap_err();
        assert_eq!(err.line, Some(3));
        assert!(
            err.to_string().contains("empty title: the title template '{question}' over columns question"),
            "{err}"
        );
    }

    /// X5, S13: fields only a person writes, and unknown fields, are refused; a title is needed.
    #[test]
    fn x5_s13_a_mapping_cannot_fill_a_persons_field_or_an_unknown_one() {
        let new = |field: &str| Mapping::new(vec![(field.into(), "x".into())], vec![], Some("{x}"), None);
        assert!(new("correction").unwrap_err().0.contains("only a person writes 'correction'"));
        assert!(new("run").unwrap_err().0.contains("only a person writes"));
        assert!(new("titel").unwrap_err().0.contains("not a ledger field"));
        assert!(Mapping::new(vec![], vec![], None, None).unwrap_err().0.contains("no title"));
        assert!(Mapping::new(vec![], vec![("s".into(), vec![])], Some("{x}"), None).is_err());
    }

    #[test]
    fn templates_parse_braces_and_refuse_broken_ones() {
        let t = Template::parse("{{literal}} {a} and {/b/c}").unwrap();
        assert_eq!(t.columns().collect::<Vec<_>>(), ["a", "/b/c"]);
        assert_eq!(t.render(|c| Some(c.to_uppercase())), "{literal} A and /B/C");
        for broken in ["{a", "a}", "{}", "{a{b}}"] {
            assert!(Template::parse(broken).is_err(), "{broken}");
        }
    }

    /// X5: JSON records address nested values with a JSON Pointer; keys a record lacks are empty.
    #[test]
    fn x5_json_records_use_keys_and_pointers() {
        let records: Vec<(Option<usize>, Value)> = vec![
            (
                None,
                serde_json::json!({"key": "PRJ-1", "fields": {"summary": "Fix login", "labels": ["ai", "web"]}}),
            ),
            (None, serde_json::json!({"key": "PRJ-2", "fields": {"summary": "Docs"}, "done": true})),
        ];
        let m = Mapping::new(
            vec![("title".into(), "/fields/summary".into()), ("tags".into(), "/fields/labels".into())],
            vec![],
            None,
            Some("{key}"),
        )
        .unwrap();
        let items = m.json_items(&records, "issues.json", &defaults()).unwrap();
        assert_eq!(items[0].title, "Fix login");
        assert_eq!(items[0].tags.to_list(), "ai,web");
        assert_eq!(items[1].body, "PRJ-2");
        let err =
            m.json_items(&[(None, serde_json::json!({"key": "x"}))], "issues.json", &defaults()).unwrap_err();
        assert!(err.to_string().starts_with("issues.json: item 1: empty title"), "{err}");
        let err = m.json_items(&[(Some(7), serde_json::json!([1]))], "feed.jsonl", &defaults()).unwrap_err();
        assert_eq!(err.to_string(), "feed.jsonl:7: not an object");
    }
}

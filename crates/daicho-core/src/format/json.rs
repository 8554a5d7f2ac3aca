//! JSON: the tasks.json document of `seeds/002…`, a plain item array, or a single item.
//!
//! ```json
//! {"goal": "ship the parser feature", "tasks": [
//!   {"id": "t1", "title": "module skeleton", "deps": [], "status": "done"},
//!   {"id": "t2", "title": "parser", "deps": ["t1"], "status": "pending"}]}
//! ```
//!
//! Ids such as `t1` are local to the document: they name items for `deps` and the ledger gives
//! the rows its own `T-` ids. Item fields use the ledger's English names; unknown fields are
//! refused so that a misspelt field is not silently lost.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::authority::PersonCells;
use crate::error::InputError;
use crate::format::{ItemDefaults, finish_item, parse_date, parse_timestamp};
use crate::item::Item;
use crate::task::{Status, Tags, Task};

/// An item on the wire; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireItem {
    #[serde(default)]
    id: Option<IdValue>,
    #[serde(default)]
    project: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    run: Option<bool>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    evidence: Option<String>,
    #[serde(default)]
    due: Option<String>,
    #[serde(default)]
    assignee: Option<String>,
    #[serde(default, rename = "type")]
    work_type: Option<String>,
    #[serde(default)]
    priority: Option<i64>,
    #[serde(default)]
    not_before: Option<String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    result: Option<String>,
    #[serde(default)]
    run_at: Option<String>,
    #[serde(default)]
    correction: Option<String>,
    #[serde(default)]
    deps: Option<StringOrList>,
    #[serde(default)]
    tags: Option<StringOrList>,
    #[serde(default)]
    failures: Option<u32>,
    #[serde(default)]
    refresh: Option<bool>,
    #[serde(default)]
    by_person: Option<StringOrList>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "expected an id: a string or a number")]
enum IdValue {
    Text(String),
    Number(u64),
}

#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "expected a list of strings or ids, or one comma-separated string")]
enum StringOrList {
    One(String),
    Many(Vec<IdValue>),
}

impl StringOrList {
    fn into_vec(self) -> Vec<String> {
        match self {
            StringOrList::One(text) => crate::format::split_refs(&text),
            StringOrList::Many(list) => list.into_iter().map(IdValue::into_string).collect(),
        }
    }
}

impl IdValue {
    fn into_string(self) -> String {
        match self {
            IdValue::Text(text) => text,
            IdValue::Number(n) => n.to_string(),
        }
    }
}

/// The keys a tasks.json document may have besides `tasks`.
const DOCUMENT_KEYS: [&str; 5] = ["goal", "project", "source", "tasks", "version"];

/// Parses a tasks.json document (`{"goal", "tasks": […]}`), an item array, or one item object.
/// A document's `project` and `source` are defaults for its items.
///
/// # Errors
///
/// An [`InputError`] at the line of the syntax error, or of the item with a bad field.
pub fn parse(text: &str, file: &str, defaults: &ItemDefaults) -> Result<Vec<Item>, InputError> {
    crate::format::collect(|each| each_item(text, file, defaults, each))
}

/// Reads a tasks.json document as [`parse`] does and hands each item, with its byte offset in
/// `text`, to `each`; returns the defaults its items took (a document's own `project` and
/// `source`), which [`item_at`] needs to read an item again.
///
/// # Errors
///
/// As [`parse`].
pub(crate) fn each_item(
    text: &str,
    file: &str,
    defaults: &ItemDefaults,
    mut each: impl FnMut(usize, Item),
) -> Result<ItemDefaults, InputError> {
    let syntax =
        |e: serde_json::Error| InputError::new(file, Some(e.line().max(1)), format!("invalid JSON: {e}"));
    let trimmed = text.trim_start().trim_start_matches('\u{feff}');
    let mut defaults = defaults.clone();
    let raw_items: Vec<&RawValue> = if trimmed.starts_with('[') {
        serde_json::from_str(trimmed).map_err(syntax)?
    } else if trimmed.starts_with('{') {
        let object: std::collections::BTreeMap<String, &RawValue> =
            serde_json::from_str(trimmed).map_err(syntax)?;
        if let Some(tasks) = object.get("tasks") {
            if let Some(key) = object.keys().find(|k| !DOCUMENT_KEYS.contains(&k.as_str())) {
                return Err(InputError::new(
                    file,
                    Some(line_of(text, object[key].get())),
                    format!("unknown key '{key}' in a tasks document (known: {})", DOCUMENT_KEYS.join(", ")),
                ));
            }
            for (key, slot) in [("project", &mut defaults.project), ("source", &mut defaults.source)] {
                if let Some(raw) = object.get(key) {
                    *slot = serde_json::from_str::<String>(raw.get()).map_err(|e| {
                        InputError::new(file, Some(line_of(text, raw.get())), format!("'{key}': {e}"))
                    })?;
                }
            }
            serde_json::from_str(tasks.get()).map_err(|e| {
                InputError::new(
                    file,
                    Some(line_of(text, tasks.get())),
                    format!("'tasks' must be an array: {e}"),
                )
            })?
        } else {
            vec![serde_json::from_str(trimmed).map_err(syntax)?]
        }
    } else if trimmed.is_empty() {
        return Err(InputError::new(file, Some(1), "empty input: expected a JSON array or object"));
    } else {
        return Err(InputError::new(file, Some(1), "expected a JSON array of tasks or a tasks document"));
    };
    let mut lines = LineCounter::new(text);
    for raw in raw_items {
        let line = lines.line_of(raw.get());
        let at = raw.get().as_ptr() as usize - text.as_ptr() as usize;
        each(at, item_at(&text[at..], line, file, &defaults)?);
    }
    Ok(defaults)
}

/// Parses JSON Lines: one item object per line, blank lines ignored.
///
/// # Errors
///
/// An [`InputError`] at the line with bad JSON or a bad field.
pub fn parse_lines(text: &str, file: &str, defaults: &ItemDefaults) -> Result<Vec<Item>, InputError> {
    crate::format::collect(|each| each_line_item(text, file, defaults, each))
}

/// Reads JSON Lines as [`parse_lines`] does and hands each item, with its byte offset in
/// `text`, to `each`.
///
/// # Errors
///
/// As [`parse_lines`].
pub(crate) fn each_line_item(
    text: &str,
    file: &str,
    defaults: &ItemDefaults,
    mut each: impl FnMut(usize, Item),
) -> Result<(), InputError> {
    for (index, line) in crate::error::without_bom(text).lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        object_at(line).map_err(|reason| InputError::new(file, Some(index + 1), reason))?;
        let wire: WireItem = serde_json::from_str(line)
            .map_err(|e| InputError::new(file, Some(index + 1), format!("bad task: {e}")))?;
        let at = line.as_ptr() as usize - text.as_ptr() as usize;
        each(at, wire_item(wire, index + 1, file, defaults)?);
    }
    Ok(())
}

/// The item whose JSON object starts `text`, on line `line` (what follows the object is not
/// read).
///
/// # Errors
///
/// An [`InputError`] at the line of the bad field.
pub(crate) fn item_at(
    text: &str,
    line: usize,
    file: &str,
    defaults: &ItemDefaults,
) -> Result<Item, InputError> {
    object_at(text).map_err(|reason| InputError::new(file, Some(line), reason))?;
    let mut de = serde_json::Deserializer::from_str(text);
    let wire = WireItem::deserialize(&mut de).map_err(|e| {
        InputError::new(file, Some(line + e.line().saturating_sub(1)), format!("bad task: {e}"))
    })?;
    wire_item(wire, line, file, defaults)
}

/// A task is a JSON object: serde would also read an array as a [`WireItem`], its values taken
/// as the fields in their order, so `["T-971", "PJ-Y", …]` became a task of project PJ-Y. A
/// JSON value of another kind is named as what it is; text that is no JSON value at all is left
/// to the parser's own message (`expected value at line 1 column 1`).
fn object_at(text: &str) -> Result<(), String> {
    let first = text.trim_start().chars().next();
    if matches!(first, Some('{') | None)
        || serde::de::IgnoredAny::deserialize(&mut serde_json::Deserializer::from_str(text)).is_err()
    {
        return Ok(());
    }
    let found = match first {
        Some('[') => "an array",
        Some('"') => "a string",
        Some('t' | 'f') => "a boolean",
        Some('n') => "null",
        _ => "a number",
    };
    Err(format!("bad task: expected a task object ({{\"title\": …}}), found {found}"))
}

fn wire_item(wire: WireItem, line: usize, file: &str, defaults: &ItemDefaults) -> Result<Item, InputError> {
    let item = to_item(wire, line).map_err(|reason| InputError::new(file, Some(line), reason))?;
    // A JSON task names itself: an object with fields but no title (an id, a body) is a
    // producer's mistake and refused, as the CSV reader refuses a row with an id and no title; an
    // object with nothing in it is a blank line (M9) and skipped.
    // Compared only for an item without a title: no copy of every item of a large push.
    let untitled = || Item { title: String::new(), ..item.clone() };
    if item.title.trim().is_empty() && untitled() != (Item { line: item.line, ..Item::default() }) {
        return Err(InputError::new(file, Some(line), "empty title: a task needs a \"title\""));
    }
    finish_item(item, defaults, file)
}

/// The records of a JSON source with columns of its own (X5), each with its line: the elements
/// of an array, of a document's `tasks` array, or one object.
///
/// # Errors
///
/// An [`InputError`] at the line of the syntax error, or when the input holds no such records.
pub fn records(text: &str, file: &str) -> Result<Vec<(Option<usize>, serde_json::Value)>, InputError> {
    let syntax =
        |e: serde_json::Error| InputError::new(file, Some(e.line().max(1)), format!("invalid JSON: {e}"));
    let trimmed = crate::error::without_bom(text).trim_start();
    let raw: Vec<&RawValue> = if trimmed.starts_with('[') {
        serde_json::from_str(trimmed).map_err(syntax)?
    } else if trimmed.starts_with('{') {
        let object: std::collections::BTreeMap<String, &RawValue> =
            serde_json::from_str(trimmed).map_err(syntax)?;
        match object.get("tasks") {
            Some(tasks) if tasks.get().trim_start().starts_with('[') => {
                serde_json::from_str(tasks.get()).map_err(syntax)?
            }
            _ => vec![serde_json::from_str(trimmed).map_err(syntax)?],
        }
    } else {
        return Err(InputError::new(file, Some(1), "expected a JSON array of records or an object"));
    };
    // Every record is a slice of `text`, so its line is counted in `text` itself.
    let mut lines = LineCounter::new(text);
    raw.into_iter()
        .map(|r| {
            let line = lines.line_of(r.get());
            serde_json::from_str(r.get()).map(|v| (Some(line), v)).map_err(syntax)
        })
        .collect()
}

/// The records of a JSON Lines source with columns of its own (X5), each with its line; blank
/// lines skipped.
///
/// # Errors
///
/// An [`InputError`] at the line with bad JSON.
pub fn record_lines(text: &str, file: &str) -> Result<Vec<(Option<usize>, serde_json::Value)>, InputError> {
    let mut records = Vec::new();
    for (index, line) in crate::error::without_bom(text).lines().enumerate() {
        if !line.trim().is_empty() {
            let value = serde_json::from_str(line)
                .map_err(|e| InputError::new(file, Some(index + 1), format!("invalid JSON: {e}")))?;
            records.push((Some(index + 1), value));
        }
    }
    Ok(records)
}

/// Finds the 1-based line at which a slice of `text` starts. Slices are asked for in increasing
/// order (items of an array), so each byte is counted once: linear in the input, not quadratic.
struct LineCounter<'a> {
    text: &'a str,
    offset: usize,
    line: usize,
}

impl<'a> LineCounter<'a> {
    fn new(text: &'a str) -> LineCounter<'a> {
        LineCounter { text, offset: 0, line: 1 }
    }

    fn line_of(&mut self, part: &str) -> usize {
        let at = (part.as_ptr() as usize).saturating_sub(self.text.as_ptr() as usize).min(self.text.len());
        if at < self.offset {
            *self = LineCounter::new(self.text);
        }
        self.line += self.text.as_bytes()[self.offset..at].iter().filter(|&&b| b == b'\n').count();
        self.offset = at;
        self.line
    }
}

/// The 1-based line at which `part` (a slice of `text`) starts; for one-off errors.
fn line_of(text: &str, part: &str) -> usize {
    LineCounter::new(text).line_of(part)
}

fn to_item(wire: WireItem, line: usize) -> Result<Item, String> {
    let status = match wire.status.as_deref() {
        Some(text) => Some(Status::parse(text).ok_or_else(|| format!("'{text}' is not a status"))?),
        None => None,
    };
    let tags =
        wire.tags.map(|t| t.into_vec().iter().map(String::as_str).collect::<Tags>()).unwrap_or_default();
    Ok(Item {
        ref_id: wire.id.map(IdValue::into_string),
        file: None,
        line: Some(line),
        project: wire.project.unwrap_or_default(),
        status,
        run: wire.run.unwrap_or(false),
        title: wire.title.unwrap_or_default(),
        body: wire.body.unwrap_or_default(),
        source: wire.source.unwrap_or_default(),
        evidence: wire.evidence.unwrap_or_default(),
        due: wire.due.as_deref().filter(|d| !d.is_empty()).map(parse_date).transpose()?,
        assignee: wire.assignee.unwrap_or_default(),
        work_type: wire.work_type.unwrap_or_default(),
        priority: wire.priority.unwrap_or(0),
        not_before: wire.not_before.as_deref().filter(|d| !d.is_empty()).map(parse_timestamp).transpose()?,
        action: wire.action.unwrap_or_default(),
        result: wire.result.unwrap_or_default(),
        run_at: wire.run_at.as_deref().filter(|d| !d.is_empty()).map(parse_timestamp).transpose()?,
        correction: wire.correction.unwrap_or_default(),
        deps: wire.deps.map(StringOrList::into_vec).unwrap_or_default(),
        tags,
        failures: wire.failures.unwrap_or(0),
        refresh: wire.refresh.unwrap_or(false),
        by_hand: false,
        key_title: None,
        person_cells: match wire.by_person {
            Some(names) => PersonCells::parse_names(names.into_vec().iter().map(String::as_str))?,
            None => PersonCells::NONE,
        },
    })
}

/// A task in the export document: the visible fields plus `failures`, `refresh` and the cells a
/// person wrote (`by_person`, left out when none).
#[derive(Debug, Serialize)]
pub(crate) struct ExportTask<'a> {
    id: String,
    project: &'a str,
    status: &'a str,
    run: bool,
    title: &'a str,
    body: &'a str,
    source: &'a str,
    evidence: &'a str,
    due: Option<String>,
    assignee: &'a str,
    #[serde(rename = "type")]
    work_type: &'a str,
    priority: i64,
    not_before: Option<String>,
    action: &'a str,
    result: &'a str,
    run_at: Option<String>,
    correction: &'a str,
    deps: Vec<String>,
    tags: Vec<&'a str>,
    failures: u32,
    refresh: bool,
    #[serde(skip_serializing_if = "PersonCells::is_empty")]
    by_person: PersonCells,
}

/// Renders tasks as a tasks document (`{"tasks": […]}`), pretty-printed, that [`parse`] reads
/// back to the same rows.
pub fn render(tasks: &[Task]) -> String {
    let mut text = String::from(DOCUMENT_START);
    render_page(tasks, true, &mut text);
    text.push_str(document_end(!tasks.is_empty()));
    text
}

/// How a tasks document starts, before its first task.
pub(crate) const DOCUMENT_START: &str = "{\n  \"tasks\": [";

/// How a tasks document ends, after its last task (`any`: it has one).
pub(crate) fn document_end(any: bool) -> &'static str {
    if any { "\n  ]\n}\n" } else { "]\n}\n" }
}

/// Appends tasks to a tasks document, pretty-printed as the whole document would be (`first`:
/// no task before them). A task's lines are indented as an element of `tasks`: JSON strings
/// hold no raw line break, so every line break is the printer's.
pub(crate) fn render_page(tasks: &[Task], first: bool, out: &mut String) {
    for (i, task) in tasks.iter().enumerate() {
        out.push_str(if first && i == 0 { "\n" } else { ",\n" });
        let text = serde_json::to_string_pretty(&export_task(task)).expect("tasks serialize to JSON");
        for (n, line) in text.lines().enumerate() {
            if n > 0 {
                out.push('\n');
            }
            out.push_str("    ");
            out.push_str(line);
        }
    }
}

/// Renders tasks as JSON Lines, one task object per line, that [`parse_lines`] reads back.
pub fn render_lines(tasks: &[Task]) -> String {
    let mut out = String::new();
    for task in tasks {
        out.push_str(&serde_json::to_string(&export_task(task)).expect("tasks serialize to JSON"));
        out.push('\n');
    }
    out
}

pub(crate) fn export_task(t: &Task) -> ExportTask<'_> {
    ExportTask {
        id: t.id.to_string(),
        project: &t.project,
        status: t.status.as_str(),
        run: t.run,
        title: &t.title,
        body: &t.body,
        source: &t.source,
        evidence: &t.evidence,
        due: t.due.map(|d| d.to_string()),
        assignee: &t.assignee,
        work_type: &t.work_type,
        priority: t.priority,
        not_before: t.not_before.map(|x| x.to_string()),
        action: &t.action,
        result: &t.result,
        run_at: t.run_at.map(|x| x.to_string()),
        correction: &t.correction,
        deps: t.deps.iter().map(ToString::to_string).collect(),
        tags: t.tags.iter().collect(),
        failures: t.failures,
        refresh: t.refresh,
        by_person: t.person_cells,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> ItemDefaults {
        ItemDefaults { source: "tasks.json".into(), project: String::new() }
    }

    #[test]
    fn x1_the_seed_002_tasks_json_shape_parses() {
        let text = r#"{
  "goal": "パーサー機能を出荷する",
  "tasks": [
    {"id": "t1", "title": "モジュールの土台作成", "deps": [], "status": "done"},
    {"id": "t2", "title": "パーサー実装", "deps": ["t1"], "status": "pending"},
    {"id": "t3", "title": "テスト作成", "deps": ["t1"], "status": "pending"},
    {"id": "t4", "title": "テストスイート実行", "deps": ["t2", "t3"], "status": "pending"},
    {"id": "t5", "title": "リリースノート", "deps": ["t4"], "status": "pending"}
  ]
}"#;
        let items = parse(text, "tasks.json", &defaults()).unwrap();
        assert_eq!(items.len(), 5);
        assert_eq!(items[0].status, Some(Status::Done));
        assert_eq!(items[3].deps, ["t2", "t3"]);
        assert_eq!(items[3].line, Some(7));
        assert_eq!(items[0].source, "tasks.json");
    }

    #[test]
    fn x1_a_plain_item_array_and_a_single_object_parse() {
        let items = parse(
            r#"[{"title": "a", "tags": "ai, heavy"}, {"title": "b", "status": "要確認"}]"#,
            "p",
            &defaults(),
        )
        .unwrap();
        assert_eq!(items[0].tags.to_list(), "ai,heavy");
        assert_eq!(items[1].status, Some(Status::Review));
        let one = parse(r#"{"title": "only", "project": "P"}"#, "p", &defaults()).unwrap();
        assert_eq!((one.len(), one[0].project.as_str()), (1, "P"));
    }

    #[test]
    fn x4_bad_json_names_line_and_reason() {
        let cases = [
            ("[\n{\"title\": \"a\"},\n{\"title\": }\n]", 3, "invalid JSON"),
            (
                "[\n{\"title\": \"a\"},\n{\"title\": \"b\", \"colour\": \"red\"}\n]",
                3,
                "unknown field `colour`",
            ),
            ("[\n\n{\"title\": \"a\", \"status\": \"finished\"}]", 3, "not a status"),
            ("{\"tasks\": [], \"owner\": 1}", 1, "unknown key 'owner'"),
            ("", 1, "empty input"),
        ];
        for (text, line, reason) in cases {
            let err = parse(text, "in.json", &defaults()).unwrap_err();
            assert!(err.reason.contains(reason), "{text:?}: {err}");
            assert_eq!(err.line, Some(line), "{text:?}: {err}");
        }
    }

    /// X4: a field of the wrong shape is named by what it should be, never by an internal type.
    #[test]
    fn x4_a_wrong_shape_says_what_is_expected_not_an_internal_type_name() {
        for (text, expect) in [
            (
                r#"[{"title": "a", "deps": 5}]"#,
                "expected a list of strings or ids, or one comma-separated string",
            ),
            (
                r#"[{"title": "a", "tags": {"x": 1}}]"#,
                "expected a list of strings or ids, or one comma-separated string",
            ),
            (r#"[{"title": "a", "id": true}]"#, "expected an id: a string or a number"),
        ] {
            let err = parse(text, "t.json", &ItemDefaults::default()).unwrap_err().to_string();
            assert!(err.contains(expect) && !err.contains("untagged") && !err.contains("enum"), "{err}");
        }
    }

    /// X4: a task is an object with a title: an array is not read as the fields in their order,
    /// a string or a number is named as what it is (text that is no JSON keeps the parser's
    /// message), and an object with fields but no title is refused, in a document and in JSON
    /// Lines, with its line; an empty object is a blank line (M9).
    #[test]
    fn x4_a_task_that_is_not_an_object_is_refused_with_its_line() {
        for (text, line, found) in [
            ("[\n[\"fix the parser\", \"urgent\"]\n]", 2, "found an array"),
            ("[\n{\"title\": \"a\"},\n\"b\"\n]", 3, "found a string"),
        ] {
            let err = parse(text, "in.json", &defaults()).unwrap_err();
            assert_eq!(err.line, Some(line), "{text:?}: {err}");
            assert!(
                err.reason.contains(&format!("expected a task object ({{\"title\": …}}), {found}")),
                "{err}"
            );
        }
        for (text, line, found) in [
            ("{\"title\": \"a\"}\n[\"T-971\", \"PJ-Y\", null, null, \"positional\"]\n", 2, "found an array"),
            ("\n42\n", 2, "found a number"),
            ("{\"title\": \"a\"}\n{\"body\": \"details only\", \"priority\": 5}\n", 2, "empty title"),
            ("{\"id\": \"T-306\", \"title\": \" \"}\n", 1, "empty title"),
            ("{\"title\": \"a\"}\n<html>\n", 2, "bad task: expected value at line 1 column 1"),
            ("title: x\n", 1, "bad task: expected ident at line 1 column 2"),
            ("{\"title\": \"a\"}\ntrue\n", 2, "found a boolean"),
        ] {
            let err = parse_lines(text, "in.jsonl", &defaults()).unwrap_err();
            assert_eq!(err.line, Some(line), "{text:?}: {err}");
            assert!(err.reason.contains(found), "{err}");
        }
        let blank = parse("[{\"title\": \"a\"}, {}, {\"title\": \"\"}]", "in.json", &defaults()).unwrap();
        assert_eq!(blank.iter().filter(|i| i.is_blank()).count(), 2, "{blank:?}");
    }

    /// X5: a source's own JSON records keep their lines, in an array, a `tasks` document or
    /// JSON Lines (a byte order mark skipped).
    #[test]
    fn x5_records_of_a_json_source_carry_their_lines() {
        let text = "\u{feff}[\n  {\"key\": 1},\n\n  {\"key\": 2}\n]";
        let found = records(text, "issues.json").unwrap();
        let lines: Vec<Option<usize>> = found.iter().map(|r| r.0).collect();
        assert_eq!(lines, [Some(2), Some(4)]);
        assert_eq!(found[1].1["key"], 2);
        let doc = records("{\"goal\": \"g\",\n\"tasks\": [\n{\"a\": 1}]}", "t.json").unwrap();
        assert_eq!(doc[0].0, Some(3));
        let lines = record_lines("\u{feff}{\"a\": 1}\n\n{\"a\": 2}\n", "f.jsonl").unwrap();
        assert_eq!(lines.iter().map(|r| r.0).collect::<Vec<_>>(), [Some(1), Some(3)]);
        let err = record_lines("{\"a\": 1}\n{oops\n", "f.jsonl").unwrap_err();
        assert_eq!(err.line, Some(2));
    }

    #[test]
    fn x4_json_lines_with_a_byte_order_mark_parse() {
        let defaults = ItemDefaults { source: "inbox".into(), project: String::new() };
        let items = parse_lines(
            "\u{feff}{\"title\": \"first\"}\r\n{\"title\": \"second\"}\r\n",
            "in.jsonl",
            &defaults,
        )
        .unwrap();
        let titles: Vec<&str> = items.iter().map(|i| i.title.as_str()).collect();
        assert_eq!(titles, ["first", "second"]);
    }
}

//! The Markdown task-line format (X3), read and written, round-trip safe.
//!
//! ```text
//! - [ ] [T-501] 下書き生成 | PJ:PJ-03 | 依存:T-500 | 分類:制作/記事 | 担当:qiita-writer | 🤖
//! ```
//!
//! `- [x]` is done. A segment `key:value` sets a field (Japanese or English key); `🤖` or
//! `【夜間AI可】` anywhere after the id is tag `ai`; `⚠️` followed within 25 characters by `対外`,
//! `承認必須`, `不可逆`, `支出`, `本番` or `external` is tag `external`. Any other segment is a
//! free tag, but a segment of several words right after the title (`compare A | B options`) is
//! still the title's text: a tag is one word. Lines that are not `- [ ]` / `- [x]` list items
//! (headings, prose, links) are ignored. In the title and values, `\|`, `\\` and `\n` stand for
//! `|`, `\` and a line break, and `\🤖`, `\【` and `\⚠` for a marker's first character that is
//! text, not a tag: [`render`] writes the tags in their own segments and escapes the markers in a
//! title, so that a title such as `fix 🤖 emoji rendering` reads back without a tag (X3, M8).

use crate::error::InputError;
use crate::format::{ItemDefaults, finish_item, parse_bool, parse_date, parse_timestamp, split_refs};
use crate::id::TaskId;
use crate::item::Item;
use crate::task::{Status, TAG_AI, TAG_EXTERNAL, Tags, Task};

/// The night-run marker that makes a task `ai`, as 🤖 does.
const AI_NIGHT: &str = "【夜間AI可】";

/// Words that, within 25 characters after ⚠️, make a task `external`.
const EXTERNAL_WORDS: [&str; 6] = ["対外", "承認必須", "不可逆", "支出", "本番", "external"];

/// Parses the task lines of a Markdown file.
///
/// # Errors
///
/// An [`InputError`] for a malformed checkbox, a malformed id, an empty title, an unknown field
/// or a bad value, at the line where it stands.
pub fn parse(text: &str, file: &str, defaults: &ItemDefaults) -> Result<Vec<Item>, InputError> {
    let mut items = Vec::new();
    for (index, line) in crate::error::without_bom(text).lines().enumerate() {
        let number = index + 1;
        if let Some(item) =
            parse_line(line, number).map_err(|reason| InputError::new(file, Some(number), reason))?
        {
            items.push(finish_item(item, defaults, file)?);
        }
    }
    Ok(items)
}

/// Parses one line: `Ok(None)` when it is not a task line.
fn parse_line(line: &str, number: usize) -> Result<Option<Item>, String> {
    let trimmed = line.trim_start();
    let Some(after_bullet) = trimmed.strip_prefix("- [").or_else(|| trimmed.strip_prefix("* [")) else {
        return Ok(None);
    };
    let mut chars = after_bullet.chars();
    let (mark, close) = (chars.next(), chars.next());
    let rest = chars.as_str();
    let done = match (mark, close) {
        (Some(' '), Some(']')) => false,
        (Some('x' | 'X'), Some(']')) => true,
        (Some(other), Some(']')) if rest.is_empty() || rest.starts_with(' ') => {
            return Err(format!("malformed checkbox '[{other}]' (expected '- [ ]' or '- [x]')"));
        }
        // A list item that starts with a link, such as `- [docs](…)`: not a task line.
        _ => return Ok(None),
    };
    let mut rest = rest.trim_start();
    let mut item = Item { line: Some(number), ..Item::default() };

    if let Some(inner) = rest.strip_prefix('[')
        && let Some(end) = inner.find(']')
    {
        let candidate = &inner[..end];
        let looks_like_id =
            candidate.trim_start().starts_with("T-") || candidate.trim_start().starts_with("t-");
        if looks_like_id && !inner[end + 1..].starts_with('(') {
            if TaskId::parse(candidate).is_none() {
                return Err(format!("malformed id '[{candidate}]' (expected the form [T-0001])"));
            }
            item.ref_id = Some(candidate.trim().to_owned());
            rest = &inner[end + 1..];
        }
        // Any other bracket (`[WIP]`, a link) is part of the title.
    } else if let Some(inner) = rest.strip_prefix('[')
        && (inner.starts_with("T-") || inner.starts_with("t-"))
        && inner[2..].starts_with(|c: char| c.is_ascii_digit())
    {
        // `[T-232 title`: an id whose bracket was never closed, not a title.
        let candidate: String = inner.chars().take_while(|c| !c.is_whitespace()).collect();
        return Err(format!("malformed id '[{candidate}' (no closing ']'; expected the form [T-0001])"));
    }

    let segments = split_segments(rest);
    // The title runs on over the segments of several words that follow it (`compare A | B
    // options`): such a segment is neither a field, nor markers, nor a (one-word) free tag.
    let title_len = 1 + segments[1..].iter().take_while(|s| is_title_text(s.trim())).count();
    // Markers count in the title and in bare segments, not inside `key:value` values (a body
    // quoting 🤖 does not make the task an AI task), nor when escaped (`\🤖`, as `render`
    // writes a title's).
    let mut tags = Tags::new();
    for segment in
        segments.iter().enumerate().filter(|(i, s)| *i == 0 || split_key(s.trim()).is_none()).map(|(_, s)| s)
    {
        let segment = unescaped_markers(segment);
        if has_ai_marker(&segment) {
            tags.insert(TAG_AI);
        }
        if has_external_marker(&segment) {
            tags.insert(TAG_EXTERNAL);
        }
    }
    // Blank after unescaping too: `- [ ] \n` is a line break, not a title.
    let title = unescape(segments[..title_len].join("|").trim());
    if title.trim().is_empty() {
        return Err("empty title: a task line needs text after the checkbox".to_owned());
    }
    item.title = title;
    item.status = done.then_some(Status::Done);
    for segment in segments.iter().skip(title_len) {
        let segment = segment.trim();
        if segment.is_empty() {
            continue;
        }
        if let Some((key, value)) = split_key(segment) {
            set_field(&mut item, &mut tags, key, &unescape(value.trim()))?;
        } else if !is_marker_segment(segment) {
            tags.insert(unescape(segment).trim_start_matches('#'));
        }
    }
    for tag in item.tags.iter() {
        tags.insert(tag);
    }
    item.tags = tags;
    Ok(Some(item))
}

/// Whether the text has 🤖 or 【夜間AI可】.
fn has_ai_marker(text: &str) -> bool {
    text.contains('🤖') || text.contains(AI_NIGHT)
}

/// Whether the text has ⚠️ followed within 25 characters by one of the external words.
fn has_external_marker(text: &str) -> bool {
    text.match_indices('⚠').any(|(at, warn)| {
        let after: String = text[at + warn.len()..].trim_start_matches('\u{FE0F}').chars().take(25).collect();
        EXTERNAL_WORDS.iter().any(|w| after.contains(w))
    })
}

/// A segment that only carries markers (🤖, 【夜間AI可】, ⚠️…): not a free tag.
fn is_marker_segment(segment: &str) -> bool {
    let segment = unescaped_markers(segment);
    has_ai_marker(&segment) || segment.contains('⚠')
}

/// A bare segment of several words: text, not a field, markers or a free tag.
fn is_title_text(segment: &str) -> bool {
    segment.contains(char::is_whitespace) && split_key(segment).is_none() && !is_marker_segment(segment)
}

/// The characters a marker starts with, which a backslash before them makes text.
const MARKER_STARTS: [char; 3] = ['🤖', '【', '⚠'];

/// The text with each escaped character that starts a marker (`\🤖`, `\【`, `\⚠`) replaced by
/// `_`, so that the marker is not found; as many characters as before, for the 25 of ⚠️.
fn unescaped_markers(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('\\') {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '\\'
            && let Some(next) = chars.next()
        {
            out.push(if MARKER_STARTS.contains(&next) { '_' } else { next });
        }
    }
    out.into()
}

/// Splits on unescaped `|`, keeping escapes for [`unescape`].
fn split_segments(text: &str) -> Vec<&str> {
    let mut segments = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '|' => {
                segments.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    segments.push(&text[start..]);
    segments
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(other @ ('|' | '\\' | '🤖' | '【' | '⚠')) => out.push(other),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '|' => out.push_str("\\|"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            _ => out.push(c),
        }
    }
    out
}

/// A title as [`escape`] writes a value, and with the first character of every marker (🤖,
/// 【夜間AI可】, ⚠) escaped: the title's markers are text, its tags have their own segments.
fn escape_title(title: &str) -> String {
    let mut out = String::with_capacity(title.len());
    for (at, c) in title.char_indices() {
        match c {
            '🤖' | '⚠' => out.push('\\'),
            '【' if title[at..].starts_with(AI_NIGHT) => out.push('\\'),
            _ => {}
        }
        out.push_str(&escape(c.encode_utf8(&mut [0; 4])));
    }
    out
}

/// `key:value` (or `key：value`) when the key is one word starting with a letter; `None` for
/// free text such as `10:30`.
fn split_key(segment: &str) -> Option<(&str, &str)> {
    let at = segment.find([':', '：'])?;
    let key = segment[..at].trim();
    let sep = segment[at..].chars().next()?.len_utf8();
    let word = key.chars().next().is_some_and(char::is_alphabetic)
        && key.chars().count() <= 16
        && !key.contains(char::is_whitespace);
    word.then(|| (key, &segment[at + sep..]))
}

/// The field a segment key names, in Japanese or English.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Project,
    Deps,
    Type,
    Assignee,
    Due,
    Source,
    Status,
    Priority,
    NotBefore,
    Action,
    Body,
    Evidence,
    Tags,
    Result,
    Correction,
    RunAt,
    Failures,
    Refresh,
    Run,
    ByPerson,
}

/// The field a Japanese key that is none means, if it plainly means one: a field's key with one
/// character more (依存先, 担当者; 担当部署 and 実行環境 are words of their own), or a common
/// word for one.
fn near_field(key: &str) -> Option<&'static str> {
    const WORDS: [(&str, &str); 10] = [
        ("期日", "期限"),
        ("締切", "期限"),
        ("締め切り", "期限"),
        ("種別", "分類"),
        ("種類", "分類"),
        ("カテゴリ", "分類"),
        ("ステータス", "状態"),
        ("優先", "優先度"),
        ("優先順位", "優先度"),
        ("プロジェクト", "案件"),
    ];
    JAPANESE_KEYS
        .into_iter()
        .find(|field| key.starts_with(field) && key.chars().count() == field.chars().count() + 1)
        .or_else(|| WORDS.iter().find(|(word, _)| *word == key).map(|(_, field)| *field))
}

/// The Japanese keys of [`field_of`].
const JAPANESE_KEYS: [&str; 19] = [
    "案件",
    "依存",
    "分類",
    "担当",
    "期限",
    "発生源",
    "状態",
    "優先度",
    "開始",
    "内容",
    "根拠",
    "タグ",
    "実行結果",
    "修正指示",
    "実行日時",
    "失敗回数",
    "集約",
    "実行",
    "人が記入",
];

fn field_of(key: &str) -> Option<Field> {
    let field = match key.to_lowercase().as_str() {
        "pj" | "project" | "案件" => Field::Project,
        "依存" | "deps" => Field::Deps,
        "分類" | "type" => Field::Type,
        "担当" | "assignee" => Field::Assignee,
        "期限" | "due" => Field::Due,
        "発生源" | "source" => Field::Source,
        "状態" | "status" => Field::Status,
        "優先度" | "priority" => Field::Priority,
        "開始" | "not_before" => Field::NotBefore,
        "ai機能" | "action" => Field::Action,
        "内容" | "body" => Field::Body,
        "根拠" | "evidence" => Field::Evidence,
        "タグ" | "tags" => Field::Tags,
        "実行結果" | "result" => Field::Result,
        "修正指示" | "correction" => Field::Correction,
        "実行日時" | "run_at" => Field::RunAt,
        "失敗回数" | "failures" => Field::Failures,
        "集約" | "refresh" => Field::Refresh,
        "実行" | "run" => Field::Run,
        "人が記入" | "by_person" => Field::ByPerson,
        _ => return None,
    };
    Some(field)
}

fn set_field(item: &mut Item, tags: &mut Tags, key: &str, value: &str) -> Result<(), String> {
    let Some(field) = field_of(key) else {
        // `https://…` and the like are free text, not a field.
        if key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !value.starts_with("//") {
            return Err(format!(
                "unknown field '{key}' (known: PJ, 依存/deps, 分類/type, 担当/assignee, 期限/due, 発生源/source, 状態/status, …)"
            ));
        }
        // A field's Japanese key with a character more (依存先, 担当者) or a common word for one
        // (期日, 締切) is a misspelt field, not a tag: it would drop the deps, assignee or due date
        // without a word. Any other word is a tag of its own (発生日:…, 担当部署:…).
        if let Some(near) = near_field(key) {
            return Err(format!(
                "unknown field '{key}' (did you mean {near}? a tag of your own with this word goes in タグ:…)"
            ));
        }
        tags.insert(&format!("{key}:{value}"));
        return Ok(());
    };
    match field {
        Field::Project => item.project = value.to_owned(),
        Field::Deps => item.deps = split_refs(value),
        Field::Type => item.work_type = value.to_owned(),
        Field::Assignee => item.assignee = value.to_owned(),
        Field::Due => item.due = Some(parse_date(value)?),
        Field::Source => item.source = value.to_owned(),
        Field::Status => {
            item.status = Some(Status::parse(value).ok_or_else(|| format!("'{value}' is not a status"))?);
        }
        Field::Priority => {
            item.priority = value.parse().map_err(|_| format!("priority '{value}' is not an integer"))?;
        }
        Field::NotBefore => item.not_before = Some(parse_timestamp(value)?),
        Field::Action => item.action = value.to_owned(),
        Field::Body => item.body = value.to_owned(),
        Field::Evidence => item.evidence = value.to_owned(),
        Field::Tags => {
            for tag in Tags::parse_list(value).iter() {
                tags.insert(tag);
            }
        }
        Field::Result => item.result = value.to_owned(),
        Field::Correction => item.correction = value.to_owned(),
        Field::RunAt => item.run_at = Some(parse_timestamp(value)?),
        Field::Failures => {
            item.failures = value.parse().map_err(|_| format!("failures '{value}' is not a count"))?;
        }
        Field::Refresh => item.refresh = parse_bool(value)?,
        Field::Run => item.run = parse_bool(value)?,
        Field::ByPerson => item.person_cells = crate::authority::PersonCells::parse_names([value])?,
    }
    Ok(())
}

/// What writing the ledger back into a Markdown file does (X6): the file's new text and the
/// lines that leave it for the done file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBack {
    /// The file's new text: every byte kept (BOM, line endings, comments, blank lines, order)
    /// but the task lines whose row changed, and without the lines moved out.
    pub text: String,
    /// The task lines of rows now `done`, checked, in file order and without line endings, for
    /// the done file.
    pub done: Vec<String>,
    /// Task lines changed in place (checkbox or 状態).
    pub rewritten: usize,
}

impl WriteBack {
    /// Whether the file stays as it is.
    pub fn is_noop(&self) -> bool {
        self.done.is_empty() && self.rewritten == 0
    }
}

/// What a line is written back from: its row's status, and a link to the row's result when the
/// source asks for one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowState {
    /// The row's status.
    pub status: Status,
    /// Written as the line's `実行結果` (the row's result, when it is a link).
    pub link: Option<String>,
}

/// Writes the ledger's state back into a Markdown file's task lines (X6): `row_of` gives the
/// state of the row a line's dedupe key names (`None`: no row, the line is left alone). A line
/// whose row is `done` is checked and moved out (for the done file); another line gets the row's
/// status as its `状態` segment (removed again when the row is back to `pending`); a link, when
/// given, is written as `実行結果` (never removed). A line a person checked is never unchecked.
/// Every other byte of the file stays as it was.
pub fn write_back(
    text: &str,
    defaults: &ItemDefaults,
    row_of: &dyn Fn(&str) -> Option<RowState>,
) -> WriteBack {
    let (bom, body) = match text.strip_prefix('\u{feff}') {
        Some(rest) => ("\u{feff}", rest),
        None => ("", text),
    };
    let mut out = WriteBack { text: String::with_capacity(text.len()), ..WriteBack::default() };
    out.text.push_str(bom);
    for (index, raw) in body.split_inclusive('\n').enumerate() {
        let line = raw.strip_suffix('\n').map_or(raw, |l| l.strip_suffix('\r').unwrap_or(l));
        let eol = &raw[line.len()..];
        let state = match parse_line(line, index + 1) {
            Ok(Some(item)) => {
                let source = if item.source.trim().is_empty() { &defaults.source } else { &item.source };
                row_of(&crate::key::dedupe_key(source, &item.title))
            }
            _ => None,
        };
        let Some(RowState { status, link }) = state else {
            out.text.push_str(raw);
            continue;
        };
        let linked = |line: &str| match &link {
            Some(link) => with_result(line, link),
            None => line.to_owned(),
        };
        match status {
            Status::Done => out.done.push(linked(&with_status(&checked(line), None))),
            status => {
                let person_checked = checked(line) == line;
                let want = (status != Status::Pending && !person_checked).then_some(status);
                let new = linked(&if person_checked { line.to_owned() } else { with_status(line, want) });
                out.rewritten += usize::from(new != line);
                out.text.push_str(&new);
                out.text.push_str(eol);
            }
        }
    }
    out
}

/// The line with its `実行結果` (or `result`) segment saying `link`, added when missing.
fn with_result(line: &str, link: &str) -> String {
    let at = |part: &str| part.as_ptr() as usize - line.as_ptr() as usize;
    let escaped = escape(link);
    let segments = split_segments(line);
    let existing = segments.iter().skip(1).find_map(|segment| {
        let (key, value) = split_key(segment.trim())?;
        (field_of(key) == Some(Field::Result)).then_some(value.trim())
    });
    match existing {
        Some(value) if unescape(value) == link => line.to_owned(),
        Some(value) => format!("{}{escaped}{}", &line[..at(value)], &line[at(value) + value.len()..]),
        None => format!("{} | 実行結果:{escaped}", line.trim_end()),
    }
}

/// The line with its checkbox ticked.
fn checked(line: &str) -> String {
    let start = line.len() - line.trim_start().len();
    let mut out = line.to_owned();
    if line[start..].get(2..4) == Some("[ ") {
        out.replace_range(start + 3..start + 4, "x");
    }
    out
}

/// The line with its `状態` (or `status`) segment saying `status`, or without one for `None`.
fn with_status(line: &str, status: Option<Status>) -> String {
    let at = |part: &str| part.as_ptr() as usize - line.as_ptr() as usize;
    let segments = split_segments(line);
    let existing = segments.iter().enumerate().skip(1).find_map(|(i, segment)| {
        let (key, value) = split_key(segment.trim())?;
        (field_of(key) == Some(Field::Status)).then_some((i, key, value.trim()))
    });
    match (existing, status) {
        (None, None) => line.to_owned(),
        (None, Some(status)) => format!("{} | 状態:{}", line.trim_end(), status.ja()),
        (Some((_, key, value)), Some(status)) => {
            let label = if key.is_ascii() { status.as_str() } else { status.ja() };
            if Status::parse(value) == Some(status) {
                return line.to_owned();
            }
            let start = at(value);
            format!("{}{label}{}", &line[..start], &line[start + value.len()..])
        }
        (Some((i, _, _)), None) => {
            // From the `|` before the segment to the `|` after it (or the end of the line).
            let pipe = at(segments[i]) - 1;
            match segments.get(i + 1) {
                Some(next) => format!("{}{}", &line[..pipe], &line[at(next) - 1..]),
                None => line[..pipe].trim_end().to_owned(),
            }
        }
    }
}

/// Renders tasks as Markdown task lines, one per task, in the given order.
pub fn render(tasks: &[Task]) -> String {
    let mut out = String::new();
    for task in tasks {
        render_line(task, &mut out);
        out.push('\n');
    }
    out
}

fn render_line(task: &Task, out: &mut String) {
    use std::fmt::Write as _;
    let done = task.status == Status::Done;
    let _ = write!(out, "- [{}] [{}] {}", if done { 'x' } else { ' ' }, task.id, escape_title(&task.title));
    let mut segment = |key: &str, value: &str| {
        if !value.is_empty() {
            let _ = write!(out, " | {key}:{}", escape(value));
        }
    };
    segment("PJ", &task.project);
    if !matches!(task.status, Status::Pending | Status::Done) {
        segment("状態", task.status.as_str());
    }
    let deps: Vec<String> = task.deps.iter().map(ToString::to_string).collect();
    segment("依存", &deps.join(","));
    segment("分類", &task.work_type);
    segment("担当", &task.assignee);
    segment("期限", &task.due.map(|d| d.to_string()).unwrap_or_default());
    segment("発生源", &task.source);
    if task.priority != 0 {
        segment("優先度", &task.priority.to_string());
    }
    segment("開始", &task.not_before.map(|t| t.to_string()).unwrap_or_default());
    segment("AI機能", &task.action);
    segment("内容", &task.body);
    segment("根拠", &task.evidence);
    segment("実行結果", &task.result);
    segment("修正指示", &task.correction);
    segment("実行日時", &task.run_at.map(|t| t.to_string()).unwrap_or_default());
    if task.failures != 0 {
        segment("失敗回数", &task.failures.to_string());
    }
    if task.refresh {
        segment("集約", "true");
    }
    if task.run {
        segment("実行", "true");
    }
    segment("人が記入", &task.person_cells.to_string());
    let free: Vec<&str> = task.tags.iter().filter(|t| *t != TAG_AI && *t != TAG_EXTERNAL).collect();
    segment("タグ", &free.join(","));
    if task.tags.contains(TAG_AI) {
        out.push_str(" | 🤖");
    }
    if task.tags.contains(TAG_EXTERNAL) {
        out.push_str(" | ⚠️external");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ledger of seeds/004, verbatim.
    const SEED_004: &str = "\
- [ ] [T-500] 記事の調査      | PJ:PJ-03 | 分類:調査/記事 | 担当:qiita-writer | 🤖
- [ ] [T-501] 下書き生成      | PJ:PJ-03 | 依存:T-500 | 分類:制作/記事 | 担当:qiita-writer | 🤖
- [ ] [T-502] 品質ゲート      | PJ:PJ-03 | 依存:T-501 | 分類:制作/記事 | 担当:qiita-writer | 🤖
- [ ] [T-503] 台帳へ記録      | PJ:PJ-03 | 依存:T-502 | 分類:台帳 | 担当:secretary | 🤖
- [ ] [T-504] Qiitaへ投稿     | PJ:PJ-03 | 依存:T-503 | 分類:外部/投稿 | 担当:publisher | ⚠️対外公開
";

    fn defaults() -> ItemDefaults {
        ItemDefaults { source: "tasks".into(), project: String::new() }
    }

    fn statuses(pairs: &[(&str, Status)]) -> impl Fn(&str) -> Option<RowState> {
        let map: std::collections::HashMap<String, Status> =
            pairs.iter().map(|(title, status)| (crate::key::dedupe_key("tasks", title), *status)).collect();
        move |key| map.get(key).map(|status| RowState { status: *status, link: None })
    }

    #[test]
    fn x6_a_link_to_the_result_is_written_and_read_back() {
        let link = "https://example.test/pr/7";
        let row_of = |status: Status| {
            move |_: &str| Some(RowState { status, link: Some("https://example.test/pr/7".to_owned()) })
        };
        let back = write_back("- [ ] a | PJ:x\n", &defaults(), &row_of(Status::Review));
        assert_eq!(
            back.text,
            "- [ ] a | PJ:x | 状態:AI実行済(要確認) | 実行結果:https://example.test/pr/7\n"
        );
        let again = write_back(&back.text, &defaults(), &row_of(Status::Review));
        assert!(again.is_noop(), "{again:?}");
        let items = parse(&back.text, "t.md", &defaults()).unwrap();
        assert_eq!(items[0].result, link);
        let replaced = write_back("- [ ] a | result: old | PJ:x\n", &defaults(), &row_of(Status::Pending));
        assert_eq!(replaced.text, "- [ ] a | result: https://example.test/pr/7 | PJ:x\n");
        let done = write_back("- [ ] a\n", &defaults(), &row_of(Status::Done));
        assert_eq!(done.done, ["- [x] a | 実行結果:https://example.test/pr/7"]);
    }

    #[test]
    fn x6_seed_004_swept_to_the_end_leaves_t504_and_moves_the_rest() {
        let text = format!("# PJ-03 article\n\n<!-- kept -->\n{SEED_004}\ntrailing prose\n");
        let status_of = statuses(&[
            ("記事の調査", Status::Done),
            ("下書き生成", Status::Done),
            ("品質ゲート", Status::Done),
            ("台帳へ記録", Status::Done),
            ("Qiitaへ投稿", Status::Pending),
        ]);
        let back = write_back(&text, &defaults(), &status_of);
        let t504 = SEED_004.lines().nth(4).unwrap();
        assert_eq!(back.text, format!("# PJ-03 article\n\n<!-- kept -->\n{t504}\n\ntrailing prose\n"));
        assert_eq!(back.done.len(), 4);
        for (moved, original) in back.done.iter().zip(SEED_004.lines()) {
            assert_eq!(*moved, original.replacen("- [ ]", "- [x]", 1), "only the checkbox changes");
        }
        assert_eq!(back.rewritten, 0);
        // Written back again, nothing changes.
        let again = write_back(&back.text, &defaults(), &status_of);
        assert!(again.is_noop() && again.text == back.text);
    }

    #[test]
    fn x6_write_back_keeps_every_other_byte_bom_crlf_and_unknown_lines() {
        let text = "\u{feff}# 台帳\r\n\r\n- [ ] a | 状態:実行中 | PJ:x\r\n- [ ] unknown row\r\n- [x] b\r\n  - [ ] c | status: review\r\nno newline at the end";
        let status_of = statuses(&[("a", Status::Review), ("b", Status::Pending), ("c", Status::Pending)]);
        let back = write_back(text, &defaults(), &status_of);
        assert_eq!(
            back.text,
            "\u{feff}# 台帳\r\n\r\n- [ ] a | 状態:AI実行済(要確認) | PJ:x\r\n- [ ] unknown row\r\n- [x] b\r\n  - [ ] c\r\nno newline at the end"
        );
        assert_eq!(back.rewritten, 2, "a's status, c's status removed; b a person checked stays");
        let status_of = statuses(&[("c", Status::NeedsHuman)]);
        let back = write_back("- [ ] c | status: review | PJ:y\n", &defaults(), &status_of);
        assert_eq!(
            back.text, "- [ ] c | status: needs_human | PJ:y\n",
            "an English key gets the English name"
        );
        let back = write_back("- [ ] c | PJ:y\n", &defaults(), &status_of);
        assert_eq!(back.text, "- [ ] c | PJ:y | 状態:要人手\n");
        let items = parse(&back.text, "t.md", &defaults()).unwrap();
        assert_eq!(
            (items[0].title.as_str(), items[0].status),
            ("c", Some(Status::NeedsHuman)),
            "it reads back"
        );
    }

    #[test]
    fn x3_the_seed_004_ledger_parses_with_deps_and_tags() {
        let items = parse(SEED_004, "tasks.md", &defaults()).unwrap();
        assert_eq!(items.len(), 5);
        let t501 = &items[1];
        assert_eq!(t501.ref_id.as_deref(), Some("T-501"));
        assert_eq!(t501.title, "下書き生成");
        assert_eq!(t501.project, "PJ-03");
        assert_eq!(t501.deps, ["T-500"]);
        assert_eq!(t501.work_type, "制作/記事");
        assert_eq!(t501.assignee, "qiita-writer");
        assert_eq!(t501.source, "tasks");
        assert_eq!(t501.line, Some(2));
        for item in &items[..4] {
            assert_eq!(item.tags.to_list(), "ai", "{}", item.title);
        }
        assert_eq!(items[4].tags.to_list(), "external");
        assert_eq!(items[4].status, None);
    }

    #[test]
    fn x3_markers_keys_and_checkboxes() {
        let text = "# heading\nprose\n- [docs](http://example.test)\n\
            - [x] [T-1] done thing | 【夜間AI可】\n\
            * [ ] plain | ⚠️ needs 承認必須 first\n\
            - [ ] far | ⚠️ a warning that goes on and on and on, 対外\n\
            - [X] English keys | project:P | deps:T-1, T-2 | type:t | assignee:a | due:2026/12/01 | source:s | status:needs_human | priority:3\n";
        let items = parse(text, "f.md", &defaults()).unwrap();
        assert_eq!(items.len(), 4);
        assert_eq!(items[0].status, Some(Status::Done));
        assert!(items[0].tags.contains("ai"));
        assert!(items[1].tags.contains("external"), "承認必須 within 25 characters");
        assert!(!items[2].tags.contains("external"), "対外 is further than 25 characters away");
        let english = &items[3];
        assert_eq!(english.status, Some(Status::NeedsHuman), "状態 wins over the checkbox");
        assert_eq!(english.deps, ["T-1", "T-2"]);
        assert_eq!(english.due, Some(jiff::civil::date(2026, 12, 1)));
        assert_eq!((english.source.as_str(), english.priority), ("s", 3));
    }

    #[test]
    fn x4_malformed_lines_name_line_and_reason() {
        let cases = [
            ("ok\n- [?] what\n", 2, "malformed checkbox"),
            ("- [ ] [T-x] bad id\n", 1, "malformed id"),
            ("- [ ] [T-1000000000000000] too long\n", 1, "malformed id"),
            ("- [ ] \n", 1, "empty title"),
            // Found by fuzzing (fuzz/regressions/markdown): an escaped line break alone.
            ("- [ ] \\n\n", 1, "empty title"),
            ("- [ ] a\n- [ ] b | 期限:tomorrow\n", 2, "not a date"),
            ("- [ ] a | colour:red\n", 1, "unknown field 'colour'"),
            ("- [ ] a | 状態:finished\n", 1, "not a status"),
            ("- [ ] y | 依存先:T-999 | 担当者:alice\n", 1, "unknown field '依存先' (did you mean 依存?"),
            ("- [ ] y | 期日:2026-12-01\n", 1, "unknown field '期日' (did you mean 期限?"),
            ("- [ ] a\n- [ ] [T-232 missing bracket\n", 2, "malformed id '[T-232' (no closing ']'"),
            ("- [ ] y | 締切:2026-12-01\n", 1, "unknown field '締切' (did you mean 期限?"),
            ("- [ ] y | 優先順位:3\n", 1, "unknown field '優先順位' (did you mean 優先度?"),
        ];
        assert!(JAPANESE_KEYS.iter().all(|k| field_of(k).is_some()), "each is a field's key");
        // Other words, even near a field's key, stay tags.
        let tagged = parse(
            "- [ ] y | 発生日:3/1 | 内部:レビュー | 担当部署:経理 | 実行環境:本番\n",
            "t.md",
            &defaults(),
        )
        .unwrap();
        assert_eq!(tagged[0].tags.to_list(), "内部:レビュー,実行環境:本番,担当部署:経理,発生日:3/1");
        for (text, line, reason) in cases {
            let err = parse(text, "tasks.md", &defaults()).unwrap_err();
            assert_eq!(err.line, Some(line), "{text:?}: {err}");
            assert!(err.reason.contains(reason), "{text:?}: {err}");
            assert!(err.to_string().starts_with(&format!("tasks.md:{line}: ")));
        }
    }

    #[test]
    fn ordinary_checklist_lines_are_tasks() {
        let text =
            "- [ ] [WIP] fix parser\n- [ ] standup | 10:30\n- [ ] quote | 内容:the bot 🤖 said ⚠️本番 hi\n";
        let items = parse(text, "f.md", &defaults()).unwrap();
        assert_eq!(items[0].title, "[WIP] fix parser");
        assert_eq!(items[0].ref_id, None);
        assert_eq!(items[1].tags.to_list(), "10:30");
        assert!(items[2].tags.is_empty(), "markers inside a value are text, not tags");
        assert_eq!(items[2].body, "the bot 🤖 said ⚠️本番 hi");
    }

    #[test]
    fn x3_render_then_parse_gives_the_same_fields() {
        let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let mut task = Task::new(TaskId::parse("T-0042").unwrap(), "a | b \\ c", "src", now);
        task.project = "PJ-03".into();
        task.status = Status::Review;
        task.body = "line one\nline two | pipe, the bot 🤖 said".into();
        task.deps = vec![TaskId::parse("T-500").unwrap(), TaskId::new(7)];
        task.tags = Tags::parse_list("ai,external,heavy");
        task.due = Some(jiff::civil::date(2026, 12, 24));
        task.priority = -2;
        task.correction = "fix: the title".into();
        task.failures = 2;
        task.run = true;
        let text = render(std::slice::from_ref(&task));
        let items = parse(&text, "x.md", &defaults()).unwrap();
        let item = &items[0];
        assert_eq!(item.ref_id.as_deref(), Some("T-0042"));
        assert_eq!(item.title, task.title);
        assert_eq!(item.body, task.body);
        assert_eq!(item.status, Some(Status::Review));
        assert_eq!(item.deps, ["T-500", "T-0007"]);
        assert_eq!(item.tags, task.tags);
        assert_eq!((item.due, item.priority, item.failures, item.run), (task.due, -2, 2, true));
        assert_eq!(item.correction, task.correction);
        assert_eq!(item.source, "src");
    }

    fn task_titled(title: &str) -> Task {
        let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        Task::new(TaskId::parse("T-0001").unwrap(), title, "t", now)
    }

    #[test]
    fn x3_m8_markers_in_a_title_stay_title_text_through_export_and_import() {
        let titles = [
            "fix 🤖 emoji rendering",
            "【夜間AI可】の意味を書く",
            "⚠️対外 wording in the banner",
            "explain ⚠️ external links",
            "a \\🤖 after a backslash",
            "🤖",
        ];
        for title in titles {
            let task = task_titled(title);
            let text = render(std::slice::from_ref(&task));
            let items = parse(&text, "x.md", &defaults()).unwrap();
            assert_eq!(items[0].title, title, "{text}");
            assert!(items[0].tags.is_empty(), "no tag was set: {text}");
            // Imported again, the line is written the same (M8: nothing changes).
            let mut again = task_titled(&items[0].title);
            again.tags = items[0].tags.clone();
            assert_eq!(render(&[again]), text);
        }
        // A tagged task keeps its tags, and the markers in its title stay text.
        let mut task = task_titled("fix 🤖 emoji");
        task.tags = Tags::parse_list("ai,external");
        let items = parse(&render(std::slice::from_ref(&task)), "x.md", &defaults()).unwrap();
        assert_eq!((items[0].title.as_str(), &items[0].tags), ("fix 🤖 emoji", &task.tags));
        // Written by a person, a marker anywhere after the id is still a tag (X3).
        let items = parse(
            "- [ ] [T-1] 🤖 記事の調査\n- [ ] 【夜間AI可】 整理\n- [ ] ⚠️対外 投稿\n",
            "h.md",
            &defaults(),
        )
        .unwrap();
        let tags: Vec<String> = items.iter().map(|i| i.tags.to_list()).collect();
        assert_eq!(tags, ["ai", "ai", "external"]);
    }

    #[test]
    fn x3_a_bar_followed_by_words_is_title_text() {
        let text = "- [ ] compare A | B options\n\
            - [ ] compare A | B options | PJ:x | heavy | 🤖\n\
            - [ ] standup | 10:30\n\
            - [ ] a | PJ:x | high priority\n";
        let items = parse(text, "p.md", &defaults()).unwrap();
        assert_eq!(items[0].title, "compare A | B options");
        assert!(items[0].tags.is_empty());
        assert_eq!(items[1].title, "compare A | B options");
        assert_eq!((items[1].project.as_str(), items[1].tags.to_list().as_str()), ("x", "ai,heavy"));
        assert_eq!(
            (items[2].title.as_str(), items[2].tags.to_list().as_str()),
            ("standup", "10:30"),
            "one word is a free tag"
        );
        assert_eq!(
            (items[3].title.as_str(), items[3].tags.to_list().as_str()),
            ("a", "high-priority"),
            "after a field, words are a free tag"
        );
        // Written back, the line keeps its title and gets its status.
        let row_of = |key: &str| {
            (key == crate::key::dedupe_key("tasks", "compare A | B options"))
                .then_some(RowState { status: Status::Review, link: None })
        };
        let back = write_back("- [ ] compare A | B options\n", &defaults(), &row_of);
        assert_eq!(back.text, "- [ ] compare A | B options | 状態:AI実行済(要確認)\n");
        // Exported, the bar is escaped and read back as it was.
        let task = task_titled("compare A | B options");
        let items = parse(&render(&[task]), "x.md", &defaults()).unwrap();
        assert_eq!(items[0].title, "compare A | B options");
    }

    proptest::proptest! {
        #[test]
        fn x3_m8_any_title_and_tags_survive_render_then_parse(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "🤖", "【夜間AI可】", "【", "⚠️", "⚠", "対外", "external", "本番", "|", "\\", "\\n",
                    "\\|", " ", " | ", "B options", "a", "PJ:x", "key:value", "10:30", "#tag", "[T-1]",
                    "\n", "タグ", "：", "\u{FE0F}",
                ]),
                1..12,
            ),
            tags in proptest::sample::subsequence(vec!["ai", "external", "heavy", "🤖bot", "a:b"], 0..=5),
        ) {
            // Titles are read trimmed, and a task has one.
            let title = match parts.concat().trim() {
                "" => "a".to_owned(),
                title => title.to_owned(),
            };
            let mut task = task_titled(&title);
            task.tags = tags.into_iter().collect();
            let text = render(std::slice::from_ref(&task));
            let items = parse(&text, "x.md", &defaults()).unwrap();
            proptest::prop_assert_eq!(&items[0].title, &title, "{}", text);
            proptest::prop_assert_eq!(&items[0].tags, &task.tags, "{}", text);
        }
    }

    #[test]
    fn x4_a_byte_order_mark_does_not_hide_the_first_task() {
        let defaults = ItemDefaults { source: "plan".into(), project: String::new() };
        let items = parse("\u{feff}- [ ] first\r\n- [ ] second\r\n", "tasks.md", &defaults).unwrap();
        let titles: Vec<(&str, Option<usize>)> = items.iter().map(|i| (i.title.as_str(), i.line)).collect();
        assert_eq!(titles, [("first", Some(1)), ("second", Some(2))]);
    }
}

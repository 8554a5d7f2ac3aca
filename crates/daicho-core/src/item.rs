//! Incoming items: what a source, a push or an import offers to the ledger.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use jiff::Timestamp;
use jiff::civil::Date;

use crate::error::InputError;
use crate::format::ItemText;

use crate::task::{Status, Tags};

/// One incoming task as read from a source, before [`crate::merge::merge_plan`] decides on it.
///
/// `ref_id` is the id as written in the source: a ledger id (`T-500`, kept when free) or a
/// source-local one (`t1` in a tasks.json) that `deps` of other items in the same batch may
/// name. `deps` are such references too. `line` is the item's line in its file, for errors.
/// `file` and `line` say where the item stands, for errors. The fields `run`, `result`, `run_at`, `correction`, `failures` and `person_cells` are only used when the item
/// creates a new row (an import of an exported ledger); a patch never carries them (M4).
///
/// Its serde form (every field optional, `file` left out) is how a run's found tasks wait in
/// the run-end spool until they are pushed (X2, S14).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Item {
    /// The id as written in the source (`T-500`, `t1`), if any.
    pub ref_id: Option<String>,
    /// The file the item came from, if any (errors name it).
    #[serde(skip)]
    pub file: Option<std::sync::Arc<str>>,
    /// The 1-based line of the item in its file, if it came from one.
    pub line: Option<usize>,
    /// The project (案件).
    pub project: String,
    /// The status the source gives; new rows default to `pending`.
    pub status: Option<Status>,
    /// The ▶ run checkbox (new rows only).
    pub run: bool,
    /// タスク.
    pub title: String,
    /// 内容.
    pub body: String,
    /// 発生源.
    pub source: String,
    /// 根拠.
    pub evidence: String,
    /// 期限.
    pub due: Option<Date>,
    /// 担当.
    pub assignee: String,
    /// 分類.
    pub work_type: String,
    /// Priority; 0 counts as empty.
    pub priority: i64,
    /// Earliest start.
    pub not_before: Option<Timestamp>,
    /// AI機能.
    pub action: String,
    /// 実行結果 (new rows only).
    pub result: String,
    /// 実行日時 (new rows only).
    pub run_at: Option<Timestamp>,
    /// 修正指示 (new rows only).
    pub correction: String,
    /// References to the tasks this one waits for.
    pub deps: Vec<String>,
    /// Tags.
    pub tags: Tags,
    /// Failure count (new rows only).
    pub failures: u32,
    /// The cells a person wrote (`by_person`; new rows only): an export of the ledger carries
    /// them so that `import --ledger` keeps them the person's (S13). Only a person's batch sets
    /// them.
    pub person_cells: crate::authority::PersonCells,
    /// A row a person writes by hand (`daicho add`): a new row is theirs in every cell they
    /// wrote, and in its action and tags even empty ([`crate::authority::PersonCells`]), so no
    /// source overwrites what they wrote nor routes their manual task to an executor (S13, M5).
    /// An existing row is filled as by any item. Only a person's batch keeps it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub by_hand: bool,
    /// An aggregate whose body and evidence overwrite the row's on every sync (M6).
    pub refresh: bool,
    /// The text the dedupe key is made from when it is not `title`: an aggregate's title with
    /// `{count}` in it (M10), so that the row stays the same row as the count changes.
    pub key_title: Option<String>,
}

impl Item {
    /// An item with a title and a source, every other field empty.
    pub fn new(title: &str, source: &str) -> Item {
        Item { title: title.to_owned(), source: source.to_owned(), ..Item::default() }
    }

    /// Whether the item is blank: no id and no title (M9: a blank line is not a task).
    pub fn is_blank(&self) -> bool {
        self.title.trim().is_empty() && self.ref_id.as_deref().is_none_or(|r| r.trim().is_empty())
    }
}

/// The items of one input, in order: held whole, or kept as the text they were read from and
/// parsed again a range at a time ([`ItemText`]), so that a large input never exists as one
/// `Vec<Item>` (I1: an upsert's memory grows with the range it writes, not with the input).
#[derive(Clone, Debug, Default)]
pub struct Items {
    parts: Vec<Part>,
    len: usize,
}

#[derive(Clone, Debug)]
enum Part {
    Held(Vec<Item>),
    Text(Arc<ItemText>),
}

impl Part {
    fn len(&self) -> usize {
        match self {
            Part::Held(items) => items.len(),
            Part::Text(text) => text.len(),
        }
    }
}

impl Items {
    /// The number of items.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds items after those already here.
    pub fn push(&mut self, items: Vec<Item>) {
        self.len += items.len();
        self.parts.push(Part::Held(items));
    }

    /// Adds `other`'s items after those already here.
    pub fn append(&mut self, other: Items) {
        self.len += other.len;
        self.parts.extend(other.parts);
    }

    /// Adds the items of a text after those already here.
    pub fn push_text(&mut self, text: ItemText) {
        self.len += text.len();
        self.parts.push(Part::Text(Arc::new(text)));
    }

    /// The items at `range`: borrowed when they are held in one piece, else read (again).
    ///
    /// # Errors
    ///
    /// The [`InputError`] of an item that no longer reads (a text is checked whole when it is
    /// kept, so only a defect shows here).
    ///
    /// # Panics
    ///
    /// When `range` reaches past the items.
    pub fn range(&self, range: Range<usize>) -> Result<Cow<'_, [Item]>, InputError> {
        assert!(range.start <= range.end && range.end <= self.len, "a range of the items");
        let mut start = 0;
        let mut out: Vec<Item> = Vec::new();
        for part in &self.parts {
            let end = start + part.len();
            let (from, to) = (range.start.max(start), range.end.min(end));
            if from < to {
                match part {
                    Part::Held(items) if from == range.start && to == range.end => {
                        return Ok(Cow::Borrowed(&items[from - start..to - start]));
                    }
                    Part::Held(items) => out.extend_from_slice(&items[from - start..to - start]),
                    Part::Text(text) => out.extend(text.items(from - start..to - start)?),
                }
            }
            start = end;
        }
        Ok(Cow::Owned(out))
    }

    /// The item at `index`, if there is one and it reads (for messages about it).
    pub fn get(&self, index: usize) -> Option<Item> {
        (index < self.len)
            .then(|| self.range(index..index + 1).ok())
            .flatten()
            .and_then(|i| i.first().cloned())
    }
}

impl From<Vec<Item>> for Items {
    fn from(items: Vec<Item>) -> Items {
        let mut all = Items::default();
        all.push(items);
        all
    }
}

impl FromIterator<Item> for Items {
    fn from_iter<I: IntoIterator<Item = Item>>(items: I) -> Items {
        Items::from(items.into_iter().collect::<Vec<Item>>())
    }
}

//! The merge rules (M1–M9): sync and push are an upsert decided by one pure function.
//!
//! [`merge_plan`] takes the existing rows that matter (those whose key or id an incoming item
//! names; passing the whole ledger is also correct), the incoming items, `now` and the next free
//! id number, and returns what to add, what to patch and what to skip with a reason.
//!
//! A store makes the same decision in two halves so that a large batch never holds every row at
//! once: a [`Decider`] takes the input a range at a time with the rows that range matches, and
//! its [`Decided`] builds the plan of one range at a time ([`Decided::plan`]); the ranges'
//! plans together are [`merge_plan`]'s. The store applies them in one transaction and never
//! re-decides them.

use std::collections::{HashMap, HashSet};

use jiff::Timestamp;
use jiff::civil::Date;
use serde::Serialize;

use crate::authority::{self, Authority, FieldNote, PersonCells, SourceCell};
use crate::id::TaskId;
use crate::item::Item;
use crate::key::dedupe_key;
use crate::task::{Status, Tags, Task};

/// What to do with a batch of incoming items.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// New rows, ids assigned.
    pub add: Vec<Addition>,
    /// Empty cells of open rows to fill, and aggregate rows to refresh.
    pub patch: Vec<Patch>,
    /// Items that change nothing, each with its reason.
    pub skip: Vec<Skip>,
    /// Dependency references that name neither an item of the batch nor a ledger id.
    pub unresolved: Vec<UnresolvedDep>,
    /// The next free id number once the plan is applied.
    pub next_id: u64,
    /// Why the whole input is refused (S13, M1); a refused plan adds and patches nothing.
    pub refused: Option<Refused>,
    /// Person-only fields a pulled source's items carried; they are not written (S13).
    pub ignored: Vec<FieldNote>,
}

/// Why a whole input is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// An item carries a field only a person writes, and its writer is no person (S13).
    PersonField(FieldNote),
    /// An item names the id of a row that is another task: another key, another current title
    /// (an id is a label; the row's identity is its key, M1).
    IdOfAnotherTask {
        /// Index of the item in the input.
        index: usize,
        /// The id the item names.
        id: TaskId,
        /// The key of the row with that id.
        row_key: String,
        /// The item's own key.
        item_key: String,
    },
    /// Two items of one input name the same id.
    DuplicateId {
        /// Index of the second item.
        index: usize,
        /// Index of the first item.
        first_index: usize,
        /// The id as the second item writes it.
        reference: String,
    },
}

impl Refused {
    /// Index of the item the refusal is about.
    pub fn index(&self) -> usize {
        match self {
            Refused::PersonField(note) => note.index,
            Refused::IdOfAnotherTask { index, .. } | Refused::DuplicateId { index, .. } => *index,
        }
    }
}

impl Plan {
    /// Whether applying the plan changes nothing.
    pub fn is_noop(&self) -> bool {
        self.add.is_empty() && self.patch.is_empty()
    }
}

/// A new row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addition {
    /// The row to insert.
    pub task: Task,
    /// Index of the item in the input.
    pub index: usize,
    /// Line of the item in its file.
    pub line: Option<usize>,
}

/// A change to an existing open row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patch {
    /// The row to change.
    pub id: TaskId,
    /// Index of the item in the input.
    pub index: usize,
    /// Line of the item in its file.
    pub line: Option<usize>,
    /// The cells to write.
    pub fields: PatchFields,
}

/// The cells a sync may write into an existing row: its empty cells (M5), an aggregate's body,
/// evidence and counted title (M6, M10), and, from a person's own input only, the cells it says
/// that person wrote ([`PatchFields::bring_persons`], S13). `correction`, `result`, `failures`,
/// `status` and `run` have no place here, so no patch can ever carry them (M4).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PatchFields {
    /// The project, when the row had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The body: filled when empty, or refreshed (M6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The evidence: filled when empty, or refreshed (M6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// The due date, when the row had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due: Option<Date>,
    /// The assignee, when the row had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignee: Option<String>,
    /// The work type, when the row had none.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub work_type: Option<String>,
    /// The priority, when the row had 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// The earliest start, when the row had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Timestamp>,
    /// The action, when the row had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The deps, when the row had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deps: Option<Vec<TaskId>>,
    /// The tags, when the row had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Marks the row as an aggregate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh: Option<bool>,
    /// An aggregate's title with its new count (M10), while a person has not renamed it; or a
    /// person's title brought by their own input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The row's marks with the cells a person's own input (`import --ledger` of an export,
    /// its `by_person`) says that person wrote (S13).
    #[serde(rename = "by_person", skip_serializing_if = "Option::is_none")]
    pub person_cells: Option<PersonCells>,
}

impl PatchFields {
    /// Whether the patch writes nothing.
    pub fn is_empty(&self) -> bool {
        *self == PatchFields::default()
    }

    /// Whether the patch writes a value (not only a person's marks).
    fn writes_values(&self) -> bool {
        PatchFields { person_cells: None, ..self.clone() } != PatchFields::default()
    }

    /// What a person's own input brings into `row` (S13): each cell the item says that person
    /// wrote (`by_person`) and no person wrote in this row takes the item's value, and the
    /// row the item's marks; a cell a person wrote here keeps its value. A due date or earliest
    /// start the person emptied cannot be emptied by a patch, and other deps than the row's are
    /// not written over them, so such a cell stays the sources'.
    fn bring_persons(&mut self, row: &Task, item: &Item, deps: &[TaskId]) {
        fn text(current: &str, offered: &str) -> Option<String> {
            (current != offered).then(|| offered.to_owned())
        }
        let mut marks = row.person_cells;
        for cell in item.person_cells.iter().filter(|&cell| !row.person_cells.contains(cell)) {
            let brought = match cell {
                SourceCell::Project => {
                    self.project = text(&row.project, &item.project);
                    true
                }
                SourceCell::Title => {
                    self.title = text(&row.title, &item.title);
                    true
                }
                SourceCell::Body => {
                    self.body = text(&row.body, &item.body);
                    true
                }
                SourceCell::Evidence => {
                    self.evidence = text(&row.evidence, &item.evidence);
                    true
                }
                SourceCell::Assignee => {
                    self.assignee = text(&row.assignee, &item.assignee);
                    true
                }
                SourceCell::WorkType => {
                    self.work_type = text(&row.work_type, &item.work_type);
                    true
                }
                SourceCell::Action => {
                    self.action = text(&row.action, item.action.trim());
                    true
                }
                SourceCell::Priority => {
                    self.priority = (row.priority != item.priority).then_some(item.priority);
                    true
                }
                // Deps are filled as any source fills them (a row without deps), since the DAG
                // check before the write sees only those; marked when the row's are the item's.
                SourceCell::Deps => row.deps.is_empty() || row.deps == deps,
                SourceCell::Tags => {
                    self.tags = (row.tags != item.tags).then(|| item.tags.clone());
                    true
                }
                SourceCell::Due => {
                    self.due = item.due.filter(|_| row.due != item.due);
                    item.due.is_some() || row.due.is_none()
                }
                SourceCell::NotBefore => {
                    self.not_before = item.not_before.filter(|_| row.not_before != item.not_before);
                    item.not_before.is_some() || row.not_before.is_none()
                }
            };
            if brought {
                marks = marks.union(PersonCells::of([cell]));
            }
        }
        self.person_cells = (marks != row.person_cells).then_some(marks);
    }

    /// Drops what the patch would write into the cells a person wrote (S13, M5, M6).
    fn withhold(&mut self, theirs: PersonCells) {
        for cell in theirs.iter() {
            match cell {
                SourceCell::Project => self.project = None,
                SourceCell::Title => self.title = None,
                SourceCell::Body => self.body = None,
                SourceCell::Evidence => self.evidence = None,
                SourceCell::Due => self.due = None,
                SourceCell::Assignee => self.assignee = None,
                SourceCell::WorkType => self.work_type = None,
                SourceCell::Priority => self.priority = None,
                SourceCell::NotBefore => self.not_before = None,
                SourceCell::Action => self.action = None,
                SourceCell::Deps => self.deps = None,
                SourceCell::Tags => self.tags = None,
            }
        }
    }

    /// Writes the patch into `task` (the store calls this on the row it read in its transaction).
    /// A patch that changes what a person approved withdraws the approval (S2, S13): the run box
    /// is cleared with it, and the row waits in the approval queue again, so a producer never
    /// changes the content of an approved outbound action.
    pub fn apply_to(&self, task: &mut Task) {
        if self.writes_values() && !task.approved_by.is_empty() {
            task.approved_by.clear();
            task.run = false;
        }
        let PatchFields {
            project,
            body,
            evidence,
            due,
            assignee,
            work_type,
            priority,
            not_before,
            action,
            deps,
            tags,
            refresh,
            title,
            person_cells,
        } = self.clone();
        if let Some(v) = project {
            task.project = v;
        }
        if let Some(v) = body {
            task.body = v;
        }
        if let Some(v) = evidence {
            task.evidence = v;
        }
        if due.is_some() {
            task.due = due;
        }
        if let Some(v) = assignee {
            task.assignee = v;
        }
        if let Some(v) = work_type {
            task.work_type = v;
        }
        if let Some(v) = priority {
            task.priority = v;
        }
        if not_before.is_some() {
            task.not_before = not_before;
        }
        if let Some(v) = action {
            task.action = v;
        }
        if let Some(v) = deps {
            task.deps = v;
        }
        if let Some(v) = tags {
            task.tags = v;
        }
        if let Some(v) = refresh {
            task.refresh = v;
        }
        if let Some(v) = title {
            task.title = v;
        }
        if let Some(v) = person_cells {
            task.person_cells = v;
        }
    }
}

/// An item that changes nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip {
    /// Index of the item in the input.
    pub index: usize,
    /// Line of the item in its file.
    pub line: Option<usize>,
    /// The item's title as written.
    pub title: String,
    /// The row the item matched, if any.
    pub id: Option<TaskId>,
    /// Why nothing changes.
    pub reason: SkipReason,
}

/// Why an item changes nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// No title: a blank line is not a task (M9), and an id alone names no row's key.
    Blank,
    /// The same key came earlier in this input; the first wins (M7).
    DuplicateInInput {
        /// Index of the first item with the key.
        first_index: usize,
    },
    /// The matching row is `done`, `dropped` or `needs_human` and is never touched (M3).
    Closed(Status),
    /// The matching row already has every value the item offers (M5, M8).
    Unchanged,
    /// The item offers other values for cells the row already has; the row's are kept, since
    /// only empty cells are filled (M5); `status` among them when the item offers another status,
    /// which only a person or a run moves (S13).
    Kept(Vec<&'static str>),
}

impl SkipReason {
    /// The reason in words; the common ones (unchanged, blank) without an allocation, for a
    /// report of a large batch that skips every item.
    pub fn text(&self) -> std::borrow::Cow<'static, str> {
        match self {
            SkipReason::Blank => "blank: no title, so not a task".into(),
            SkipReason::Unchanged => "unchanged: the row already has these values".into(),
            other => other.to_string().into(),
        }
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::Blank | SkipReason::Unchanged => f.write_str(&self.text()),
            SkipReason::DuplicateInInput { first_index } => {
                write!(f, "duplicate key in this input; item #{} wins", first_index + 1)
            }
            SkipReason::Closed(status) => {
                write!(f, "row is {status}; closed rows are never touched")
            }
            SkipReason::Kept(fields) => {
                let cells: Vec<&str> = fields.iter().copied().filter(|&f| f != "status").collect();
                if !cells.is_empty() {
                    write!(
                        f,
                        "the row keeps its own {} (only empty cells are filled from a source)",
                        cells.join(", ")
                    )?;
                }
                if fields.contains(&"status") {
                    let sep = if cells.is_empty() { "" } else { "; " };
                    write!(f, "{sep}the row keeps its own status (only a person or a run moves a row)")?;
                }
                Ok(())
            }
        }
    }
}

/// A dependency reference that names neither an item of the batch nor a ledger id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnresolvedDep {
    /// Index of the item in the input.
    pub index: usize,
    /// Line of the item in its file.
    pub line: Option<usize>,
    /// The reference as written.
    pub reference: String,
}

/// Decides how `incoming` merges into the ledger (M1–M9).
///
/// `existing` must hold at least every row whose key equals an incoming item's key or whose id
/// equals an incoming `T-` id; other rows may be present and are ignored. `next_id` is the
/// ledger's id counter: numbers at or above it were never given (fresh ids also stay above every
/// row in `existing`). `now` stamps new rows.
///
/// - the key is `source|normalize(title)` (M1); an item whose key matches a row is that row;
/// - rows are never deleted: the plan has no deletions (M2);
/// - closed rows are skipped (M3);
/// - a patch only fills empty cells of an open row (M5) and never carries `correction`,
///   `result` or `failures` (M4, by the type [`PatchFields`]);
/// - a `refresh` item overwrites `body` and `evidence` of an open row (M6);
/// - the first item with a key wins (M7);
/// - applying the plan and merging the same input again adds and patches nothing (M8);
/// - blank items are skipped (M9).
///
/// A new row keeps the `T-` id it was written with when that number is free, and otherwise gets
/// the next free number. Dependency references are resolved against the batch's own ids first,
/// then read as ledger ids; the rest are listed in [`Plan::unresolved`].
pub fn merge_plan(existing: &[Task], incoming: &[Item], now: Timestamp, next_id: u64) -> Plan {
    let keys = incoming_keys(incoming);
    merge_plan_with_keys(existing, incoming, &keys, Authority::Person, now, next_id)
}

/// The dedupe key of each incoming item (M1), `None` for a blank one (M9). A store computes
/// them once to find the rows they match and hands them to [`merge_plan_with_keys`].
pub fn incoming_keys(incoming: &[Item]) -> Vec<Option<String>> {
    incoming.iter().map(item_key).collect()
}

/// The dedupe key of one incoming item (M1), `None` for a blank one (M9).
fn item_key(item: &Item) -> Option<String> {
    let title = item.key_title.as_deref().unwrap_or(&item.title);
    is_keyed(item).then(|| dedupe_key(&item.source, title))
}

/// Whether an item has a key: it is not blank (M9).
fn is_keyed(item: &Item) -> bool {
    !item.is_blank() && !item.title.trim().is_empty()
}

/// [`merge_plan`] with the keys of [`incoming_keys`] already computed, for a writer of the
/// given [`Authority`] (S13):
///
/// - a producer's or an agent's input that carries a field only a person writes (`run`,
///   `correction`, `result`, `run_at`, `failures`) is refused whole ([`Plan::refused`]);
/// - a pulled source's such fields are not written and are listed in [`Plan::ignored`];
/// - a person's (an import of an exported ledger) are kept in new rows.
///
/// Whoever writes, an item naming the `T-` id of an existing row addresses that row only when
/// the row is the same task — the item's key is the row's key, or the row's current source and
/// title give the item's key (a row renamed since) — and two items of one input never name the
/// same id; otherwise the whole input is refused. An id that no row has is kept for a new row.
///
/// # Panics
///
/// When `keys` and `incoming` differ in length.
pub fn merge_plan_with_keys(
    existing: &[Task],
    incoming: &[Item],
    keys: &[Option<String>],
    authority: Authority,
    now: Timestamp,
    next_id: u64,
) -> Plan {
    let refused = |refused| Plan { next_id, refused: Some(refused), ..Plan::default() };
    assert_eq!(keys.len(), incoming.len(), "one key per incoming item");
    let mut decider = Decider::new(authority, next_id);
    if let Err(e) =
        decider.check(0, incoming).and_then(|()| decider.take(0, incoming, keys.to_vec(), existing))
    {
        return refused(e);
    }
    let rows: HashMap<TaskId, &Task> = existing.iter().map(|t| (t.id, t)).collect();
    decider.finish().plan(0, incoming, &rows, now).expect("every patched row is among the existing rows")
}

/// What happens to an item, decided over the whole input.
#[derive(Clone, Debug)]
enum Fate {
    Skip(SkipReason, Option<TaskId>),
    /// The row, and whether it had deps (a patch fills deps only into a row without).
    Patch(TaskId, bool),
    Add(TaskId),
}

/// The first half of [`merge_plan_with_keys`], fed the input and the ledger rows a range of
/// items at a time: what becomes of each item (its fate and id), building no row, holding no
/// row and no item. A store hands every range to [`Decider::check`], then reads the rows that
/// match one range of items and hands both to [`Decider::take`], and so on through the input;
/// [`Decider::finish`] then gives fresh ids and resolves references.
#[derive(Debug)]
pub struct Decider {
    authority: Authority,
    /// Refuse items that would make a row `done` or `dropped` ([`authority::refuses_closed`]).
    refuse_closed: bool,
    next_id: u64,
    ignored: Vec<FieldNote>,
    /// The largest ledger id named as a dep: fresh ids never take such a number (the ids items
    /// keep are in `planned`).
    max_named: u64,
    max_existing: u64,
    /// Items checked ([`Decider::check`]) and a duplicate id found among them.
    checked: usize,
    duplicate: Option<Refused>,
    /// The item each reference names (its own id as written), over the whole input: unique,
    /// since a second item with the same id refuses the input.
    refs: HashMap<Digest, usize>,
    /// The first item of each key (M7); the keys of the ranges taken are kept only here.
    first_by_key: HashMap<Digest, usize>,
    /// Makes the digests kept in place of keys and references (a million of each are a few
    /// hundred MB as text).
    digester: Digester,
    first_by_row: HashMap<u64, usize>,
    planned: HashSet<u64>,
    firsts: Vec<First>,
    /// The dependency references of the items that add or patch a row, with their lines.
    wanted_deps: Vec<(usize, Option<usize>, Vec<String>)>,
}

/// An item's fate after pass 1: an addition's id is given by [`Decider::finish`] unless it kept
/// the one it asked for.
#[derive(Clone, Debug)]
enum First {
    Skip(SkipReason, Option<TaskId>),
    Patch(TaskId, bool),
    Add(Option<TaskId>),
}

impl Decider {
    /// Starts deciding an input written under `authority`, the ledger's counter at `next_id`.
    /// The input is then handed over a range at a time, twice: every range to
    /// [`Decider::check`], then every range to [`Decider::take`], each time in order from the
    /// first item, so that a store never needs the whole input at once.
    pub fn new(authority: Authority, next_id: u64) -> Decider {
        Decider {
            authority,
            refuse_closed: false,
            next_id,
            ignored: Vec::new(),
            max_named: 0,
            max_existing: 0,
            checked: 0,
            duplicate: None,
            refs: HashMap::new(),
            first_by_key: HashMap::new(),
            digester: Digester::default(),
            first_by_row: HashMap::new(),
            planned: HashSet::new(),
            firsts: Vec::new(),
            wanted_deps: Vec::new(),
        }
    }

    /// [`Decider::new`] for an input `actor` writes: its authority, and for a push or an agent
    /// no item that would register a row as `done` or `dropped` (S13).
    pub fn for_actor(actor: &crate::Actor, next_id: u64) -> Decider {
        Decider {
            refuse_closed: authority::refuses_closed(actor),
            ..Decider::new(Authority::of(actor), next_id)
        }
    }

    /// Checks the next `items` of the input, which start at item `start`: the fields only a
    /// person writes (S13), ids named twice, the ledger ids named as deps.
    ///
    /// # Errors
    ///
    /// [`Refused::PersonField`]: the whole input is refused. An id named twice
    /// ([`Refused::DuplicateId`]) refuses it too, from the first [`Decider::take`], so that a
    /// person-only field anywhere in the input is the reason given first.
    ///
    /// # Panics
    ///
    /// When `start` is not where the last range checked ended.
    pub fn check(&mut self, start: usize, items: &[Item]) -> Result<(), Refused> {
        assert_eq!(start, self.checked, "ranges in order");
        self.checked += items.len();
        let screen = authority::screen(self.authority, items);
        let at = |note: FieldNote| FieldNote { index: note.index + start, ..note };
        if let Some(note) = screen.refused {
            return Err(Refused::PersonField(at(note)));
        }
        if self.refuse_closed
            && let Some(note) = authority::closed_item(items)
        {
            return Err(Refused::PersonField(at(note)));
        }
        self.ignored.extend(screen.ignored.into_iter().map(at));
        for (index, item) in (start..).zip(items) {
            // Ledger ids named as deps: fresh ids never take such a number, or a dep on a
            // missing task would silently come to mean whatever row got its number next.
            for dep in &item.deps {
                if let Some(id) = TaskId::parse(dep) {
                    self.max_named = self.max_named.max(id.num());
                }
            }
            let Some(reference) = item.ref_id.as_deref().filter(|r| !r.trim().is_empty() && is_keyed(item))
            else {
                continue;
            };
            match self.refs.entry(self.digester.of(&RefKey::of(reference))) {
                std::collections::hash_map::Entry::Occupied(first) => {
                    let first_index = *first.get();
                    self.duplicate.get_or_insert_with(|| Refused::DuplicateId {
                        index,
                        first_index,
                        reference: reference.trim().to_owned(),
                    });
                }
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(index);
                }
            }
        }
        Ok(())
    }

    /// Decides the next `items`, which start at item `start`, given their [`incoming_keys`] and
    /// the ledger rows those keys or the items' requested ids match (more rows do no harm).
    ///
    /// # Errors
    ///
    /// [`Refused::DuplicateId`] found by [`Decider::check`], or [`Refused::IdOfAnotherTask`]:
    /// the whole input is refused.
    ///
    /// # Panics
    ///
    /// When `start` is not where the last range taken ended, the input was not checked that
    /// far, or `keys` is not one per item.
    pub fn take(
        &mut self,
        start: usize,
        items: &[Item],
        keys: Vec<Option<String>>,
        rows: &[Task],
    ) -> Result<(), Refused> {
        let range = start..start + items.len();
        assert_eq!(range.start, self.firsts.len(), "ranges in order");
        assert!(range.end <= self.checked, "every range checked before one is taken");
        assert_eq!(keys.len(), range.len(), "one key per item of the range");
        if let Some(duplicate) = self.duplicate.clone() {
            return Err(duplicate);
        }
        let mut wanted: HashMap<&str, Option<&Task>> =
            keys.iter().flatten().map(|k| (k.as_str(), None)).collect();
        let requested: HashSet<u64> = items
            .iter()
            .filter_map(|i| i.ref_id.as_deref().and_then(TaskId::parse))
            .map(TaskId::num)
            .collect();
        let mut by_id: HashMap<u64, &Task> = HashMap::new();
        for task in rows {
            self.max_existing = self.max_existing.max(task.id.num());
            if let Some(slot) = wanted.get_mut(task.key.as_str())
                && slot.is_none()
            {
                *slot = Some(task);
            }
            if requested.contains(&task.id.num()) {
                by_id.entry(task.id.num()).or_insert(task);
            }
        }
        // The row each item of the range matched, if any.
        let mut matched: Vec<Option<&Task>> = Vec::with_capacity(range.len());
        // Pass 1: match every item by key and decide its fate; keep requested ids that are free.
        for (index, (item, key)) in range.clone().zip(items.iter().zip(&keys)) {
            let Some(key) = key.as_deref() else {
                self.firsts.push(First::Skip(SkipReason::Blank, None));
                matched.push(None);
                continue;
            };
            let requested_id = item.ref_id.as_deref().and_then(TaskId::parse);
            // The row an item is: the one with its key. An id it names must be that row's, or a
            // row renamed since (its current source and title give the item's key), or free.
            let by_key = wanted.get(key).copied().flatten();
            let named = requested_id.and_then(|id| by_id.get(&id.num()).copied());
            let row = match (by_key, named) {
                (Some(row), Some(other)) if other.id != row.id => {
                    return Err(refuse_id(index, other, key));
                }
                (None, Some(other)) if dedupe_key(&other.source, &other.title) != key => {
                    return Err(refuse_id(index, other, key));
                }
                (by_key, named) => by_key.or(named),
            };
            matched.push(row);
            let digest = self.digester.of(key);
            let first = self
                .first_by_key
                .get(&digest)
                .or_else(|| row.and_then(|r| self.first_by_row.get(&r.id.num())));
            if let Some(&first_index) = first {
                // M7: the first item with a key (or for a row) wins.
                let reason = SkipReason::DuplicateInInput { first_index };
                self.firsts.push(First::Skip(reason, row.map(|r| r.id)));
                continue;
            }
            self.first_by_key.insert(digest, index);
            if !item.deps.is_empty() && !row.is_some_and(|r| r.status.is_closed()) {
                self.wanted_deps.push((index, item.line, item.deps.clone()));
            }
            if let Some(row) = row {
                self.first_by_row.insert(row.id.num(), index);
                self.firsts.push(if row.status.is_closed() {
                    First::Skip(SkipReason::Closed(row.status), Some(row.id))
                } else {
                    First::Patch(row.id, !row.deps.is_empty())
                });
                continue;
            }
            let requested =
                requested_id.filter(|id| !by_id.contains_key(&id.num()) && !self.planned.contains(&id.num()));
            if let Some(id) = requested {
                self.planned.insert(id.num());
            }
            self.firsts.push(First::Add(requested));
        }
        // A pulled item that repeats what its row already holds (a file daicho wrote back into)
        // overwrites nothing: only fields that differ are reported as ignored.
        self.ignored.retain(|note| {
            !range.contains(&note.index)
                || !matched[note.index - start]
                    .is_some_and(|row| note.field.agrees(&items[note.index - start], row))
        });
        Ok(())
    }

    /// Gives the other new rows fresh numbers, counting on from the largest id in use so that
    /// ids grow in the order they are given, and resolves every item's references.
    ///
    /// # Panics
    ///
    /// When an item checked was not taken.
    pub fn finish(self) -> Decided {
        let Decider {
            authority,
            next_id,
            ignored,
            max_named,
            max_existing,
            checked,
            refs,
            planned,
            firsts,
            first_by_key,
            digester,
            wanted_deps,
            ..
        } = self;
        drop(first_by_key);
        assert_eq!(firsts.len(), checked, "every item taken");
        let max_planned = planned.iter().copied().max().unwrap_or(0);
        // Every number from `next` on is free: above the ledger's counter, every existing row,
        // every id kept in pass 1 and every id named as a dep.
        let mut next = next_id.max(max_existing + 1).max(max_planned + 1).max(max_named + 1);
        let mut resolved: Vec<Option<TaskId>> = Vec::with_capacity(firsts.len());
        // Collected in place: the fates take the memory of the firsts (a million items, 40 MB).
        let fates: Vec<Fate> = firsts
            .into_iter()
            .map(|first| {
                let (fate, id) = match first {
                    // A duplicate names the same task as the first item with its key.
                    First::Skip(reason @ SkipReason::DuplicateInInput { first_index }, None) => {
                        let id = resolved[first_index];
                        (Fate::Skip(reason, None), id)
                    }
                    First::Skip(reason, id) => (Fate::Skip(reason, id), id),
                    First::Patch(id, had_deps) => (Fate::Patch(id, had_deps), Some(id)),
                    First::Add(Some(id)) => (Fate::Add(id), Some(id)),
                    First::Add(None) => {
                        let id = TaskId::new(next);
                        next += 1;
                        (Fate::Add(id), Some(id))
                    }
                };
                resolved.push(id);
                fate
            })
            .collect();

        // References: an item's own id (as written) names the row it resolved to.
        let refs: HashMap<Digest, TaskId> =
            refs.into_iter().filter_map(|(reference, index)| Some((reference, resolved[index]?))).collect();
        drop(resolved);
        let mut unresolved = Vec::new();
        let mut deps = vec![Vec::new(); fates.len()];
        for (index, line, references) in wanted_deps {
            deps[index] = resolve_deps(&references, index, line, &refs, &digester, &mut unresolved);
        }
        Decided { fates, deps, unresolved, next_id: next, ignored, authority }
    }
}

/// The decisions of a merge over a whole input ([`Decider`]): each item's fate and id, and its
/// dependency references resolved. Small beside the items (no row is built or held), so a
/// store can check the new edges of the whole input at once and then build and write the rows
/// a range at a time ([`Decided::plan`]), never holding a copy of every row.
#[derive(Clone, Debug)]
pub struct Decided {
    fates: Vec<Fate>,
    /// The resolved deps of each item that adds or patches a row (empty for the others).
    deps: Vec<Vec<TaskId>>,
    /// Dependency references that name neither an item of the input nor a ledger id.
    pub unresolved: Vec<UnresolvedDep>,
    /// The next free id number once every addition is written.
    pub next_id: u64,
    /// Person-only fields a pulled source's items carried (S13), whole input.
    ignored: Vec<FieldNote>,
    authority: Authority,
}

/// The dependency edges an input adds or replaces, for `dag::check_new_deps`: each new row's
/// deps, and the deps a patch fills into a row that had none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DepChange {
    /// The row.
    pub task: TaskId,
    /// Its deps once written.
    pub deps: Vec<TaskId>,
    /// Index of the item in the input.
    pub index: usize,
}

impl Decided {
    /// The ids of the new rows, in order of number.
    pub fn added(&self) -> Vec<TaskId> {
        let mut ids: Vec<TaskId> =
            self.fates.iter().filter_map(|f| if let Fate::Add(id) = f { Some(*id) } else { None }).collect();
        ids.sort_unstable();
        ids
    }

    /// The rows the items at `range` patch: those [`Decided::plan`] needs for the range.
    pub fn patched(&self, range: std::ops::Range<usize>) -> Vec<TaskId> {
        self.fates[range]
            .iter()
            .filter_map(|f| if let Fate::Patch(id, _) = f { Some(*id) } else { None })
            .collect()
    }

    /// Whether a patch fills deps into a row that had none (an existing row gains edges).
    pub fn fills_deps(&self) -> bool {
        self.fates
            .iter()
            .zip(&self.deps)
            .any(|(fate, deps)| matches!(fate, Fate::Patch(_, false) if !deps.is_empty()))
    }

    /// The edges the input adds (a new row's deps) or fills in (a patch of a row without deps),
    /// over the whole input, for the DAG check before anything is written: new rows first, then
    /// patches, each in input order. A new row without deps is left out: it closes no cycle
    /// and names nothing; the check knows it exists from [`Decided::added`].
    pub fn dep_changes(&self) -> Vec<DepChange> {
        let each = || self.fates.iter().zip(&self.deps).enumerate();
        let adds = each().filter_map(|(index, (fate, deps))| match fate {
            Fate::Add(id) if !deps.is_empty() => Some(DepChange { task: *id, deps: deps.clone(), index }),
            Fate::Skip(..) | Fate::Patch(..) | Fate::Add(_) => None,
        });
        let patches = each().filter_map(|(index, (fate, deps))| match fate {
            Fate::Patch(id, false) if !deps.is_empty() => {
                Some(DepChange { task: *id, deps: deps.clone(), index })
            }
            Fate::Skip(..) | Fate::Patch(..) | Fate::Add(_) => None,
        });
        adds.chain(patches).collect()
    }

    /// The plan of the `items` that start at item `start` (the whole input's [`Plan`] when they
    /// are the whole input): their new rows built, their patches and skips, the unresolved
    /// references and ignored fields among them. `rows` holds (at least) the rows the items
    /// patch ([`Decided::patched`]), as they are now.
    ///
    /// # Errors
    ///
    /// The id of a patched row missing from `rows`.
    ///
    /// # Panics
    ///
    /// When `range` reaches past the input.
    pub fn plan<T: std::borrow::Borrow<Task>>(
        &self,
        start: usize,
        items: &[Item],
        rows: &HashMap<TaskId, T>,
        now: Timestamp,
    ) -> Result<Plan, TaskId> {
        let range = start..start + items.len();
        let in_range = |index: usize| range.contains(&index);
        let mut plan = Plan {
            next_id: self.next_id,
            unresolved: self.unresolved.iter().filter(|u| in_range(u.index)).cloned().collect(),
            ignored: self.ignored.iter().filter(|n| in_range(n.index)).cloned().collect(),
            ..Plan::default()
        };
        for (index, item) in range.clone().zip(items) {
            match &self.fates[index] {
                Fate::Skip(reason, id) => plan.skip.push(Skip {
                    index,
                    line: item.line,
                    title: item.title.clone(),
                    id: *id,
                    reason: reason.clone(),
                }),
                Fate::Patch(id, _) => {
                    let row: &Task = rows.get(id).ok_or(*id)?.borrow();
                    let deps = self.deps[index].clone();
                    let kept = kept_cells(row, item, &deps);
                    let fields = if self.authority.keeps_person_fields() {
                        let mut fields = fill_empty_cells(row, item, deps.clone());
                        fields.bring_persons(row, item, &deps);
                        fields
                    } else {
                        fill_empty_cells(row, item, deps)
                    };
                    if fields.is_empty() {
                        let reason =
                            if kept.is_empty() { SkipReason::Unchanged } else { SkipReason::Kept(kept) };
                        plan.skip.push(Skip {
                            index,
                            line: item.line,
                            title: item.title.clone(),
                            id: Some(row.id),
                            reason,
                        });
                    } else {
                        plan.patch.push(Patch { id: row.id, index, line: item.line, fields });
                    }
                }
                Fate::Add(id) => {
                    let key = item_key(item).expect("an addition has a key");
                    let mut task = new_row(*id, item, key, self.deps[index].clone(), now);
                    if !self.authority.keeps_person_fields() {
                        clear_person_fields(&mut task);
                    }
                    plan.add.push(Addition { task, index, line: item.line });
                }
            }
        }
        Ok(plan)
    }
}

fn refuse_id(index: usize, other: &Task, item_key: &str) -> Refused {
    Refused::IdOfAnotherTask {
        index,
        id: other.id,
        row_key: other.key.clone(),
        item_key: item_key.to_owned(),
    }
}

/// A new row from a writer who is no person keeps none of a person's fields (S13).
fn clear_person_fields(task: &mut Task) {
    task.run = false;
    task.result.clear();
    task.run_at = None;
    task.correction.clear();
    task.failures = 0;
    task.person_cells = PersonCells::NONE;
}

/// What a [`Decider`] keeps of a dedupe key or a reference over the whole input: a 128-bit
/// keyed hash (SipHash under two random keys, new for each input), 16 bytes in place of the
/// text. No input can be made to collide, and by chance two of a million keys collide with a
/// probability near 2^-88.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Digest(u128);

#[derive(Debug, Default)]
struct Digester(std::hash::RandomState, std::hash::RandomState);

impl Digester {
    fn of<T: std::hash::Hash + ?Sized>(&self, value: &T) -> Digest {
        use std::hash::BuildHasher as _;
        Digest((u128::from(self.0.hash_one(value)) << 64) | u128::from(self.1.hash_one(value)))
    }
}

/// How a reference is compared: ledger ids by number (`T-500` = `T-0500`), others as written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum RefKey {
    Id(u64),
    Local(String),
}

impl RefKey {
    fn of(reference: &str) -> RefKey {
        match TaskId::parse(reference) {
            Some(id) => RefKey::Id(id.num()),
            None => RefKey::Local(reference.trim().to_owned()),
        }
    }
}

fn resolve_deps(
    references: &[String],
    index: usize,
    line: Option<usize>,
    refs: &HashMap<Digest, TaskId>,
    digester: &Digester,
    unresolved: &mut Vec<UnresolvedDep>,
) -> Vec<TaskId> {
    let mut deps: Vec<TaskId> = Vec::with_capacity(references.len());
    for reference in references {
        if reference.trim().is_empty() {
            continue;
        }
        let key = RefKey::of(reference);
        let id = refs.get(&digester.of(&key)).copied().or(match key {
            RefKey::Id(_) => TaskId::parse(reference),
            RefKey::Local(_) => None,
        });
        match id {
            Some(id) if !deps.contains(&id) => deps.push(id),
            Some(_) => {}
            None => unresolved.push(UnresolvedDep { index, line, reference: reference.clone() }),
        }
    }
    deps
}

fn fill_empty_cells(row: &Task, item: &Item, deps: Vec<TaskId>) -> PatchFields {
    fn fill(current: &str, offered: &str) -> Option<String> {
        (current.is_empty() && !offered.trim().is_empty()).then(|| offered.to_owned())
    }
    let mut fields = PatchFields {
        project: fill(&row.project, &item.project),
        body: fill(&row.body, &item.body),
        evidence: fill(&row.evidence, &item.evidence),
        due: if row.due.is_none() { item.due } else { None },
        assignee: fill(&row.assignee, &item.assignee),
        work_type: fill(&row.work_type, &item.work_type),
        priority: (row.priority == 0 && item.priority != 0).then_some(item.priority),
        not_before: if row.not_before.is_none() { item.not_before } else { None },
        action: fill(&row.action, item.action.trim()),
        deps: (row.deps.is_empty() && !deps.is_empty()).then_some(deps),
        tags: (row.tags.is_empty() && !item.tags.is_empty()).then(|| item.tags.clone()),
        refresh: (item.refresh && !row.refresh).then_some(true),
        title: None,
        person_cells: None,
    };
    if item.refresh {
        // M6: an aggregate's count changes, so its body and evidence are overwritten, and a
        // title with the count in it follows, unless a person renamed the row.
        fields.body = (row.body != item.body).then(|| item.body.clone());
        fields.evidence = (row.evidence != item.evidence).then(|| item.evidence.clone());
        let counted = item
            .key_title
            .as_deref()
            .is_some_and(|template| crate::aggregate::is_counted(template, &row.title));
        fields.title = (counted && row.title != item.title).then(|| item.title.clone());
    }
    // S13: what a person wrote is theirs, emptied or not; no source writes it again.
    fields.withhold(row.person_cells);
    fields
}

/// The cells of an open row an item offers other values for, kept by the fill-empty rule (M5),
/// and its status when the item offers another. A cell a person wrote is kept even when they
/// emptied it (S13).
fn kept_cells(row: &Task, item: &Item, deps: &[TaskId]) -> Vec<&'static str> {
    let theirs = |cell| row.person_cells.contains(cell);
    // The row keeps its value when it has one, or a person wrote the cell, and the item offers
    // another one.
    let kept = |cell: SourceCell, filled: bool, offered: bool, differ: bool| {
        (filled || theirs(cell)) && offered && differ
    };
    let text = |cell: SourceCell, current: &str, offered: &str| {
        kept(cell, !current.is_empty(), !offered.trim().is_empty(), current != offered)
    };
    // An aggregate's body and evidence are overwritten (M6), unless a person wrote them.
    let refreshed = |cell: SourceCell| item.refresh && !theirs(cell);
    let mut kept: Vec<&'static str> = [
        (SourceCell::Project, text(SourceCell::Project, &row.project, &item.project)),
        (SourceCell::Body, !refreshed(SourceCell::Body) && text(SourceCell::Body, &row.body, &item.body)),
        (
            SourceCell::Evidence,
            !refreshed(SourceCell::Evidence) && text(SourceCell::Evidence, &row.evidence, &item.evidence),
        ),
        (SourceCell::Due, kept(SourceCell::Due, row.due.is_some(), item.due.is_some(), row.due != item.due)),
        (SourceCell::Assignee, text(SourceCell::Assignee, &row.assignee, &item.assignee)),
        (SourceCell::WorkType, text(SourceCell::WorkType, &row.work_type, &item.work_type)),
        (
            SourceCell::Priority,
            kept(SourceCell::Priority, row.priority != 0, item.priority != 0, row.priority != item.priority),
        ),
        (
            SourceCell::NotBefore,
            kept(
                SourceCell::NotBefore,
                row.not_before.is_some(),
                item.not_before.is_some(),
                row.not_before != item.not_before,
            ),
        ),
        (SourceCell::Action, text(SourceCell::Action, &row.action, item.action.trim())),
        (SourceCell::Deps, kept(SourceCell::Deps, !row.deps.is_empty(), !deps.is_empty(), row.deps != deps)),
        (
            SourceCell::Tags,
            kept(SourceCell::Tags, !row.tags.is_empty(), !item.tags.is_empty(), row.tags != item.tags),
        ),
    ]
    .into_iter()
    .filter_map(|(cell, kept)| kept.then_some(cell.name()))
    .collect();
    // Nor does a source's status move the row (S13, M4): an import offering another one is
    // told so, not that the row already has its values.
    if item.status.is_some_and(|status| status != row.status) {
        kept.push("status");
    }
    kept
}

fn new_row(id: TaskId, item: &Item, key: String, deps: Vec<TaskId>, now: Timestamp) -> Task {
    let mut task = Task::with_key(id, &item.title, &item.source, key, now);
    task.project = item.project.clone();
    // A run cannot be under way in a row that did not exist: an imported `running` is pending.
    task.status = match item.status.unwrap_or(Status::Pending) {
        Status::Running => Status::Pending,
        status => status,
    };
    task.run = item.run;
    task.body = item.body.clone();
    task.evidence = item.evidence.clone();
    task.due = item.due;
    task.assignee = item.assignee.clone();
    task.work_type = item.work_type.clone();
    task.priority = item.priority;
    task.not_before = item.not_before;
    // Stored trimmed, as routing compares it (the claim's query matches it exactly, I5).
    task.action = item.action.trim().to_owned();
    task.result = item.result.clone();
    task.run_at = item.run_at;
    task.correction = item.correction.clone();
    task.deps = deps;
    task.tags = item.tags.clone();
    task.failures = item.failures;
    task.person_cells = match item.by_hand {
        true => by_hand(&task),
        false => item.person_cells,
    };
    task.refresh = item.refresh;
    task
}

/// The cells of a row a person adds by hand that are theirs (S13, M5): every cell they wrote,
/// and its action and tags even empty, since an empty action makes the task manual and no
/// source may route an agent to it. The other empty cells are left to the sources to fill, and
/// an export carries no mark on them that would empty another ledger's row.
fn by_hand(task: &Task) -> PersonCells {
    let blank = Task::with_key(task.id, "", "", String::new(), task.created_at);
    PersonCells::of(
        SourceCell::ALL.into_iter().filter(|&cell| {
            matches!(cell, SourceCell::Action | SourceCell::Tags) || cell.differs(task, &blank)
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    /// Applies a plan to an in-memory ledger, as a store would.
    fn apply(ledger: &mut Vec<Task>, plan: &Plan) {
        for patch in &plan.patch {
            let row = ledger.iter_mut().find(|t| t.id == patch.id).unwrap();
            patch.fields.apply_to(row);
        }
        ledger.extend(plan.add.iter().map(|a| a.task.clone()));
    }

    fn next_id(ledger: &[Task]) -> u64 {
        ledger.iter().map(|t| t.id.num()).max().unwrap_or(0) + 1
    }

    fn row(n: u64, title: &str, status: Status) -> Task {
        let mut t = Task::new(TaskId::new(n), title, "src", now());
        t.status = status;
        t
    }

    /// S13: a person's own input (`import --ledger` of their export) brings into a row that is
    /// already in the ledger the cells it says that person wrote, values and marks: an emptied
    /// body, an assignee over the sheet's. A cell a person wrote in this ledger keeps its value,
    /// an emptied due date cannot be emptied so stays unmarked, and anyone else's input brings
    /// nothing. Marks alone withdraw no approval.
    #[test]
    fn s13_a_persons_input_brings_their_cells_into_a_row_already_there() {
        let mut there = row(1, "check the invoice", Status::Pending);
        (there.body, there.assignee, there.work_type) = ("from the sheet".into(), "bob".into(), "ops".into());
        there.due = Some(jiff::civil::date(2026, 12, 24));
        there.person_cells = PersonCells::of([SourceCell::WorkType]);
        let mut item = Item::new("check the invoice", "src");
        (item.body, item.assignee, item.work_type) = (String::new(), "ana".into(), "finance".into());
        item.person_cells =
            PersonCells::of([SourceCell::Body, SourceCell::Assignee, SourceCell::WorkType, SourceCell::Due]);
        let keys = incoming_keys(std::slice::from_ref(&item));
        let ledger = [there.clone()];
        let plan =
            merge_plan_with_keys(&ledger, std::slice::from_ref(&item), &keys, Authority::Person, now(), 2);
        assert_eq!(plan.patch.len(), 1, "{plan:?}");
        let mut after = there.clone();
        plan.patch[0].fields.apply_to(&mut after);
        assert_eq!(
            (after.body.as_str(), after.assignee.as_str(), after.work_type.as_str(), after.due),
            ("", "ana", "ops", there.due),
            "the person's values, but this ledger's person's type and a due date a patch cannot empty"
        );
        assert_eq!(after.person_cells.to_string(), "body, assignee, type");
        for authority in [Authority::Producer, Authority::Puller, Authority::Agent] {
            let mut foreign = item.clone();
            foreign.person_cells = PersonCells::NONE;
            let plan = merge_plan_with_keys(&ledger, &[foreign], &keys, authority, now(), 2);
            assert!(plan.patch.iter().all(|p| p.fields.person_cells.is_none()), "{authority:?}: {plan:?}");
            let brought =
                merge_plan_with_keys(&ledger, std::slice::from_ref(&item), &keys, authority, now(), 2);
            assert!(brought.patch.iter().all(|p| p.fields.person_cells.is_none()), "{authority:?}");
        }
        // The same values, marks only: an approval stays.
        let mut approved = after.clone();
        (approved.run, approved.approved_by, approved.person_cells) =
            (true, "human:boss".into(), PersonCells::NONE);
        let mut same = item.clone();
        (same.work_type, same.due) = ("ops".into(), there.due);
        let plan = merge_plan_with_keys(&[approved.clone()], &[same], &keys, Authority::Person, now(), 2);
        let mut marked = approved.clone();
        plan.patch[0].fields.apply_to(&mut marked);
        assert_eq!(marked.person_cells.to_string(), "body, due, assignee, type");
        assert_eq!(
            (marked.run, marked.approved_by.as_str()),
            (true, "human:boss"),
            "marks withdraw no approval"
        );
    }

    /// S13, M5: a new row a person writes by hand (`by_hand`) is theirs in every cell they wrote,
    /// and in its action and tags even empty (a manual task stays manual); the same item from
    /// anyone else marks nothing, and a row already there is only filled.
    #[test]
    fn s13_a_row_a_person_adds_by_hand_is_theirs_where_they_wrote_and_stays_manual() {
        let mut item = Item::new("rotate the keys", "ops");
        (item.body, item.by_hand) = ("call Ana first".into(), true);
        let keys = incoming_keys(std::slice::from_ref(&item));
        let theirs = [SourceCell::Title, SourceCell::Body, SourceCell::Action, SourceCell::Tags];
        for (authority, marks) in [
            (Authority::Person, PersonCells::of(theirs)),
            (Authority::Producer, PersonCells::NONE),
            (Authority::Puller, PersonCells::NONE),
            (Authority::Agent, PersonCells::NONE),
        ] {
            let plan = merge_plan_with_keys(&[], std::slice::from_ref(&item), &keys, authority, now(), 1);
            assert_eq!(plan.add.len(), 1, "{authority:?}: {plan:?}");
            assert_eq!(plan.add[0].task.person_cells, marks, "{authority:?}");
        }
        let there = Task::new(TaskId::new(1), "rotate the keys", "ops", now());
        let plan =
            merge_plan_with_keys(&[there], std::slice::from_ref(&item), &keys, Authority::Person, now(), 2);
        assert_eq!(plan.patch.len(), 1, "the empty body is filled: {plan:?}");
        assert_eq!(plan.patch[0].fields.person_cells, None, "and made nobody's");
    }

    /// S2, S13: a producer's patch of an approved row withdraws the approval with the run box;
    /// an empty patch, or a row not approved, keeps what it has.
    #[test]
    fn s2_a_patch_of_an_approved_row_withdraws_the_approval() {
        let mut approved = Task::new(TaskId::new(1), "mail", "ci", now());
        (approved.run, approved.approved_by) = (true, "human:boss".into());
        let body = PatchFields { body: Some("other text".into()), ..PatchFields::default() };
        let mut row = approved.clone();
        body.apply_to(&mut row);
        assert_eq!((row.body.as_str(), row.run, row.approved_by.as_str()), ("other text", false, ""));
        let mut row = approved.clone();
        PatchFields::default().apply_to(&mut row);
        assert_eq!(row, approved, "nothing changed, nothing withdrawn");
        let mut ticked = Task::new(TaskId::new(2), "build", "ci", now());
        ticked.run = true;
        body.apply_to(&mut ticked);
        assert!(ticked.run, "a person's tick without an approval stays");
    }

    #[test]
    fn m1_width_variants_match_the_existing_row() {
        let ledger = vec![row(1, "パーサー実装", Status::Pending)];
        let items = [Item::new("パーサー　実装！", "src"), Item::new("ﾊﾟｰｻｰ実装", "src")];
        let plan = merge_plan(&ledger, &items, now(), 2);
        assert!(plan.add.is_empty());
        assert_eq!(plan.skip[0].reason, SkipReason::Unchanged);
        assert_eq!(plan.skip[0].id, Some(TaskId::new(1)));
        assert_eq!(plan.skip[1].reason, SkipReason::DuplicateInInput { first_index: 0 });
        let other_source = merge_plan(&ledger, &[Item::new("パーサー実装", "elsewhere")], now(), 2);
        assert_eq!(other_source.add.len(), 1, "another source is another key");
    }

    #[test]
    fn i5_an_action_is_stored_trimmed_as_routing_reads_it() {
        let mut item = Item::new("a", "src");
        item.action = " write\u{3000}".into();
        let mut after = Vec::new();
        apply(&mut after, &merge_plan(&[], &[item.clone()], now(), 1));
        assert_eq!(after[0].action, "write");
        let mut ledger = vec![row(1, "a", Status::Pending)];
        let plan = merge_plan(&ledger, &[item], now(), 2);
        apply(&mut ledger, &plan);
        assert_eq!(ledger[0].action, "write", "an empty cell filled, trimmed");
        let mut edited = ledger[0].clone();
        edited.action = "x".into();
        let edit = crate::edit::TaskEdit { action: Some(" draft ".into()), ..Default::default() };
        assert_eq!(edit.apply(&edited, now()).action, "draft");
    }

    #[test]
    fn m2_an_item_gone_from_its_source_leaves_its_row() {
        let ledger = vec![row(1, "a", Status::Pending), row(2, "b", Status::Pending)];
        let plan = merge_plan(&ledger, &[Item::new("a", "src")], now(), 3);
        let mut after = ledger.clone();
        apply(&mut after, &plan);
        assert_eq!(after.len(), 2, "b is still there");
        assert!(plan.is_noop());
    }

    #[test]
    fn m3_closed_rows_untouched() {
        for status in [Status::Done, Status::Dropped, Status::NeedsHuman] {
            let ledger = vec![row(1, "a", status)];
            let mut item = Item::new("a", "src");
            item.body = "new body".into();
            item.assignee = "x".into();
            item.refresh = true;
            item.evidence = "count: 3".into();
            let plan = merge_plan(&ledger, &[item], now(), 2);
            assert!(plan.patch.is_empty() && plan.add.is_empty(), "{status}");
            assert_eq!(plan.skip[0].reason, SkipReason::Closed(status));
        }
    }

    #[test]
    fn m4_correction_result_failures_never_in_a_patch() {
        let mut existing = row(1, "a", Status::Review);
        existing.correction = String::new();
        existing.result = String::new();
        let ledger = vec![existing];
        let mut item = Item::new("a", "src");
        item.correction = "from the source".into();
        item.result = "from the source".into();
        item.failures = 7;
        item.body = "b".into();
        let plan = merge_plan(&ledger, &[item], now(), 2);
        assert_eq!(plan.patch.len(), 1, "the body is filled");
        let json = serde_json::to_value(&plan.patch[0].fields).unwrap();
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["body"]);
        let mut after = ledger.clone();
        apply(&mut after, &plan);
        assert_eq!((after[0].correction.as_str(), after[0].result.as_str(), after[0].failures), ("", "", 0));
    }

    #[test]
    fn m5_open_rows_only_get_empty_cells_filled() {
        let mut existing = row(1, "a", Status::Pending);
        existing.body = "written by a person".into();
        existing.assignee = String::new();
        let ledger = vec![existing];
        let mut item = Item::new("a", "src");
        item.body = "from the source".into();
        item.assignee = "writer".into();
        item.due = Some(jiff::civil::date(2026, 12, 1));
        item.tags = Tags::parse_list("ai");
        item.deps = vec!["T-0009".into()];
        let plan = merge_plan(&ledger, &[item], now(), 10);
        let fields = &plan.patch[0].fields;
        assert_eq!(fields.body, None, "a value is never overwritten");
        assert_eq!(fields.assignee.as_deref(), Some("writer"));
        assert_eq!(fields.due, Some(jiff::civil::date(2026, 12, 1)));
        assert_eq!(fields.tags, Some(Tags::parse_list("ai")));
        assert_eq!(fields.deps, Some(vec![TaskId::new(9)]));
    }

    #[test]
    fn m6_refresh_overwrites_body_and_evidence_of_open_rows_only() {
        let mut open = row(1, "Get the unanswered questions answered", Status::Pending);
        open.body = "375 unanswered".into();
        open.evidence = "sheet@v1".into();
        open.refresh = true;
        let mut closed = open.clone();
        closed.id = TaskId::new(2);
        closed.source = "other".into();
        closed.key = crate::key::dedupe_key("other", &closed.title);
        closed.status = Status::Done;
        let ledger = vec![open, closed];
        let mut item = Item::new("Get the unanswered questions answered", "src");
        item.body = "376 unanswered".into();
        item.evidence = "sheet@v2".into();
        item.refresh = true;
        let mut closed_item = item.clone();
        closed_item.source = "other".into();
        let plan = merge_plan(&ledger, &[item.clone(), closed_item], now(), 3);
        assert_eq!(plan.patch.len(), 1);
        assert_eq!(plan.patch[0].fields.body.as_deref(), Some("376 unanswered"));
        assert_eq!(plan.patch[0].fields.evidence.as_deref(), Some("sheet@v2"));
        assert_eq!(plan.skip[0].reason, SkipReason::Closed(Status::Done));
        let mut after = ledger.clone();
        apply(&mut after, &plan);
        assert!(merge_plan(&after, &[item], now(), 3).is_noop(), "the same count again changes nothing");
    }

    #[test]
    fn m7_the_first_of_a_key_wins() {
        let mut first = Item::new("Same", "src");
        first.body = "first".into();
        let mut second = Item::new("same!", "src");
        second.body = "second".into();
        let plan = merge_plan(&[], &[first, second], now(), 1);
        assert_eq!(plan.add.len(), 1);
        assert_eq!(plan.add[0].task.body, "first");
        assert_eq!(plan.skip[0].reason, SkipReason::DuplicateInInput { first_index: 0 });
    }

    #[test]
    fn m8_the_same_input_twice_adds_and_patches_nothing() {
        let mut items = vec![Item::new("a", "src"), Item::new("b", "src")];
        items[1].deps = vec!["T-0001".into()];
        items[1].body = "body".into();
        let mut ledger = Vec::new();
        let first = merge_plan(&ledger, &items, now(), 1);
        assert_eq!(first.add.len(), 2);
        apply(&mut ledger, &first);
        let second = merge_plan(&ledger, &items, now(), next_id(&ledger));
        assert!(second.add.is_empty() && second.patch.is_empty());
        assert_eq!(second.skip.len(), 2);
    }

    #[test]
    fn m9_blank_items_are_ignored() {
        let items = [Item::default(), Item::new("   ", "src"), Item::new("real", "src")];
        let plan = merge_plan(&[], &items, now(), 1);
        assert_eq!(plan.add.len(), 1);
        assert_eq!(plan.skip.iter().filter(|s| s.reason == SkipReason::Blank).count(), 2);
    }

    #[test]
    fn ids_are_kept_when_free_and_local_refs_resolve() {
        let ledger = vec![row(500, "taken", Status::Pending)];
        let mut a = Item::new("taken", "src");
        a.ref_id = Some("T-500".into());
        let mut b = Item::new("b", "src");
        b.ref_id = Some("T-0777".into());
        b.deps = vec!["T-500".into(), "t9".into()];
        let mut c = Item::new("c", "src");
        c.ref_id = Some("t9".into());
        let plan = merge_plan(&ledger, &[a, b, c], now(), 501);
        assert_eq!(plan.skip[0].id, Some(TaskId::new(500)), "an item with a ledger id is that row");
        let ids: Vec<String> = plan.add.iter().map(|x| x.task.id.to_string()).collect();
        assert_eq!(ids, ["T-0777", "T-0778"], "T-0777 is free; fresh ids count on from it");
        assert_eq!(plan.add[0].task.deps, [TaskId::new(500), TaskId::new(778)], "refs name the batch's rows");
        assert_eq!(plan.next_id, 779);
        let unknown = merge_plan(
            &[],
            &[{
                let mut i = Item::new("x", "s");
                i.deps = vec!["t404".into()];
                i
            }],
            now(),
            1,
        );
        assert_eq!(unknown.unresolved[0].reference, "t404");
    }

    #[test]
    fn m1_s13_an_id_addresses_a_row_only_with_its_key() {
        // A person's manual task T-0002 (source cli) and a plan's T-0001 in another project.
        let mut manual = row(2, "Call the customer", Status::Pending);
        manual.source = "cli".into();
        manual.key = crate::key::dedupe_key("cli", "Call the customer");
        manual.project = "PJ-01".into();
        let mut planned = row(1, "Write the draft", Status::Pending);
        planned.source = "plan.md".into();
        planned.key = crate::key::dedupe_key("plan.md", "Write the draft");
        planned.project = "PJ-01".into();
        let ledger = vec![planned, manual];

        // Another source, another title, the id of a person's task: refused, both keys named.
        let mut hijack = Item::new("x", "bot");
        hijack.ref_id = Some("T-0002".into());
        hijack.action = "publish".into();
        let plan = merge_plan(&ledger, &[Item::new("fine", "bot"), hijack], now(), 3);
        assert!(plan.add.is_empty() && plan.patch.is_empty(), "a refused input writes nothing");
        assert_eq!(
            plan.refused,
            Some(Refused::IdOfAnotherTask {
                index: 1,
                id: TaskId::new(2),
                row_key: "cli|callthecustomer".into(),
                item_key: "bot|x".into(),
            })
        );
        // Another project's plan file with the same title but another source: refused too.
        let mut other_plan = Item::new("Write the draft", "other/plan.md");
        other_plan.ref_id = Some("T-0001".into());
        other_plan.project = "PJ-02".into();
        assert!(matches!(
            merge_plan(&ledger, &[other_plan], now(), 3).refused,
            Some(Refused::IdOfAnotherTask { .. })
        ));
        // The item's key names one row and its id another: refused.
        let mut crossed = Item::new("Write the draft", "plan.md");
        crossed.ref_id = Some("T-0002".into());
        assert!(matches!(
            merge_plan(&ledger, &[crossed], now(), 3).refused,
            Some(Refused::IdOfAnotherTask { id, .. }) if id == TaskId::new(2)
        ));
        // The same task under its own id fills empty cells; a free id makes a new row.
        let mut same = Item::new("write the draft!", "plan.md");
        same.ref_id = Some("T-1".into());
        same.assignee = "writer".into();
        let mut fresh = Item::new("new", "plan.md");
        fresh.ref_id = Some("T-0040".into());
        let plan = merge_plan(&ledger, &[same, fresh], now(), 3);
        assert_eq!(plan.refused, None);
        assert_eq!(plan.patch[0].id, TaskId::new(1));
        assert_eq!(plan.add[0].task.id, TaskId::new(40));
    }

    #[test]
    fn s13_the_same_id_twice_in_one_input_is_refused() {
        let mut first = Item::new("a", "s");
        first.ref_id = Some("T-500".into());
        first.line = Some(3);
        let mut second = Item::new("b", "s");
        second.ref_id = Some("T-0500".into());
        second.line = Some(9);
        let plan = merge_plan(&[], &[first.clone(), second], now(), 1);
        assert_eq!(
            plan.refused,
            Some(Refused::DuplicateId { index: 1, first_index: 0, reference: "T-0500".into() })
        );
        let mut local = Item::new("c", "s");
        local.ref_id = Some("t1".into());
        let plan = merge_plan(&[], &[local.clone(), local], now(), 1);
        assert!(matches!(plan.refused, Some(Refused::DuplicateId { .. })), "local ids too");
        assert!(plan.add.is_empty());
    }

    #[test]
    fn s13_person_fields_by_authority() {
        let mut item = Item::new("a", "bot");
        item.run = true;
        item.correction = "again".into();
        item.result = "r".into();
        item.failures = 2;
        let keys = incoming_keys(std::slice::from_ref(&item));
        let pushed =
            merge_plan_with_keys(&[], std::slice::from_ref(&item), &keys, Authority::Producer, now(), 1);
        assert!(matches!(&pushed.refused, Some(Refused::PersonField(n)) if n.field.name() == "run"));
        assert!(pushed.add.is_empty());
        let pulled =
            merge_plan_with_keys(&[], std::slice::from_ref(&item), &keys, Authority::Puller, now(), 1);
        assert_eq!(pulled.refused, None);
        assert_eq!(pulled.ignored.len(), 4);
        let task = &pulled.add[0].task;
        assert_eq!(
            (task.run, task.correction.as_str(), task.result.as_str(), task.failures),
            (false, "", "", 0)
        );
        let imported = merge_plan_with_keys(&[], &[item], &keys, Authority::Person, now(), 1);
        let task = &imported.add[0].task;
        assert_eq!(
            (task.run, task.correction.as_str(), task.failures),
            (true, "again", 2),
            "a person's import"
        );
        assert_eq!(task.approved_by, "", "no file approves");
    }

    #[test]
    fn s13_x6_a_pulled_field_equal_to_the_rows_is_not_reported() {
        let mut row = row(1, "a", Status::Review);
        row.result = "https://example.test/pr/1".into();
        let mut item = Item::new("a", "src");
        item.result = row.result.clone();
        let keys = incoming_keys(std::slice::from_ref(&item));
        let rows = [row];
        let same =
            merge_plan_with_keys(&rows, std::slice::from_ref(&item), &keys, Authority::Puller, now(), 2);
        assert!(same.ignored.is_empty(), "what the row holds: {:?}", same.ignored);
        item.result = "something else".into();
        let other = merge_plan_with_keys(&rows, &[item], &keys, Authority::Puller, now(), 2);
        assert_eq!(other.ignored.len(), 1, "a different value is still reported");
        assert!(other.patch.iter().all(|p| p.fields.title.is_none()), "and never written");
    }

    #[test]
    fn a_renamed_row_is_matched_by_its_id() {
        let mut renamed = row(3, "draft v2", Status::Review);
        renamed.key = crate::key::dedupe_key("src", "draft");
        let mut item = Item::new("draft v2", "src");
        item.ref_id = Some("T-0003".into());
        item.body = "filled".into();
        let mut again = item.clone();
        again.ref_id = None;
        let plan = merge_plan(&[renamed], &[item, again], now(), 4);
        assert!(plan.add.is_empty(), "no duplicate row for a renamed task");
        assert_eq!(plan.patch[0].id, TaskId::new(3));
        assert_eq!(plan.skip[0].reason, SkipReason::DuplicateInInput { first_index: 0 });
    }

    /// M10, M6: an aggregate whose title carries its count matches its row by the text as
    /// written; the refresh rewrites the title with the new count, unless a person renamed it.
    #[test]
    fn m10_a_counted_aggregate_title_follows_the_count_unless_a_person_renamed_it() {
        let source = |n: usize| {
            crate::aggregate::aggregate(
                &vec![Item::new("q", "inbox"); n],
                "inbox",
                "",
                "{count} 件に回答",
                "f",
            )
        };
        let mut ledger = Vec::new();
        let first = merge_plan(&ledger, &[source(376)], now(), 1);
        apply(&mut ledger, &first);
        assert_eq!(ledger[0].title, "376 件に回答");
        let second = merge_plan(&ledger, &[source(120)], now(), next_id(&ledger));
        assert!(second.add.is_empty(), "the same row");
        assert_eq!(second.patch[0].fields.title.as_deref(), Some("120 件に回答"));
        apply(&mut ledger, &second);
        ledger[0].title = "先方に電話".into(); // a person renames the row
        let third = merge_plan(&ledger, &[source(7)], now(), next_id(&ledger));
        assert!(third.add.is_empty());
        assert_eq!(third.patch[0].fields.title, None, "a person's title stays");
        assert!(third.patch[0].fields.body.as_deref().is_some_and(|b| b.starts_with("7 open items")));
    }

    /// M5: an item that offers other values for cells the row already has is skipped saying
    /// which cells keep their values, not "unchanged".
    #[test]
    fn m5_a_skip_names_the_cells_the_row_keeps() {
        let mut existing = row(1, "a", Status::Pending);
        existing.deps = vec![TaskId::new(2)];
        existing.assignee = "aki".into();
        let ledger = vec![existing, row(2, "b", Status::Done), row(3, "c", Status::Done)];
        let mut item = Item::new("a", "src");
        item.deps = vec!["T-0003".into()];
        item.assignee = "ben".into();
        let plan = merge_plan(&ledger, &[item], now(), 10);
        assert!(plan.patch.is_empty());
        assert_eq!(plan.skip[0].reason, SkipReason::Kept(vec!["assignee", "deps"]));
        assert_eq!(
            plan.skip[0].reason.to_string(),
            "the row keeps its own assignee, deps (only empty cells are filled from a source)"
        );
        let same = Item { assignee: "aki".into(), ..Item::new("a", "src") };
        let plan = merge_plan(&ledger, &[same], now(), 10);
        assert_eq!(plan.skip[0].reason, SkipReason::Unchanged);
    }

    #[test]
    fn a_duplicate_keeps_naming_the_first_items_task() {
        let items: Vec<Item> = [("t1", "A", vec![]), ("t2", "a!", vec![]), ("t3", "C", vec!["t2"])]
            .into_iter()
            .map(|(id, title, deps)| {
                let mut i = Item::new(title, "s");
                i.ref_id = Some(id.into());
                i.deps = deps.into_iter().map(str::to_owned).collect();
                i
            })
            .collect();
        let plan = merge_plan(&[], &items, now(), 1);
        assert!(plan.unresolved.is_empty(), "{:?}", plan.unresolved);
        assert_eq!(plan.add.len(), 2);
        assert_eq!(plan.add[1].task.deps, [plan.add[0].task.id], "t2 is A's duplicate, so C waits for A");
    }

    #[test]
    fn d2_fresh_ids_never_take_a_number_named_as_a_missing_dep() {
        let mut waits = Item::new("waits", "s");
        waits.deps = vec!["T-0002".into()];
        let plan = merge_plan(&[], &[waits, Item::new("other", "s")], now(), 1);
        let ids: Vec<u64> = plan.add.iter().map(|a| a.task.id.num()).collect();
        assert_eq!(ids, [3, 4], "T-0002 stays the missing task it names");
        assert_eq!(plan.add[0].task.deps, [TaskId::new(2)]);
        assert_eq!(plan.next_id, 5);
    }

    fn item_strategy() -> impl Strategy<Value = Item> {
        (
            prop::sample::select(vec!["a", "A!", "ａ", "b", "b ", "c", "ｃ", ""]),
            prop::sample::select(vec!["s1", "s2"]),
            prop::sample::select(vec!["", "body1", "body2"]),
            prop::sample::select(vec!["", "x", "y"]),
            any::<bool>(),
            prop::option::of(0usize..6),
            // The cells a person's own input says that person wrote (S13, `by_person`).
            prop::sample::subsequence(vec![SourceCell::Body, SourceCell::Assignee, SourceCell::Title], 0..=3),
        )
            .prop_map(|(title, source, body, assignee, refresh, status, theirs)| {
                let mut item = Item::new(title, source);
                item.person_cells = PersonCells::of(theirs);
                item.body = body.into();
                item.evidence = body.into();
                item.assignee = assignee.into();
                item.refresh = refresh;
                item.status = status.map(|s| Status::ALL[s]);
                item.correction = "c".into();
                item.result = "r".into();
                item.failures = 1;
                item
            })
    }

    /// S13, M1: an input checked a range at a time is refused for the reason it would be as a
    /// whole: a person-only field anywhere is named before an id named twice, and an id named
    /// twice in two ranges refuses it before anything is taken.
    #[test]
    fn s13_an_input_checked_in_ranges_is_refused_as_a_whole() {
        let mut first = Item::new("one", "s");
        first.ref_id = Some("t1".into());
        let mut second = Item::new("two", "s");
        second.ref_id = Some("t1".into());
        let mut third = Item::new("three", "s");
        third.correction = "only a person writes this".into();
        let items = [first, second, third];
        let mut decider = Decider::new(Authority::Producer, 1);
        decider.check(0, &items[..1]).expect("one id so far");
        decider.check(1, &items[1..2]).expect("the second id refuses at the first take");
        let refused = decider.check(2, &items[2..]).expect_err("a person's field");
        assert!(matches!(&refused, Refused::PersonField(note) if note.index == 2), "{refused:?}");

        let mut decider = Decider::new(Authority::Producer, 1);
        decider.check(0, &items[..1]).expect("one id so far");
        decider.check(1, &items[1..2]).expect("the second id refuses at the first take");
        let refused = decider.take(0, &items[..1], incoming_keys(&items[..1]), &[]).expect_err("an id twice");
        assert!(
            matches!(&refused, Refused::DuplicateId { index: 1, first_index: 0, reference } if reference == "t1"),
            "{refused:?}"
        );
    }

    proptest! {
        #[test]
        fn m8_merge_twice_is_idempotent(
            first in prop::collection::vec(item_strategy(), 0..10),
            second in prop::collection::vec(item_strategy(), 0..10),
        ) {
            let mut ledger = Vec::new();
            let plan = merge_plan(&ledger, &first, now(), 1);
            apply(&mut ledger, &plan);
            let plan = merge_plan(&ledger, &second, now(), next_id(&ledger));
            apply(&mut ledger, &plan);
            let again = merge_plan(&ledger, &second, now(), next_id(&ledger));
            prop_assert!(again.add.is_empty(), "{:?}", again.add);
            prop_assert!(again.patch.is_empty(), "{:?}", again.patch);
        }

        /// I1: a store plans a large input a range at a time; the ranges together are the
        /// whole input's plan, whatever the cut, deps across ranges resolved.
        #[test]
        fn i1_plans_of_ranges_make_the_whole_plan(
            mut items in prop::collection::vec(item_strategy(), 0..14),
            chunk in 1usize..5,
            ledger_statuses in prop::collection::vec(0usize..6, 0..3),
        ) {
            // Each item names itself and depends on the next item (a forward reference) and on
            // a ledger row.
            let n = items.len();
            for (i, item) in items.iter_mut().enumerate() {
                item.ref_id = Some(format!("r{i}"));
                item.deps = vec![format!("r{}", (i + 1) % n.max(1)), "T-0001".into()];
                item.correction.clear();
                item.result.clear();
                item.failures = 0;
            }
            let titles = ["a", "b", "c"];
            let ledger: Vec<Task> = ledger_statuses.iter().enumerate().map(|(i, &s)| {
                let mut t = row(i as u64 + 1, titles[i], Status::ALL[s]);
                t.source = "s1".into();
                t.key = crate::key::dedupe_key(&t.source, &t.title);
                t
            }).collect();
            let keys = incoming_keys(&items);
            let whole = merge_plan_with_keys(&ledger, &items, &keys, Authority::Person, now(), 10);
            // A store hands each range the rows its items' keys match, and later the rows it patches.
            let ranges: Vec<std::ops::Range<usize>> =
                (0..n).step_by(chunk).map(|start| start..(start + chunk).min(n)).collect();
            let mut decider = Decider::new(Authority::Person, 10);
            for range in &ranges {
                decider.check(range.start, &items[range.clone()]).expect("not refused");
            }
            for range in &ranges {
                let keys = incoming_keys(&items[range.clone()]);
                let wanted: HashSet<&str> = keys.iter().flatten().map(String::as_str).collect();
                let rows: Vec<Task> = ledger.iter().filter(|t| wanted.contains(t.key.as_str())).cloned().collect();
                decider.take(range.start, &items[range.clone()], keys, &rows).expect("not refused");
            }
            let decided = decider.finish();
            let mut joined = Plan { next_id: decided.next_id, ..Plan::default() };
            for range in ranges {
                let rows: HashMap<TaskId, &Task> = ledger
                    .iter()
                    .filter(|t| decided.patched(range.clone()).contains(&t.id))
                    .map(|t| (t.id, t))
                    .collect();
                let part = decided.plan(range.start, &items[range], &rows, now()).expect("the patched rows are given");
                joined.add.extend(part.add);
                joined.patch.extend(part.patch);
                joined.skip.extend(part.skip);
                joined.unresolved.extend(part.unresolved);
                joined.ignored.extend(part.ignored);
            }
            prop_assert_eq!(&joined, &whole);
            // The edges to check are those the whole plan writes.
            let mut edges: Vec<(TaskId, Vec<TaskId>)> = whole
                .add
                .iter()
                .filter(|a| !a.task.deps.is_empty())
                .map(|a| (a.task.id, a.task.deps.clone()))
                .collect();
            edges.extend(whole.patch.iter().filter_map(|p| p.fields.deps.clone().map(|d| (p.id, d))));
            let changes: Vec<(TaskId, Vec<TaskId>)> =
                decided.dep_changes().into_iter().map(|c| (c.task, c.deps)).collect();
            prop_assert_eq!(changes, edges);
            let mut added: Vec<TaskId> = whole.add.iter().map(|a| a.task.id).collect();
            added.sort_unstable();
            prop_assert_eq!(decided.added(), added);
        }

        #[test]
        fn m3_m4_no_patch_touches_a_closed_row_or_a_person_field(
            statuses in prop::collection::vec(0usize..6, 1..8),
            items in prop::collection::vec(item_strategy(), 0..12),
        ) {
            let titles = ["a", "b", "c", "d", "e", "f", "g", "h"];
            let ledger: Vec<Task> = statuses.iter().enumerate().map(|(i, &s)| {
                let mut t = row(i as u64 + 1, titles[i], Status::ALL[s]);
                t.source = if i % 2 == 0 { "s1".into() } else { "s2".into() };
                t.key = crate::key::dedupe_key(&t.source, &t.title);
                t
            }).collect();
            let plan = merge_plan(&ledger, &items, now(), 100);
            for patch in &plan.patch {
                let target = ledger.iter().find(|t| t.id == patch.id).unwrap();
                prop_assert!(target.status.is_open(), "patched a {} row", target.status);
                // M4 holds by type (PatchFields has no such fields); check what was written. A
                // title changes only where a person's input brings theirs (S13), and a cell a
                // person wrote in the row is never written.
                let mut after = target.clone();
                patch.fields.apply_to(&mut after);
                prop_assert_eq!(
                    (&after.correction, &after.result, after.failures, after.status, after.run),
                    (&target.correction, &target.result, target.failures, target.status, target.run)
                );
                let item = &items[patch.index];
                if !item.person_cells.contains(SourceCell::Title) {
                    prop_assert_eq!(&after.title, &target.title);
                }
                prop_assert!(after.person_cells.union(target.person_cells) == after.person_cells, "marks only grow");
            }
            // M2: every existing id is still there after applying.
            let mut after = ledger.clone();
            apply(&mut after, &plan);
            for t in &ledger {
                prop_assert!(after.iter().any(|a| a.id == t.id));
            }
        }
    }
}

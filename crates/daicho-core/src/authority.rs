//! Who may write what (S13): the authority model, decided here once for every channel.
//!
//! Every write names its [`Actor`]. The actor's [`Authority`] decides what the write may carry:
//!
//! | authority | actors | may set `run`, `correction`, `result`, `run_at`, `failures` | may edit, approve |
//! |---|---|---|---|
//! | [`Authority::Person`] | `human:<name>` (CLI, web UI, API edits), `system` | yes | yes |
//! | [`Authority::Producer`] | `push:<source>` (CLI, API, MCP, executor output), `import:<source>` | refused whole | no |
//! | [`Authority::Puller`] | `sync:<source>` (configured sources) | ignored and reported | no |
//! | [`Authority::Agent`] | `worker:<id>` (runs, remote workers, MCP claims) | refused whole | no |
//!
//! The cells a person wrote (`by_person`, [`PersonField::ByPerson`]) come into the ledger only
//! with a person's batch (`import --ledger` of an export): a producer's or a puller's are ignored
//! (never refused, so a plain re-import of one's own export still works), an agent's refused.
//!
//! A push (`push:<source>`) and an agent also never register a row as `done` or `dropped`
//! ([`PersonField::Closed`]): only a person closes work, and a row born closed would satisfy a
//! waiting task's dep at once. A pulled checklist's `[x]` and an imported file's done lines are
//! the person's own ticks and stay done.
//!
//! Whatever the authority, `running` is set by a claim only (a person's edit cannot set it), an
//! approval is a person's act on a task that is ready, and an item that names an id addresses
//! that row only when it is the same task (see [`crate::merge`]).

use std::fmt;

use crate::edit::TaskEdit;
use crate::item::Item;
use crate::task::{Actor, Status, Task};

/// What an actor may write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Authority {
    /// A person (or daicho itself on a person's command): every field.
    Person,
    /// A producer pushing or a foreign file imported: never a person's fields; an item carrying
    /// one is refused whole.
    Producer,
    /// A configured source pulled by sync: never a person's fields; they are ignored and
    /// reported, so a sheet with a result column still syncs.
    Puller,
    /// An agent or worker: reports only on its own claims (fenced by attempt); its found tasks
    /// are a producer's.
    Agent,
}

impl Authority {
    /// The authority of an actor.
    pub fn of(actor: &Actor) -> Authority {
        match actor {
            Actor::Human(_) | Actor::System => Authority::Person,
            Actor::Push(_) | Actor::Import(_) => Authority::Producer,
            Actor::Sync(_) => Authority::Puller,
            Actor::Worker(_) => Authority::Agent,
        }
    }

    /// Whether new rows written with this authority keep an item's person-only fields.
    pub fn keeps_person_fields(self) -> bool {
        self == Authority::Person
    }
}

/// A field only a person writes (M4, C1, S2, S3, S13).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PersonField {
    /// The ▶ run checkbox.
    Run,
    /// 修正指示.
    Correction,
    /// 実行結果 (a run's, or a person's).
    Result,
    /// 実行日時.
    RunAt,
    /// The failure counter.
    Failures,
    /// The source [`MANUAL_SOURCE`] of the rows people add by hand (`daicho add`): an item of a
    /// producer naming it would match a person's rows and fill their cells — an action, the `ai`
    /// tag — so that an agent runs them.
    ManualSource,
    /// The cells a person wrote (`by_person`, S13): only a person's batch (`import --ledger` of
    /// an export) gives them to its rows; a producer's or puller's is ignored for them, never
    /// refused, and an agent's refused (a decomposer's plan is saved as the person's).
    ByPerson,
    /// A new row's status `done` or `dropped`, pushed: only a person closes work (S13). A
    /// pushed row born closed would satisfy at once a dep that another task waits for. (A
    /// pulled checklist's `[x]` and an imported file's done lines are a person's own ticks.)
    Closed,
}

/// The source of the rows people add by hand (`daicho add`'s default): only a person writes
/// into it (S13).
pub const MANUAL_SOURCE: &str = "manual";

impl PersonField {
    /// The field's name as items and the ledger's columns spell it.
    pub fn name(self) -> &'static str {
        match self {
            PersonField::Run => "run",
            PersonField::Correction => "correction",
            PersonField::Result => "result",
            PersonField::RunAt => "run_at",
            PersonField::Failures => "failures",
            PersonField::ManualSource => "source",
            PersonField::ByPerson => "by_person",
            PersonField::Closed => "status",
        }
    }

    /// Whether `item` carries the value `row` already holds in this field.
    pub fn agrees(self, item: &Item, row: &crate::Task) -> bool {
        match self {
            PersonField::Run => item.run == row.run,
            PersonField::Correction => item.correction == row.correction,
            PersonField::Result => item.result == row.result,
            PersonField::RunAt => item.run_at == row.run_at,
            PersonField::Failures => item.failures == row.failures,
            PersonField::ByPerson => item.person_cells == row.person_cells,
            // Never ignored: such an item is refused whole, whoever writes it.
            PersonField::ManualSource | PersonField::Closed => false,
        }
    }

    /// The person-only fields an item sets (non-empty, non-zero, true), in column order.
    pub fn set_in(item: &Item) -> Vec<PersonField> {
        let mut fields = Vec::new();
        if item.run {
            fields.push(PersonField::Run);
        }
        if !item.result.is_empty() {
            fields.push(PersonField::Result);
        }
        if item.run_at.is_some() {
            fields.push(PersonField::RunAt);
        }
        if !item.correction.is_empty() {
            fields.push(PersonField::Correction);
        }
        if item.failures != 0 {
            fields.push(PersonField::Failures);
        }
        if !item.person_cells.is_empty() {
            fields.push(PersonField::ByPerson);
        }
        if item.source.trim().eq_ignore_ascii_case(MANUAL_SOURCE) {
            fields.push(PersonField::ManualSource);
        }
        fields
    }
}

impl fmt::Display for PersonField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A cell a source may write into an existing row: filled when empty (M5), or overwritten by an
/// aggregate (M6, M10). Once a person edits one — with `daicho set`, the web form or the API —
/// it is theirs ([`PersonCells`]): no source fills or overwrites it again, not even after the
/// person emptied it (S13).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourceCell {
    /// 案件.
    Project,
    /// タスク (an aggregate's counted title follows its count, M10).
    Title,
    /// 内容.
    Body,
    /// 根拠.
    Evidence,
    /// 期限.
    Due,
    /// 担当.
    Assignee,
    /// 分類.
    WorkType,
    /// The priority.
    Priority,
    /// The earliest start.
    NotBefore,
    /// AI機能.
    Action,
    /// The deps.
    Deps,
    /// The tags (`ai`, `external`, …).
    Tags,
}

impl SourceCell {
    /// Every cell, in the ledger's column order.
    pub const ALL: [SourceCell; 12] = [
        SourceCell::Project,
        SourceCell::Title,
        SourceCell::Body,
        SourceCell::Evidence,
        SourceCell::Due,
        SourceCell::Assignee,
        SourceCell::WorkType,
        SourceCell::Priority,
        SourceCell::NotBefore,
        SourceCell::Action,
        SourceCell::Deps,
        SourceCell::Tags,
    ];

    /// The cell's name as items and the ledger's columns spell it.
    pub fn name(self) -> &'static str {
        match self {
            SourceCell::Project => "project",
            SourceCell::Title => "title",
            SourceCell::Body => "body",
            SourceCell::Evidence => "evidence",
            SourceCell::Due => "due",
            SourceCell::Assignee => "assignee",
            SourceCell::WorkType => "type",
            SourceCell::Priority => "priority",
            SourceCell::NotBefore => "not_before",
            SourceCell::Action => "action",
            SourceCell::Deps => "deps",
            SourceCell::Tags => "tags",
        }
    }

    /// The cell its [`SourceCell::name`] names (`type` for the work type).
    pub fn parse(name: &str) -> Option<SourceCell> {
        SourceCell::ALL.into_iter().find(|c| c.name() == name.trim())
    }

    fn bit(self) -> u16 {
        1 << self as u16
    }

    /// Whether the cell differs between two versions of a row.
    pub fn differs(self, a: &Task, b: &Task) -> bool {
        match self {
            SourceCell::Project => a.project != b.project,
            SourceCell::Title => a.title != b.title,
            SourceCell::Body => a.body != b.body,
            SourceCell::Evidence => a.evidence != b.evidence,
            SourceCell::Due => a.due != b.due,
            SourceCell::Assignee => a.assignee != b.assignee,
            SourceCell::WorkType => a.work_type != b.work_type,
            SourceCell::Priority => a.priority != b.priority,
            SourceCell::NotBefore => a.not_before != b.not_before,
            SourceCell::Action => a.action != b.action,
            SourceCell::Deps => a.deps != b.deps,
            SourceCell::Tags => a.tags != b.tags,
        }
    }
}

/// The cells of a row a person wrote (S13, M5): a set of [`SourceCell`]s, kept with the row.
/// Set by a person's edit ([`Actor::Human`]); a sync, a push, an import or an aggregate never
/// writes into them, a person's own later edits do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PersonCells(u16);

impl PersonCells {
    /// No cell.
    pub const NONE: PersonCells = PersonCells(0);

    /// The cells `names` name (`body`, `type`, …), as an export writes them: a list, or one
    /// text of names separated as ids are (a CSV cell, a Markdown segment).
    ///
    /// # Errors
    ///
    /// The first name no cell has, with the names there are.
    pub fn parse_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<PersonCells, String> {
        let mut cells = PersonCells::NONE;
        for name in names.into_iter().flat_map(crate::format::split_refs) {
            let Some(cell) = SourceCell::parse(&name) else {
                let known: Vec<&str> = SourceCell::ALL.iter().map(|c| c.name()).collect();
                return Err(format!("'{name}' is not a cell a person writes (one of {})", known.join(", ")));
            };
            cells = cells.union(PersonCells::of([cell]));
        }
        Ok(cells)
    }

    /// Whether no cell is in the set (by reference, for serde's `skip_serializing_if`).
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// Whether `cell` is in the set.
    pub fn contains(self, cell: SourceCell) -> bool {
        self.0 & cell.bit() != 0
    }

    /// The set with `other`'s cells added.
    #[must_use]
    pub fn union(self, other: PersonCells) -> PersonCells {
        PersonCells(self.0 | other.0)
    }

    /// The set without `cells`.
    #[must_use]
    pub fn without(self, cells: &[SourceCell]) -> PersonCells {
        PersonCells(self.0 & !PersonCells::of(cells.iter().copied()).0)
    }

    /// The cells, in column order.
    pub fn iter(self) -> impl Iterator<Item = SourceCell> {
        SourceCell::ALL.into_iter().filter(move |c| self.contains(*c))
    }

    /// The cells that differ between two versions of a row (what an edit wrote).
    pub fn changed(before: &Task, after: &Task) -> PersonCells {
        PersonCells::of(SourceCell::ALL.into_iter().filter(|c| c.differs(before, after)))
    }

    /// The set of `cells`.
    pub fn of(cells: impl IntoIterator<Item = SourceCell>) -> PersonCells {
        PersonCells(cells.into_iter().fold(0, |bits, c| bits | c.bit()))
    }

    /// The set as a number (one bit per cell in [`SourceCell::ALL`]'s order), as stored.
    pub fn bits(self) -> u16 {
        self.0
    }

    /// The set of a stored number; bits no cell has are dropped.
    pub fn from_bits(bits: u16) -> PersonCells {
        PersonCells(bits & ((1 << SourceCell::ALL.len()) - 1))
    }
}

impl fmt::Display for PersonCells {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(SourceCell::name).collect();
        f.write_str(&names.join(", "))
    }
}

/// As a list of names (`["body", "tags"]`), in the JSON of a row and in the journal.
impl serde::Serialize for PersonCells {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter().map(SourceCell::name))
    }
}

/// From a list of names; a name no cell has is skipped, so a journal entry written by a later
/// version still reads back.
impl<'de> serde::Deserialize<'de> for PersonCells {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let names = Vec::<String>::deserialize(deserializer)?;
        Ok(PersonCells::of(names.iter().filter_map(|n| SourceCell::parse(n))))
    }
}

/// A person-only field an item carried: refused (producers, agents) or ignored (pullers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldNote {
    /// Index of the item in the input.
    pub index: usize,
    /// Line of the item in its file.
    pub line: Option<usize>,
    /// The field.
    pub field: PersonField,
}

/// How a batch's person-only fields are treated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Screen {
    /// The first person-only field found where the authority refuses the batch.
    pub refused: Option<FieldNote>,
    /// Person-only fields a puller's items carried, and `by_person` from a producer or a
    /// puller; they are not written.
    pub ignored: Vec<FieldNote>,
}

/// Screens a batch of items written with `authority` for fields only a person writes.
pub fn screen(authority: Authority, items: &[Item]) -> Screen {
    let mut screen = Screen::default();
    if authority == Authority::Person {
        return screen;
    }
    for (index, item) in items.iter().enumerate() {
        for field in PersonField::set_in(item) {
            let note = FieldNote { index, line: item.line, field };
            // `by_person` only keeps cells from sources: a producer's or puller's file that
            // names it (a plain import of one's own export, say) is not refused for it, and no row
            // of it gets the marks. An agent's is refused: its plan is saved as the person's.
            if (authority == Authority::Puller && field != PersonField::ManualSource)
                || (field == PersonField::ByPerson && authority != Authority::Agent)
            {
                screen.ignored.push(note);
            } else {
                screen.refused = Some(note);
                return screen;
            }
        }
    }
    screen
}

/// The first of `items` that registers closed work (`done` or `dropped`,
/// [`PersonField::Closed`]), which an actor that [`refuses_closed`] may not.
pub fn closed_item(items: &[Item]) -> Option<FieldNote> {
    let (index, item) =
        items.iter().enumerate().find(|(_, i)| i.status.is_some_and(Status::satisfies_deps))?;
    Some(FieldNote { index, line: item.line, field: PersonField::Closed })
}

/// Whether `actor` may not register a row as `done` or `dropped` ([`PersonField::Closed`]): a
/// push (CLI, HTTP, MCP, an executor's output) and an agent (a worker, a decomposer).
pub fn refuses_closed(actor: &Actor) -> bool {
    matches!(actor, Actor::Push(_) | Actor::Worker(_))
}

/// The reason given when a producer's item carries a person-only field.
pub fn refused_field_reason(actor: &Actor, field: PersonField) -> String {
    if field == PersonField::ManualSource {
        return format!(
            "the source '{MANUAL_SOURCE}' holds the rows people add by hand (S13); {actor} may not write into it — give the item a source of its own"
        );
    }
    if field == PersonField::Closed {
        return format!(
            "status 'done' or 'dropped' is set only by a person (S13); {actor} registers open work — remove the status, or push it as pending"
        );
    }
    format!(
        "field '{field}' is written only by a person (S13); {actor} may not set it — remove it from the item{}",
        match actor {
            Actor::Import(_) => ", or import an export of your own ledger with `daicho import --ledger`",
            _ => "",
        }
    )
}

/// Why an edit or an approval is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// Only a person edits rows and approves.
    #[error("only a person may {what}; {actor} may not (S13)")]
    NotAPerson {
        /// What was attempted.
        what: &'static str,
        /// Who attempted it.
        actor: String,
    },
    /// `running` is set by a claim only.
    #[error("{id}: `running` is set only by a claim (`daicho run {id}` runs it now)")]
    RunningByHand {
        /// The task.
        id: crate::TaskId,
    },
    /// An approval of a task that cannot run yet (S2: it enters the queue when its deps are done).
    #[error("{id} is not ready to approve: {why}; approve it when it shows in the approval queue")]
    NotReady {
        /// The task.
        id: crate::TaskId,
        /// Why it is not ready.
        why: String,
    },
}

/// Checks a person's edit of `before` (S13): the actor must be a person, and no edit sets
/// `running` (a claim's alone). Moving a row that is `running` elsewhere (to `pending`, say)
/// stays a person's right: it ends the lease and the run's later writes are fenced out.
///
/// # Errors
///
/// The [`Refusal`].
pub fn check_edit(actor: &Actor, before: &Task, edit: &TaskEdit) -> Result<(), Refusal> {
    if Authority::of(actor) != Authority::Person {
        return Err(Refusal::NotAPerson { what: "edit a task", actor: actor.to_string() });
    }
    if edit.status == Some(Status::Running) && before.status != Status::Running {
        return Err(Refusal::RunningByHand { id: before.id });
    }
    Ok(())
}

/// Checks an approval of `before` (S2, S13): by a person, of a `pending` task whose deps are
/// all done (`unmet_deps` is the store's count of deps not yet `done`/`dropped`).
///
/// # Errors
///
/// The [`Refusal`].
pub fn check_approve(actor: &Actor, before: &Task, unmet_deps: u32) -> Result<(), Refusal> {
    if Authority::of(actor) != Authority::Person || *actor == Actor::System {
        return Err(Refusal::NotAPerson { what: "approve a task", actor: actor.to_string() });
    }
    let why = if before.status != Status::Pending {
        Some(format!("it is {}", before.status))
    } else if unmet_deps > 0 {
        let deps: Vec<String> = before.deps.iter().map(ToString::to_string).collect();
        Some(format!("it waits for {unmet_deps} unfinished dep(s) among {}", deps.join(", ")))
    } else {
        None
    };
    match why {
        Some(why) => Err(Refusal::NotReady { id: before.id, why }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TaskId;
    use jiff::Timestamp;

    fn item(line: usize) -> Item {
        let mut item = Item::new("x", "bot");
        item.line = Some(line);
        item
    }

    /// S13: a push or an agent never registers a row as done or dropped; a pulled checklist, an
    /// imported file and a person do.
    #[test]
    fn s13_only_a_push_or_an_agent_may_not_register_closed_work() {
        let mut done = Item::new("the review", "bot");
        done.status = Some(Status::Done);
        let mut dropped = Item::new("the draft", "bot");
        dropped.status = Some(Status::Dropped);
        let parked = Item { status: Some(Status::NeedsHuman), ..Item::new("ask", "bot") };
        let writers = [
            (Actor::Push("bot".into()), true),
            (Actor::Worker("w1".into()), true),
            (Actor::Sync("tasks".into()), false),
            (Actor::Import("tasks".into()), false),
            (Actor::Human("ana".into()), false),
        ];
        for (actor, refused) in writers {
            for item in [&done, &dropped] {
                let mut decider = crate::merge::Decider::for_actor(&actor, 1);
                let result = decider.check(0, std::slice::from_ref(item));
                assert_eq!(
                    matches!(
                        result,
                        Err(crate::merge::Refused::PersonField(FieldNote { field: PersonField::Closed, .. }))
                    ),
                    refused,
                    "{actor} {:?}",
                    item.status
                );
            }
            let mut decider = crate::merge::Decider::for_actor(&actor, 1);
            assert!(
                decider.check(0, std::slice::from_ref(&parked)).is_ok(),
                "{actor}: needs_human is open work"
            );
        }
    }

    /// S13: the cells a person wrote are the cells that changed, and read back from their stored
    /// number and from the journal's list of names (a name a later version added is skipped).
    #[test]
    fn s13_person_cells_are_what_changed_and_read_back_as_stored() {
        let before = Task::new(TaskId::new(1), "x", "bot", Timestamp::UNIX_EPOCH);
        let mut after = before.clone();
        after.body = "mine".into();
        after.tags.insert("ai");
        after.due = Some(jiff::civil::date(2027, 1, 31));
        let cells = PersonCells::changed(&before, &after);
        assert_eq!(cells.to_string(), "body, due, tags");
        assert!(cells.contains(SourceCell::Body) && !cells.contains(SourceCell::Title));
        assert_eq!(PersonCells::from_bits(cells.bits()), cells);
        assert_eq!(
            PersonCells::from_bits(u16::MAX),
            PersonCells::of(SourceCell::ALL),
            "unknown bits dropped"
        );
        let json = serde_json::to_string(&cells).unwrap();
        assert_eq!(json, r#"["body","due","tags"]"#);
        assert_eq!(serde_json::from_str::<PersonCells>(&json).unwrap(), cells);
        let later: PersonCells = serde_json::from_str(r#"["body","colour"]"#).unwrap();
        assert_eq!(later, PersonCells::of([SourceCell::Body]));
        assert!(PersonCells::changed(&before, &before).is_empty());
    }

    /// S13: no producer, puller or agent writes into the source of the rows people add by hand
    /// (an item of theirs there would fill a person's row with an action and the `ai` tag); a
    /// person does.
    #[test]
    fn s13_only_a_person_writes_into_the_manual_source() {
        let mut manual = item(4);
        manual.source = " Manual ".into();
        let items = [item(3), manual];
        for authority in [Authority::Producer, Authority::Puller, Authority::Agent] {
            let screen = screen(authority, &items);
            let want = FieldNote { index: 1, line: Some(4), field: PersonField::ManualSource };
            assert_eq!(screen.refused, Some(want), "{authority:?}");
        }
        assert_eq!(screen(Authority::Person, &items), Screen::default());
        let reason = refused_field_reason(&Actor::Push("ci".into()), PersonField::ManualSource);
        assert!(reason.starts_with("the source 'manual' holds the rows people add by hand"), "{reason}");
    }

    #[test]
    fn s13_authority_follows_the_actor() {
        assert_eq!(Authority::of(&Actor::Human("ana".into())), Authority::Person);
        assert_eq!(Authority::of(&Actor::Push("bot".into())), Authority::Producer);
        assert_eq!(Authority::of(&Actor::Import("file".into())), Authority::Producer);
        assert_eq!(Authority::of(&Actor::Sync("sheet".into())), Authority::Puller);
        assert_eq!(Authority::of(&Actor::Worker("w1".into())), Authority::Agent);
    }

    #[test]
    fn s13_producers_are_refused_at_the_first_person_field_pullers_are_reported() {
        let plain = item(1);
        let mut run = item(2);
        run.run = true;
        let mut many = item(3);
        many.correction = "do it again".into();
        many.failures = 2;
        many.result = "r".into();
        let items = [plain.clone(), run, many];
        let refused = screen(Authority::Producer, &items);
        assert_eq!(refused.refused, Some(FieldNote { index: 1, line: Some(2), field: PersonField::Run }));
        assert_eq!(screen(Authority::Agent, &items).refused.map(|n| n.field), Some(PersonField::Run));
        let pulled = screen(Authority::Puller, &items);
        assert_eq!(pulled.refused, None);
        let fields: Vec<&str> = pulled.ignored.iter().map(|n| n.field.name()).collect();
        assert_eq!(fields, ["run", "result", "correction", "failures"]);
        assert_eq!(screen(Authority::Person, &items), Screen::default());
        assert_eq!(screen(Authority::Producer, &[plain]), Screen::default(), "a plain item passes");
    }

    #[test]
    fn s13_running_is_a_claims_alone_and_only_people_edit() {
        let t0 = Timestamp::UNIX_EPOCH;
        let task = Task::new(TaskId::new(1), "a", "s", t0);
        let running = TaskEdit { status: Some(Status::Running), ..TaskEdit::default() };
        let person = Actor::Human("ana".into());
        assert_eq!(check_edit(&person, &task, &running), Err(Refusal::RunningByHand { id: task.id }));
        let done = TaskEdit { status: Some(Status::Done), ..TaskEdit::default() };
        assert_eq!(check_edit(&person, &task, &done), Ok(()));
        assert!(matches!(
            check_edit(&Actor::Push("bot".into()), &task, &done),
            Err(Refusal::NotAPerson { .. })
        ));
        let mut claimed = task.clone();
        claimed.status = Status::Running;
        assert_eq!(check_edit(&person, &claimed, &running), Ok(()), "no change is no claim");
    }

    #[test]
    fn s2_s13_only_a_person_approves_and_only_a_ready_task() {
        let mut task = Task::new(TaskId::new(504), "publish", "s", Timestamp::UNIX_EPOCH);
        task.deps = vec![TaskId::new(503)];
        let person = Actor::Human("ana".into());
        assert!(matches!(check_approve(&person, &task, 1), Err(Refusal::NotReady { .. })));
        assert_eq!(check_approve(&person, &task, 0), Ok(()));
        assert!(matches!(check_approve(&Actor::System, &task, 0), Err(Refusal::NotAPerson { .. })));
        assert!(matches!(
            check_approve(&Actor::Worker("mcp:a".into()), &task, 0),
            Err(Refusal::NotAPerson { .. })
        ));
        task.status = Status::Done;
        let err = check_approve(&person, &task, 0).expect_err("done");
        assert!(err.to_string().contains("it is done"), "{err}");
    }
}

//! The task model of SPEC §1: statuses, tags, the task row, actors.

use std::fmt;

use jiff::Timestamp;
use jiff::civil::Date;
use serde::{Deserialize, Serialize};

use crate::id::TaskId;

/// The status of a task row (状態).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// 未着手: not started.
    Pending,
    /// 実行中: claimed by a worker.
    Running,
    /// AI実行済(要確認): an executor ran it; a person checks.
    Review,
    /// 完了: finished.
    Done,
    /// 不要: not needed.
    Dropped,
    /// 要人手: parked for a person.
    NeedsHuman,
}

impl Status {
    /// Every status, in lifecycle order.
    pub const ALL: [Status; 6] =
        [Status::Pending, Status::Running, Status::Review, Status::Done, Status::Dropped, Status::NeedsHuman];

    /// The English wire name (`needs_human`).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Running => "running",
            Status::Review => "review",
            Status::Done => "done",
            Status::Dropped => "dropped",
            Status::NeedsHuman => "needs_human",
        }
    }

    /// The Japanese name shown when the locale is `ja`.
    pub fn ja(self) -> &'static str {
        match self {
            Status::Pending => "未着手",
            Status::Running => "実行中",
            Status::Review => "AI実行済(要確認)",
            Status::Done => "完了",
            Status::Dropped => "不要",
            Status::NeedsHuman => "要人手",
        }
    }

    /// The name for a locale: Japanese when `ja` is true.
    pub fn label(self, ja: bool) -> &'static str {
        if ja { self.ja() } else { self.as_str() }
    }

    /// Parses an English or Japanese status name. Case, blanks and full-width forms are ignored.
    pub fn parse(text: &str) -> Option<Status> {
        let folded: String = crate::key::nfkc(text.trim())
            .chars()
            .filter(|c| !c.is_whitespace())
            .flat_map(char::to_lowercase)
            .map(|c| if c == '-' { '_' } else { c })
            .collect();
        let status = match folded.as_str() {
            "pending" | "todo" | "open" | "未着手" => Status::Pending,
            "running" | "実行中" => Status::Running,
            "review" | "ai実行済(要確認)" | "ai実行済" | "要確認" => Status::Review,
            "done" | "完了" => Status::Done,
            "dropped" | "不要" => Status::Dropped,
            "needs_human" | "needshuman" | "要人手" => Status::NeedsHuman,
            _ => return None,
        };
        Some(status)
    }

    /// The statuses a filter names (`list --status`, the ledger page's `?status=`): names in
    /// either language, `open` for pending, running and review, `closed` for done, dropped and
    /// needs_human; blank names are passed over.
    ///
    /// # Errors
    /// The first name that is no status.
    pub fn parse_filter<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Vec<Status>, BadStatus> {
        let mut statuses = Vec::new();
        for name in names.into_iter().map(str::trim).filter(|n| !n.is_empty()) {
            match name.to_lowercase().as_str() {
                "open" => statuses.extend(Status::ALL.into_iter().filter(|s| s.is_open())),
                "closed" => statuses.extend(Status::ALL.into_iter().filter(|s| s.is_closed())),
                _ => statuses.push(name.parse()?),
            }
        }
        Ok(statuses)
    }

    /// Open statuses (`pending`, `running`, `review`) are the ones sync may still fill in.
    pub fn is_open(self) -> bool {
        matches!(self, Status::Pending | Status::Running | Status::Review)
    }

    /// Closed statuses (`done`, `dropped`, `needs_human`) are never touched by sync (M3).
    pub fn is_closed(self) -> bool {
        !self.is_open()
    }

    /// A dependency is satisfied by `done` or `dropped`.
    pub fn satisfies_deps(self) -> bool {
        matches!(self, Status::Done | Status::Dropped)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a status name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{0}' is not a status (pending, running, review, done, dropped, needs_human, or 未着手, 実行中, 要確認, 完了, 不要, 要人手)"
)]
pub struct BadStatus(pub String);

impl std::str::FromStr for Status {
    type Err = BadStatus;

    fn from_str(s: &str) -> Result<Status, BadStatus> {
        Status::parse(s).ok_or_else(|| BadStatus(s.to_owned()))
    }
}

/// Tag `ai` (🤖 / 【夜間AI可】): an AI may run the task.
pub const TAG_AI: &str = "ai";
/// Tag `external` (⚠️対外 …): an outbound action that needs a person's approval.
pub const TAG_EXTERNAL: &str = "external";
/// Tag `heavy`: too long for a sweep.
pub const TAG_HEAVY: &str = "heavy";

/// The tags of a task: a sorted set of short lower-case words, kept in a sorted `Vec` (a task
/// has a few; a `BTreeSet` node would take ~280 bytes for one tag, per row of a large batch).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Tags(Vec<String>);

impl<'de> Deserialize<'de> for Tags {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Tags, D::Error> {
        let mut tags = Vec::<String>::deserialize(deserializer)?;
        tags.sort_unstable();
        tags.dedup();
        Ok(Tags(tags))
    }
}

impl Tags {
    /// No tags.
    pub fn new() -> Tags {
        Tags::default()
    }

    /// A tag as stored: lower case, inner blanks and commas turned into `-` (a tag is one word).
    fn normalize(tag: &str) -> String {
        tag.trim()
            .to_lowercase()
            .split(|c: char| c.is_whitespace() || c == ',' || c == '、')
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join("-")
    }

    /// Adds a tag (trimmed, lower-cased, one word); blank tags are ignored.
    pub fn insert(&mut self, tag: &str) {
        let tag = Tags::normalize(tag);
        if !tag.is_empty()
            && let Err(at) = self.0.binary_search(&tag)
        {
            self.0.insert(at, tag);
        }
    }

    /// Removes a tag; returns whether it was there.
    pub fn remove(&mut self, tag: &str) -> bool {
        match self.0.binary_search(&Tags::normalize(tag)) {
            Ok(at) => {
                self.0.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// Whether the tag is present.
    pub fn contains(&self, tag: &str) -> bool {
        self.0.binary_search_by(|t| t.as_str().cmp(tag)).is_ok()
    }

    /// Whether there are no tags.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The tags in sorted order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// Parses a comma- or blank-separated list (`ai, external`).
    pub fn parse_list(text: &str) -> Tags {
        let mut tags = Tags::new();
        for tag in text.split(|c: char| c == ',' || c == '、' || c.is_whitespace()) {
            tags.insert(tag);
        }
        tags
    }

    /// The comma-separated form (`ai,external`).
    pub fn to_list(&self) -> String {
        self.iter().collect::<Vec<_>>().join(",")
    }
}

impl<'a> FromIterator<&'a str> for Tags {
    fn from_iter<I: IntoIterator<Item = &'a str>>(iter: I) -> Tags {
        let mut tags = Tags::new();
        for tag in iter {
            tags.insert(tag);
        }
        tags
    }
}

/// The lease of a running task: who holds it and until when. On a row a person moved out of
/// `running` it stays as a fence until its worker has stopped the run and cleared it, or until it
/// runs out: no claim takes the row meanwhile (S14, [`crate::policy::previous_run`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The worker that claimed the task.
    pub owner: String,
    /// When the lease runs out unless a heartbeat extends it.
    pub expires_at: Timestamp,
}

/// One row of the ledger (SPEC §1). Fields are in the order a person sees them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// `T-0001`; never changes.
    pub id: TaskId,
    /// The project (案件) whose ledger holds the row.
    pub project: String,
    /// 状態.
    pub status: Status,
    /// The ▶ run checkbox: a person asks for a run.
    pub run: bool,
    /// タスク.
    pub title: String,
    /// 内容.
    pub body: String,
    /// 発生源: where it came from; part of the dedupe key.
    pub source: String,
    /// 根拠: why the task exists.
    pub evidence: String,
    /// 期限.
    pub due: Option<Date>,
    /// 担当.
    pub assignee: String,
    /// 分類: the work type, used for routing.
    #[serde(rename = "type")]
    pub work_type: String,
    /// Larger runs first; 0 is the default.
    pub priority: i64,
    /// Earliest start.
    pub not_before: Option<Timestamp>,
    /// AI機能: the executor to run; empty means a manual task.
    pub action: String,
    /// 実行結果.
    pub result: String,
    /// 実行日時: when the last run started.
    pub run_at: Option<Timestamp>,
    /// 修正指示: written by a person only.
    pub correction: String,
    /// The ids this task waits for.
    pub deps: Vec<TaskId>,
    /// `ai`, `external`, `heavy` and free tags.
    pub tags: Tags,
    /// Hidden: the dedupe key (`source|normalized title`).
    pub key: String,
    /// Hidden: failures counted so far.
    pub failures: u32,
    /// Hidden: an aggregate row whose body and evidence each sync overwrites.
    pub refresh: bool,
    /// Hidden: how many times the task was claimed.
    pub attempt: u32,
    /// Hidden: owner and expiry while running (and, as a fence, after a person moved the row
    /// out of `running` until the run has stopped).
    pub lease: Option<Lease>,
    /// Hidden: the person who approved the next run of this external task (S2, S13), as the
    /// journal names them; empty when none did. Only `approve` sets it; the claim clears it.
    #[serde(default)]
    pub approved_by: String,
    /// Hidden: the cells a person wrote, which no source fills or overwrites again (S13, M5).
    #[serde(default)]
    pub person_cells: crate::authority::PersonCells,
    /// When the row was created.
    pub created_at: Timestamp,
    /// When the row last changed.
    pub updated_at: Timestamp,
}

impl Task {
    /// A pending task with every other field empty.
    pub fn new(id: TaskId, title: &str, source: &str, now: Timestamp) -> Task {
        Task::with_key(id, title, source, crate::key::dedupe_key(source, title), now)
    }

    /// [`Task::new`] with the dedupe key already computed.
    pub fn with_key(id: TaskId, title: &str, source: &str, key: String, now: Timestamp) -> Task {
        Task {
            id,
            project: String::new(),
            status: Status::Pending,
            run: false,
            title: title.to_owned(),
            body: String::new(),
            source: source.to_owned(),
            evidence: String::new(),
            due: None,
            assignee: String::new(),
            work_type: String::new(),
            priority: 0,
            not_before: None,
            action: String::new(),
            result: String::new(),
            run_at: None,
            correction: String::new(),
            deps: Vec::new(),
            tags: Tags::new(),
            key,
            failures: 0,
            refresh: false,
            attempt: 0,
            lease: None,
            approved_by: String::new(),
            person_cells: crate::authority::PersonCells::NONE,
            created_at: now,
            updated_at: now,
        }
    }
}

/// Who changed a row; recorded in the journal as `sync:<source>`, `human:<name>`, ….
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Actor {
    /// A pull source being synced or imported.
    Sync(String),
    /// A producer pushing tasks.
    Push(String),
    /// A worker running tasks.
    Worker(String),
    /// A person.
    Human(String),
    /// A file imported as foreign input (`daicho import` without `--ledger`): a producer.
    Import(String),
    /// daicho itself.
    System,
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Sync(name) => write!(f, "sync:{name}"),
            Actor::Push(name) => write!(f, "push:{name}"),
            Actor::Worker(name) => write!(f, "worker:{name}"),
            Actor::Human(name) => write!(f, "human:{name}"),
            Actor::Import(name) => write!(f, "import:{name}"),
            Actor::System => f.write_str("system"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn japanese_status_names_are_accepted() {
        let cases = [
            ("未着手", Status::Pending),
            ("実行中", Status::Running),
            ("AI実行済(要確認)", Status::Review),
            ("AI実行済（要確認）", Status::Review),
            ("要確認", Status::Review),
            ("完了", Status::Done),
            ("不要", Status::Dropped),
            ("要人手", Status::NeedsHuman),
            ("Needs-Human", Status::NeedsHuman),
            (" DONE ", Status::Done),
        ];
        for (text, want) in cases {
            assert_eq!(Status::parse(text), Some(want), "{text}");
        }
        assert_eq!(Status::parse("finished"), None);
        for status in Status::ALL {
            assert_eq!(Status::parse(status.as_str()), Some(status));
            assert_eq!(Status::parse(status.ja()), Some(status));
        }
    }

    #[test]
    fn open_and_closed_statuses() {
        let open: Vec<_> = Status::ALL.into_iter().filter(|s| s.is_open()).collect();
        assert_eq!(open, [Status::Pending, Status::Running, Status::Review]);
        let satisfying: Vec<_> = Status::ALL.into_iter().filter(|s| s.satisfies_deps()).collect();
        assert_eq!(satisfying, [Status::Done, Status::Dropped]);
    }

    /// I1, I2: a status filter takes names in either language and `open` / `closed` (any case),
    /// passes blanks over and names the first bad name.
    #[test]
    fn i1_i2_a_status_filter_takes_names_and_the_open_and_closed_groups() {
        use Status::*;
        assert_eq!(Status::parse_filter(["Open", " ", "完了"]), Ok(vec![Pending, Running, Review, Done]));
        assert_eq!(Status::parse_filter(["closed"]), Ok(vec![Done, Dropped, NeedsHuman]));
        assert_eq!(Status::parse_filter(["要人手", "bogus", "nope"]), Err(BadStatus("bogus".to_owned())));
        assert_eq!(Status::parse_filter([]), Ok(vec![]));
    }

    #[test]
    fn tags_are_a_lower_case_set() {
        let tags = Tags::parse_list("AI, external heavy,,ai");
        assert_eq!(tags.to_list(), "ai,external,heavy");
        let mut spaced = Tags::new();
        spaced.insert("Needs  Review");
        assert_eq!(Tags::parse_list(&spaced.to_list()), spaced, "a tag with a blank reads back whole");
        assert!(spaced.remove("needs review"));
        assert!(!spaced.remove("needs review") && spaced.is_empty());
        let mut tags = Tags::parse_list("zeta alpha mid");
        assert!(tags.contains("alpha") && tags.contains("zeta") && !tags.contains("beta"));
        tags.insert("beta");
        assert_eq!(tags.to_list(), "alpha,beta,mid,zeta", "kept sorted");
        // Read back from JSON as a set: sorted, once each.
        let read: Tags = serde_json::from_str(r#"["b","a","b"]"#).expect("tags");
        assert_eq!(
            (read.to_list(), serde_json::to_string(&read).expect("json")),
            ("a,b".into(), r#"["a","b"]"#.into())
        );
    }
}

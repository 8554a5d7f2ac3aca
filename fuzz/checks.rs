#![allow(dead_code)]
//! The fuzz checks, shared by the cargo-fuzz targets (`fuzz_targets/*.rs`) and the regression
//! test that replays every saved input in `fuzz/regressions/<target>/` on each `cargo test`
//! (`crates/daicho-engine/tests/fuzz_regressions.rs`). Each check takes raw bytes, must not panic,
//! and asserts the properties its code promises.

use std::collections::BTreeMap;

use daicho_core::dag::{NewDeps, check_new_deps, find_cycle};
use daicho_core::format::ItemDefaults;
use daicho_core::key::normalize_title;
use daicho_core::{Item, Status, Task, TaskId, merge_plan};

/// A check of one fuzz input.
pub type Check = fn(&[u8]);

/// The targets, by name, as the fuzz script and the regression test know them.
pub const TARGETS: [(&str, Check); 7] = [
    ("markdown", check_markdown),
    ("csv", check_csv),
    ("json", check_json),
    ("normalize_title", check_normalize_title),
    ("merge_plan", check_merge_plan),
    ("dag", check_dag),
    ("config", check_config),
];

fn defaults() -> ItemDefaults {
    ItemDefaults { source: "fuzz".into(), project: String::new() }
}

/// Parsed items go through `merge_plan` into an empty ledger: no panic, and no blank row is added
/// (an item with neither title nor id is the blank line M9 skips).
fn items_are_sane(items: &[Item]) {
    let now = jiff::Timestamp::from_second(1_800_000_000).expect("time");
    let plan = merge_plan(&[], items, now, 1);
    for add in &plan.add {
        assert!(!add.task.title.trim().is_empty(), "a blank row would be added: {:?}", add.task);
    }
}

/// The Markdown task-line parser: no panic; an error names the file and a line within the text.
pub fn check_markdown(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match daicho_core::format::markdown::parse(text, "f.md", &defaults()) {
        Ok(items) => {
            // A task line without text after its checkbox is an error, never a blank item.
            assert!(items.iter().all(|i| !i.title.trim().is_empty()), "a blank task line: {items:?}");
            items_are_sane(&items);
        }
        Err(e) => {
            assert_eq!(e.file, "f.md");
            assert!(e.line.is_none_or(|l| l >= 1 && l <= text.lines().count().max(1) + 1), "{e}");
        }
    }
}

/// The CSV importer.
pub fn check_csv(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(items) = daicho_core::format::csv::parse(text, "f.csv", &defaults()) {
        items_are_sane(&items);
    }
}

/// The JSON importers (a document or array, and JSON Lines).
pub fn check_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(items) = daicho_core::format::json::parse(text, "f.json", &defaults()) {
        items_are_sane(&items);
    }
    if let Ok(items) = daicho_core::format::json::parse_lines(text, "f.jsonl", &defaults()) {
        items_are_sane(&items);
    }
}

/// `normalize_title` (M1): idempotent, so a title and its normalized form share one key.
pub fn check_normalize_title(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let once = normalize_title(&text);
    assert_eq!(normalize_title(&once), once, "not idempotent on {text:?}");
}

/// A byte reader for structured inputs: each call takes what it needs, zeros when exhausted.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else { return 0 };
        self.0 = rest;
        b
    }

    fn below(&mut self, n: u8) -> u8 {
        self.next() % n.max(1)
    }
}

const TITLES: [&str; 8] = ["parser", "パーサー実装", "ﾊﾟｰｻｰ実装", "Parser!", "docs", "tests", "", "  "];

/// `merge_plan` on an arbitrary ledger and batch: M2 (no row removed), M3 (closed rows never
/// patched), new ids unique and unused, patches only of existing rows.
pub fn check_merge_plan(data: &[u8]) {
    let mut b = Bytes(data);
    let now = jiff::Timestamp::from_second(1_800_000_000).expect("time");
    let mut existing = Vec::new();
    for n in 1..=u64::from(b.below(12)) {
        let title = TITLES[b.below(8) as usize];
        let source = if b.below(2) == 0 { "a" } else { "b" };
        let mut task = Task::new(TaskId::new(n * u64::from(1 + b.below(3))), title, source, now);
        task.status = Status::ALL[b.below(6) as usize];
        if b.below(3) == 0 {
            task.body = "body".into();
        }
        task.refresh = b.below(4) == 0;
        if existing.iter().all(|t: &Task| t.id != task.id) {
            existing.push(task);
        }
    }
    let mut items = Vec::new();
    for _ in 0..b.below(10) {
        let mut item = Item::new(TITLES[b.below(8) as usize], if b.below(2) == 0 { "a" } else { "b" });
        if b.below(3) == 0 {
            item.ref_id = Some(format!("T-{}", b.below(40)));
        }
        if b.below(3) == 0 {
            item.status = Some(Status::ALL[b.below(6) as usize]);
        }
        item.body = if b.below(2) == 0 { String::new() } else { "new body".into() };
        item.deps = (0..b.below(3)).map(|_| format!("T-{}", b.below(40))).collect();
        items.push(item);
    }
    let next_id = existing.iter().map(|t| t.id.num()).max().unwrap_or(0) + 1 + u64::from(b.below(3));
    let plan = merge_plan(&existing, &items, now, next_id);
    let by_id: BTreeMap<TaskId, &Task> = existing.iter().map(|t| (t.id, t)).collect();
    for patch in &plan.patch {
        let row = by_id.get(&patch.id).unwrap_or_else(|| panic!("a patch of a missing row {}", patch.id));
        assert!(!row.status.is_closed(), "M3: patched closed row {}", row.id);
    }
    let mut seen = std::collections::BTreeSet::new();
    for add in &plan.add {
        assert!(!by_id.contains_key(&add.task.id), "an added id already in use: {}", add.task.id);
        assert!(seen.insert(add.task.id), "an id added twice: {}", add.task.id);
    }
    assert!(plan.next_id >= next_id, "the id counter went back");
    // M2: nothing in a plan removes a row; every existing row is still addressed by its id.
    assert!(plan.patch.iter().all(|p| by_id.contains_key(&p.id)));
}

/// The DAG checker: a reported cycle is a real one; accepted changes leave the graph acyclic.
pub fn check_dag(data: &[u8]) {
    let mut b = Bytes(data);
    let mut graph: BTreeMap<TaskId, Vec<TaskId>> = BTreeMap::new();
    let n = 1 + u64::from(b.below(10));
    for id in 1..=n {
        let deps = (0..b.below(3))
            .map(|_| TaskId::new(1 + u64::from(b.below(n as u8))))
            .filter(|d| d.num() != id)
            .collect();
        graph.insert(TaskId::new(id), deps);
    }
    let is_cycle = |path: &[TaskId], graph: &BTreeMap<TaskId, Vec<TaskId>>| {
        path.len() >= 2
            && path.first() == path.last()
            && path.windows(2).all(|w| graph.get(&w[0]).is_some_and(|deps| deps.contains(&w[1])))
    };
    if let Some(path) = find_cycle(&graph) {
        assert!(is_cycle(&path, &graph), "not a cycle: {path:?}");
    }
    // A change on an acyclic base: accepted ⇒ the result is acyclic.
    let base: BTreeMap<TaskId, Vec<TaskId>> =
        graph.iter().map(|(id, deps)| (*id, deps.iter().copied().filter(|d| d < id).collect())).collect();
    let changes: Vec<NewDeps> = (0..1 + b.below(3))
        .map(|i| {
            let task = TaskId::new(1 + u64::from(b.below(n as u8 + 2)));
            let deps = (0..b.below(3)).map(|_| TaskId::new(1 + u64::from(b.below(n as u8 + 2)))).collect();
            NewDeps { task, deps, origin: Some(usize::from(i)) }
        })
        .collect();
    let refuse_unknown = b.below(2) == 0;
    let outcome = check_new_deps(&changes, refuse_unknown, |id| base.get(&id).cloned());
    if outcome.is_ok() {
        let mut after = base.clone();
        for change in &changes {
            after.insert(change.task, change.deps.clone());
        }
        assert_eq!(find_cycle(&after), None, "accepted {changes:?} on {base:?}");
    }
}

/// The configuration loader: any text gives a config or an error naming the file, never a panic.
pub fn check_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Err(e) = daicho_engine::Config::parse(text, "daicho.toml") {
        assert!(e.to_string().contains("daicho.toml"), "{e}");
    }
}

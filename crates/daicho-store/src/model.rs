//! A model-based test of the whole ledger on a real store (every backend runs it, as it runs the
//! [`crate::contract`] suite): random sequences of add,
//! push, sync, import, claim, heartbeat, finish (success and failure), lease expiry, set, pause,
//! purge and restore, applied both to the store and to a simple in-memory model. After every step
//! the store must equal the model, and the invariants hold: no row deleted except by purge, ids
//! and keys stable, closed rows and `correction` / `result` / `failures` untouched by sync, no
//! task claimed twice at once, the ready set equal to the model's, failures within the cap,
//! every change journaled.
//!
//! The model decides with the pure core where the core is the rule (`merge_plan` for upserts,
//! `TaskEdit::apply` for a person's edit, `dag::ready` for the ready set); claims, heartbeats,
//! run ends, expiry and purge are written out here from SPEC §5 and §9 on their own.
//!
//! A backend's test calls [`model_based_walks_keep_every_ledger_invariant`] with a function giving
//! a fresh [`Backend`] (an empty database) per seed. CI runs `DAICHO_MODEL_SEEDS` seeds (default
//! 48 on SQLite, 16 on PostgreSQL) of 90 steps; a longer local run:
//! `DAICHO_MODEL_SEEDS=2000 cargo test -p daicho-sqlite --test it model -- --nocapture`.

use std::collections::{BTreeMap, BTreeSet};

use crate::contract::Backend;
use crate::{Batch, ClaimOutcome, ClaimRequest, Finish, ListFilter, RunEnd, Store, StoreError, UnknownDeps};
use daicho_core::edit::TaskEdit;
use daicho_core::merge::merge_plan_with_keys;
use daicho_core::policy::FailurePolicy;
use daicho_core::task::Lease;
use daicho_core::{Actor, Item, Status, Task, TaskId, dag};
use jiff::{SignedDuration, Timestamp};

const STEPS: usize = 90;
const CAP: u32 = 3;
const WORKERS: [&str; 2] = ["w1", "w2"];
const SOURCES: [&str; 2] = ["sheet", "inbox"];

/// A deterministic generator per seed (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }

    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

/// The fields the model follows: everything a person or a rule cares about; timestamps other
/// than the lease are left out.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Shape {
    key: String,
    status: Status,
    run: bool,
    title: String,
    body: String,
    source: String,
    project: String,
    result: String,
    correction: String,
    deps: Vec<TaskId>,
    failures: u32,
    attempt: u32,
    lease: Option<(String, Timestamp)>,
    person_cells: daicho_core::authority::PersonCells,
}

fn shape(t: &Task) -> Shape {
    Shape {
        key: t.key.clone(),
        status: t.status,
        run: t.run,
        title: t.title.clone(),
        body: t.body.clone(),
        source: t.source.clone(),
        project: t.project.clone(),
        result: t.result.clone(),
        correction: t.correction.clone(),
        deps: t.deps.clone(),
        failures: t.failures,
        attempt: t.attempt,
        lease: t.lease.as_ref().map(|l| (l.owner.clone(), l.expires_at)),
        person_cells: t.person_cells,
    }
}

/// The in-memory model.
#[derive(Clone, Debug, Default)]
struct Model {
    rows: BTreeMap<TaskId, Task>,
    next_id: u64,
    paused: bool,
    /// Rows a person edited (purge keeps them).
    edited: BTreeSet<TaskId>,
    /// Rows purged per source, each as its last purge left it (restore skips those back in the
    /// ledger).
    purged: BTreeMap<String, BTreeMap<TaskId, Task>>,
}

impl Model {
    fn tasks(&self) -> Vec<Task> {
        self.rows.values().cloned().collect()
    }

    fn ready(&self, now: Timestamp) -> BTreeSet<TaskId> {
        dag::ready(&self.tasks(), now).into_iter().collect()
    }

    /// A run's end (S3) or a lost run (S4): one failure, back to pending or parked at the cap.
    fn fail(row: &mut Task) {
        row.failures += 1;
        row.status = if row.failures >= CAP { Status::NeedsHuman } else { Status::Pending };
        row.lease = None;
    }
}

async fn store_shapes<S: Store>(store: &S) -> BTreeMap<TaskId, Shape> {
    store.list(ListFilter::default()).await.expect("list").iter().map(|t| (t.id, shape(t))).collect()
}

async fn journal_lengths<S: Store>(store: &S, ids: impl Iterator<Item = TaskId>) -> BTreeMap<TaskId, usize> {
    let mut out = BTreeMap::new();
    for id in ids {
        out.insert(id, store.journal(id).await.expect("journal").len());
    }
    out
}

fn random_items(rng: &mut Rng, source: &str) -> Vec<Item> {
    (0..1 + rng.below(3))
        .map(|_| {
            let mut item = Item::new(&format!("task {}", rng.below(12)), source);
            if rng.chance(3) {
                item.body = format!("body {}", rng.below(4));
            }
            if rng.chance(4) {
                item.project = format!("PJ-{}", rng.below(2));
            }
            if rng.chance(5) {
                item.ref_id = Some(format!("T-{}", 1 + rng.below(20)));
            }
            item.deps = (0..rng.below(3)).map(|_| format!("T-{}", 1 + rng.below(20))).collect();
            if rng.chance(4) {
                item.status = Some(Status::ALL[rng.below(6) as usize]);
            }
            item
        })
        .collect()
}

/// One seed's walk. Returns the number of steps that changed the ledger.
async fn walk<B: Backend>(backend: &B, seed: u64) -> usize {
    let store = backend.open().await;
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut model = Model { next_id: 1, ..Model::default() };
    let mut now = Timestamp::from_second(1_800_000_000).expect("time");
    let policy = FailurePolicy { max_failures: CAP };
    let mut changed_steps = 0;
    for step in 0..STEPS {
        now += SignedDuration::from_secs(1 + rng.below(20) as i64);
        let before = store_shapes(&store).await;
        let journal_before = journal_lengths(&store, before.keys().copied()).await;
        let op = rng.below(14);
        let is_sync = matches!(op, 0..=2);
        let what: String = match op {
            // add / push / sync / import: one upsert through merge_plan.
            0..=4 => {
                let source = SOURCES[rng.below(2) as usize];
                let items = random_items(&mut rng, source);
                let (actor, unknown_deps) = match op {
                    0..=2 => (Actor::Sync(source.into()), UnknownDeps::Keep),
                    3 => (Actor::Push(source.into()), UnknownDeps::Refuse),
                    _ => (Actor::Human("importer".into()), UnknownDeps::Refuse),
                };
                let keys = daicho_core::merge::incoming_keys(&items);
                let authority = daicho_core::authority::Authority::of(&actor);
                let plan = merge_plan_with_keys(&model.tasks(), &items, &keys, authority, now, model.next_id);
                let batch = Batch { items: items.into(), actor, now, file: "walk".into(), unknown_deps };
                match store.upsert(batch).await {
                    Ok(report) => {
                        let added: Vec<TaskId> = plan.add.iter().map(|a| a.task.id).collect();
                        assert_eq!(report.added, added, "seed {seed} step {step}: the rows added");
                        for a in plan.add {
                            model.rows.insert(a.task.id, a.task);
                        }
                        for p in plan.patch {
                            let row = model.rows.get_mut(&p.id).expect("patched row");
                            p.fields.apply_to(row);
                        }
                        model.next_id = plan.next_id;
                        format!("upsert ok {report:?}")
                    }
                    // Refused whole (unknown dep, cycle): nothing written, no id used.
                    Err(StoreError::InvalidInput(e)) => format!("upsert refused: {e}"),
                    Err(e) => panic!("seed {seed} step {step}: upsert failed: {e}"),
                }
            }
            // claim (S1)
            5 | 6 => {
                let id = TaskId::new(1 + rng.below(model.next_id.max(2) - 1));
                let worker = WORKERS[rng.below(2) as usize];
                let require_run = rng.chance(3);
                let lease = SignedDuration::from_secs(30 + rng.below(60) as i64);
                let request = ClaimRequest {
                    id,
                    worker: worker.into(),
                    action: "act".into(),
                    now,
                    lease,
                    require_run,
                    require_approval: false,
                };
                let ready = model.ready(now);
                let outcome = store.claim(request).await.expect("claim");
                // S14: not while a run a person stopped may still be alive (its lease a fence).
                let claimable = !model.paused
                    && ready.contains(&id)
                    && model.rows.get(&id).is_some_and(|r| {
                        (!require_run || r.run) && daicho_core::policy::previous_run(r, now).is_none()
                    });
                match (&outcome, claimable) {
                    (ClaimOutcome::Claimed(_), true) => {
                        let row = model.rows.get_mut(&id).expect("row");
                        row.status = Status::Running;
                        row.run = false;
                        row.attempt += 1;
                        row.lease = Some(Lease { owner: worker.into(), expires_at: now + lease });
                    }
                    (ClaimOutcome::Paused(_), false) if model.paused => {}
                    (ClaimOutcome::NotClaimable, false) => {}
                    _ => panic!(
                        "seed {seed} step {step}: claim {id} by {worker} gave {outcome:?}, model: {claimable}"
                    ),
                }
                format!("claim {id}: {outcome:?}")
            }
            // heartbeat, right or wrong attempt and worker
            7 => {
                let Some(row) = model.rows.values().find(|r| r.status == Status::Running).cloned() else {
                    continue;
                };
                let owner = row.lease.as_ref().map(|l| l.owner.clone()).unwrap_or_default();
                let worker = if rng.chance(4) { "intruder".to_owned() } else { owner.clone() };
                let attempt = if rng.chance(4) { row.attempt.saturating_sub(1) } else { row.attempt };
                let until = now + SignedDuration::from_secs(90);
                let result = store.heartbeat(row.id, attempt, &worker, until).await;
                let current = worker == owner && attempt == row.attempt;
                match (&result, current) {
                    (Ok(()), true) => {
                        model.rows.get_mut(&row.id).expect("row").lease.as_mut().expect("lease").expires_at =
                            until
                    }
                    (Err(StoreError::LeaseLost { .. }), false) => {}
                    _ => panic!(
                        "seed {seed} step {step}: heartbeat {} gave {result:?}, model: {current}",
                        row.id
                    ),
                }
                format!("heartbeat {}: {result:?}", row.id)
            }
            // finish: success or failure, current or stale (fenced)
            8 | 9 => {
                let Some(row) =
                    model.rows.values().filter(|r| r.attempt > 0).nth(rng.below(4) as usize).cloned()
                else {
                    continue;
                };
                let owner = row.lease.as_ref().map(|l| l.owner.clone()).unwrap_or_else(|| "w1".into());
                let attempt = if rng.chance(5) { row.attempt + 1 } else { row.attempt };
                let success = rng.chance(2);
                let end = if success {
                    RunEnd::Success {
                        result: format!("result {step}"),
                        status: Status::Review,
                        tokens_in: None,
                        tokens_out: None,
                    }
                } else {
                    RunEnd::Failure { error: "boom".into(), timeout: false }
                };
                let finish = Finish { id: row.id, attempt, worker: owner.clone(), now, end, policy };
                let result = store.finish(finish).await;
                let current = attempt == row.attempt && row.lease.as_ref().is_some_and(|l| l.owner == owner);
                match (&result, current) {
                    (Err(StoreError::LeaseLost { .. }), true) if row.status != Status::Running => {
                        // S14: a run a person stopped has ended: its end is refused, and its
                        // fence goes.
                        model.rows.get_mut(&row.id).expect("row").lease = None;
                    }
                    (Ok(_), true) => {
                        let m = model.rows.get_mut(&row.id).expect("row");
                        if success {
                            m.status = Status::Review;
                            m.result = format!("result {step}");
                            m.lease = None;
                        } else {
                            Model::fail(m);
                        }
                    }
                    (Err(StoreError::LeaseLost { .. }), false) => {}
                    _ => {
                        panic!("seed {seed} step {step}: finish {} gave {result:?}, model: {current}", row.id)
                    }
                }
                format!("finish {} success={success}: {}", row.id, result.is_ok())
            }
            // lease expiry (S4)
            10 => {
                let lost = store.expire_leases(now, policy).await.expect("expire");
                let mut want = Vec::new();
                for row in model.rows.values_mut() {
                    if row.status == Status::Running && row.lease.as_ref().is_none_or(|l| l.expires_at <= now)
                    {
                        Model::fail(row);
                        want.push((row.id, row.status));
                    }
                }
                assert_eq!(lost, want, "seed {seed} step {step}: lost runs");
                format!("expire: {lost:?}")
            }
            // a person's set (F1)
            11 => {
                let id = TaskId::new(1 + rng.below(model.next_id.max(2) - 1));
                let mut edit = TaskEdit::default();
                if rng.chance(2) {
                    let status = Status::ALL[rng.below(6) as usize];
                    edit.status = Some(if status == Status::Running { Status::Pending } else { status });
                }
                if rng.chance(2) {
                    edit.correction = Some(format!("fix {}", rng.below(3)));
                }
                if rng.chance(2) {
                    edit.run = Some(rng.chance(2));
                }
                if rng.chance(4) {
                    // A person's body, or an emptied one: theirs from now on (S13).
                    edit.body = Some(["", "mine"][rng.below(2) as usize].into());
                }
                let person = Actor::Human("p".into());
                let result = store.edit(id, edit.clone(), person.clone(), now).await;
                match (model.rows.get_mut(&id), &result) {
                    (Some(row), Ok(_)) => {
                        let after =
                            crate::ends::plan_edit(row, &edit, &person, now).expect("a person's edit");
                        if shape(&after) != shape(row) {
                            model.edited.insert(id);
                        }
                        *row = after;
                    }
                    (None, Err(StoreError::NotFound(_))) => {}
                    (row, result) => panic!("seed {seed} step {step}: set {id} gave {result:?} for {row:?}"),
                }
                format!("set {id}: {}", result.is_ok())
            }
            // the kill switch
            12 => {
                model.paused = !model.paused;
                let reason = model.paused.then(|| "walk".to_owned());
                store.set_paused(reason, Actor::Human("p".into()), now).await.expect("pause");
                format!("paused = {}", model.paused)
            }
            // purge a source (F2), or restore it
            _ => {
                let source = SOURCES[rng.below(2) as usize];
                if model.purged.contains_key(source) && rng.chance(2) {
                    let report =
                        store.restore_source(source, Actor::Human("p".into()), now).await.expect("restore");
                    let purged = model.purged.get(source).cloned().unwrap_or_default();
                    // Restored by id: a row whose key an earlier one took back stays out.
                    let mut keys: BTreeSet<String> = model.rows.values().map(|r| r.key.clone()).collect();
                    for (id, row) in purged {
                        let back = report.restored.contains(&id);
                        let free = !model.rows.contains_key(&id) && !keys.contains(&row.key);
                        assert_eq!(back, free, "seed {seed} step {step}: restore of {id} ({report:?})");
                        if back {
                            keys.insert(row.key.clone());
                            model.rows.insert(id, row);
                        }
                    }
                    format!("restore {source}: {report:?}")
                } else {
                    let report =
                        store.purge_source(source, true, Actor::Human("p".into()), now).await.expect("purge");
                    for row in &report.purged {
                        let m = model.rows.get(&row.id).expect("a purged row was in the model");
                        assert_eq!(m.source, source);
                        // F2: only untouched rows go.
                        assert!(
                            m.status == Status::Pending
                                && m.attempt == 0
                                && m.failures == 0
                                && m.result.is_empty()
                                && m.correction.is_empty()
                                && !model.edited.contains(&m.id),
                            "seed {seed} step {step}: purged a touched row {m:?}"
                        );
                    }
                    // Nothing that stays depends on a purged row.
                    let gone: BTreeSet<TaskId> = report.purged.iter().map(|t| t.id).collect();
                    for row in model.rows.values().filter(|r| !gone.contains(&r.id)) {
                        assert!(
                            row.deps.iter().all(|d| !gone.contains(d)),
                            "seed {seed} step {step}: {} lost a dep",
                            row.id
                        );
                    }
                    for id in &gone {
                        let row = model.rows.remove(id).expect("row");
                        model.purged.entry(source.to_owned()).or_default().insert(*id, row);
                    }
                    format!("purge {source}: {} purged", gone.len())
                }
            }
        };

        // The store equals the model.
        let after = store_shapes(&store).await;
        let want: BTreeMap<TaskId, Shape> = model.rows.iter().map(|(id, t)| (*id, shape(t))).collect();
        assert_eq!(after, want, "seed {seed} step {step} ({what}): the store differs from the model");
        // No row deleted except by purge; ids and keys stable.
        if op != 13 {
            for (id, old) in &before {
                let new =
                    after.get(id).unwrap_or_else(|| panic!("seed {seed} step {step} ({what}): {id} deleted"));
                assert_eq!(old.key, new.key, "seed {seed} step {step}: the key of {id} changed");
            }
        }
        // Sync never touches closed rows, nor correction, result or failures (M3, M4).
        if is_sync {
            for (id, old) in &before {
                let new = &after[id];
                if old.status.is_closed() {
                    assert_eq!(old, new, "seed {seed} step {step} ({what}): sync touched closed row {id}");
                }
                assert_eq!(
                    (&old.correction, &old.result, old.failures),
                    (&new.correction, &new.result, new.failures),
                    "seed {seed} step {step} ({what}): sync wrote a person's or a run's field of {id}"
                );
            }
        }
        // The ready set is the model's.
        let set = store.ready(now, 10_000).await.expect("ready");
        let ready: BTreeSet<TaskId> = set.tasks.iter().map(|t| t.id).collect();
        assert_eq!(ready, model.ready(now), "seed {seed} step {step} ({what}): ready set");
        assert_eq!(set.total, ready.len(), "seed {seed} step {step} ({what}): ready count");
        // Failures stay within the cap; a running row has a lease (any other row's lease is the
        // fence of a run a person stopped, S14).
        for (id, row) in &after {
            assert!(row.failures <= CAP, "seed {seed} step {step}: {id} has {} failures", row.failures);
            assert!(
                row.status != Status::Running || row.lease.is_some(),
                "seed {seed} step {step}: lease of {id}"
            );
        }
        // Every change is journaled.
        let journal_after = journal_lengths(&store, after.keys().copied()).await;
        let mut changed = false;
        for (id, new) in &after {
            // A heartbeat only moves the lease's expiry: not journaled (see ARCHITECTURE.md).
            let content = |s: &Shape| Shape {
                lease: s.lease.as_ref().map(|l| (l.0.clone(), Timestamp::UNIX_EPOCH)),
                ..s.clone()
            };
            if before.get(id).map(content) != Some(content(new)) {
                changed = true;
                assert!(
                    journal_after[id] > journal_before.get(id).copied().unwrap_or(0),
                    "seed {seed} step {step} ({what}): {id} changed without a journal entry"
                );
            }
        }
        changed_steps += usize::from(changed);
    }
    changed_steps
}

/// Walks `DAICHO_MODEL_SEEDS` seeds (default `default_seeds`: a backend whose fresh database
/// is slow to make, as a PostgreSQL server's, walks fewer), each on a fresh backend from
/// `fresh`, and checks that the walks changed the ledger often enough to mean something.
pub async fn model_based_walks_keep_every_ledger_invariant<B: Backend>(
    default_seeds: u64,
    fresh: impl Fn() -> B,
) {
    let seeds: u64 =
        std::env::var("DAICHO_MODEL_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(default_seeds);
    let mut changed = 0;
    for seed in 0..seeds {
        changed += walk(&fresh(), seed).await;
    }
    eprintln!("model walks: {seeds} seeds × {STEPS} steps, {changed} steps changed the ledger");
    // The walks must exercise the ledger, not idle on refusals.
    assert!(changed as u64 > seeds * STEPS as u64 / 6, "only {changed} steps changed anything");
}

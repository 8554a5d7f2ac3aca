//! The contract test suite, written once and run against every backend.
//!
//! A backend's test file instantiates it in one line:
//!
//! ```text
//! daicho_store::store_contract_tests!(SqliteBackend::temp());
//! ```
//!
//! where the expression gives a fresh [`Backend`] (an empty database of its own). Each test
//! function here takes that backend, opens stores on it (opening again is a restart) and
//! panics with a message when the contract is broken.

use std::future::Future;

use daicho_core::dag;
use daicho_core::edit::TaskEdit;
use daicho_core::{Actor, Item, Status, Tags, Task, TaskId};
use jiff::{SignedDuration, Timestamp};

use crate::{
    Batch, ClaimOutcome, ClaimRequest, Decision, Finish, JournalEntry, JournalKind, ListFilter, RunEnd,
    RunOutcome, Store, StoreError, UnknownDeps,
};
use daicho_core::policy::FailurePolicy;

/// A fresh database of one backend; every [`Backend::open`] opens it again.
pub trait Backend {
    /// The store type.
    type Store: Store;
    /// Opens a store on this database: a first open, or a restart.
    fn open(&self) -> impl Future<Output = Self::Store>;
}

/// Instantiates the contract suite for a backend: one `#[tokio::test]` per contract test.
#[macro_export]
macro_rules! store_contract_tests {
    ($backend:expr) => {
        $crate::store_contract_tests!(@tests $backend;
            ids_are_stable_across_restarts,
            ids_are_never_given_twice,
            journal_entry_per_mutation,
            a_large_batch_journals_every_row_in_order,
            i1_a_batch_of_many_ranges_is_one_upsert,
            push_is_idempotent,
            ready_order_and_deps,
            ready_matches_the_definition_after_every_step,
            i3_the_ready_count_follows_the_clock_and_every_write,
            missing_dep_blocks_until_it_arrives,
            a_cycle_through_a_formerly_missing_dep_is_refused,
            refused_batch_changes_nothing,
            unknown_deps_follow_the_policy,
            closed_rows_untouched_by_upsert,
            edit_reads_back_and_refuses_cycles,
            list_filters,
            i2_list_orders_and_filters_page_like_a_sort,
            i2_the_change_mark_grows_with_every_change_and_only_then,
            s1_claim_is_committed_before_the_run_and_fenced_by_attempt,
            s1_concurrent_claims_of_one_row_give_it_once,
            i5_claims_of_the_same_head_take_different_rows_in_one_write_each,
            i5_claim_next_claims_the_first_row_its_pick_takes_in_run_order,
            i5_a_workers_turn_records_its_ends_then_claims_the_row_they_released,
            i5_a_one_slot_turn_claims_the_head_its_ends_leave,
            s13_i5_a_turns_end_is_written_on_the_row_as_it_is_when_it_ends,
            s14_a_workers_turn_that_failed_records_its_ends_alone,
            i5_a_claim_and_a_run_end_return_the_row_as_stored,
            s1_i5_every_claim_writes_the_planned_row_and_journals_it_once,
            i5_run_ends_side_by_side_keep_a_shared_dependents_count_exact,
            s3_three_failures_park_the_row,
            s4_an_expired_lease_counts_one_failure_once,
            done_unblocks_dependents_and_requires_run_when_asked,
            s8_paused_claims_nothing,
            s14_a_run_a_person_stopped_keeps_its_row_from_every_claim_until_it_has_ended,
            s2_approval_queue_is_idempotent,
            s13_producers_never_write_a_persons_fields,
            s13_m5_m6_no_source_writes_again_a_cell_a_person_wrote,
            s13_an_id_addresses_a_row_only_with_its_key,
            s13_only_a_person_edits_and_running_is_a_claims,
            s2_s13_approval_is_a_persons_of_a_ready_task_and_spent_by_the_claim,
            s2_s13_a_withdrawn_or_spent_approval_queues_the_task_again,
            i5_a_claim_scope_selects_in_the_query_what_the_rule_admits,
            i3_counts_and_view_heads_follow_every_write,
            s9_run_counts_and_stats,
            s9_i3_stats_since_the_first_run_are_the_counts_kept_with_the_runs,
            batched_claims_and_finishes_commit_together,
            batched_claims_decide_each_request_alone,
            d4_replan_drops_the_old_open_tasks_in_the_same_transaction,
            r3_cursors_persist_per_role_apart_from_the_kill_switch,
            r2_a_role_lease_has_one_holder_until_it_expires_or_is_released,
            f2_purge_deletes_only_untouched_rows_and_restore_brings_them_back,
            a_random_walk_keeps_ready_exact_and_the_graph_acyclic,
        );
    };
    (@tests $backend:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let backend = $backend;
                $crate::contract::$name(&backend).await;
            }
        )*
    };
}

fn t0() -> Timestamp {
    Timestamp::from_second(1_800_000_000).expect("a valid instant")
}

/// A minute after [`t0`].
fn t1() -> Timestamp {
    t0() + SignedDuration::from_mins(1)
}

fn item(title: &str) -> Item {
    Item::new(title, "contract")
}

fn with_id(title: &str, id: &str, deps: &[&str]) -> Item {
    let mut item = item(title);
    item.ref_id = Some(id.to_owned());
    item.deps = deps.iter().map(|d| (*d).to_owned()).collect();
    item
}

fn batch(items: Vec<Item>) -> Batch {
    Batch {
        items: items.into(),
        actor: Actor::Push("contract".into()),
        now: t0(),
        file: "contract.json".into(),
        unknown_deps: UnknownDeps::Refuse,
    }
}

/// A file imported (a checklist with ticked lines): like a push, but it may hold rows that are
/// already done or dropped, which a push may not register (S13).
fn imported(items: Vec<Item>) -> Batch {
    Batch { actor: Actor::Import("contract".into()), ..batch(items) }
}

/// A batch written by a person (an import of an exported ledger, a plan): it may carry the
/// fields only people write (S13).
fn person_batch(items: Vec<Item>) -> Batch {
    Batch { actor: Actor::Human("tester".into()), ..batch(items) }
}

fn id(text: &str) -> TaskId {
    TaskId::parse(text).expect("a task id")
}

async fn all<S: Store>(store: &S) -> Vec<Task> {
    store.list(ListFilter::default()).await.expect("list")
}

async fn set_status<S: Store>(store: &S, task: TaskId, status: Status) -> Task {
    let edit = TaskEdit { status: Some(status), ..TaskEdit::default() };
    store.edit(task, edit, Actor::Human("tester".into()), t0()).await.expect("edit")
}

/// Ids survive a restart unchanged; a requested `T-500` is kept; the counter resumes past it.
pub async fn ids_are_stable_across_restarts<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let report = store
        .upsert(batch(vec![item("first"), with_id("imported", "T-500", &[]), item("third")]))
        .await
        .expect("upsert");
    let shown: Vec<String> = report.added.iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["T-0501", "T-500", "T-0502"], "T-500 kept; fresh ids count on from it");
    let before = all(&store).await;
    drop(store);

    let store = backend.open().await;
    assert_eq!(all(&store).await, before, "a restart reads back the same rows");
    let report = store.upsert(batch(vec![item("after restart")])).await.expect("upsert");
    assert_eq!(report.added[0].to_string(), "T-0503");
    let got = store.get(id("T-500")).await.expect("get").expect("T-500 exists");
    assert_eq!((got.title.as_str(), got.id.to_string().as_str()), ("imported", "T-500"));
    assert_eq!(store.get(id("T-0500")).await.expect("get").map(|t| t.title), Some("imported".into()));
}

/// A requested id that is taken gets a fresh one; fresh ids never repeat.
pub async fn ids_are_never_given_twice<B: Backend>(backend: &B) {
    let store = backend.open().await;
    store.upsert(batch(vec![with_id("a", "T-0001", &[])])).await.expect("upsert");
    let mut b = with_id("b", "T-0001", &[]);
    b.body = "b's body".into();
    let err = store.upsert(batch(vec![b])).await.expect_err("another task's id");
    assert!(err.to_string().contains("names T-0001, which is another task"), "{err}");
    let mut a = with_id("a", "T-0001", &[]);
    a.body = "a's body".into();
    let report = store.upsert(batch(vec![a])).await.expect("upsert");
    assert!(report.added.is_empty(), "an item with the id and key of a row is that row, not a new one");
    assert_eq!(report.updated, [id("T-0001")]);
    let report = store.upsert(batch(vec![item("b2"), with_id("c", "T-0003", &[])])).await.expect("upsert");
    assert_eq!(report.added, [id("T-0004"), id("T-0003")], "T-0003 kept; fresh ids count on past it");
    let mut seen = std::collections::HashSet::new();
    for round in 0..5 {
        let report = store.upsert(batch(vec![item(&format!("r{round}"))])).await.expect("upsert");
        for added in report.added {
            assert!(seen.insert(added), "{added} given twice");
        }
    }
    assert_eq!(all(&store).await.len(), 8);
    // A dep on a missing id under the Keep policy: fresh ids never take that number.
    let mut keep = batch(vec![with_id("waits", "t-local", &["T-0050"])]);
    keep.unknown_deps = UnknownDeps::Keep;
    store.upsert(keep).await.expect("kept");
    let mut done = item("unrelated");
    done.status = Some(Status::Done);
    let report = store.upsert(imported(vec![done])).await.expect("upsert");
    assert!(report.added[0].num() > 50, "{:?} must not become the missing T-0050", report.added);
}

/// Every mutation has its journal entry; a no-op writes none.
pub async fn journal_entry_per_mutation<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let report = store.upsert(batch(vec![item("journaled")])).await.expect("upsert");
    let task = report.added[0];
    let entries = store.journal(task).await.expect("journal");
    assert_eq!(entries.len(), 1);
    assert_eq!((entries[0].kind.as_str(), entries[0].actor.as_str()), ("add", "push:contract"));
    assert_eq!(entries[0].after["title"], "journaled");

    let mut fill = item("journaled");
    fill.body = "filled by sync".into();
    let mut sync = batch(vec![fill]);
    sync.actor = Actor::Sync("sheet".into());
    let report = store.upsert(sync).await.expect("upsert");
    assert_eq!(report.updated, [task]);
    set_status(&store, task, Status::Review).await;
    let edit = TaskEdit { status: Some(Status::Review), ..TaskEdit::default() };
    store.edit(task, edit, Actor::Human("tester".into()), t0()).await.expect("no-op edit");

    let entries = store.journal(task).await.expect("journal");
    let kinds: Vec<(&str, &str)> = entries.iter().map(|e| (e.kind.as_str(), e.actor.as_str())).collect();
    assert_eq!(kinds, [("add", "push:contract"), ("patch", "sync:sheet"), ("edit", "human:tester")]);
    assert_eq!(entries[1].before["body"], "");
    assert_eq!(entries[1].after["body"], "filled by sync");
    assert_eq!(entries[2].before["status"], "pending");
    assert_eq!(entries[2].after["status"], "review");
    assert!(entries.windows(2).all(|w| w[0].seq < w[1].seq));
}

/// A batch larger than any chunk a backend writes its journal in: every row added and patched
/// has its own entry, in the order of the input, and a second push patches every one.
pub async fn a_large_batch_journals_every_row_in_order<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let items: Vec<Item> = (0..2_500).map(|i| item(&format!("row {i}"))).collect();
    let report = store.upsert(batch(items.clone())).await.expect("upsert");
    assert_eq!(report.added.len(), 2_500);
    let filled: Vec<Item> = items
        .into_iter()
        .map(|mut i| {
            i.body = format!("body of {}", i.title);
            i
        })
        .collect();
    let second = store.upsert(batch(filled)).await.expect("fill");
    assert_eq!(second.updated.len(), 2_500);
    for (n, id) in [(0, report.added[0]), (1_234, report.added[1_234]), (2_499, report.added[2_499])] {
        let entries = store.journal(id).await.expect("journal");
        let kinds: Vec<&str> = entries.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["add", "patch"], "row {n}");
        assert_eq!(entries[0].after["title"], format!("row {n}"));
        assert_eq!(entries[1].after["body"], format!("body of row {n}"));
    }
    let first = store.journal(report.added[0]).await.expect("journal")[0].seq;
    let last = store.journal(report.added[2_499]).await.expect("journal")[0].seq;
    assert!(first < last, "entries in the order of the input");
}

/// I1: a batch longer than one write range ([`crate::UPSERT_RANGE`]) is still one upsert:
/// references forward into a later range resolve, a done row of a later range releases the
/// row that waits for it, the first of a key wins across ranges (M7), ids follow the input,
/// and a cycle closed by the last range refuses the whole batch with nothing written.
pub async fn i1_a_batch_of_many_ranges_is_one_upsert<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let n = crate::UPSERT_RANGE * 2 + 100;
    let chain = |i: usize| {
        let deps = if i + 1 < n { vec![format!("r{}", i + 1)] } else { Vec::new() };
        let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
        with_id(&format!("link {i}"), &format!("r{i}"), &deps)
    };
    let mut items: Vec<Item> = (0..n).map(chain).collect();
    // The first link of the second range is done and waits for nothing: the last link of the
    // first range, written a range earlier, waits for it.
    let k = crate::UPSERT_RANGE;
    items[k].status = Some(Status::Done);
    items[k].deps.clear();
    // A second item with the key of item 3, in the second range.
    items.insert(k + 5, item("link 3"));
    for (line, it) in items.iter_mut().enumerate() {
        it.line = Some(line + 1);
    }
    let report = store.upsert(imported(items.clone())).await.expect("upsert");
    assert_eq!(report.added.len(), n);
    assert!(report.added.windows(2).all(|w| w[0] < w[1]), "ids in input order");
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    assert_eq!(report.skipped[0].line, Some(k + 6));
    assert!(report.skipped[0].reason.contains("item #4"), "{}", report.skipped[0].reason);
    let rows = all(&store).await;
    for (i, w) in rows.windows(2).enumerate().filter(|(i, _)| *i != k) {
        assert_eq!(w[0].deps, [w[1].id], "link {i} waits for the next link");
    }
    let ready: Vec<TaskId> = store.ready(t0(), 10).await.expect("ready").tasks.iter().map(|t| t.id).collect();
    assert_eq!(ready, dag::ready(&rows, t0()));
    assert_eq!(ready, [rows[k - 1].id, rows[n - 1].id], "the link before the done one, and the last");
    // A new chain whose last link waits for its first: a cycle only the whole batch shows.
    let mut cycle: Vec<Item> = (0..n)
        .map(|i| {
            let mut it = chain(i);
            it.title = format!("loop {i}");
            it
        })
        .collect();
    cycle[n - 1].deps = vec!["r0".into()];
    let err = store.upsert(batch(cycle)).await.expect_err("a cycle across ranges is refused");
    assert!(err.to_string().contains("dependency cycle"), "{err}");
    assert_eq!(all(&store).await, rows, "nothing written");
    let next = store.upsert(batch(vec![item("after")])).await.expect("upsert");
    assert_eq!(next.added, [TaskId::new(n as u64 + 1)], "the refused batch used no id");
}

/// The same push twice: the second adds 0 and updates 0 (M8 through the store).
pub async fn push_is_idempotent<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let items = vec![
        with_id("t1 土台", "t1", &[]),
        with_id("t2 パーサー", "t2", &["t1"]),
        with_id("t3 テスト", "t3", &["t1"]),
    ];
    let first = store.upsert(batch(items.clone())).await.expect("first");
    assert_eq!((first.added.len(), first.updated.len()), (3, 0));
    let second = store.upsert(batch(items)).await.expect("second");
    assert_eq!((second.added.len(), second.updated.len(), second.skipped.len()), (0, 0, 3));
    assert_eq!(all(&store).await.len(), 3);
    let t2 = store.get(first.added[1]).await.expect("get").expect("t2");
    assert_eq!(t2.deps, [first.added[0]], "local ids resolve to ledger ids");
}

/// D1: ready needs every dep done or dropped; order is priority, then id.
pub async fn ready_order_and_deps<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let items = vec![
        with_id("t1", "T-0001", &[]),
        with_id("t2", "T-0002", &["T-0001"]),
        with_id("t3", "T-0003", &["T-0001"]),
        with_id("t4", "T-0004", &["T-0002", "T-0003"]),
        with_id("t5", "T-0005", &["T-0004"]),
    ];
    store.upsert(batch(items)).await.expect("upsert");
    let ready = |limit| store.ready(t0(), limit);
    let ids = |set: crate::ReadySet| set.tasks.into_iter().map(|t| t.id.to_string()).collect::<Vec<_>>();
    assert_eq!(ids(ready(10).await.expect("ready")), ["T-0001"]);
    set_status(&store, id("T-0001"), Status::Done).await;
    let set = ready(1).await.expect("ready");
    assert_eq!(set.total, 2);
    assert_eq!(ids(set), ["T-0002"], "a single worker takes T-0002 before T-0003");
    set_status(&store, id("T-0002"), Status::Done).await;
    assert_eq!(ids(ready(10).await.expect("ready")), ["T-0003"], "t4 waits for t3 too");
    set_status(&store, id("T-0003"), Status::Dropped).await;
    assert_eq!(ids(ready(10).await.expect("ready")), ["T-0004"], "dropped satisfies a dep");
    set_status(&store, id("T-0003"), Status::Pending).await;
    assert_eq!(ids(ready(10).await.expect("ready")), ["T-0003"], "reopening a dep blocks again");
    let edit = TaskEdit { priority: Some(9), ..TaskEdit::default() };
    let mut urgent = item("urgent");
    urgent.priority = 0;
    let report = store.upsert(batch(vec![urgent])).await.expect("upsert");
    store.edit(report.added[0], edit, Actor::Human("t".into()), t0()).await.expect("edit");
    assert_eq!(ids(ready(10).await.expect("ready")), [report.added[0].to_string(), "T-0003".into()]);

    let mut later = item("later");
    later.not_before = Some(t0() + SignedDuration::from_hours(1));
    let report = store.upsert(batch(vec![later])).await.expect("upsert");
    let at = |t| store.ready(t, 10);
    assert!(!at(t0()).await.expect("ready").tasks.iter().any(|t| t.id == report.added[0]));
    let in_two_hours = at(t0() + SignedDuration::from_hours(2)).await.expect("ready");
    assert!(in_two_hours.tasks.iter().any(|t| t.id == report.added[0]), "D5: ready once due");
}

/// After a scripted mix of adds, edits and syncs, the store's ready set equals the definition.
pub async fn ready_matches_the_definition_after_every_step<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let mut items = Vec::new();
    for n in 1..=12u64 {
        let deps: Vec<String> =
            [n / 2, n / 3].iter().filter(|&&d| d > 0 && d < n).map(|d| format!("T-{d:04}")).collect();
        let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
        let mut it = with_id(&format!("n{n}"), &format!("T-{n:04}"), &deps);
        it.priority = (n % 3) as i64;
        items.push(it);
    }
    store.upsert(batch(items)).await.expect("upsert");
    let steps = [
        (1, Status::Done),
        (2, Status::Done),
        (3, Status::Dropped),
        (2, Status::Pending),
        (4, Status::NeedsHuman),
        (2, Status::Done),
        (5, Status::Review),
        (6, Status::Done),
        (4, Status::Done),
        (1, Status::Pending),
    ];
    for (n, status) in steps {
        set_status(&store, TaskId::new(n), status).await;
        let rows = all(&store).await;
        let want = dag::ready(&rows, t0());
        let set = store.ready(t0(), 100).await.expect("ready");
        let got: Vec<TaskId> = set.tasks.iter().map(|t| t.id).collect();
        assert_eq!(got, want, "after setting T-{n:04} to {status}");
        assert_eq!(set.total, want.len(), "the ready count after setting T-{n:04} to {status}");
    }
}

/// I3, D1, D5: `ready`'s total is the size of the ready set — rows not due yet (`not_before`
/// ahead) counted out until their time, then in; claims, run ends, edits, purge and restore
/// moving rows in and out of it — however the backend counts it.
pub async fn i3_the_ready_count_follows_the_clock_and_every_write<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let hour = SignedDuration::from_hours(1);
    let mut later = with_id("due in an hour", "c3", &[]);
    later.not_before = Some(t0() + hour);
    let mut past = with_id("was due an hour ago", "c4", &[]);
    past.not_before = Some(t0() - hour);
    let mut much_later = with_id("due tomorrow, waits for c1", "c5", &["c1"]);
    much_later.not_before = Some(t0() + SignedDuration::from_hours(24));
    let items =
        vec![with_id("free", "c1", &[]), with_id("waits for c1", "c2", &["c1"]), later, past, much_later];
    let ids = store.upsert(batch(items)).await.expect("upsert").added;
    let check = |what: &'static str, now: Timestamp| {
        let store = &store;
        async move {
            let rows = all(store).await;
            let want = dag::ready(&rows, now).len();
            let set = store.ready(now, 1000).await.expect("ready");
            assert_eq!((set.total, set.tasks.len()), (want, want), "{what} (at {now})");
        }
    };
    check("c1 and c4 ready, c3 not due", t0()).await;
    check("c3 due after an hour", t0() + hour + SignedDuration::from_secs(1)).await;
    let task = claimed(&store, claim_request(ids[0], "w", t0())).await;
    check("c1 claimed", t0()).await;
    store.finish(finish(&task, "w", success(Status::Done))).await.expect("finish");
    check("c1 done: c2 ready, c5 waits for its day", t0()).await;
    check("c5 due tomorrow", t0() + SignedDuration::from_hours(25)).await;
    let task = claimed(&store, claim_request(ids[1], "w", t0())).await;
    store.finish(finish(&task, "w", failure("no"))).await.expect("fail");
    check("c2 failed once: pending again", t0()).await;
    set_status(&store, ids[3], Status::Dropped).await;
    check("c4 dropped", t0()).await;
    let edit = TaskEdit { not_before: Some(None), ..TaskEdit::default() };
    store.edit(ids[2], edit, Actor::Human("ana".into()), t0()).await.expect("edit");
    check("c3's wait removed by a person", t0()).await;
    store.purge_source("contract", true, Actor::Human("ana".into()), t0()).await.expect("purge");
    check("purged", t0()).await;
    store.restore_source("contract", Actor::Human("ana".into()), t0()).await.expect("restore");
    check("restored", t0()).await;
}

/// Thirty rows for the backends' upgrade tests of the ready count (I3): twenty without deps,
/// four of them not due until `later` (rows 0, 5, 20, 25); at the epoch sixteen are ready.
pub fn thirty_rows_some_waiting(later: Timestamp) -> Batch {
    let items: Vec<Item> = (0..30)
        .map(|n| {
            let mut item = Item::new(&format!("row {n}"), "s");
            item.ref_id = Some(format!("r{n}"));
            if n % 3 == 1 {
                item.deps = vec![format!("r{}", n - 1)];
            }
            if n % 5 == 0 {
                item.not_before = Some(later);
            }
            item
        })
        .collect();
    Batch { actor: Actor::System, now: Timestamp::UNIX_EPOCH, file: "x".into(), ..batch(items) }
}

/// A dep on an id that arrives later blocks until the dep is done.
pub async fn missing_dep_blocks_until_it_arrives<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let mut keep = batch(vec![with_id("waits", "T-0010", &["T-0020"])]);
    keep.unknown_deps = UnknownDeps::Keep;
    store.upsert(keep).await.expect("kept with a missing dep");
    assert_eq!(store.ready(t0(), 10).await.expect("ready").total, 0, "blocked by a missing task");
    let mut arrives = with_id("arrives", "T-0020", &[]);
    arrives.status = Some(Status::Done);
    store.upsert(imported(vec![arrives])).await.expect("upsert");
    let ready = store.ready(t0(), 10).await.expect("ready");
    assert_eq!(ready.tasks.iter().map(|t| t.id.to_string()).collect::<Vec<_>>(), ["T-0010"]);
}

/// D2: a row kept waiting for a missing id, and that id arriving to wait for the row, is a cycle.
pub async fn a_cycle_through_a_formerly_missing_dep_is_refused<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let mut keep = batch(vec![with_id("waits", "T-0010", &["T-0020"]), with_id("unrelated", "T-0011", &[])]);
    keep.unknown_deps = UnknownDeps::Keep;
    store.upsert(keep).await.expect("kept with a missing dep");
    let before = all(&store).await;
    let err = store
        .upsert(batch(vec![with_id("arrives", "T-0020", &["T-0010"])]))
        .await
        .expect_err("T-0010 → T-0020 → T-0010 is a cycle");
    assert!(err.to_string().contains("dependency cycle"), "{err}");
    assert_eq!(all(&store).await, before);
    store.upsert(batch(vec![with_id("fine", "T-0020", &["T-0011"])])).await.expect("no cycle");
}

/// A batch refused for a cycle, an unknown dep or an unresolved ref writes nothing.
pub async fn refused_batch_changes_nothing<B: Backend>(backend: &B) {
    let store = backend.open().await;
    store.upsert(batch(vec![with_id("base", "T-0001", &[])])).await.expect("upsert");
    let before = all(&store).await;
    let mut cycle =
        vec![item("fresh row"), with_id("a", "T-0002", &["T-0003"]), with_id("b", "T-0003", &["T-0002"])];
    cycle[2].line = Some(3);
    cycle[1].line = Some(2);
    let err = store.upsert(batch(cycle)).await.expect_err("a cycle is refused");
    let message = err.to_string();
    assert!(message.contains("dependency cycle: T-0002 → T-0003 → T-0002"), "{message}");
    assert!(message.starts_with("contract.json:2: "), "{message}");
    let unresolved = store.upsert(batch(vec![with_id("x", "t1", &["t9"])])).await.expect_err("unresolved");
    assert!(unresolved.to_string().contains("t9"), "{unresolved}");
    assert_eq!(all(&store).await, before, "nothing written");
    let journal = store.journal(TaskId::new(2)).await.expect("journal");
    assert!(journal.is_empty(), "no journal entry for a refused row");
    let report = store.upsert(batch(vec![item("next")])).await.expect("upsert");
    assert_eq!(report.added, [TaskId::new(2)], "the refused batch used no id");
}

/// D2: a dep on an unknown id is refused by default and kept with `UnknownDeps::Keep`.
pub async fn unknown_deps_follow_the_policy<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let err = store.upsert(batch(vec![with_id("x", "T-0001", &["T-0404"])])).await.expect_err("refused");
    assert!(matches!(err, StoreError::InvalidInput(_)), "{err:?}");
    assert!(err.to_string().contains("T-0404, which is not in the ledger"), "{err}");
    let mut keep = batch(vec![with_id("x", "T-0001", &["T-0404"])]);
    keep.unknown_deps = UnknownDeps::Keep;
    store.upsert(keep).await.expect("kept");
    assert_eq!(all(&store).await[0].deps, [id("T-0404")]);
}

/// M3 through the store: closed rows are never touched by an upsert.
pub async fn closed_rows_untouched_by_upsert<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let report = store.upsert(batch(vec![item("closed")])).await.expect("upsert");
    let task = set_status(&store, report.added[0], Status::Done).await;
    let mut again = item("closed");
    again.body = "new".into();
    again.refresh = true;
    let report = store.upsert(batch(vec![again])).await.expect("upsert");
    assert!(report.updated.is_empty());
    assert!(report.skipped[0].reason.contains("done"), "{:?}", report.skipped);
    assert_eq!(store.get(task.id).await.expect("get").expect("row"), task);
}

/// F1 through the store: an edit is read back; cycles and unknown ids are refused.
pub async fn edit_reads_back_and_refuses_cycles<B: Backend>(backend: &B) {
    let store = backend.open().await;
    store
        .upsert(batch(vec![with_id("a", "T-0001", &[]), with_id("b", "T-0002", &["T-0001"])]))
        .await
        .expect("upsert");
    let edit = TaskEdit {
        status: Some(Status::Review),
        correction: Some("make it shorter".into()),
        run: Some(true),
        ..TaskEdit::default()
    };
    let stored = store.edit(id("T-0001"), edit, Actor::Human("p".into()), t0()).await.expect("edit");
    assert_eq!(
        (stored.status, stored.correction.as_str(), stored.run),
        (Status::Review, "make it shorter", true)
    );
    assert_eq!(store.get(id("T-0001")).await.expect("get"), Some(stored.clone()));
    // The same values again change nothing and write no journal entry (a web form saved as is).
    let entries = store.journal(id("T-0001")).await.expect("journal").len();
    let same = TaskEdit {
        status: Some(Status::Review),
        correction: Some("make it shorter".into()),
        run: Some(true),
        ..TaskEdit::default()
    };
    let later = t0() + jiff::SignedDuration::from_secs(60);
    let unchanged = store.edit(id("T-0001"), same, Actor::Human("p".into()), later).await.expect("edit");
    assert_eq!(unchanged, stored);
    assert_eq!(store.journal(id("T-0001")).await.expect("journal").len(), entries);

    let cycle = TaskEdit { deps: Some(vec![id("T-0002")]), ..TaskEdit::default() };
    let err = store.edit(id("T-0001"), cycle, Actor::Human("p".into()), t0()).await.expect_err("cycle");
    assert!(err.to_string().contains("T-0001 → T-0002 → T-0001"), "{err}");
    let unknown = TaskEdit { deps: Some(vec![id("T-0099")]), ..TaskEdit::default() };
    let err = store.edit(id("T-0001"), unknown, Actor::Human("p".into()), t0()).await.expect_err("unknown");
    assert!(matches!(err, StoreError::Dag(_)), "{err:?}");
    let missing = store.edit(id("T-0404"), TaskEdit::default(), Actor::System, t0()).await;
    assert!(matches!(missing, Err(StoreError::NotFound(_))));
    assert_eq!(store.get(id("T-0001")).await.expect("get").expect("row").deps, Vec::<TaskId>::new());
}

/// `list` filters by project, status, source, tag and the task rows wait on, ordered by id.
pub async fn list_filters<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let mut a = item("a");
    a.project = "PJ-01".into();
    a.tags = "ai".split(',').collect();
    let mut b = item("b");
    b.project = "PJ-02".into();
    b.source = "sheet".into();
    let mut c = item("c");
    c.project = "PJ-01".into();
    c.status = Some(Status::Done);
    store.upsert(imported(vec![a, b, c])).await.expect("upsert");
    let titles = |rows: Vec<Task>| rows.into_iter().map(|t| t.title).collect::<Vec<_>>();
    let list = |filter| store.list(filter);
    assert_eq!(
        titles(
            list(ListFilter { project: Some("PJ-01".into()), ..ListFilter::default() }).await.expect("list")
        ),
        ["a", "c"]
    );
    assert_eq!(
        titles(
            list(ListFilter { statuses: vec![Status::Done], ..ListFilter::default() }).await.expect("list")
        ),
        ["c"]
    );
    assert_eq!(
        titles(
            list(ListFilter { source: Some("sheet".into()), ..ListFilter::default() }).await.expect("list")
        ),
        ["b"]
    );
    assert_eq!(
        titles(list(ListFilter { tag: Some("ai".into()), ..ListFilter::default() }).await.expect("list")),
        ["a"]
    );
    assert_eq!(
        titles(list(ListFilter { limit: Some(2), ..ListFilter::default() }).await.expect("list")),
        ["a", "b"]
    );
    // Keyset paging: the page after the first row's id.
    let first = list(ListFilter { limit: Some(1), ..ListFilter::default() }).await.expect("list");
    assert_eq!(
        titles(
            list(ListFilter { after: Some(first[0].id), limit: Some(5), ..ListFilter::default() })
                .await
                .expect("list")
        ),
        ["b", "c"]
    );
    let counts: Vec<(String, Status, u64)> = store
        .status_counts()
        .await
        .expect("counts")
        .into_iter()
        .map(|c| (c.project, c.status, c.count))
        .collect();
    assert_eq!(
        counts,
        [
            ("PJ-01".to_owned(), Status::Pending, 1),
            ("PJ-01".to_owned(), Status::Done, 1),
            ("PJ-02".to_owned(), Status::Pending, 1)
        ]
    );
    // The rows that wait on a task (its dependents), after an edit changed who waits.
    let mut d = item("d");
    d.deps = vec![first[0].id.to_string()];
    let mut e = item("e");
    e.deps = vec![first[0].id.to_string()];
    let added = store.upsert(batch(vec![d, e])).await.expect("upsert").added;
    let waiting = |dep: TaskId| list(ListFilter { waiting_on: Some(dep), ..ListFilter::default() });
    assert_eq!(titles(waiting(first[0].id).await.expect("list")), ["d", "e"]);
    let unwait = TaskEdit { deps: Some(Vec::new()), ..TaskEdit::default() };
    store.edit(added[0], unwait, Actor::Human("p".into()), t0()).await.expect("edit");
    assert_eq!(titles(waiting(first[0].id).await.expect("list")), ["e"]);
    assert!(waiting(added[1]).await.expect("list").is_empty());
}

/// I2: every order of `list` pages (keyset, a few rows a page) through exactly the rows a sort
/// of the whole ledger gives, ties broken by id, and every filter keeps exactly the rows its
/// rule keeps — text search literal (`%` and `_` are not wildcards) and in any ASCII case.
pub async fn i2_list_orders_and_filters_page_like_a_sort<B: Backend>(backend: &B) {
    use crate::ListOrder;
    let store = backend.open().await;
    let items: Vec<Item> = (0..40u32)
        .map(|n| {
            let mut it = item(&format!("row {n} {}", ["Alpha", "beta", "100% done", "a_b"][n as usize % 4]));
            it.body = if n % 5 == 0 { "see the SPREADSHEET".into() } else { String::new() };
            it.project = ["PJ-A", "PJ-B"][n as usize % 2].into();
            it.assignee = ["ann", "bob", ""][n as usize % 3].into();
            it.work_type = ["mail", "code"][n as usize % 2].into();
            it.priority = i64::from(n % 4);
            it.due = (n % 3 != 0).then(|| jiff::civil::date(2026, 1, 1 + (n % 7) as i8));
            it.status = Some([Status::Pending, Status::Done, Status::Review][n as usize % 3]);
            it
        })
        .collect();
    store.upsert(imported(items)).await.expect("upsert");
    // Different update times: a few rows edited later.
    for (n, minutes) in [(3u64, 5), (7, 2), (11, 9)] {
        let edit = TaskEdit { correction: Some("later".into()), ..TaskEdit::default() };
        let at = t0() + SignedDuration::from_mins(minutes);
        store.edit(TaskId::new(n), edit, Actor::Human("p".into()), at).await.expect("edit");
    }
    let everything = all(&store).await;
    let pages = |order: ListOrder, base: ListFilter| {
        let store = &store;
        async move {
            let mut seen: Vec<Task> = Vec::new();
            loop {
                let filter =
                    ListFilter { order, after: seen.last().map(|t| t.id), limit: Some(3), ..base.clone() };
                let page = store.list(filter).await.expect("page");
                if page.is_empty() {
                    return seen;
                }
                seen.extend(page);
            }
        }
    };
    for order in ListOrder::ALL {
        let mut want = everything.clone();
        match order {
            ListOrder::Id => want.sort_by_key(|t| t.id),
            ListOrder::Due => want.sort_by_key(|t| (t.due.is_none(), t.due, t.id)),
            ListOrder::Priority => want.sort_by_key(|t| (std::cmp::Reverse(t.priority), t.id)),
            ListOrder::Updated => want.sort_by_key(|t| (std::cmp::Reverse(t.updated_at), t.id)),
        }
        let got = pages(order, ListFilter::default()).await;
        let ids = |rows: &[Task]| rows.iter().map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(ids(&got), ids(&want), "{order:?}");
        // With filters: open rows of PJ-A, in the same order.
        let open = vec![Status::Pending, Status::Review];
        let base =
            ListFilter { project: Some("PJ-A".into()), statuses: open.clone(), ..ListFilter::default() };
        let got = pages(order, base).await;
        let want: Vec<TaskId> =
            want.iter().filter(|t| t.project == "PJ-A" && open.contains(&t.status)).map(|t| t.id).collect();
        assert_eq!(ids(&got), want, "{order:?} filtered");
    }
    let only = |filter: ListFilter| {
        let store = &store;
        async move { store.list(filter).await.expect("list").iter().map(|t| t.id).collect::<Vec<_>>() }
    };
    let want = |keep: &dyn Fn(&Task) -> bool| {
        everything.iter().filter(|t| keep(t)).map(|t| t.id).collect::<Vec<_>>()
    };
    assert_eq!(
        only(ListFilter { assignee: Some("bob".into()), ..ListFilter::default() }).await,
        want(&|t| t.assignee == "bob")
    );
    assert_eq!(
        only(ListFilter { work_type: Some("mail".into()), ..ListFilter::default() }).await,
        want(&|t| t.work_type == "mail")
    );
    let day = jiff::civil::date(2026, 1, 4);
    assert_eq!(
        only(ListFilter { due_before: Some(day), ..ListFilter::default() }).await,
        want(&|t| t.due.is_some_and(|d| d < day))
    );
    assert_eq!(
        only(ListFilter { text: Some("ALPHA".into()), ..ListFilter::default() }).await,
        want(&|t| t.title.contains("Alpha"))
    );
    assert_eq!(
        only(ListFilter { text: Some("100%".into()), ..ListFilter::default() }).await,
        want(&|t| t.title.contains("100%"))
    );
    assert_eq!(
        only(ListFilter { text: Some("a_b".into()), ..ListFilter::default() }).await,
        want(&|t| t.title.contains("a_b"))
    );
    assert_eq!(
        only(ListFilter { text: Some("spreadsheet".into()), ..ListFilter::default() }).await,
        want(&|t| !t.body.is_empty())
    );
    assert!(
        only(ListFilter { text: Some("it's".into()), ..ListFilter::default() }).await.is_empty(),
        "a quote is text"
    );
}

/// I2: the change mark open pages watch grows with every write a page shows — an upsert, an
/// edit, a task queued for approval, an approval, a claim — and stays put across reads and a
/// restart.
pub async fn i2_the_change_mark_grows_with_every_change_and_only_then<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let mark = || async { store.change_mark().await.expect("mark") };
    let m0 = mark().await;
    let ids = store.upsert(batch(vec![item("a"), item("b")])).await.expect("upsert").added;
    let m1 = mark().await;
    assert!(m1 > m0);
    store.list(ListFilter::default()).await.expect("list");
    store.ready(t0(), 10).await.expect("ready");
    assert_eq!(mark().await, m1, "reads change nothing");
    let edit = TaskEdit { correction: Some("c".into()), ..TaskEdit::default() };
    store.edit(ids[0], edit, Actor::Human("p".into()), t0()).await.expect("edit");
    let m2 = mark().await;
    assert!(m2 > m1);
    store.queue_approvals(vec![ids[1]], "test".into(), t0()).await.expect("queue");
    let m3 = mark().await;
    assert!(m3 > m2, "queued for approval");
    store.approve(ids[1], Actor::Human("p".into()), t0()).await.expect("approve");
    let m4 = mark().await;
    assert!(m4 > m3);
    claimed(&store, claim_request(ids[0], "w", t0())).await;
    let m5 = mark().await;
    assert!(m5 > m4);
    drop(store);
    assert_eq!(backend.open().await.change_mark().await.expect("mark"), m5, "a restart keeps it");
}

fn claim_request(task: TaskId, worker: &str, now: Timestamp) -> ClaimRequest {
    ClaimRequest {
        id: task,
        worker: worker.to_owned(),
        action: "act".to_owned(),
        now,
        lease: SignedDuration::from_mins(30),
        require_run: false,
        require_approval: false,
    }
}

fn finish(task: &Task, worker: &str, end: RunEnd) -> Finish {
    Finish {
        id: task.id,
        attempt: task.attempt,
        worker: worker.to_owned(),
        now: t0() + SignedDuration::from_secs(5),
        end,
        policy: FailurePolicy::default(),
    }
}

fn success(status: Status) -> RunEnd {
    RunEnd::Success { result: "made it".into(), status, tokens_in: Some(10), tokens_out: Some(20) }
}

fn failure(error: &str) -> RunEnd {
    RunEnd::Failure { error: error.to_owned(), timeout: false }
}

/// `item` as a worker of action `act` may run it on its own (action `act`, tagged `ai`).
fn for_act(mut item: Item) -> Item {
    item.action = "act".into();
    item.tags = Tags::parse_list("ai");
    item
}

/// What a worker serving action `act` (automatic) may claim: rows [`for_act`] made.
fn act_scope() -> daicho_core::policy::ClaimScope {
    use daicho_core::policy::{ActionSpec, ClaimScope, Gate};
    let specs = [ActionSpec { name: "act".into(), auto: true, ..ActionSpec::default() }];
    ClaimScope::worker(&Gate { actions: &specs, ..Gate::default() }, None, None)
}

async fn claimed<S: Store>(store: &S, request: ClaimRequest) -> Task {
    match store.claim(request).await.expect("claim") {
        ClaimOutcome::Claimed(task) => *task,
        other => panic!("expected a claim, got {other:?}"),
    }
}

/// S1: the claim commits `running`, `run = false`, `run_at`, attempt + 1 and the lease before
/// any run; a second claim gets nothing; every later write is fenced by the attempt.
pub async fn s1_claim_is_committed_before_the_run_and_fenced_by_attempt<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let mut requested = item("run me");
    requested.run = true;
    let id = store.upsert(person_batch(vec![requested])).await.expect("upsert").added[0];
    let task = claimed(&store, claim_request(id, "w1", t0())).await;
    // What an executor reading the ledger at its start sees (read through a second store).
    let seen = backend.open().await.get(id).await.expect("get").expect("row");
    assert_eq!((seen.status, seen.run, seen.attempt, seen.run_at), (Status::Running, false, 1, Some(t0())));
    assert_eq!(seen.lease.as_ref().map(|l| l.owner.as_str()), Some("w1"));
    assert_eq!(seen, task, "the claim returns the committed row");
    assert_eq!(store.claim(claim_request(id, "w2", t0())).await.expect("claim"), ClaimOutcome::NotClaimable);

    let stale = Finish { worker: "w2".into(), ..finish(&task, "w1", success(Status::Done)) };
    assert!(matches!(store.finish(stale).await, Err(StoreError::LeaseLost { .. })), "another worker's write");
    let wrong_attempt = Finish { attempt: 7, ..finish(&task, "w1", success(Status::Done)) };
    assert!(matches!(store.finish(wrong_attempt).await, Err(StoreError::LeaseLost { .. })));
    store.heartbeat(id, 1, "w1", t0() + SignedDuration::from_hours(1)).await.expect("heartbeat");
    let done = store.finish(finish(&task, "w1", success(Status::Review))).await.expect("finish");
    assert_eq!((done.status, done.result.as_str(), done.lease.is_none()), (Status::Review, "made it", true));
    let late = store.finish(finish(&task, "w1", failure("late"))).await;
    assert!(matches!(late, Err(StoreError::LeaseLost { id: i, attempt: 1 }) if i == id), "{late:?}");
    assert!(matches!(store.heartbeat(id, 1, "w1", t0()).await, Err(StoreError::LeaseLost { .. })));
    assert_eq!(store.get(id).await.expect("get").expect("row"), done, "a rejected write changes nothing");
    let runs = store.runs(id).await.expect("runs");
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0].outcome.as_str(), runs[0].idempotency_key.clone()), ("success", format!("{id}:1")));
    let kinds: Vec<&str> =
        store.journal(id).await.expect("journal").into_iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["add", "claim", "finish"]);
}

/// I5: what a claim and a run's end return is the row as the ledger then gives it back, even
/// when their times are finer than the columns keep (a store may return the row it wrote rather
/// than read it again).
pub async fn i5_a_claim_and_a_run_end_return_the_row_as_stored<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let ids = store.upsert(person_batch(vec![item("fine"), item("finer")])).await.expect("upsert").added;
    let fine = t0() + SignedDuration::from_nanos(123_456_789);
    for (n, id) in ids.into_iter().enumerate() {
        let task = claimed(&store, claim_request(id, "w1", fine)).await;
        assert_eq!(Some(&task), store.get(id).await.expect("get").as_ref(), "the claim's row");
        let end = Finish {
            now: fine + SignedDuration::from_nanos(987_654_321),
            ..finish(&task, "w1", success(Status::Done))
        };
        let done = match n {
            0 => store.finish(end).await.expect("finish"),
            _ => store.finish_many(vec![end]).await.expect("finish").remove(0).expect("finished"),
        };
        assert_eq!(done.status, Status::Done);
        assert_eq!(Some(&done), store.get(id).await.expect("get").as_ref(), "the run end's row");
    }
}

/// S1, S13, I5: every way to claim (`claim`, `claim_first`, `claim_many`, and `claim_next` with a
/// one-row look, a one-slot worker's) writes the row [`crate::ends::plan_claim`] makes of the row
/// it took, and journals the claim once, with the fields the claim changed before and after
/// (PostgreSQL writes the entry of a row its look holds locked with the claim itself, from that
/// plan). Each row was approved by a person, so the claim also clears ▶ run and spends the
/// approval.
pub async fn s1_i5_every_claim_writes_the_planned_row_and_journals_it_once<B: Backend>(backend: &B) {
    use daicho_core::policy::{ActionSpec, ClaimScope, Gate};

    let store = backend.open().await;
    let channels = ["claim", "claim_first", "claim_many", "claim_next"];
    let ids: Vec<TaskId> = (1..=channels.len()).map(|n| id(&format!("T-{n:04}"))).collect();
    let mut items: Vec<Item> =
        ids.iter().map(|t| with_id(&format!("approved {t}"), &t.to_string(), &[])).collect();
    for it in &mut items {
        it.action = "act".into();
    }
    store.upsert(batch(items)).await.expect("upsert");
    for &task in &ids {
        store.approve(task, Actor::Human("boss".into()), t0()).await.expect("approve");
    }
    // Finer than the columns keep: the row and the entry hold it to the microsecond.
    let at = t0() + SignedDuration::from_nanos(123_456_789);
    let request = move |task: TaskId| ClaimRequest {
        require_run: true,
        require_approval: true,
        ..claim_request(task, "w", at)
    };
    let specs = [ActionSpec { name: "act".into(), auto: true, ..ActionSpec::default() }];
    let scope = ClaimScope::worker(&Gate { actions: &specs, ..Gate::default() }, None, None);
    for (channel, &task) in channels.into_iter().zip(&ids) {
        let before = store.get(task).await.expect("get").expect("row");
        assert_eq!((before.run, before.approved_by.as_str()), (true, "human:boss"), "{channel}");
        let req = request(task);
        let outcome = match channel {
            "claim" => store.claim(req.clone()).await.expect("claim"),
            "claim_first" => store.claim_first(vec![req.clone()]).await.expect("claim"),
            "claim_many" => store.claim_many(vec![req.clone()]).await.expect("claim").remove(0),
            _ => {
                let pick: crate::Pick =
                    Box::new(move |head: &[Task]| head.iter().map(|t| request(t.id)).collect());
                let next =
                    store.claim_next(at, scope.clone(), 1, 1, pick).await.expect("claim").expect("a request");
                assert_eq!(next.tried.iter().map(|r| r.id).collect::<Vec<_>>(), [task], "the head is {task}");
                next.outcome
            }
        };
        let ClaimOutcome::Claimed(after) = outcome else { panic!("{channel}: {outcome:?}") };
        let planned = crate::codec::as_stored(crate::ends::plan_claim(&before, &req));
        assert_eq!(*after, planned, "{channel}: the claimed row is the plan's");
        assert_eq!(store.get(task).await.expect("get").as_ref(), Some(&planned), "{channel}: as stored");
        let entry =
            crate::writes::JournalWrite::change(at, &before, &planned, "worker:w", JournalKind::Claim, None)
                .expect("entry");
        let claims: Vec<JournalEntry> = store
            .journal(task)
            .await
            .expect("journal")
            .into_iter()
            .filter(|e| e.kind == JournalKind::Claim)
            .collect();
        assert_eq!(claims.len(), 1, "{channel}: one claim entry: {claims:?}");
        let stored = &claims[0];
        let parse = |text: &str| {
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text).expect("json")
        };
        assert_eq!(
            (stored.actor.as_str(), &stored.before, &stored.after),
            (entry.actor.as_str(), &parse(&entry.before), &parse(&entry.after)),
            "{channel}: the claim's entry"
        );
        assert_eq!(stored.at.as_microsecond(), at.as_microsecond(), "{channel}: the entry's time");
    }
    // A one-row look's claim keeps the request's rules: a row with ▶ run unticked is not claimed
    // when the request requires it, nor a ticked one that no person approved when it requires an
    // approval; the row stays pending, and no claim is journaled.
    let mut unticked = with_id("not approved", "T-0100", &[]);
    unticked.action = "act".into();
    unticked.tags = Tags::parse_list("ai");
    let last = store.upsert(batch(vec![unticked])).await.expect("upsert").added[0];
    for (rule, tick) in [("require_run", false), ("require_approval", true)] {
        if tick {
            let edit = TaskEdit { run: Some(true), ..TaskEdit::default() };
            store.edit(last, edit, Actor::Human("p".into()), t0()).await.expect("tick");
        }
        let approval = rule == "require_approval";
        let pick: crate::Pick = Box::new(move |head: &[Task]| {
            let ask = |t: &Task| ClaimRequest {
                require_run: true,
                require_approval: approval,
                ..claim_request(t.id, "w", at)
            };
            head.iter().map(ask).collect()
        });
        let next = store.claim_next(at, scope.clone(), 1, 1, pick).await.expect("claim").expect("a request");
        assert_eq!(next.tried.iter().map(|r| r.id).collect::<Vec<_>>(), [last], "{rule}: the head");
        assert_eq!(next.outcome, ClaimOutcome::NotClaimable, "{rule}");
        let row = store.get(last).await.expect("get").expect("row");
        assert_eq!((row.status, row.run), (Status::Pending, tick), "{rule}: untouched");
    }
    let journal = store.journal(last).await.expect("journal");
    assert!(journal.iter().all(|e| e.kind != JournalKind::Claim), "{journal:?}");
}

/// S1: many concurrent claims of one row: exactly one wins.
pub async fn s1_concurrent_claims_of_one_row_give_it_once<B: Backend>(backend: &B) {
    let store = std::sync::Arc::new(backend.open().await);
    let id = store.upsert(batch(vec![item("contended")])).await.expect("upsert").added[0];
    let mut handles = Vec::new();
    for w in 0..8 {
        let store = std::sync::Arc::clone(&store);
        handles.push(async move { store.claim(claim_request(id, &format!("w{w}"), t0())).await });
    }
    let mut wins = 0;
    for outcome in futures_join(handles).await {
        if matches!(outcome.expect("claim"), ClaimOutcome::Claimed(_)) {
            wins += 1;
        }
    }
    assert_eq!(wins, 1);
}

/// I5, S1: `claim_first` takes the first claimable of its requests; workers handing it the same
/// head at once each get a different row (none twice), rows taken or not ready are passed over,
/// and the kill switch stops it.
pub async fn i5_claims_of_the_same_head_take_different_rows_in_one_write_each<B: Backend>(backend: &B) {
    let store = std::sync::Arc::new(backend.open().await);
    let ids = store
        .upsert(batch((0..12).map(|i| item(&format!("head {i}"))).collect()))
        .await
        .expect("upsert")
        .added;
    // The first row is already running, so every worker passes over it.
    claimed(&*store, claim_request(ids[0], "early", t0())).await;
    let mut handles = Vec::new();
    for w in 0..8 {
        let store = std::sync::Arc::clone(&store);
        let requests: Vec<ClaimRequest> =
            ids.iter().map(|&id| claim_request(id, &format!("w{w}"), t0())).collect();
        handles.push(async move { store.claim_first(requests).await });
    }
    let mut got: Vec<TaskId> = futures_join(handles)
        .await
        .into_iter()
        .map(|o| match o.expect("claim_first") {
            ClaimOutcome::Claimed(task) => task.id,
            other => panic!("every worker finds a row among 11 free ones: {other:?}"),
        })
        .collect();
    got.sort();
    let before = got.len();
    got.dedup();
    assert_eq!(got.len(), before, "no row claimed twice");
    assert!(!got.contains(&ids[0]), "a running row is passed over");
    for &id in &got {
        let runs = store.runs(id).await.expect("runs");
        assert_eq!(runs.len(), 1, "one run record per claimed row");
    }
    // The three rows left, then none; each time the first free one in the requests' order
    // (here the reverse of the ledger's), its run recorded for that request's own worker.
    let mut rest: Vec<ClaimRequest> = ids.iter().map(|&id| claim_request(id, "late", t0())).collect();
    rest.reverse();
    for (k, request) in rest.iter_mut().enumerate() {
        request.worker = format!("late{k}");
    }
    let mut left: Vec<(usize, TaskId)> = rest
        .iter()
        .enumerate()
        .filter(|(_, r)| !got.contains(&r.id) && r.id != ids[0])
        .map(|(k, r)| (k, r.id))
        .collect();
    assert_eq!(left.len(), 3);
    for (k, id) in left.drain(..) {
        match store.claim_first(rest.clone()).await.expect("claim") {
            ClaimOutcome::Claimed(task) => {
                assert_eq!(task.id, id, "the first free row in the requests' order");
                let runs = store.runs(id).await.expect("runs");
                assert_eq!(
                    runs.last().map(|r| r.worker.clone()),
                    Some(format!("late{k}")),
                    "its own request's worker"
                );
            }
            other => panic!("three rows are left: {other:?}"),
        }
    }
    assert_eq!(store.claim_first(rest.clone()).await.expect("claim"), ClaimOutcome::NotClaimable);
    assert_eq!(store.claim_first(Vec::new()).await.expect("claim"), ClaimOutcome::NotClaimable);
    let more = store.upsert(batch(vec![item("after the switch")])).await.expect("upsert").added;
    store.set_paused(Some("stop".into()), Actor::Human("ana".into()), t0()).await.expect("pause");
    let requests = vec![claim_request(more[0], "late", t0())];
    assert!(matches!(store.claim_first(requests).await.expect("claim"), ClaimOutcome::Paused(_)));
}

/// I5, S1, D1: `claim_next` shows its pick the head of the ready set in run order, reads it wider
/// while the pick takes nothing (within its limit), claims the first of the pick's requests in
/// the pick's order, claims nothing when the pick takes nothing, gives workers claiming at once
/// different rows, and stops at the kill switch.
pub async fn i5_claim_next_claims_the_first_row_its_pick_takes_in_run_order<B: Backend>(backend: &B) {
    use crate::{NextClaim, Pick};
    use daicho_core::policy::{ActionSpec, ClaimScope, Gate};
    use std::sync::{Arc, Mutex};

    let store = Arc::new(backend.open().await);
    let items: Vec<Item> = (0..40)
        .map(|i| {
            let mut it = item(&format!("next {i}"));
            it.action = "act".into();
            it.tags = daicho_core::Tags::parse_list("ai");
            // Run order: the rows of priority 1 (every third) first, then by id.
            it.priority = i64::from(i % 3 == 0);
            it
        })
        .collect();
    store.upsert(batch(items)).await.expect("upsert");
    let order: Vec<TaskId> =
        store.ready(t0(), 100).await.expect("ready").tasks.iter().map(|t| t.id).collect();
    assert_eq!(order.len(), 40);
    let specs = [ActionSpec { name: "act".into(), auto: true, ..ActionSpec::default() }];
    let scope = ClaimScope::worker(&Gate { actions: &specs, ..Gate::default() }, None, None);
    // A pick that asks for every row of the window but those of `skip` (in the window's order,
    // or the reverse), and records each window it is shown.
    let picker =
        |skip: Vec<TaskId>, worker: &str, reverse: bool, seen: Arc<Mutex<Vec<Vec<TaskId>>>>| -> Pick {
            let worker = worker.to_owned();
            Box::new(move |window: &[Task]| {
                seen.lock().expect("seen").push(window.iter().map(|t| t.id).collect());
                let mut asked: Vec<ClaimRequest> = window
                    .iter()
                    .filter(|t| !skip.contains(&t.id))
                    .map(|t| claim_request(t.id, &worker, t0()))
                    .collect();
                if reverse {
                    asked.reverse();
                }
                asked
            })
        };
    let claimed_id = |next: Option<NextClaim>| match next.map(|n| n.outcome) {
        Some(ClaimOutcome::Claimed(task)) => task.id,
        other => panic!("a row is claimed: {other:?}"),
    };
    let seen = || Arc::new(Mutex::new(Vec::new()));
    // The first three in run order passed over: the fourth is claimed, its run recorded; the
    // pick was shown the first eight rows in run order.
    let shown = seen();
    let pick = picker(order[..3].to_vec(), "w", false, Arc::clone(&shown));
    let got = claimed_id(store.claim_next(t0(), scope.clone(), 8, 100, pick).await.expect("claim_next"));
    assert_eq!(got, order[3], "the first row in run order the pick asks for");
    assert_eq!(shown.lock().expect("seen").clone(), vec![order[..8].to_vec()], "one window, in run order");
    assert_eq!(store.runs(got).await.expect("runs").len(), 1);
    let mut order: Vec<TaskId> = order.into_iter().filter(|&id| id != got).collect();
    // The pick's own order is the order tried: asked in reverse, the last of the window is taken.
    let pick = picker(Vec::new(), "w", true, seen());
    let got = claimed_id(store.claim_next(t0(), scope.clone(), 8, 100, pick).await.expect("claim_next"));
    assert_eq!(got, order[7], "the first request in the pick's order");
    order.retain(|&id| id != got);
    // Behind twenty rows passed over (more than the first window): read wider, then found.
    let shown = seen();
    let pick = picker(order[..20].to_vec(), "w", false, Arc::clone(&shown));
    let got = claimed_id(store.claim_next(t0(), scope.clone(), 8, 1_000, pick).await.expect("claim_next"));
    assert_eq!(got, order[20], "found behind 20 rows");
    let windows: Vec<usize> = shown.lock().expect("seen").iter().map(Vec::len).collect();
    assert_eq!(windows, [8, 32], "the window read four times wider");
    order.retain(|&id| id != got);
    // Not within the limit, or nothing the pick takes: nothing claimed, nothing written.
    let mark = store.change_mark().await.expect("mark");
    let pick = picker(order[..10].to_vec(), "w", false, seen());
    let next = store.claim_next(t0(), scope.clone(), 8, 5, pick).await.expect("claim_next");
    assert!(next.is_none(), "the row it would take is beyond the limit");
    let pick = picker(order.clone(), "w", false, seen());
    assert!(store.claim_next(t0(), scope.clone(), 8, 1_000, pick).await.expect("claim_next").is_none());
    assert_eq!(store.change_mark().await.expect("mark"), mark, "nothing was written");
    // Eight workers at once, each asking for its window: eight different rows, one run each.
    let mut handles = Vec::new();
    for w in 0..8 {
        let (store, scope) = (Arc::clone(&store), scope.clone());
        let pick = picker(Vec::new(), &format!("w{w}"), false, seen());
        handles.push(async move { store.claim_next(t0(), scope, 8, 1_000, pick).await });
    }
    let mut got: Vec<TaskId> =
        futures_join(handles).await.into_iter().map(|n| claimed_id(n.expect("claim_next"))).collect();
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 8, "no row claimed twice");
    for id in got {
        assert_eq!(store.runs(id).await.expect("runs").len(), 1, "one run record per claimed row");
    }
    store.set_paused(Some("stop".into()), Actor::Human("ana".into()), t0()).await.expect("pause");
    let pick = picker(Vec::new(), "w", false, seen());
    let next = store.claim_next(t0(), scope, 8, 1_000, pick).await.expect("claim_next");
    assert!(matches!(next.map(|n| n.outcome), Some(ClaimOutcome::Paused(_))), "the kill switch");
}

/// I5, D1: run ends that release the same dependent at the same moment (PostgreSQL lets run
/// ends go side by side) leave its count of unmet deps exact: it is ready when the last of its
/// deps is done, not before and not never.
pub async fn i5_run_ends_side_by_side_keep_a_shared_dependents_count_exact<B: Backend>(backend: &B) {
    let store = std::sync::Arc::new(backend.open().await);
    for round in 0..8u64 {
        let refs: Vec<String> = (1..=4).map(|k| format!("r{round}-dep{k}")).collect();
        let mut items: Vec<Item> = refs.iter().map(|r| with_id(&format!("dep {r}"), r, &[])).collect();
        let names: Vec<&str> = refs.iter().map(String::as_str).collect();
        items.push(with_id(&format!("round {round} waits for four"), &format!("r{round}-waits"), &names));
        let added = store.upsert(person_batch(items)).await.expect("upsert").added;
        let waiting = added[4];
        let mut running = Vec::new();
        for &dep in &added[..4] {
            running.push(claimed(&*store, claim_request(dep, "w", t0())).await);
        }
        // Three of the four end together: the dependent still waits for the fourth.
        let ends: Vec<_> = running[..3]
            .iter()
            .map(|t| {
                let store = std::sync::Arc::clone(&store);
                let end = finish(t, "w", success(Status::Done));
                async move { store.finish(end).await }
            })
            .collect();
        for end in futures_join(ends).await {
            end.expect("finish");
        }
        let ready: Vec<TaskId> =
            store.ready(t0(), 100).await.expect("ready").tasks.iter().map(|t| t.id).collect();
        assert!(!ready.contains(&waiting), "round {round}: {waiting} still waits for one dep");
        store.finish(finish(&running[3], "w", success(Status::Done))).await.expect("finish");
        let ready: Vec<TaskId> =
            store.ready(t0(), 100).await.expect("ready").tasks.iter().map(|t| t.id).collect();
        assert!(ready.contains(&waiting), "round {round}: {waiting} is ready once its four deps are done");
    }
}

/// Awaits all futures concurrently (a tiny join without an extra crate).
async fn futures_join<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = (0..pinned.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (slot, future) in out.iter_mut().zip(pinned.iter_mut()) {
            if slot.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(value) => *slot = Some(value),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
    })
    .await;
    out.into_iter().map(|o| o.expect("every future finished")).collect()
}

/// I5, S1: a worker's turn (`finish_and_claim_next`) records its run ends first and then claims
/// from the head as it is after them: the row a finished run released is claimed in the same
/// turn. A stale end gets its own `LeaseLost` and keeps neither the other end nor the claim from
/// being written; with nothing to record, the call is a claim.
pub async fn i5_a_workers_turn_records_its_ends_then_claims_the_row_they_released<B: Backend>(backend: &B) {
    use crate::Pick;
    use daicho_core::policy::{ActionSpec, ClaimScope, Gate};

    let store = backend.open().await;
    let mut items =
        vec![with_id("a", "T-0001", &[]), with_id("b", "T-0002", &["T-0001"]), with_id("c", "T-0003", &[])];
    for it in &mut items {
        it.action = "act".into();
        it.tags = daicho_core::Tags::parse_list("ai");
    }
    items[2].deps = vec!["T-0002".into()];
    store.upsert(batch(items)).await.expect("upsert");
    let specs = [ActionSpec { name: "act".into(), auto: true, ..ActionSpec::default() }];
    let scope = ClaimScope::worker(&Gate { actions: &specs, ..Gate::default() }, None, None);
    let every = |worker: &'static str| -> Pick {
        Box::new(move |head: &[Task]| head.iter().map(|t| claim_request(t.id, worker, t0())).collect())
    };
    let a = claimed(&store, claim_request(id("T-0001"), "w", t0())).await;
    // The end of a (and a stale end of it besides) and the next claim, in one turn: b, which
    // waited for a, is claimed.
    let stale = Finish { attempt: a.attempt + 1, ..finish(&a, "w", success(Status::Done)) };
    let ends = vec![stale, finish(&a, "w", success(Status::Done))];
    let (ends, next) = store.finish_and_claim_next(ends, t0(), scope.clone(), 8, 100, every("w")).await;
    let ends = ends.expect("the ends are recorded");
    assert!(matches!(ends[0], Err(StoreError::LeaseLost { .. })), "{:?}", ends[0]);
    assert_eq!(ends[1].as_ref().expect("recorded").status, Status::Done);
    let b = match next.expect("the claim").map(|n| n.outcome) {
        Some(ClaimOutcome::Claimed(task)) => *task,
        other => panic!("b, released by a's end, is claimed in the same turn: {other:?}"),
    };
    assert_eq!((b.id, b.status, b.attempt), (id("T-0002"), Status::Running, 1));
    assert_eq!(store.runs(b.id).await.expect("runs").len(), 1, "its run is recorded");
    // b fails: back to pending, and the claim of the same turn sees it ready again (not to
    // claim a run that just failed here is the worker's rule, in its pick); c still waits.
    let (ends, next) = store
        .finish_and_claim_next(vec![finish(&b, "w", failure("no"))], t0(), scope.clone(), 8, 100, every("w"))
        .await;
    assert_eq!(ends.expect("recorded")[0].as_ref().expect("recorded").status, Status::Pending);
    match next.expect("the claim").map(|n| n.outcome) {
        Some(ClaimOutcome::Claimed(task)) => assert_eq!(task.id, id("T-0002"), "b failed: pending again"),
        other => panic!("b is ready again: {other:?}"),
    }
    let mark = store.change_mark().await.expect("mark");
    let (ends, next) = store.finish_and_claim_next(Vec::new(), t0(), scope, 8, 100, every("w")).await;
    assert!(ends.expect("nothing to record").is_empty());
    assert!(next.expect("the look").is_none(), "nothing ready");
    assert_eq!(store.change_mark().await.expect("mark"), mark, "nothing was written");
}

/// I5: a one-slot worker's turn (a look of one row) claims the head its ends leave: after an end
/// that makes nothing ready, the next row in run order, the end and its run record written; after
/// an end that releases a dependent, the dependent (ahead of the rest, by its priority); after
/// ends that were all stale, the next row; after a failure, the row it put back to pending, ahead
/// of the row that was the head before. (PostgreSQL reads the look in the ends' own statement,
/// whose snapshot is taken before its writes, only when they make no row ready.)
pub async fn i5_a_one_slot_turn_claims_the_head_its_ends_leave<B: Backend>(backend: &B) {
    use crate::Pick;

    let store = backend.open().await;
    let mut items: Vec<Item> =
        ["T-0001", "T-0002", "T-0003", "T-0004"].iter().map(|t| with_id(t, t, &[])).collect();
    let mut released = with_id("T-0005", "T-0005", &["T-0001"]);
    released.priority = 10;
    items.push(released);
    store.upsert(batch(items.into_iter().map(for_act).collect())).await.expect("upsert");
    let scope = act_scope();
    let pick = || -> Pick {
        Box::new(|head: &[Task]| head.iter().map(|t| claim_request(t.id, "w", t0())).collect())
    };
    let turn =
        |finishes: Vec<Finish>| store.finish_and_claim_next(finishes, t0(), scope.clone(), 1, 1, pick());
    let claimed_in =
        |next: Result<Option<crate::NextClaim>, StoreError>| match next.map(|n| n.map(|n| n.outcome)) {
            Ok(Some(ClaimOutcome::Claimed(task))) => *task,
            other => panic!("a claim: {other:?}"),
        };
    // b ends: nobody waits on it, so nothing is made ready; a, the head, is claimed.
    let b = claimed(&store, claim_request(id("T-0002"), "w", t0())).await;
    let (ends, next) = turn(vec![finish(&b, "w", success(Status::Done))]).await;
    assert_eq!(ends.expect("recorded")[0].as_ref().expect("recorded").status, Status::Done);
    let a = claimed_in(next);
    assert_eq!(a.id, id("T-0001"), "the next row in run order");
    assert_eq!(store.get(b.id).await.expect("get").expect("b").status, Status::Done);
    let runs = store.runs(b.id).await.expect("runs");
    assert_eq!(runs.iter().map(|r| r.outcome.as_str()).collect::<Vec<_>>(), ["success"], "b's run ended");
    let kinds: Vec<JournalKind> =
        store.journal(b.id).await.expect("journal").iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [JournalKind::Add, JournalKind::Claim, JournalKind::Finish]);
    // a ends done and releases e, which goes ahead of c and d.
    let (ends, next) = turn(vec![finish(&a, "w", success(Status::Done))]).await;
    assert_eq!(ends.expect("recorded")[0].as_ref().expect("recorded").status, Status::Done);
    let e = claimed_in(next);
    assert_eq!(e.id, id("T-0005"), "e, released by a's end");
    // Only a stale end: refused, and the head claimed all the same.
    let (ends, next) = turn(vec![finish(&a, "w", success(Status::Done))]).await;
    assert!(matches!(ends.expect("answered")[0], Err(StoreError::LeaseLost { .. })));
    assert_eq!(claimed_in(next).id, id("T-0003"));
    // A failure puts e back to pending: the turn sees it, ahead of d.
    let (ends, next) = turn(vec![finish(&e, "w", failure("no"))]).await;
    assert_eq!(ends.expect("recorded")[0].as_ref().expect("recorded").status, Status::Pending);
    assert_eq!(claimed_in(next).id, id("T-0005"), "e, back to pending, ahead of d");
}

/// S13, S4, I5: a one-slot turn's end is written as the row is when it ends, whatever changed it
/// since the turn that claimed it: a person's edit (kept, and in the row the end answers), a
/// person's drop (the end is refused and the drop stays), a heartbeat, a dependent added during
/// the run (released by the end, and claimed by the same turn), a lost run claimed again by
/// another worker (the first worker's late end is refused), and an end of a row nothing changed.
/// (PostgreSQL plans such an end on the row as its claim left it, guarded by the row's version:
/// the edit, the drop, the dependent and the new claim must each fail the guard; its own
/// heartbeat drops the plan.)
pub async fn s13_i5_a_turns_end_is_written_on_the_row_as_it_is_when_it_ends<B: Backend>(backend: &B) {
    use crate::Pick;

    let store = backend.open().await;
    let items = (1..=6).map(|i| for_act(with_id(&format!("T-000{i}"), &format!("T-000{i}"), &[])));
    store.upsert(batch(items.collect())).await.expect("upsert");
    let scope = act_scope();
    let pick = |worker: &'static str, now: Timestamp| -> Pick {
        Box::new(move |head: &[Task]| head.iter().map(|t| claim_request(t.id, worker, now)).collect())
    };
    let turn = |finishes: Vec<Finish>| {
        store.finish_and_claim_next(finishes, t0(), scope.clone(), 1, 1, pick("w", t0()))
    };
    let claimed_in =
        |next: Result<Option<crate::NextClaim>, StoreError>| match next.map(|n| n.map(|n| n.outcome)) {
            Ok(Some(ClaimOutcome::Claimed(task))) => *task,
            other => panic!("a claim: {other:?}"),
        };
    let person = || Actor::Human("p".into());

    // A person retitles the running row: the end keeps the title and answers the row as stored.
    let a = claimed_in(turn(Vec::new()).await.1);
    assert_eq!(a.id, id("T-0001"));
    let edit = TaskEdit { title: Some("retitled while it ran".into()), ..TaskEdit::default() };
    store.edit(a.id, edit, person(), t0()).await.expect("edit");
    let (ends, next) = turn(vec![finish(&a, "w", success(Status::Done))]).await;
    let ended = ends.expect("recorded").remove(0).expect("recorded");
    let stored = store.get(a.id).await.expect("get").expect("a");
    assert_eq!((stored.status, stored.title.as_str()), (Status::Done, "retitled while it ran"));
    assert_eq!(ended, stored, "the end answers the row as stored");
    let b = claimed_in(next);

    // A person drops the running row: the worker's end is refused, and only clears the lease the
    // drop kept as a fence (S14); the drop stays.
    let edit = TaskEdit { status: Some(Status::Dropped), ..TaskEdit::default() };
    store.edit(b.id, edit, person(), t0()).await.expect("drop");
    let (ends, next) = turn(vec![finish(&b, "w", success(Status::Done))]).await;
    let ended = ends.expect("answered").remove(0);
    assert!(
        matches!(ended, Err(StoreError::LeaseLost { .. })),
        "an end of a dropped row is refused: {ended:?}"
    );
    let stored = store.get(b.id).await.expect("get").expect("b");
    assert_eq!((stored.status, &stored.lease, stored.result.as_str()), (Status::Dropped, &None, ""));
    let c = claimed_in(next);

    // A heartbeat, then the end.
    store.heartbeat(c.id, c.attempt, "w", t0() + SignedDuration::from_mins(40)).await.expect("heartbeat");
    let (ends, next) = turn(vec![finish(&c, "w", success(Status::Done))]).await;
    assert_eq!(ends.expect("recorded")[0].as_ref().expect("recorded").status, Status::Done);
    assert_eq!(store.get(c.id).await.expect("get").expect("c").lease, None, "the lease is cleared");
    let d = claimed_in(next);

    // A dependent added while d runs, ahead of the rest: d's end releases it, the turn claims it.
    let mut waiting = for_act(with_id("T-0009", "T-0009", &[&d.id.to_string()]));
    waiting.priority = 10;
    store.upsert(batch(vec![waiting])).await.expect("a dependent");
    let (ends, next) = turn(vec![finish(&d, "w", success(Status::Done))]).await;
    assert_eq!(ends.expect("recorded")[0].as_ref().expect("recorded").status, Status::Done);
    let released = claimed_in(next);
    assert_eq!(released.id, id("T-0009"), "the dependent, released by d's end");
    let stored = store.get(d.id).await.expect("get").expect("d");
    let d_journal = store.journal(d.id).await.expect("journal");
    let end = d_journal.last().expect("the end's entry");
    assert_eq!(
        (end.kind, &end.before["status"], &end.after["status"]),
        (JournalKind::Finish, &serde_json::json!("running"), &serde_json::json!("done"))
    );
    assert_eq!(stored.lease, None);

    // A lost run: the sweeper counts it, another worker claims it again; the late end is refused.
    // An end of a row nothing changed since its claim: written with its journal entry and run
    // record, and the row it answers is the row as stored.
    let (ends, next) = turn(vec![finish(&released, "w", success(Status::Done))]).await;
    let ended = ends.expect("recorded").remove(0).expect("recorded");
    assert_eq!(ended, store.get(released.id).await.expect("get").expect("T-0009"), "the row as stored");
    assert_eq!((ended.status, ended.result.as_str(), ended.lease.is_none()), (Status::Done, "made it", true));
    let kinds: Vec<JournalKind> =
        store.journal(released.id).await.expect("journal").iter().map(|j| j.kind).collect();
    assert_eq!(kinds, [JournalKind::Add, JournalKind::Claim, JournalKind::Finish]);
    let runs = store.runs(released.id).await.expect("runs");
    assert_eq!(
        runs.iter().map(|r| r.outcome.as_str()).collect::<Vec<_>>(),
        ["success"],
        "its run ended once"
    );
    let e = claimed_in(next);
    let later = t0() + SignedDuration::from_hours(2);
    assert_eq!(
        store.expire_leases(later, FailurePolicy::default()).await.expect("sweep"),
        [(e.id, Status::Pending)]
    );
    let again = claimed(&store, claim_request(e.id, "w2", later)).await;
    let (ends, _) = turn(vec![finish(&e, "w", success(Status::Done))]).await;
    assert!(matches!(ends.expect("answered")[0], Err(StoreError::LeaseLost { .. })), "the late end");
    let stored = store.get(e.id).await.expect("get").expect("e");
    assert_eq!((stored.status, stored.attempt), (Status::Running, again.attempt), "w2's run goes on");
    let kinds: Vec<JournalKind> =
        store.journal(e.id).await.expect("journal").iter().map(|j| j.kind).collect();
    assert!(!kinds.contains(&JournalKind::Finish), "no end journaled: {kinds:?}");
}

/// S14, I5: when a worker's turn failed as one transaction, its ends are recorded on their own
/// (`ends_alone_if_failed`, what both backends answer then) and the claim keeps the error; with
/// no ends, nothing is written.
pub async fn s14_a_workers_turn_that_failed_records_its_ends_alone<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let added = store.upsert(batch(vec![item("ends alone")])).await.expect("upsert").added;
    let task = claimed(&store, claim_request(added[0], "w", t0())).await;
    let failed = || Err(StoreError::Unavailable("the turn's transaction failed".into()));
    let mark = store.change_mark().await.expect("mark");
    let (ends, next) = crate::ends_alone_if_failed(&store, failed(), Vec::new()).await;
    assert!(ends.expect("nothing to record").is_empty());
    assert!(matches!(next, Err(StoreError::Unavailable(_))), "the claim keeps the error: {next:?}");
    assert_eq!(store.change_mark().await.expect("mark"), mark, "nothing was written");
    let finishes = vec![finish(&task, "w", success(Status::Done))];
    let (ends, next) = crate::ends_alone_if_failed(&store, failed(), finishes).await;
    let ends = ends.expect("the ends are recorded");
    assert_eq!(ends[0].as_ref().expect("recorded").status, Status::Done);
    assert!(matches!(next, Err(StoreError::Unavailable(_))), "the claim keeps the error: {next:?}");
    assert_eq!(store.get(task.id).await.expect("get").expect("the row").status, Status::Done);
}

/// S3: a failure counts, puts the row back to pending and stops; the third parks it.
pub async fn s3_three_failures_park_the_row<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let id = store.upsert(batch(vec![item("flaky")])).await.expect("upsert").added[0];
    for round in 1..=3u32 {
        let task = claimed(&store, claim_request(id, "w", t0())).await;
        let after = store.finish(finish(&task, "w", failure(&format!("boom {round}")))).await.expect("fail");
        assert_eq!(after.failures, round);
        let want = if round < 3 { Status::Pending } else { Status::NeedsHuman };
        assert_eq!(after.status, want, "after failure {round}");
    }
    assert_eq!(store.claim(claim_request(id, "w", t0())).await.expect("claim"), ClaimOutcome::NotClaimable);
    let journal = store.journal(id).await.expect("journal");
    assert_eq!(journal.last().expect("entry").after["error"], "boom 3");
}

/// S4: a running row whose lease expired counts one timeout failure, once; its worker's late
/// write is then rejected; at the cap the row is parked.
pub async fn s4_an_expired_lease_counts_one_failure_once<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let id = store.upsert(batch(vec![item("killed worker")])).await.expect("upsert").added[0];
    let policy = FailurePolicy::default();
    for round in 1..=3u32 {
        let now = t0() + SignedDuration::from_hours(i64::from(round));
        let mut request = claim_request(id, "doomed", now);
        request.lease = SignedDuration::from_mins(1);
        let task = claimed(&store, request).await;
        assert!(store.expire_leases(now, policy).await.expect("expire").is_empty(), "not yet expired");
        let later = now + SignedDuration::from_mins(2);
        let expired = store.expire_leases(later, policy).await.expect("expire");
        let want = if round < 3 { Status::Pending } else { Status::NeedsHuman };
        assert_eq!(expired, [(id, want)]);
        assert!(store.expire_leases(later, policy).await.expect("expire").is_empty(), "counted once");
        let late = store.finish(finish(&task, "doomed", success(Status::Done))).await;
        assert!(matches!(late, Err(StoreError::LeaseLost { .. })), "a lost run's late write is rejected");
        assert_eq!(store.get(id).await.expect("get").expect("row").failures, round);
    }
    let runs = store.runs(id).await.expect("runs");
    assert!(runs.iter().all(|r| r.outcome == "lost"), "{runs:?}");
}

/// A run finishing `done` unblocks its dependents; `require_run` claims only ticked rows.
pub async fn done_unblocks_dependents_and_requires_run_when_asked<B: Backend>(backend: &B) {
    let store = backend.open().await;
    store
        .upsert(batch(vec![with_id("a", "T-0001", &[]), with_id("b", "T-0002", &["T-0001"])]))
        .await
        .expect("upsert");
    assert_eq!(
        store.claim(claim_request(id("T-0002"), "w", t0())).await.expect("claim"),
        ClaimOutcome::NotClaimable,
        "blocked"
    );
    let mut ticked = claim_request(id("T-0001"), "w", t0());
    ticked.require_run = true;
    assert_eq!(
        store.claim(ticked.clone()).await.expect("claim"),
        ClaimOutcome::NotClaimable,
        "run not ticked"
    );
    let edit = TaskEdit { run: Some(true), ..TaskEdit::default() };
    store.edit(id("T-0001"), edit, Actor::Human("p".into()), t0()).await.expect("tick");
    let task = claimed(&store, ticked).await;
    assert!(!task.run, "the claim clears the run box");
    store.finish(finish(&task, "w", success(Status::Done))).await.expect("finish");
    let ready = store.ready(t0(), 10).await.expect("ready");
    assert_eq!(ready.tasks.iter().map(|t| t.id).collect::<Vec<_>>(), [id("T-0002")]);
}

/// S8: while paused, no claim succeeds, by any way to claim (`claim`, `claim_first`,
/// `claim_many`, `claim_next` with a one-row look and a wider one): each answers the reason and
/// the row stays pending, unjournaled; after resume they do.
pub async fn s8_paused_claims_nothing<B: Backend>(backend: &B) {
    use daicho_core::policy::{ActionSpec, ClaimScope, Gate};

    let store = backend.open().await;
    let mut waiting = item("waits out the pause");
    waiting.action = "act".into();
    waiting.tags = Tags::parse_list("ai");
    let id = store.upsert(batch(vec![waiting])).await.expect("upsert").added[0];
    store.set_paused(Some("maintenance".into()), Actor::Human("p".into()), t0()).await.expect("pause");
    assert_eq!(store.paused().await.expect("paused"), Some("maintenance".into()));
    let specs = [ActionSpec { name: "act".into(), auto: true, ..ActionSpec::default() }];
    let scope = ClaimScope::worker(&Gate { actions: &specs, ..Gate::default() }, None, None);
    let paused = ClaimOutcome::Paused("maintenance".into());
    assert_eq!(store.claim(claim_request(id, "w", t0())).await.expect("claim"), paused);
    assert_eq!(store.claim_first(vec![claim_request(id, "w", t0())]).await.expect("claim"), paused);
    assert_eq!(
        store.claim_many(vec![claim_request(id, "w", t0())]).await.expect("claim"),
        vec![paused.clone()]
    );
    for window in [1, 8] {
        let pick: crate::Pick =
            Box::new(|head: &[Task]| head.iter().map(|t| claim_request(t.id, "w", t0())).collect());
        let next = store.claim_next(t0(), scope.clone(), window, 8, pick).await.expect("claim");
        assert_eq!(next.map(|n| n.outcome), Some(paused.clone()), "a look of {window}");
    }
    assert_eq!(store.get(id).await.expect("get").expect("row").status, Status::Pending);
    let kinds: Vec<JournalKind> = store.journal(id).await.expect("journal").iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [JournalKind::Add], "no claim was journaled");
    store.set_paused(None, Actor::Human("p".into()), t0()).await.expect("resume");
    assert_eq!(store.paused().await.expect("paused"), None);
    claimed(&store, claim_request(id, "w", t0())).await;
}

/// S14: a person who moves a running row out of `running` stops its run at once in the ledger
/// (the run record is closed as interrupted, the worker's heartbeat is refused), but the row's
/// lease stays as a fence: no way to claim it (`claim`, `claim_first`, `claim_many`,
/// `claim_next` with a one-row look and a wider one, `finish_and_claim_next`) takes the row while
/// the run may live. The worker's end then clears the fence and nothing else (the person's
/// status stays, no failure is counted, the record is not closed twice), and the row is claimed
/// again. A worker that never ends its run leaves the fence until its lease runs out.
pub async fn s14_a_run_a_person_stopped_keeps_its_row_from_every_claim_until_it_has_ended<B: Backend>(
    backend: &B,
) {
    let store = backend.open().await;
    let items = vec![for_act(with_id("stopped", "T-0001", &[])), for_act(with_id("dies", "T-0002", &[]))];
    store.upsert(batch(items)).await.expect("upsert");
    let (a, b) = (id("T-0001"), id("T-0002"));
    let run = claimed(&store, claim_request(a, "w1", t0())).await;
    let dying = claimed(&store, claim_request(b, "w0", t0())).await;
    let later = t0() + SignedDuration::from_secs(1);
    for (task, status) in [(a, Status::Pending), (b, Status::Pending)] {
        let edit = TaskEdit { status: Some(status), ..TaskEdit::default() };
        store.edit(task, edit, Actor::Human("p".into()), later).await.expect("a person's move");
    }
    let moved = store.get(a).await.expect("get").expect("a");
    assert_eq!(moved.status, Status::Pending);
    assert_eq!(moved.lease, run.lease, "the lease stays as a fence");
    let records = store.runs(a).await.expect("runs");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome, RunOutcome::Interrupted, "the person's move closes the record");
    assert!(records[0].error.contains("human:p"), "{}", records[0].error);
    let stats = store.stats(Timestamp::UNIX_EPOCH).await.expect("stats");
    assert_eq!(stats.iter().map(|s| (s.runs, s.running, s.failures)).collect::<Vec<_>>(), [(2, 0, 0)]);
    assert!(
        matches!(
            store.heartbeat(a, run.attempt, "w1", later + SignedDuration::from_mins(30)).await,
            Err(StoreError::LeaseLost { .. })
        ),
        "the worker learns its claim is gone"
    );

    // Every way to claim passes the fenced rows over.
    let now = later + SignedDuration::from_secs(1);
    let ready = store.ready(now, 10).await.expect("ready");
    assert_eq!(ready.tasks.len(), 2, "both rows are ready, and held");
    let none = ClaimOutcome::NotClaimable;
    for row in [a, b] {
        assert_eq!(store.claim(claim_request(row, "w2", now)).await.expect("claim"), none);
        assert_eq!(store.claim_first(vec![claim_request(row, "w2", now)]).await.expect("claim"), none);
        assert_eq!(
            store.claim_many(vec![claim_request(row, "w2", now)]).await.expect("claim"),
            std::slice::from_ref(&none)
        );
    }
    let pick = |worker: &'static str, at: Timestamp| -> crate::Pick {
        Box::new(move |head: &[Task]| head.iter().map(|t| claim_request(t.id, worker, at)).collect())
    };
    for window in [1, 8] {
        let next = store.claim_next(now, act_scope(), window, 8, pick("w2", now)).await.expect("claim");
        assert!(next.is_none(), "a look of {window} found a fenced row: {next:?}");
    }
    let (_, next) = store.finish_and_claim_next(Vec::new(), now, act_scope(), 1, 8, pick("w2", now)).await;
    assert!(next.expect("a turn").is_none(), "a turn found a fenced row");
    assert_eq!(store.journal(a).await.expect("journal").last().map(|e| e.kind), Some(JournalKind::Edit));

    // The worker's end is refused as the run's, and clears the fence only; the row is claimed
    // again.
    let mut end = finish(&run, "w1", RunEnd::Interrupted { reason: "killed".into() });
    end.now = now;
    let refused = store.finish(end.clone()).await;
    assert!(matches!(refused, Err(StoreError::LeaseLost { .. })), "{refused:?}");
    let cleared = store.get(a).await.expect("get").expect("a");
    assert_eq!((cleared.status, &cleared.lease, cleared.failures), (Status::Pending, &None, 0));
    let journal = store.journal(a).await.expect("journal");
    let last = journal.last().expect("an entry");
    assert_eq!((last.kind, last.actor.as_str()), (JournalKind::Interrupted, "worker:w1"));
    assert_eq!(store.runs(a).await.expect("runs"), records, "the record is not closed twice");
    let again = claimed(&store, claim_request(a, "w2", now)).await;
    assert_eq!((again.attempt, again.lease.map(|l| l.owner)), (2, Some("w2".to_owned())));
    assert!(
        matches!(store.finish(end).await, Err(StoreError::LeaseLost { .. })),
        "the old worker's end again is stale"
    );

    // The fence of a worker that never ends its run lasts until its lease runs out.
    let expiry = dying.lease.expect("a lease").expires_at;
    let before = expiry - SignedDuration::from_secs(1);
    assert_eq!(store.claim(claim_request(b, "w2", before)).await.expect("claim"), none);
    let next = store.claim_next(expiry, act_scope(), 1, 8, pick("w2", expiry)).await.expect("claim");
    match next.map(|n| n.outcome) {
        Some(ClaimOutcome::Claimed(task)) => assert_eq!(task.id, b),
        other => panic!("the row whose fence ran out: {other:?}"),
    }
}

/// S2: a task enters the approval queue once, with who queued it; approving ticks `run` and
/// empties the queue; rejecting drops the task with the reason; the history shows both
/// decisions, latest first, with who queued, who decided and why; no one but a person rejects.
pub async fn s2_approval_queue_is_idempotent<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let added =
        store.upsert(batch(vec![item("publish"), item("mail the client")])).await.expect("upsert").added;
    let (id, other) = (added[0], added[1]);
    let by = || "sweep:run-requested".to_owned();
    assert_eq!(store.queue_approvals(vec![id, other], by(), t0()).await.expect("queue"), [id, other]);
    assert!(store.queue_approvals(vec![id], by(), t0()).await.expect("queue").is_empty(), "not queued twice");
    let queue = store.approvals().await.expect("approvals");
    assert_eq!(
        queue.iter().map(|q| (q.id, q.queued_by.as_str())).collect::<Vec<_>>(),
        [(id, "sweep:run-requested"), (other, "sweep:run-requested")]
    );
    let approved = store.approve(id, Actor::Human("boss".into()), t0()).await.expect("approve");
    assert!(approved.run);
    assert_eq!(store.approvals().await.expect("approvals").len(), 1);
    assert!(
        store.queue_approvals(vec![id], by(), t0()).await.expect("queue").is_empty(),
        "decided stays decided"
    );
    let journal = store.journal(id).await.expect("journal");
    assert_eq!(journal.last().map(|e| (e.kind.as_str(), e.actor.as_str())), Some(("approve", "human:boss")));

    let blank = store.reject(other, "  ".into(), Actor::Human("boss".into()), t1()).await;
    assert!(matches!(blank, Err(StoreError::InvalidInput(_))), "{blank:?}");
    let by_a_producer = store.reject(other, "no".into(), Actor::Push("ci".into()), t1()).await;
    assert!(matches!(by_a_producer, Err(StoreError::Refused(_))), "{by_a_producer:?}");
    assert!(store.decisions(10).await.expect("decisions").iter().all(|d| d.queued.id != other));
    let rejected = store.reject(other, " wrong client ".into(), Actor::Human("boss".into()), t1()).await;
    let rejected = rejected.expect("reject");
    assert_eq!((rejected.status, rejected.run), (Status::Dropped, false));
    assert_eq!(rejected.correction, "rejected: wrong client");
    assert!(store.approvals().await.expect("approvals").is_empty());
    let history = store.decisions(10).await.expect("decisions");
    let seen: Vec<(TaskId, Decision, &str, &str, &str)> = history
        .iter()
        .map(|d| {
            (d.queued.id, d.decision, d.decided_by.as_str(), d.reason.as_str(), d.queued.queued_by.as_str())
        })
        .collect();
    assert_eq!(
        seen,
        [
            (other, Decision::Rejected, "human:boss", "wrong client", "sweep:run-requested"),
            (id, Decision::Approved, "human:boss", "", "sweep:run-requested"),
        ]
    );
    assert_eq!((history[0].decided_at, history[1].decided_at), (t1(), t0()));
    assert_eq!(store.decisions(1).await.expect("decisions").len(), 1, "the limit holds");
}

/// Every row and the whole journal, for "nothing changed" checks.
async fn snapshot<S: Store>(store: &S) -> (Vec<Task>, Vec<Vec<JournalEntry>>) {
    let rows = all(store).await;
    let mut journals = Vec::new();
    for row in &rows {
        journals.push(store.journal(row.id).await.expect("journal"));
    }
    (rows, journals)
}

/// S13, M4: a producer's (push, import of a foreign file) or an agent's item that carries
/// `run`, `correction`, `result`, `run_at` or `failures` is refused whole, naming the field
/// and the line; a pulled source's are left out and reported; a person's import keeps them.
pub async fn s13_producers_never_write_a_persons_fields<B: Backend>(backend: &B) {
    let store = backend.open().await;
    store.upsert(batch(vec![item("already here")])).await.expect("upsert");
    let before = snapshot(&store).await;
    type Offer = (&'static str, fn(&mut Item));
    let offers: [Offer; 5] = [
        ("run", |i| i.run = true),
        ("correction", |i| i.correction = "send it now".into()),
        ("result", |i| i.result = "sent".into()),
        ("run_at", |i| i.run_at = Some(t0())),
        ("failures", |i| i.failures = 2),
    ];
    for actor in
        [Actor::Push("bot".into()), Actor::Import("foreign".into()), Actor::Worker("mcp:agent".into())]
    {
        for (field, set) in offers {
            let mut carrying = item("new work");
            carrying.line = Some(2);
            set(&mut carrying);
            let mut plain = item("plain");
            plain.line = Some(1);
            let batch = Batch { actor: actor.clone(), ..batch(vec![plain, carrying]) };
            let err = store.upsert(batch).await.expect_err("refused");
            let text = err.to_string();
            assert!(text.starts_with("contract.json:2: field '"), "{actor} {field}: {text}");
            assert!(text.contains(&format!("field '{field}' is written only by a person")), "{text}");
            assert_eq!(snapshot(&store).await, before, "{actor} {field}: nothing written");
        }
    }
    let mut pulled = item("from the sheet");
    pulled.correction = "a column the sheet has".into();
    pulled.run = true;
    pulled.line = Some(4);
    let report = store
        .upsert(Batch { actor: Actor::Sync("sheet".into()), ..batch(vec![pulled.clone()]) })
        .await
        .expect("sync");
    let fields: Vec<&str> = report.ignored.iter().map(|i| i.field).collect();
    assert_eq!(fields, ["run", "correction"]);
    assert_eq!(report.ignored[0].line, Some(4));
    let row = store.get(report.added[0]).await.expect("get").expect("row");
    assert_eq!((row.run, row.correction.as_str()), (false, ""), "a pulled source writes neither");
    let mut exported = item("from my export");
    exported.correction = "shorter".into();
    exported.failures = 1;
    let report = store.upsert(person_batch(vec![exported])).await.expect("a person's import");
    let row = store.get(report.added[0]).await.expect("get").expect("row");
    assert_eq!((row.correction.as_str(), row.failures), ("shorter", 1));
}

/// S13, M5, M6: a cell a person edited — rewritten or emptied — is theirs: no push, sync,
/// import or aggregate refresh fills or overwrites it again, while the cells no person wrote are
/// still filled and refreshed; and the row is never purged.
pub async fn s13_m5_m6_no_source_writes_again_a_cell_a_person_wrote<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let offered = |body: &str, evidence: &str| {
        let mut i = item("fix the parser");
        i.body = body.into();
        i.evidence = evidence.into();
        i.assignee = "bot".into();
        i.tags = Tags::parse_list("ai");
        i
    };
    let pushed = store.upsert(batch(vec![offered("the bot's words", "e1")])).await.expect("push");
    let row = pushed.added[0];
    assert!(store.get(row).await.expect("get").expect("row").person_cells.is_empty(), "a producer's row");
    // A person rewrites the body, empties the assignee and takes the ai tag off.
    let edit = TaskEdit {
        body: Some("my own notes".into()),
        assignee: Some(String::new()),
        remove_tags: vec!["ai".into()],
        ..TaskEdit::default()
    };
    let edited = store.edit(row, edit, Actor::Human("ana".into()), t0()).await.expect("edit");
    assert_eq!(edited.person_cells.to_string(), "body, assignee, tags");
    // An aggregate refresh, a push and a sync of the same item, each offering those cells again.
    let mut refresh = offered("376 open questions", "e2");
    refresh.due = Some("2027-01-31".parse().expect("date"));
    refresh.refresh = true;
    let writers = [Actor::Push("contract".into()), Actor::Sync("contract".into()), Actor::Import("c".into())];
    for actor in writers {
        let report = store.upsert(Batch { actor: actor.clone(), ..batch(vec![refresh.clone()]) }).await;
        report.expect("upsert");
        let now = store.get(row).await.expect("get").expect("row");
        assert_eq!(now.body, "my own notes", "{actor}: a person's body is never refreshed");
        assert_eq!(now.assignee, "", "{actor}: an emptied cell stays empty");
        assert!(now.tags.is_empty(), "{actor}: the ai tag stays off: {:?}", now.tags);
        assert_eq!(now.evidence, "e2", "{actor}: no person wrote the evidence: refreshed (M6)");
        assert_eq!(now.due, refresh.due, "{actor}: an empty cell no person wrote is filled (M5)");
    }
    // The same input again changes nothing (M8) and says which cells the row keeps.
    let again = store.upsert(batch(vec![refresh.clone()])).await.expect("again");
    assert!(again.added.is_empty() && again.updated.is_empty(), "{again:?}");
    let reason = &again.skipped[0].reason;
    assert!(reason.contains("body") && reason.contains("assignee") && reason.contains("tags"), "{reason}");
    // A purge of the source keeps the row: a person wrote into it (F2).
    let purge = store.purge_source("contract", false, Actor::Human("ana".into()), t0()).await.expect("purge");
    assert!(purge.kept.iter().any(|(id, _)| *id == row), "{purge:?}");
}

/// S13, M1: an item naming the id of an existing row addresses it only with the row's key
/// (source + normalized title) or its current source and title; otherwise the whole input is
/// refused naming both keys, across sources and projects; one id twice in one input is
/// refused naming both lines.
pub async fn s13_an_id_addresses_a_row_only_with_its_key<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let mut manual = Item::new("Call the customer", "cli");
    manual.project = "PJ-01".into();
    let mut plan_a = Item::new("Write the draft", "plan.md");
    plan_a.ref_id = Some("T-0001".into());
    plan_a.project = "PJ-01".into();
    store.upsert(person_batch(vec![plan_a.clone()])).await.expect("plan of PJ-01");
    store.upsert(person_batch(vec![manual])).await.expect("manual task");
    let before = snapshot(&store).await;

    // A push naming the person's manual task T-0002 with another title and source.
    let mut hijack = Item::new("x", "bot");
    hijack.ref_id = Some("T-0002".into());
    hijack.tags = daicho_core::Tags::parse_list("ai");
    hijack.action = "publish".into();
    hijack.line = Some(1);
    let err = store
        .upsert(Batch { actor: Actor::Push("bot".into()), ..batch(vec![hijack]) })
        .await
        .expect_err("another task's id");
    let text = err.to_string();
    assert!(text.contains("names T-0002, which is another task of project PJ-01"), "{text}");
    assert!(text.contains("'cli|callthecustomer'") && text.contains("'bot|x'"), "both keys: {text}");
    // Another project's plan file with the same ids, synced.
    let mut plan_b = Item::new("Write the draft", "pj02/plan.md");
    plan_b.ref_id = Some("T-0001".into());
    plan_b.project = "PJ-02".into();
    plan_b.assignee = "writer".into();
    plan_b.line = Some(3);
    let err = store
        .upsert(Batch { actor: Actor::Sync("pj02".into()), ..batch(vec![plan_b]) })
        .await
        .expect_err("another project's row");
    assert!(err.to_string().contains("contract.json:3: names T-0001"), "{err}");
    assert_eq!(snapshot(&store).await, before, "nothing written");

    // The same task under its own id still fills its empty cells.
    plan_a.assignee = "writer".into();
    let report =
        store.upsert(Batch { actor: Actor::Sync("plan".into()), ..batch(vec![plan_a]) }).await.expect("same");
    assert_eq!(report.updated, [id("T-0001")]);
    // One id twice in one input.
    let mut first = with_id("one", "T-0900", &[]);
    first.line = Some(3);
    let mut second = with_id("two", "T-900", &[]);
    second.line = Some(8);
    let err = store.upsert(batch(vec![first, second])).await.expect_err("duplicate id");
    assert_eq!(
        err.to_string(),
        "contract.json:8: id 'T-900' appears twice in this input: here and at line 3"
    );
}

/// S13: only a person edits a row, and no edit sets `running` (a claim's alone).
pub async fn s13_only_a_person_edits_and_running_is_a_claims<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let task = store.upsert(batch(vec![item("a")])).await.expect("upsert").added[0];
    let before = snapshot(&store).await;
    let running = TaskEdit { status: Some(Status::Running), ..TaskEdit::default() };
    let err = store.edit(task, running, Actor::Human("ana".into()), t0()).await.expect_err("running by hand");
    assert!(matches!(err, StoreError::Refused(_)), "{err:?}");
    for actor in [Actor::Push("bot".into()), Actor::Worker("w".into()), Actor::Sync("s".into())] {
        let tick = TaskEdit { run: Some(true), correction: Some("x".into()), ..TaskEdit::default() };
        let err = store.edit(task, tick, actor.clone(), t0()).await.expect_err("not a person");
        assert!(err.to_string().contains("only a person may edit a task"), "{actor}: {err}");
    }
    assert_eq!(snapshot(&store).await, before, "nothing written");
}

/// S2, S13: only a person approves, and only a `pending` task whose deps are done; the
/// approval names the person; a claim that requires an approval finds it or claims nothing,
/// and spends it. A ▶ tick alone is no approval.
pub async fn s2_s13_approval_is_a_persons_of_a_ready_task_and_spent_by_the_claim<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let items = vec![with_id("draft", "T-503", &[]), with_id("publish", "T-504", &["T-503"])];
    store.upsert(batch(items)).await.expect("upsert");
    let publish = id("T-504");
    let err = store.approve(publish, Actor::Human("ana".into()), t0()).await.expect_err("deps not done");
    assert!(
        err.to_string().starts_with("T-504 is not ready to approve: it waits for 1 unfinished dep"),
        "{err}"
    );
    assert!(!store.get(publish).await.expect("get").expect("row").run, "nothing ticked");
    set_status(&store, id("T-503"), Status::Done).await;
    for actor in [Actor::Push("bot".into()), Actor::Worker("mcp:agent".into()), Actor::System] {
        let err = store.approve(publish, actor.clone(), t0()).await.expect_err("not a person");
        assert!(matches!(err, StoreError::Refused(_)), "{actor}: {err:?}");
    }
    // A person's ▶ tick is a request, not an approval.
    let tick = TaskEdit { run: Some(true), ..TaskEdit::default() };
    store.edit(publish, tick, Actor::Human("ana".into()), t0()).await.expect("tick");
    let external =
        ClaimRequest { require_run: true, require_approval: true, ..claim_request(publish, "w", t0()) };
    assert_eq!(store.claim(external.clone()).await.expect("claim"), ClaimOutcome::NotClaimable);
    let approved = store.approve(publish, Actor::Human("boss".into()), t0()).await.expect("approve");
    assert_eq!((approved.run, approved.approved_by.as_str()), (true, "human:boss"));
    let claimed = claimed(&store, external.clone()).await;
    assert_eq!((claimed.run, claimed.approved_by.as_str()), (false, ""), "the claim spends the approval");
    let lost = finish(&claimed, "w", RunEnd::Failure { error: "smtp down".into(), timeout: false });
    store.finish(lost).await.expect("fail");
    assert_eq!(
        store.claim(external).await.expect("claim"),
        ClaimOutcome::NotClaimable,
        "a retry needs a new approval"
    );
}

/// S2, S13: a producer's change to an approved row (the text an outbound action would send)
/// withdraws the approval — the run box is cleared with it — and the row is queued for approval
/// again, once; so is a row whose approved run was claimed and failed. A row approved and not
/// yet claimed keeps its decision.
pub async fn s2_s13_a_withdrawn_or_spent_approval_queues_the_task_again<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let id = store.upsert(batch(vec![item("mail the customer")])).await.expect("upsert").added[0];
    let by = || "sweep:auto".to_owned();
    assert_eq!(store.queue_approvals(vec![id], by(), t0()).await.expect("queue"), [id]);
    store.approve(id, Actor::Human("boss".into()), t0()).await.expect("approve");
    assert!(store.queue_approvals(vec![id], by(), t0()).await.expect("queue").is_empty(), "approved");
    let mut changed = item("mail the customer");
    changed.body = "text the person never saw".into();
    let report = store.upsert(Batch { now: t1(), ..batch(vec![changed]) }).await.expect("upsert");
    assert_eq!(report.updated, [id]);
    let row = store.get(id).await.expect("get").expect("row");
    assert_eq!(
        (row.body.as_str(), row.run, row.approved_by.as_str()),
        ("text the person never saw", false, ""),
        "the approval is withdrawn with the change"
    );
    let journal = store.journal(id).await.expect("journal");
    let last = journal.last().expect("entry");
    assert_eq!((last.kind.as_str(), last.before["approved_by"].as_str()), ("patch", Some("human:boss")));
    assert_eq!(store.queue_approvals(vec![id], by(), t1()).await.expect("queue"), [id], "queued again");
    assert!(store.queue_approvals(vec![id], by(), t1()).await.expect("queue").is_empty(), "once");
    assert_eq!(store.approvals().await.expect("approvals").iter().map(|q| q.id).collect::<Vec<_>>(), [id]);

    store.approve(id, Actor::Human("boss".into()), t1()).await.expect("approve the new text");
    let external = ClaimRequest { require_run: true, require_approval: true, ..claim_request(id, "w", t1()) };
    let claimed = claimed(&store, external).await;
    store.finish(finish(&claimed, "w", failure("smtp down"))).await.expect("fail");
    assert_eq!(
        store.queue_approvals(vec![id], by(), t1()).await.expect("queue"),
        [id],
        "a retry is asked for"
    );
    assert_eq!(store.approvals().await.expect("approvals").len(), 1);
}

/// I5: the ready rows a claim may take are chosen in the query, and exactly as
/// [`ClaimScope::admits`] says, for every kind of row (manual, heavy, external with and without
/// approval, routed by name, type or assignee, ticked or not, another project's, a name with a
/// quote): the SQL and the Rust rule agree, so the policy's soundness proof carries over.
pub async fn i5_a_claim_scope_selects_in_the_query_what_the_rule_admits<B: Backend>(backend: &B) {
    use daicho_core::policy::{ActionSpec, ClaimScope, Gate, Mode};
    let store = backend.open().await;
    let (actions, types, people) = (["", "sum", "o'mail", "render"], ["", "調査", "x"], ["", "bot", "佐藤"]);
    let tags = ["", "ai", "external", "heavy", "ai,external", "ai,heavy"];
    let mut items = Vec::new();
    for (n, (((action, work_type), person), tag)) in actions
        .iter()
        .flat_map(|a| types.iter().map(move |t| (a, t)))
        .flat_map(|at| people.iter().map(move |p| (at, p)))
        .flat_map(|atp| tags.iter().map(move |t| (atp, t)))
        .enumerate()
    {
        let mut it = item(&format!("row {n}"));
        (it.action, it.work_type, it.assignee) = ((*action).into(), (*work_type).into(), (*person).into());
        it.tags = daicho_core::Tags::parse_list(tag);
        it.project = if n % 3 == 0 { "PJ-01'".into() } else { "PJ-02".into() };
        it.run = n % 2 == 0;
        items.push(it);
    }
    let report = store.upsert(person_batch(items)).await.expect("upsert");
    // Every tenth row gets a person's approval (which ticks ▶ run).
    for (n, row) in report.added.iter().enumerate().filter(|(n, _)| n % 10 == 0) {
        store.approve(*row, Actor::Human(format!("p{n}")), t0()).await.expect("approve");
    }
    let spec = |name: &str, types: &[&str], people: &[&str]| ActionSpec {
        name: name.into(),
        types: types.iter().map(|t| (*t).into()).collect(),
        assignees: people.iter().map(|p| (*p).into()).collect(),
        ..ActionSpec::default()
    };
    let specs = [
        ActionSpec { auto: true, ..spec("sum", &["調査"], &["bot"]) },
        ActionSpec { external: true, auto: true, ..spec("o'mail", &["x"], &[]) },
        ActionSpec { heavy: true, auto: true, ..spec("render", &[], &["佐藤"]) },
    ];
    let gate = Gate { actions: &specs, ..Gate::default() };
    let ready = store.ready(t0(), 10_000).await.expect("ready").tasks;
    assert_eq!(ready.len(), 4 * 3 * 3 * 6);
    let modes = [None, Some(Mode::Auto), Some(Mode::Requested)];
    let mut admitted_any = false;
    for (ticked, unticked) in modes.iter().flat_map(|t| modes.iter().map(move |u| (*t, *u))) {
        for (project, only) in
            [(None, None), (Some("PJ-01'"), None), (None, Some("o'mail")), (None, Some("sum"))]
        {
            let scope = ClaimScope::new(&gate, ticked, unticked, project, only);
            let want: Vec<TaskId> = ready.iter().filter(|t| scope.admits(t)).map(|t| t.id).collect();
            let got: Vec<TaskId> = store
                .ready_head(t0(), Some(scope.clone()), 10_000)
                .await
                .expect("ready_head")
                .iter()
                .map(|t| t.id)
                .collect();
            assert_eq!(got, want, "{scope:?}");
            let head: Vec<TaskId> = store
                .ready_head(t0(), Some(scope.clone()), 2)
                .await
                .expect("head")
                .iter()
                .map(|t| t.id)
                .collect();
            assert_eq!(head, want[..want.len().min(2)], "the first two in run order");
            admitted_any |= !want.is_empty() && want.len() < ready.len();
        }
    }
    assert!(admitted_any, "the scopes tried both admit and leave out rows");
    // The rows awaiting approval, less those already queued.
    let awaiting = |project: Option<&str>| ClaimScope::awaiting_approval(&gate, project);
    let waiting: Vec<TaskId> = ready.iter().filter(|t| awaiting(None).admits(t)).map(|t| t.id).collect();
    assert!(waiting.len() > 2, "{waiting:?}");
    store.queue_approvals(waiting[..2].to_vec(), "test".into(), t0()).await.expect("queue");
    for project in [None, Some("PJ-01'")] {
        let want: Vec<TaskId> = ready
            .iter()
            .filter(|t| awaiting(project).admits(t) && !waiting[..2].contains(&t.id))
            .map(|t| t.id)
            .collect();
        let got: Vec<TaskId> = store
            .ready_head(t0(), Some(awaiting(project)), 10_000)
            .await
            .expect("awaiting")
            .iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(got, want, "awaiting approval in {project:?}");
    }
}

/// The status counts and each project's view head as the rows say, after `what`.
async fn check_counts_and_heads<S: Store>(store: &S, what: &str) {
    use daicho_core::view::is_open_work;
    let rows = all(store).await;
    let mut want: std::collections::BTreeMap<(String, u8), u64> = std::collections::BTreeMap::new();
    for t in &rows {
        *want.entry((t.project.clone(), t.status as u8)).or_default() += 1;
    }
    let got: std::collections::BTreeMap<(String, u8), u64> = store
        .status_counts()
        .await
        .expect("counts")
        .into_iter()
        .map(|c| ((c.project, c.status as u8), c.count))
        .collect();
    assert_eq!(got, want, "{what}: the status counts drifted from the rows");
    for project in ["A", "B'"] {
        let mut open: Vec<&Task> = rows
            .iter()
            .filter(|t| t.project == project && is_open_work(t.status) && t.source != "dash")
            .collect();
        open.sort_by_key(|t| (t.due.is_none(), t.due, t.id));
        let want: Vec<TaskId> = open.iter().take(3).map(|t| t.id).collect();
        let got: Vec<TaskId> = store
            .view_head(project.to_owned(), vec!["dash".to_owned()], 3)
            .await
            .expect("view head")
            .iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(got, want, "{what}: the view head of {project}");
    }
}

/// I3, V1–V3: the project × status counts and each project's first open rows in the view's order
/// (undated last, dashboard sources left out) follow every kind of write: insert, a person's
/// edits, a project change, a claim and its end, a lost run, a purge and a restore.
pub async fn i3_counts_and_view_heads_follow_every_write<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let mut items = Vec::new();
    for n in 0..12 {
        let mut it = item(&format!("row {n}"));
        it.project = if n % 3 == 0 { "B'".into() } else { "A".into() };
        it.due = (n % 4 != 0).then(|| jiff::civil::date(2026, 12, 1 + (n * 7 % 28) as i8));
        if n % 5 == 0 {
            it.source = "dash".into();
        }
        items.push(it);
    }
    let ids = store.upsert(batch(items)).await.expect("upsert").added;
    check_counts_and_heads(&store, "insert").await;
    for (i, status) in
        [Status::Done, Status::Review, Status::Dropped, Status::NeedsHuman].into_iter().enumerate()
    {
        set_status(&store, ids[i + 1], status).await;
    }
    check_counts_and_heads(&store, "edits").await;
    let moved = TaskEdit { project: Some("B'".into()), ..TaskEdit::default() };
    store.edit(ids[5], moved, Actor::Human("ana".into()), t0()).await.expect("move");
    check_counts_and_heads(&store, "a project change").await;
    let running = claimed(&store, claim_request(ids[7], "w", t0())).await;
    check_counts_and_heads(&store, "a claim").await;
    store.finish(finish(&running, "w", success(Status::Review))).await.expect("finish");
    let lost = claimed(&store, claim_request(ids[8], "w", t0())).await;
    store
        .expire_leases(t0() + SignedDuration::from_hours(1), FailurePolicy::default())
        .await
        .expect("expire");
    assert_eq!(store.get(lost.id).await.expect("get").expect("row").status, Status::Pending);
    check_counts_and_heads(&store, "a run's end and a lost run").await;
    store.purge_source("dash", true, Actor::Human("ana".into()), t0()).await.expect("purge");
    check_counts_and_heads(&store, "a purge").await;
    store.restore_source("dash", Actor::Human("ana".into()), t0()).await.expect("restore");
    check_counts_and_heads(&store, "a restore").await;
}

/// S9: runs are counted per action for the daily caps; stats add up outcomes and tokens.
pub async fn s9_run_counts_and_stats<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let report = store.upsert(batch(vec![item("one"), item("two")])).await.expect("upsert");
    let a = claimed(&store, claim_request(report.added[0], "w", t0())).await;
    store.finish(finish(&a, "w", success(Status::Review))).await.expect("finish");
    let b = claimed(&store, claim_request(report.added[1], "w", t0())).await;
    store.finish(finish(&b, "w", failure("no"))).await.expect("fail");
    let counts = store.run_counts(t0()).await.expect("counts");
    assert_eq!((counts.total, counts.by_action.get("act").copied()), (2, Some(2)));
    assert_eq!(store.run_counts(t0() + SignedDuration::from_secs(1)).await.expect("counts").total, 0);
    let stats = store.stats(t0()).await.expect("stats");
    assert_eq!(stats.len(), 1);
    let s = &stats[0];
    assert_eq!((s.runs, s.successes, s.failures, s.tokens_in, s.tokens_out), (2, 1, 1, 10, 20));
}

/// S9, I3: stats since the first run (`/metrics`, `stats --since all`) come from the counts the
/// backend keeps with the run records, and equal a pass over every run after each kind of run
/// record write: claims of two actions, one at a time and batched, a success with tokens, a
/// failure, a timeout, an operator's interruption and a lost run.
pub async fn s9_i3_stats_since_the_first_run_are_the_counts_kept_with_the_runs<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let ids =
        store.upsert(batch((0..8).map(|i| item(&format!("run {i}"))).collect())).await.expect("upsert").added;
    let with_action =
        |id, action: &str| ClaimRequest { action: action.to_owned(), ..claim_request(id, "w", t0()) };
    let runs = [
        (0, "act", success(Status::Review)),
        (1, "act", failure("no")),
        (2, "mail", RunEnd::Failure { error: "slow".into(), timeout: true }),
        (3, "mail", RunEnd::Interrupted { reason: "stopped".into() }),
        (4, "mail", success(Status::Done)),
    ];
    for (i, action, end) in runs {
        let task = claimed(&store, with_action(ids[i], action)).await;
        check_stats_agree(&store, &format!("claim of {action}")).await;
        store.finish(finish(&task, "w", end)).await.expect("finish");
        check_stats_agree(&store, &format!("run end of {action}")).await;
    }
    let batched = store.claim_many(vec![with_action(ids[5], "act"), with_action(ids[6], "mail")]).await;
    assert_eq!(batched.expect("claim_many").len(), 2);
    check_stats_agree(&store, "a batched claim").await;
    store
        .expire_leases(t0() + SignedDuration::from_hours(1), FailurePolicy::default())
        .await
        .expect("expire");
    check_stats_agree(&store, "lost runs").await;
    let all = store.stats(Timestamp::UNIX_EPOCH).await.expect("stats");
    let figures: Vec<_> = all
        .iter()
        .map(|s| (s.action.as_str(), s.runs, s.successes, s.failures, s.running, s.tokens_in))
        .collect();
    assert_eq!(figures, [("act", 3, 1, 2, 0, 10), ("mail", 4, 1, 2, 0, 10)]);
    drop(store);
    check_stats_agree(&backend.open().await, "a restart").await;
}

/// Three new rows (titled `name 0` …) run to an end each (a success with tokens, a failure, a
/// timeout) and a fourth left running, under two actions: run history for a backend's upgrade
/// tests.
pub async fn some_runs<S: Store>(store: &S, name: &str) {
    let items = (0..4).map(|i| Item::new(&format!("{name} {i}"), "runs")).collect();
    let ids = store.upsert(batch(items)).await.expect("upsert").added;
    let ends =
        [success(Status::Review), failure("no"), RunEnd::Failure { error: "slow".into(), timeout: true }];
    for (i, end) in ends.into_iter().enumerate() {
        let action = if i == 0 { "act" } else { "mail" };
        let task =
            claimed(store, ClaimRequest { action: action.into(), ..claim_request(ids[i], "w", t0()) }).await;
        store.finish(finish(&task, "w", end)).await.expect("finish");
    }
    claimed(store, claim_request(ids[3], "w", t0())).await;
}

/// `n` new tasks, each claimed and finished (a success) in turn, as a one-slot worker runs
/// them: the run table grows from empty by one record a claim.
pub async fn runs_one_by_one<S: Store>(store: &S, n: usize) {
    let items = (0..n).map(|i| Item::new(&format!("one by one {i}"), "runs")).collect();
    for id in store.upsert(batch(items)).await.expect("upsert").added {
        let task = claimed(store, claim_request(id, "w", t0())).await;
        store.finish(finish(&task, "w", success(Status::Done))).await.expect("finish");
    }
}

/// The row of the run [`some_runs`] leaves under way, in a fresh ledger where `some_runs` ran
/// first: the back half of [`check_a_left_running_record_is_closed`]'s setup moves it out of
/// `running` as daicho did before such a move closed the run's record (lease cleared, record left
/// `running`).
pub const LEFT_RUNNING: TaskId = TaskId::new(4);

/// S14, S9: after `some_runs(store, "before")`, `some_runs(store, "live")`, the old move of
/// [`LEFT_RUNNING`]'s row and an upgrade, that run's record is closed as interrupted and counted
/// as ended, the live run (`live 3`) still runs, and the kept counts agree with the records.
pub async fn check_a_left_running_record_is_closed<S: Store>(store: &S) {
    let left = store.runs(LEFT_RUNNING).await.expect("runs");
    assert_eq!(left.iter().map(|r| r.outcome).collect::<Vec<_>>(), [RunOutcome::Interrupted], "{left:?}");
    assert!(left[0].error.contains("stopped by a person"), "{left:?}");
    let live = store.runs(TaskId::new(8)).await.expect("runs");
    assert_eq!(live.iter().map(|r| r.outcome).collect::<Vec<_>>(), [RunOutcome::Running], "{live:?}");
    check_stats_agree(store, "the upgrade").await;
    let all = store.stats(Timestamp::UNIX_EPOCH).await.expect("stats");
    let totals = all.iter().fold((0, 0, 0), |(runs, running, failures), s| {
        (runs + s.runs, running + s.running, failures + s.failures)
    });
    assert_eq!(totals, (8, 1, 4), "8 runs, the live one running, no new failure: {all:?}");
}

/// Stats since the first run (the kept counts) equal stats since a microsecond later (a pass
/// over the run records, all of which started after it).
pub async fn check_stats_agree<S: Store>(store: &S, after: &str) {
    let kept = store.stats(Timestamp::UNIX_EPOCH).await.expect("stats from the counts");
    let counted = store.stats(Timestamp::UNIX_EPOCH + SignedDuration::from_micros(1)).await.expect("stats");
    assert_eq!(kept, counted, "after {after}: the kept counts and a pass over the runs differ");
}

/// `claim_many` and `finish_many`: one transaction for several runs; a stale finish among them
/// is rejected alone.
pub async fn batched_claims_and_finishes_commit_together<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let ids = store.upsert(batch(vec![item("b1"), item("b2"), item("b3")])).await.expect("upsert").added;
    let mut requests: Vec<ClaimRequest> = ids.iter().map(|&i| claim_request(i, "w", t0())).collect();
    requests.push(claim_request(ids[0], "w", t0()));
    let outcomes = store.claim_many(requests).await.expect("claim_many");
    let claimed: Vec<Task> = outcomes
        .iter()
        .filter_map(|o| match o {
            ClaimOutcome::Claimed(t) => Some((**t).clone()),
            _ => None,
        })
        .collect();
    assert_eq!(claimed.len(), 3, "the repeated request finds its row already claimed");
    assert_eq!(outcomes[3], ClaimOutcome::NotClaimable);
    let mut finishes: Vec<Finish> = claimed.iter().map(|t| finish(t, "w", success(Status::Done))).collect();
    finishes[1].attempt = 9;
    let results = store.finish_many(finishes).await.expect("finish_many");
    assert!(results[0].is_ok() && results[2].is_ok());
    assert!(matches!(results[1], Err(StoreError::LeaseLost { .. })));
    let statuses: Vec<Status> = all(&store).await.into_iter().map(|t| t.status).collect();
    assert_eq!(statuses, [Status::Done, Status::Running, Status::Done]);
}

/// S1, D1, D5 in a batch: each request of one `claim_many` is decided alone (deps, `not_before`,
/// the ▶ box); each claim journals its own before/after and opens its own run record; a batched
/// finish unblocks the dependents of every row it closes.
pub async fn batched_claims_decide_each_request_alone<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let mut later = with_id("later", "T-3", &[]);
    later.not_before = Some(t0() + SignedDuration::from_hours(1));
    let mut ticked = with_id("ticked", "T-5", &[]);
    ticked.run = true;
    let items = vec![
        with_id("first", "T-1", &[]),
        with_id("blocked", "T-2", &["T-1", "T-5"]),
        later,
        with_id("unticked", "T-4", &[]),
        ticked,
    ];
    store.upsert(person_batch(items)).await.expect("upsert");
    let edited = store
        .edit(
            id("T-1"),
            TaskEdit { correction: Some("use the v2 schema".into()), ..TaskEdit::default() },
            Actor::Human("ana".into()),
            t0(),
        )
        .await
        .expect("edit");
    assert_eq!(edited.correction, "use the v2 schema");
    let mut requests: Vec<ClaimRequest> =
        ["T-1", "T-2", "T-3", "T-4", "T-5"].iter().map(|t| claim_request(id(t), "w", t0())).collect();
    requests[3].require_run = true;
    requests[4].require_run = true;
    let outcomes = store.claim_many(requests).await.expect("claim_many");
    let kinds: Vec<&str> = outcomes
        .iter()
        .map(|o| match o {
            ClaimOutcome::Claimed(_) => "claimed",
            ClaimOutcome::NotClaimable => "no",
            ClaimOutcome::Paused(_) => "paused",
        })
        .collect();
    assert_eq!(kinds, ["claimed", "no", "no", "no", "claimed"]);
    let ClaimOutcome::Claimed(first) = &outcomes[0] else { unreachable!("checked above") };
    assert_eq!(first.correction, "use the v2 schema", "the claim hands over the row as stored now");
    assert_eq!((first.status, first.attempt, first.run_at), (Status::Running, 1, Some(t0())));
    let ClaimOutcome::Claimed(fifth) = &outcomes[4] else { unreachable!("checked above") };
    assert!(!fifth.run, "a claim clears the ▶ box");
    for claimed in [first, fifth] {
        assert_eq!(store.get(claimed.id).await.expect("get").as_ref(), Some(&**claimed));
        let journal = store.journal(claimed.id).await.expect("journal");
        let last = journal.last().expect("a claim entry");
        assert_eq!((last.kind.as_str(), last.actor.as_str()), ("claim", "worker:w"));
        assert_eq!(last.before["status"], "pending");
        assert_eq!(last.after["status"], "running");
        let runs = store.runs(claimed.id).await.expect("runs");
        assert_eq!(runs.len(), 1);
        assert_eq!((runs[0].attempt, runs[0].outcome.as_str()), (1, "running"));
    }
    assert!(store.ready(t0(), 10).await.expect("ready").tasks.iter().all(|t| t.id != id("T-2")));
    let finishes = vec![finish(first, "w", success(Status::Done)), finish(fifth, "w", success(Status::Done))];
    let results = store.finish_many(finishes).await.expect("finish_many");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let ready: Vec<String> =
        store.ready(t0(), 10).await.expect("ready").tasks.iter().map(|t| t.id.to_string()).collect();
    assert_eq!(ready, ["T-2", "T-4"], "both deps of T-2 done in one batch unblock it");
    let runs = store.runs(id("T-1")).await.expect("runs");
    assert_eq!((runs[0].outcome.as_str(), runs[0].tokens_in), ("success", Some(10)));
}

/// D4: `replan` drops the old plan's open rows (journaled) and adds the new plan in one
/// transaction; closed rows stay as they are; a refused new plan drops nothing.
pub async fn d4_replan_drops_the_old_open_tasks_in_the_same_transaction<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let old = store.upsert(batch(vec![item("old step 1"), item("old step 2")])).await.expect("plan").added;
    set_status(&store, old[0], Status::Done).await;
    let cyclic = batch(vec![with_id("new a", "a", &["b"]), with_id("new b", "b", &["a"])]);
    let cyclic = Batch { actor: Actor::Human("planner".into()), ..cyclic };
    assert!(store.replan(cyclic, old.clone()).await.is_err(), "a cycle is refused");
    assert_eq!(
        store.get(old[1]).await.expect("get").expect("row").status,
        Status::Pending,
        "nothing dropped"
    );
    let report = store
        .replan(person_batch(vec![with_id("new a", "a", &[]), with_id("new b", "b", &["a"])]), old.clone())
        .await
        .expect("replan");
    assert_eq!(report.added.len(), 2);
    let rows = all(&store).await;
    let status = |id: TaskId| rows.iter().find(|t| t.id == id).map(|t| t.status);
    assert_eq!((status(old[0]), status(old[1])), (Some(Status::Done), Some(Status::Dropped)));
    let journal = store.journal(old[1]).await.expect("journal");
    assert_eq!(journal.last().map(|e| e.after["status"].clone()), Some("dropped".into()));
    assert_eq!(rows.len(), 4, "rows are never deleted");
}

/// R3: a role's cursor persists across store handles, per role, and never touches the kill
/// switch kept in the same settings.
pub async fn r3_cursors_persist_per_role_apart_from_the_kill_switch<B: Backend>(backend: &B) {
    let store = backend.open().await;
    assert_eq!(store.cursor("sync").await.expect("cursor"), None);
    store.set_cursor("sync", "inbox").await.expect("set");
    store.set_cursor("sync", "sheet").await.expect("set");
    store.set_cursor("view", "ops").await.expect("set");
    store.set_paused(Some("night".into()), Actor::System, t0()).await.expect("pause");
    let again = backend.open().await;
    assert_eq!(again.cursor("sync").await.expect("cursor").as_deref(), Some("sheet"));
    assert_eq!(again.cursor("view").await.expect("cursor").as_deref(), Some("ops"));
    assert_eq!(again.paused().await.expect("paused").as_deref(), Some("night"));
}

/// R2: one holder per role lease: a second owner is refused until it expires or is released;
/// the holder may renew it; leases of different roles are independent.
pub async fn r2_a_role_lease_has_one_holder_until_it_expires_or_is_released<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let later = |s: i64| t0() + SignedDuration::from_secs(s);
    assert!(store.lease_role("sync", "serve-a", t0(), later(60)).await.expect("lease"));
    assert!(!store.lease_role("sync", "serve-b", later(10), later(70)).await.expect("lease"));
    assert!(store.lease_role("auto", "serve-b", later(10), later(70)).await.expect("lease"), "another role");
    assert!(store.lease_role("sync", "serve-a", later(20), later(80)).await.expect("lease"), "renewed");
    assert!(!store.lease_role("sync", "serve-b", later(79), later(90)).await.expect("lease"));
    assert!(store.lease_role("sync", "serve-b", later(80), later(90)).await.expect("lease"), "expired");
    assert!(store.lease_role("sync", "serve-b", later(85), later(85)).await.expect("release"));
    assert!(store.lease_role("sync", "serve-a", later(86), later(99)).await.expect("lease"), "released");
}

/// F2: a dry run writes nothing; `apply` deletes only untouched rows (a person's correction, a
/// closed status, a row another depends on keep theirs), journaled with the full row; `restore`
/// brings them back identical; a second restore finds them in the ledger.
pub async fn f2_purge_deletes_only_untouched_rows_and_restore_brings_them_back<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let ids = store
        .upsert(batch(vec![
            with_id("first", "x1", &[]),
            with_id("corrected", "x2", &[]),
            with_id("needs first", "x3", &["x1"]),
            with_id("closed", "x4", &[]),
            with_id("needed elsewhere", "x5", &[]),
        ]))
        .await
        .expect("upsert")
        .added;
    let mut other = with_id("other source", "y1", &[]);
    other.source = "elsewhere".into();
    other.deps = vec![ids[4].to_string()];
    store.upsert(batch(vec![other])).await.expect("upsert");
    let edit = TaskEdit { correction: Some("keep it".into()), ..TaskEdit::default() };
    store.edit(ids[1], edit, Actor::Human("ana".into()), t0()).await.expect("edit");
    set_status(&store, ids[3], Status::Done).await;
    let before = all(&store).await;

    let dry = store.purge_source("contract", false, Actor::Human("ana".into()), t0()).await.expect("dry run");
    let purged: Vec<TaskId> = dry.purged.iter().map(|t| t.id).collect();
    assert_eq!(purged, [ids[0], ids[2]]);
    let kept: Vec<TaskId> = dry.kept.iter().map(|(id, _)| *id).collect();
    assert_eq!(kept, [ids[1], ids[3], ids[4]], "{:?}", dry.kept);
    assert_eq!(all(&store).await, before, "a dry run writes nothing");

    let done = store.purge_source("contract", true, Actor::Human("ana".into()), t0()).await.expect("apply");
    assert_eq!(done.purged.len(), 2);
    let left: Vec<TaskId> = all(&store).await.iter().map(|t| t.id).collect();
    assert!(!left.contains(&ids[0]) && !left.contains(&ids[2]) && left.len() == before.len() - 2);
    let journal = store.journal(ids[0]).await.expect("journal");
    assert_eq!(journal.last().map(|e| e.kind.as_str()), Some("purge"));

    let restored = store.restore_source("contract", Actor::Human("ana".into()), t0()).await.expect("restore");
    assert_eq!(restored.restored, [ids[0], ids[2]]);
    assert_eq!(all(&store).await, before, "restored identical");
    let ready: Vec<TaskId> = store.ready(t0(), 10).await.expect("ready").tasks.iter().map(|t| t.id).collect();
    assert!(ready.contains(&ids[0]) && !ready.contains(&ids[2]), "deps counted again: {ready:?}");
    let again = store.restore_source("contract", Actor::Human("ana".into()), t0()).await.expect("restore");
    assert!(again.restored.is_empty() && again.skipped.len() == 2);
}

/// A deterministic random walk of upserts (requested ids, missing deps kept, closed statuses),
/// status and deps edits, claims, finishes, failures and expiries; after every step the store's
/// ready set equals the definition (D1) and the graph has no cycle (D2).
pub async fn a_random_walk_keeps_ready_exact_and_the_graph_acyclic<B: Backend>(backend: &B) {
    let store = backend.open().await;
    let mut seed: u64 = 0x1234_5678_9abc_def1;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut now = t0();
    for step in 0..160 {
        now += SignedDuration::from_secs(1);
        let op = rnd(6);
        let what = match op {
            0 | 1 => {
                let mut items = Vec::new();
                for _ in 0..(1 + rnd(3)) {
                    let mut i = item(&format!("x{}", rnd(14)));
                    if rnd(2) == 0 {
                        i.ref_id = Some(format!("T-{}", 1 + rnd(16)));
                    }
                    i.deps = (0..rnd(3)).map(|_| format!("T-{}", 1 + rnd(16))).collect();
                    if rnd(3) == 0 {
                        i.status = Some(Status::ALL[rnd(6) as usize]);
                    }
                    items.push(i);
                }
                let mut keep = batch(items);
                keep.unknown_deps = UnknownDeps::Keep;
                keep.now = now;
                format!("upsert: {:?}", store.upsert(keep).await.map(|r| r.added))
            }
            2 => {
                let (task, status) = (TaskId::new(1 + rnd(16)), Status::ALL[rnd(6) as usize]);
                let edit = TaskEdit { status: Some(status), ..TaskEdit::default() };
                format!(
                    "set {task} {status}: {:?}",
                    store.edit(task, edit, Actor::System, now).await.map(|t| t.status)
                )
            }
            3 => {
                let task = TaskId::new(1 + rnd(16));
                let deps: Vec<TaskId> = (0..rnd(3)).map(|_| TaskId::new(1 + rnd(16))).collect();
                let edit = TaskEdit { deps: Some(deps.clone()), ..TaskEdit::default() };
                format!("deps {task} {deps:?}: {}", store.edit(task, edit, Actor::System, now).await.is_ok())
            }
            4 => {
                let ready = store.ready(now, 20).await.expect("ready");
                match ready.tasks.first() {
                    Some(first) => {
                        let mut request = claim_request(first.id, "walker", now);
                        request.lease = SignedDuration::from_secs(3);
                        match store.claim(request).await.expect("claim") {
                            ClaimOutcome::Claimed(task) => match rnd(3) {
                                // Left running: a lost run for a later expiry.
                                2 => format!("claimed {} and left it running", task.id),
                                r => {
                                    let end = if r == 0 { success(Status::Done) } else { failure("walk") };
                                    let mut f = finish(&task, "walker", end);
                                    f.now = now;
                                    format!("ran {}: {:?}", task.id, store.finish(f).await.map(|t| t.status))
                                }
                            },
                            other => format!("claim {}: {other:?}", first.id),
                        }
                    }
                    None => "nothing ready".to_owned(),
                }
            }
            _ => format!(
                "expire: {:?}",
                store.expire_leases(now, FailurePolicy::default()).await.expect("expire")
            ),
        };
        let rows = all(&store).await;
        let graph: std::collections::BTreeMap<TaskId, Vec<TaskId>> =
            rows.iter().map(|t| (t.id, t.deps.clone())).collect();
        assert_eq!(dag::find_cycle(&graph), None, "step {step} ({what}) made a cycle");
        let want = dag::ready(&rows, now);
        let set = store.ready(now, 1000).await.expect("ready");
        let got: Vec<TaskId> = set.tasks.iter().map(|t| t.id).collect();
        assert_eq!(got, want, "step {step} ({what}): the ready set drifted from the definition");
        assert_eq!(set.total, want.len(), "step {step} ({what}): the ready count drifted from the set");
        let head: Vec<TaskId> =
            store.ready_head(now, None, 3).await.expect("ready_head").iter().map(|t| t.id).collect();
        assert_eq!(
            head,
            want[..want.len().min(3)],
            "step {step} ({what}): ready_head is not the head of ready"
        );
        assert!(rows.iter().all(|t| t.failures <= 3), "step {step}: failures over the cap");
        let counted: u64 = store.status_counts().await.expect("counts").iter().map(|c| c.count).sum();
        assert_eq!(counted, rows.len() as u64, "step {step} ({what}): the status counts drifted");
    }
}

/// A `purge` journal entry as written before the record was versioned and before `refresh`,
/// `attempt`, `lease` and `approved_by` existed: task T-0042 of source `old`, waiting for T-0001.
pub const OLD_PURGE_ENTRY: &str = r#"{"id":"T-0042","project":"PJ","status":"pending","run":false,
"title":"an old row","body":"from before","source":"old","evidence":"","due":"2026-04-01","assignee":"",
"type":"","priority":3,"not_before":null,"action":"","result":"","run_at":null,"correction":"",
"deps":["T-0001"],"tags":["ai"],"key":"old|an old row","failures":1,
"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-02T00:00:00Z"}"#;

/// F2: a purge entry of the old form ([`OLD_PURGE_ENTRY`], which the backend's own test wrote
/// into the journal of `store`'s ledger as task 42, after adding `T-0001` as done) is restored:
/// the fields it has as they were, the newer ones at their defaults, and the row ready since its
/// dep is done.
pub async fn f2_an_old_purge_entry_is_restored<S: Store>(store: &S) {
    let report = store.restore_source("old", Actor::Human("ana".into()), t0()).await.expect("restore");
    assert_eq!(report.restored, [id("T-0042")], "{report:?}");
    let row = store.get(id("T-0042")).await.expect("get").expect("restored");
    assert_eq!(
        (row.title.as_str(), row.body.as_str(), row.priority, row.failures, row.deps.clone()),
        ("an old row", "from before", 3, 1, vec![id("T-0001")])
    );
    assert_eq!((row.attempt, row.lease.clone(), row.approved_by.as_str(), row.refresh), (0, None, "", false));
    let ready = store.ready(t0(), 10).await.expect("ready");
    assert_eq!(ready.tasks.iter().map(|t| t.id).collect::<Vec<_>>(), [id("T-0042")]);
    let journal = store.journal(id("T-0042")).await.expect("journal");
    assert_eq!(journal.last().map(|e| e.kind.as_str()), Some("restore"));
}

/// The batch [`f2_an_old_purge_entry_is_restored`] expects before the old entry: `T-0001`, done.
pub fn old_purge_setup() -> Batch {
    let mut done = with_id("done first", "T-0001", &[]);
    done.status = Some(Status::Done);
    imported(vec![done])
}

/// I5, for a backend that tells idle workers when work may be ready ([`Store::wait_for_work`]):
/// adds rows to `store`'s ledger, claims some, and returns run ends to record one by one, each
/// with whether it makes work ready (and so must wake an idle worker). A row with no dependents
/// finished, or one whose dependent still waits for another dep, wakes nobody; a dependent
/// released, or a failed row back to pending, does.
pub async fn i5_run_ends_and_whether_they_make_work_ready<S: Store>(
    store: &S,
) -> Vec<(&'static str, Finish, bool)> {
    store
        .upsert(batch(vec![
            with_id("alone", "T-0001", &[]),
            with_id("released", "T-0002", &[]),
            with_id("waits for T-0002", "T-0003", &["T-0002"]),
            with_id("fails", "T-0004", &[]),
            with_id("half", "T-0005", &[]),
            with_id("not yet", "T-0007", &[]),
            with_id("waits for two", "T-0006", &["T-0005", "T-0007"]),
        ]))
        .await
        .expect("upsert");
    let mut ends = Vec::new();
    for (row, end, wakes, what) in [
        ("T-0001", success(Status::Done), false, "a row with no dependents done"),
        ("T-0005", success(Status::Done), false, "a dependent that still waits for another dep"),
        ("T-0002", success(Status::Done), true, "a dependent released"),
        ("T-0004", failure("boom"), true, "a failed row back to pending"),
    ] {
        let task = claimed(store, claim_request(id(row), "w", t0())).await;
        ends.push((what, finish(&task, "w", end), wakes));
    }
    ends
}

//! Claims, run ends and lost runs: set-based statements whose round trips do not grow with the
//! batch, so that one durable commit carries many tasks.

use std::collections::{HashMap, HashSet};

use daicho_core::policy::{ClaimScope, FailurePolicy};
use daicho_core::{Actor, Status, Task, TaskId};
use daicho_store::codec::claimable_where;
use daicho_store::ends::EndPlan;
use daicho_store::writes::JournalWrite;
use daicho_store::{
    ClaimOutcome, ClaimRequest, Finish, JournalKind, NextClaim, Pick, Result, RunOutcome, StoreError,
};
use jiff::Timestamp;
use tokio_postgres::types::ToSql;

use crate::backend;
use crate::rows::{COLUMNS, JournalRows, micros, read_task};
use crate::tx::{IN_TX, Tx};

/// How many of a claim's requests to take.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// Every request that is claimable (`Store::claim_many`).
    All,
    /// The first claimable one, in the requests' order (`Store::claim_first`).
    First,
}

/// The rows a store's one-slot looks claimed ([`claim_held_and_commit`]), each as its claim wrote
/// it, with that row version's `xmin`: the end of such a run is planned on the row as claimed and
/// written with the look in one statement, BEGIN before it ([`Ends::write_guarded_with_look`]),
/// instead of reading the row locked first (I5: a turn of two round trips, not three). The
/// statement's guard (the same row version, nobody waiting on the row) decides; when it finds
/// the row changed since (a person's edit, a heartbeat, a sweeper, a dependent added), nothing is
/// written and the end takes the locking path. So an entry is a hint and never trusted: a stale
/// one costs a statement, never a wrong write.
#[derive(Default)]
pub(crate) struct ClaimedRows(std::sync::Mutex<HashMap<TaskId, (Task, String)>>);

impl ClaimedRows {
    /// Entries kept at most: runs whose ends never come here (lost, ended elsewhere) are dropped
    /// all together when it is reached.
    const MAX: usize = 1024;

    fn put(&self, task: Task, version: String) {
        let mut rows = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if rows.len() >= Self::MAX {
            rows.clear();
        }
        rows.insert(task.id, (task, version));
    }

    fn take(&self, id: TaskId) -> Option<(Task, String)> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&id)
    }

    /// Drops `id`'s entry: this store is about to change the row.
    pub(crate) fn forget(&self, id: TaskId) {
        self.take(id);
    }
}

/// Claims the requests that are claimable (all of them, or the first one in their order), in one
/// statement that locks the rows it takes (`FOR UPDATE SKIP LOCKED`: a row another transaction
/// holds is skipped, never waited for) and writes their run records, then writes the journal
/// entries and commits `tx`, in one round trip. So a claim is one round trip for the rows and
/// one for what goes with them and the commit, however many candidates other workers took first
/// (I5).
pub(crate) async fn claim_and_commit(
    tx: &Tx,
    requests: &[ClaimRequest],
    take: Take,
) -> Result<Vec<ClaimOutcome>> {
    // The first request for a row decides; a repeat of it in the same batch is not claimable.
    let mut first: HashMap<TaskId, usize> = HashMap::with_capacity(requests.len());
    for (i, r) in requests.iter().enumerate() {
        first.entry(r.id).or_insert(i);
    }
    let mut order: Vec<usize> = first.values().copied().collect();
    order.sort_unstable();
    let nums: Vec<i64> = order.iter().map(|&i| requests[i].id.num() as i64).collect();
    let require_run: Vec<bool> = order.iter().map(|&i| requests[i].require_run).collect();
    let require_approval: Vec<bool> = order.iter().map(|&i| requests[i].require_approval).collect();
    let workers: Vec<&str> = order.iter().map(|&i| requests[i].worker.as_str()).collect();
    let nows: Vec<i64> = order.iter().map(|&i| micros(requests[i].now)).collect();
    let expires: Vec<i64> = order.iter().map(|&i| micros(requests[i].now + requests[i].lease)).collect();
    let actions: Vec<&str> = order.iter().map(|&i| requests[i].action.as_str()).collect();
    let ids: Vec<String> = order.iter().map(|&i| requests[i].id.to_string()).collect();
    let stmt = tx.prepare_cached(&claim_sql(take)).await.map_err(backend)?;
    let rows = tx
        .query(&stmt, &[&nums, &require_run, &workers, &nows, &expires, &require_approval, &actions, &ids])
        .await
        .map_err(backend)?;
    let base = COLUMNS.split(',').count();
    let mut claimed: HashMap<TaskId, Task> = HashMap::with_capacity(rows.len());
    let mut journal = JournalRows::default();
    for row in &rows {
        let after = read_task(row)?;
        let mut before = after.clone();
        before.status = Status::Pending;
        before.run = row.get(base);
        before.run_at = row.get::<_, Option<i64>>(base + 1).map(crate::rows::time).transpose()?;
        before.updated_at = crate::rows::time(row.get(base + 2))?;
        before.approved_by = row.get(base + 3);
        before.attempt = after.attempt - 1;
        before.lease = None;
        let i = first[&after.id];
        let req = &requests[i];
        let actor = Actor::Worker(req.worker.clone()).to_string();
        journal.push(&JournalWrite::change(req.now, &before, &after, &actor, JournalKind::Claim, None)?);
        claimed.insert(after.id, after);
    }
    // The journal, (when some request was refused) the kill switch, and the commit, in one round
    // trip: tokio-postgres pipelines them, each statement prepared first so that each is sent on
    // its first poll, before the COMMIT. (The run records went in with the claim statement.)
    let short = match take {
        Take::All => claimed.len() < requests.len(),
        Take::First => claimed.is_empty(),
    };
    for sql in [crate::rows::JOURNAL_INSERT.as_str(), crate::PAUSED] {
        tx.prepare_cached(sql).await.map_err(backend)?;
    }
    let paused = async { if short { crate::paused_in(tx).await } else { Ok(None) } };
    let ((), paused) = tx.commit_after(async { tokio::try_join!(journal.insert(tx), paused) }).await?;
    if take == Take::First {
        let outcome = match (claimed.into_values().next(), paused) {
            (Some(task), _) => ClaimOutcome::Claimed(Box::new(task)),
            (None, Some(reason)) => ClaimOutcome::Paused(reason),
            (None, None) => ClaimOutcome::NotClaimable,
        };
        return Ok(vec![outcome]);
    }
    Ok(requests
        .iter()
        .enumerate()
        .map(|(i, r)| match claimed.remove(&r.id) {
            Some(task) if first[&r.id] == i => ClaimOutcome::Claimed(Box::new(task)),
            _ => match &paused {
                Some(reason) => ClaimOutcome::Paused(reason.clone()),
                None => ClaimOutcome::NotClaimable,
            },
        })
        .collect())
}

/// Claims `req`'s row, which `tx` holds locked as `before` (a one-slot worker's look), and commits
/// `tx`: one statement, with the COMMIT behind it (one round trip). The row is held, so the claim
/// changes it exactly as [`daicho_store::ends::plan_claim`] says: its journal entry is made from
/// that plan beforehand and written by the claim's statement with the row and its run record,
/// and the statement also answers the kill switch.
///
/// The answer is read after the COMMIT, so nothing found in it fails the turn (its ends, committed
/// with it, would be recorded again and refused as stale). A claimed row other than the plan's
/// would be a bug in one of the two (the contract checks both backends against the plan): the
/// statement itself checked every rule of the claim (ready, ▶ run, approval, kill switch), so the
/// row is run, and the wrong journal entry is logged as an error. An answer that cannot be read
/// is logged and answered `NotClaimable`: the claim is not run, and its lease runs out.
async fn claim_held_and_commit(
    tx: &Tx,
    claimed: &ClaimedRows,
    req: &ClaimRequest,
    before: &Task,
) -> Result<ClaimOutcome> {
    let planned = daicho_store::codec::as_stored(daicho_store::ends::plan_claim(before, req));
    let actor = Actor::Worker(req.worker.clone()).to_string();
    let mut journal = JournalRows::default();
    journal.push(&JournalWrite::change(req.now, before, &planned, &actor, JournalKind::Claim, None)?);
    let stmt = tx.prepare_cached(&CLAIM_HELD).await.map_err(backend)?;
    let (num, now, expires) = (req.id.num() as i64, micros(req.now), micros(req.now + req.lease));
    let rid = req.id.to_string();
    let claim: [&(dyn ToSql + Sync); 8] =
        [&num, &now, &req.worker, &expires, &req.require_run, &req.require_approval, &req.action, &rid];
    let params: Vec<&(dyn ToSql + Sync)> = claim.into_iter().chain(journal.params()).collect();
    let row = tx.commit_after(async { tx.query_one(&stmt, &params).await.map_err(backend) }).await?;
    let base = COLUMNS.split(',').count();
    let answer = match row.try_get::<_, Option<i64>>(0) {
        Ok(None) => row.try_get::<_, Option<String>>(base + 1).map_err(backend).map(|paused| match paused {
            Some(reason) => ClaimOutcome::Paused(reason),
            None => ClaimOutcome::NotClaimable,
        }),
        Ok(Some(_)) => read_task(&row).map(|task| ClaimOutcome::Claimed(Box::new(task))),
        Err(e) => Err(backend(e)),
    };
    match answer {
        Ok(ClaimOutcome::Claimed(after)) if *after != planned => {
            tracing::error!(
                task = %after.id, ?after, ?planned,
                "a claim wrote another row than its plan, and its journal entry is the plan's (a bug)"
            );
            Ok(ClaimOutcome::Claimed(after))
        }
        Ok(ClaimOutcome::Claimed(after)) => {
            if let Ok(Some(version)) = row.try_get::<_, Option<String>>(base) {
                claimed.put((*after).clone(), version);
            }
            Ok(ClaimOutcome::Claimed(after))
        }
        Ok(outcome) => Ok(outcome),
        Err(e) => {
            tracing::error!(task = %req.id, "a claim's answer could not be read, so it is not run: {e}");
            Ok(ClaimOutcome::NotClaimable)
        }
    }
}

/// [`daicho_store::Store::finish_and_claim_next`] in `tx`, which it begins and commits: the run
/// ends, then the head that `scope` admits as it is after them (read behind their writes, so the
/// rows they released are in it; or, when they make no row ready, in their own statement, whose
/// snapshot holds the same head), widened while `pick` asks for none of it;
/// then the first of `pick`'s requests that is claimable. The BEGIN goes with the first
/// statement and the COMMIT with the last ones, so a one-slot worker's turn (an end and a claim
/// of the row its look holds, [`claim_held_and_commit`]) is three round trips, or two when its
/// end is of a run this store claimed so ([`guarded_end`]).
///
/// A look of one row (a one-slot worker's) reads it locked (`FOR UPDATE SKIP LOCKED`): a row
/// another look holds is passed over, so concurrent workers read different rows and the row a pick
/// asks for is still claimable when the claim comes, instead of every worker reading the same
/// first row and all but one losing it (I5: a lost claim is a turn and a commit for nothing). A
/// wider look reads unlocked, as does a one-row look that found nothing free: it would hold rows
/// its pick does not take, or pass over rows that other looks hold only for a moment; its claim
/// skips the rows held meanwhile.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn finish_and_claim_next(
    tx: &Tx,
    claimed: &ClaimedRows,
    finishes: &[Finish],
    now: Timestamp,
    scope: &ClaimScope,
    window: usize,
    limit: usize,
    mut pick: Pick,
) -> Result<(Vec<Result<Task>>, Option<NextClaim>)> {
    let sql = daicho_store::codec::ready_head_sql("$1", "$2", Some(scope));
    // Both prepared first: the first read is pipelined behind the ends' writes.
    let head = tx.prepare_cached(&sql).await.map_err(backend)?;
    let locked =
        tx.prepare_cached(&format!("{sql} FOR UPDATE OF task SKIP LOCKED")).await.map_err(backend)?;
    let read = |window: usize, lock: bool| {
        let head = if lock { &locked } else { &head };
        async move {
            let rows = tx.query(head, &[&micros(now), &(window as i64)]).await.map_err(backend)?;
            rows.iter().map(read_task).collect::<Result<Vec<Task>>>()
        }
    };
    let mut window = NextClaim::first_window(window, limit);
    let lock = window == 1;
    let (ends, mut tasks) = match finishes.is_empty() {
        true => (Vec::new(), tx.first(read(window, lock)).await?),
        false => match guarded_end(tx, claimed, finishes, lock, scope, now, window).await? {
            Some(done) => done,
            None => {
                let (out, ends) = plan_ends(tx, finishes).await?;
                let tasks = match lock && !ends.nums.is_empty() && ends.make_nothing_ready() {
                    // The locked look goes in the ends' statement: one statement fewer. They make
                    // no row ready, so the head in that statement's snapshot (before its writes)
                    // is the head after them.
                    true => {
                        let look = daicho_store::codec::ready_head_sql(LOOK_NOW, LOOK_LIMIT, Some(scope));
                        ends.write_with_look(tx, &look, micros(now), window as i64).await?
                    }
                    false => ends.write_then(tx, read(window, lock)).await?,
                };
                (out, tasks)
            }
        },
    };
    // The rows of a locked look are held until the commit: a claim of one goes as planned.
    let mut held = lock && !tasks.is_empty();
    if lock && tasks.is_empty() {
        tasks = read(window, false).await?;
    }
    loop {
        let tried = pick(&tasks);
        let held_row = match (held, tried.as_slice()) {
            (true, [req]) => tasks.iter().find(|t| t.id == req.id),
            _ => None,
        };
        if let Some(before) = held_row {
            let outcome = claim_held_and_commit(tx, claimed, &tried[0], before).await?;
            return Ok((ends, Some(NextClaim { tried, outcome })));
        }
        if !tried.is_empty() {
            let outcome =
                claim_and_commit(tx, &tried, Take::First).await?.pop().unwrap_or(ClaimOutcome::NotClaimable);
            return Ok((ends, Some(NextClaim { tried, outcome })));
        }
        let Some(wider) = NextClaim::wider_window(window, tasks.len(), limit) else {
            tx.commit().await?;
            return Ok((ends, None));
        };
        window = wider;
        tasks = read(window, false).await?;
        held = false;
    }
}

/// A one-slot turn's end of a run this store claimed ([`ClaimedRows`]), planned on the row as
/// claimed, when it makes no row ready unless another row waits on it: written with the turn's
/// locked look in one statement, the transaction's BEGIN before it ([`Ends::write_guarded_with_look`]).
/// `None` when the turn is of another kind, or when the statement's guard found the row changed
/// since its claim or a row waiting on it, and wrote nothing: the end then takes the locking
/// path (in the same transaction; the row the look locked stays locked until its end).
async fn guarded_end(
    tx: &Tx,
    claimed: &ClaimedRows,
    finishes: &[Finish],
    lock: bool,
    scope: &ClaimScope,
    now: Timestamp,
    window: usize,
) -> Result<Option<(Vec<Result<Task>>, Vec<Task>)>> {
    let ([finish], true, true) = (finishes, lock, tx.is_pending()) else { return Ok(None) };
    let Some((before, version)) = claimed.take(finish.id) else { return Ok(None) };
    let Ok(plan) = daicho_store::ends::plan_finish(&before, finish) else { return Ok(None) };
    let mut ends = Ends::default();
    ends.push(&before, &plan, false)?;
    if !ends.make_nothing_ready() {
        return Ok(None);
    }
    let look = daicho_store::codec::ready_head_sql(LOOK_NOW, LOOK_LIMIT, Some(scope));
    let written = ends.write_guarded_with_look(tx, &look, micros(now), window as i64, &version);
    Ok(tx
        .first_writing(written)
        .await?
        .map(|tasks| (vec![Ok(daicho_store::codec::as_stored(plan.after))], tasks)))
}

/// The claim statement. `All`: each request's row by its primary key (a lateral join, whatever
/// the planner's statistics say about how many rows are pending), each locked if free. `First`:
/// the candidates in the requests' order, locked one by one until one is free and still
/// claimable (`LIMIT 1` above the lock: a row another worker holds or took since is passed over
/// within the statement, not in another round trip). Each claimed row's run record is inserted
/// by the same statement, keyed `{id}:{attempt}` as `policy::idempotency_key` says (the contract
/// checks the key).
fn claim_sql(take: Take) -> String {
    let req = "WITH req AS (SELECT * FROM unnest($1::BIGINT[], $2::BOOLEAN[], $3::TEXT[], $4::BIGINT[], \
               $5::BIGINT[], $6::BOOLEAN[], $7::TEXT[], $8::TEXT[]) WITH ORDINALITY AS r(rnum, require_run, \
               worker, now, expires, require_approval, action, rid, ord))";
    let claimable = claimable_where("req.now", "req.require_run", "req.require_approval");
    let picked = "t.num AS pnum, t.run AS old_run, t.run_at AS old_run_at, t.updated_at AS old_updated_at, \
                  t.approved_by AS old_approved_by, req.worker AS new_owner, req.now AS new_now, \
                  req.expires AS new_expires, req.action AS run_action, req.rid AS run_rid";
    let picked = match take {
        Take::All => format!(
            "picked AS (SELECT {picked} FROM req CROSS JOIN LATERAL (SELECT num, run, run_at, updated_at, \
             approved_by FROM task t WHERE t.num = req.rnum AND {claimable} FOR UPDATE SKIP LOCKED) AS t \
             WHERE {NOT_PAUSED})"
        ),
        Take::First => format!(
            "picked AS (SELECT {picked} FROM task t JOIN req ON t.num = req.rnum WHERE {claimable} \
             AND {NOT_PAUSED} ORDER BY req.ord LIMIT 1 FOR UPDATE OF t SKIP LOCKED)"
        ),
    };
    let set = claim_set("picked.new_now", "picked.new_owner", "picked.new_expires");
    format!(
        "{req}, {picked}, claimed AS ( \
         UPDATE task SET {set} FROM picked WHERE num = picked.pnum \
         RETURNING {COLUMNS}, picked.old_run, picked.old_run_at, picked.old_updated_at, picked.old_approved_by, \
             picked.new_owner, picked.new_now, picked.run_action, picked.run_rid), \
         runs AS (INSERT INTO run (task, attempt, worker, action, started, idempotency_key) \
             SELECT num, attempt, new_owner, run_action, new_now, run_rid || ':' || attempt FROM claimed) \
         SELECT {COLUMNS}, old_run, old_run_at, old_updated_at, old_approved_by FROM claimed"
    )
}

/// The kill switch is off (S8): a claim statement's condition.
const NOT_PAUSED: &str = "NOT EXISTS (SELECT 1 FROM setting WHERE name = 'paused')";

/// What a claim sets ([`daicho_store::ends::plan_claim`] in SQL), its time, worker and lease's
/// end being SQL expressions: `running`, ▶ run cleared, the approval spent, one attempt more.
fn claim_set(now: &str, owner: &str, expires: &str) -> String {
    format!(
        "status = 'running', run = false, approved_by = '', run_at = {now}, attempt = attempt + 1, \
         lease_owner = {owner}, lease_expires_at = {expires}, updated_at = {now}"
    )
}

/// The claim of one held row ([`claim_held_and_commit`]): `$1` its number, `$2` the time, `$3`
/// the worker, `$4` the lease's end, `$5` and `$6` whether ▶ run and an approval are required,
/// `$7` the action, `$8` the id; the journal entry from `$9` ([`JournalRows::params`]), written
/// only if the row was claimed. One row answers: the claimed row's columns (all NULL when it was
/// not claimed), its version (`xmin`, for [`ClaimedRows`]), then the kill switch's reason (NULL
/// when off).
static CLAIM_HELD: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let claimable = claimable_where("$2::BIGINT", "$5::BOOLEAN", "$6::BOOLEAN");
    let set = claim_set("$2::BIGINT", "$3::TEXT", "$4::BIGINT");
    let journal = crate::rows::journal_insert_where_sql(9, "j.task IN (SELECT num FROM claimed)");
    format!(
        "WITH claimed AS (UPDATE task SET {set} WHERE num = $1::BIGINT AND {claimable} \
             AND {NOT_PAUSED} RETURNING {COLUMNS}, xmin::TEXT), \
         runs AS (INSERT INTO run (task, attempt, worker, action, started, idempotency_key) \
             SELECT num, attempt, $3::TEXT, $7::TEXT, $2::BIGINT, $8::TEXT || ':' || attempt FROM claimed), \
         planned AS ({journal}) \
         SELECT claimed.*, ({}) FROM (SELECT 1) AS one LEFT JOIN claimed ON true",
        crate::PAUSED
    )
});

/// Records run ends under the write lock (shared: run ends go side by side): the rows are locked in id order, each end is checked against its fence
/// (status `running`, same attempt, same lease owner) and the accepted ones are written in one
/// round trip ([`Ends::write`]). A stale end gets its own `LeaseLost`.
pub(crate) async fn finish_many_in(tx: &Tx, finishes: &[Finish]) -> Result<Vec<Result<Task>>> {
    Ok(finish_many_then(tx, finishes, async { Ok(()) }).await?.0)
}

/// [`finish_many_in`], with `then` pipelined behind the ends' writes ([`Ends::write_then`]). When
/// `tx` has not begun, its BEGIN goes with the first statement, the ends' locking read.
pub(crate) async fn finish_many_then<T>(
    tx: &Tx,
    finishes: &[Finish],
    then: impl Future<Output = Result<T>>,
) -> Result<(Vec<Result<Task>>, T)> {
    let (out, ends) = plan_ends(tx, finishes).await?;
    let then = ends.write_then(tx, then).await?;
    Ok((out, then))
}

/// The ends' rows read locked under the shared write lock (the BEGIN of `tx` goes with that read
/// when it has not begun, [`Tx::first_sharing_write_lock`]) and
/// each finish planned on its row: what each finish gets, and the writes of those accepted.
async fn plan_ends(tx: &Tx, finishes: &[Finish]) -> Result<(Vec<Result<Task>>, Ends)> {
    let mut nums: Vec<i64> = finishes.iter().map(|f| f.id.num() as i64).collect();
    nums.sort_unstable();
    nums.dedup();
    let (mut current, waited_on) = tx.first_sharing_write_lock(lock_ending_rows(tx, &nums)).await?;
    let mut ends = Ends::default();
    let mut out = Vec::with_capacity(finishes.len());
    for finish in finishes {
        let Some(before) = current.get(&finish.id) else {
            out.push(Err(StoreError::NotFound(finish.id)));
            continue;
        };
        let plan = match daicho_store::ends::plan_finish(before, finish) {
            Ok(plan) => plan,
            Err(e) => {
                out.push(Err(e));
                continue;
            }
        };
        ends.push(before, &plan, waited_on.contains(&finish.id))?;
        let after = daicho_store::codec::as_stored(plan.after);
        current.insert(after.id, after.clone());
        // A run a person stopped: its fence is cleared, its end refused.
        out.push(match plan.refused {
            true => Err(StoreError::LeaseLost { id: finish.id, attempt: finish.attempt }),
            false => Ok(after),
        });
    }
    Ok((out, ends))
}

/// Counts every lost run (S4): each `running` row whose lease expired by `now` (or that has none)
/// gets one timeout failure. The rows are locked, so two sweepers never count one run twice.
pub(crate) async fn expire_in(
    tx: &Tx,
    now: Timestamp,
    policy: FailurePolicy,
) -> Result<Vec<(TaskId, Status)>> {
    let rows = tx
        .query(
            &format!(
                "SELECT {COLUMNS} FROM task WHERE status = 'running' \
                 AND (lease_expires_at IS NULL OR lease_expires_at <= $1) ORDER BY num FOR UPDATE"
            ),
            &[&micros(now)],
        )
        .await
        .map_err(backend)?;
    let mut ends = Ends::default();
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let before = read_task(row)?;
        let plan = daicho_store::ends::plan_lost(&before, now, policy);
        tracing::warn!(task = %before.id, attempt = before.attempt, "{}", plan.error.as_deref().unwrap_or(""));
        // A lost run goes back to pending or to a person, never done: it releases nobody.
        ends.push(&before, &plan, false)?;
        let status = plan.after.status;
        out.push((before.id, status));
    }
    ends.write(tx).await?;
    Ok(out)
}

/// The rows with these numbers, locked until the transaction ends (in id order, so two
/// transactions locking overlapping sets never deadlock).
pub(crate) async fn lock_rows(tx: &Tx, nums: &[i64]) -> Result<HashMap<TaskId, Task>> {
    let stmt = tx
        .prepare_cached(&format!("SELECT {COLUMNS} FROM task WHERE num = ANY($1) ORDER BY num FOR UPDATE"))
        .await
        .map_err(backend)?;
    let rows = tx.query(&stmt, &[&nums]).await.map_err(backend)?;
    rows.iter().map(|r| read_task(r).map(|t| (t.id, t))).collect()
}

/// [`lock_rows`], run under the write lock taken shared ([`Tx::first_sharing_write_lock`]: run
/// ends go side by side; held before any row is locked, as every writer takes them, and before
/// this statement's snapshot is taken). With the rows, the ids of those that other rows wait on
/// (have as a dep): an end releases dependents only of those, so a row nobody waits on (most
/// rows) costs no statement for its dependents and none for a ready notice. Read under the
/// shared write lock, which every write that adds or removes deps excludes, so the answer holds
/// until the commit.
async fn lock_ending_rows(tx: &Tx, nums: &[i64]) -> Result<(HashMap<TaskId, Task>, HashSet<TaskId>)> {
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT {COLUMNS}, EXISTS (SELECT 1 FROM task_dep d WHERE d.dep = task.num) \
             FROM task WHERE num = ANY($1) ORDER BY num FOR UPDATE"
        ))
        .await
        .map_err(backend)?;
    let rows = tx.query(&stmt, &[&nums]).await.map_err(backend)?;
    let base = COLUMNS.split(',').count();
    let (mut current, mut waited_on) = (HashMap::with_capacity(rows.len()), HashSet::new());
    for row in &rows {
        let task = read_task(row)?;
        if row.get::<_, bool>(base) {
            waited_on.insert(task.id);
        }
        current.insert(task.id, task);
    }
    Ok((current, waited_on))
}

/// Run ends gathered column by column, written with one statement per table (the run records:
/// one per record) in one round trip.
#[derive(Default)]
struct Ends {
    nums: Vec<i64>,
    statuses: Vec<&'static str>,
    results: Vec<String>,
    failures: Vec<i32>,
    attempts: Vec<i32>,
    at: Vec<i64>,
    outcomes: Vec<&'static str>,
    /// Per end, whether its run counts as a success, and as a failure ([`RunOutcome::is_failure`]).
    counted: Vec<(bool, bool)>,
    errors: Vec<String>,
    tokens_in: Vec<Option<i64>>,
    tokens_out: Vec<Option<i64>>,
    /// Rows that now satisfy their dependents' deps.
    unblocking: Vec<i64>,
    journal: JournalRows,
}

impl Ends {
    /// Adds one end; `waited_on`: other rows have this one as a dep.
    fn push(&mut self, before: &Task, plan: &EndPlan, waited_on: bool) -> Result<()> {
        let after = &plan.after;
        let num = after.id.num() as i64;
        self.nums.push(num);
        self.statuses.push(after.status.as_str());
        self.results.push(after.result.clone());
        self.failures.push(after.failures as i32);
        self.attempts.push(before.attempt as i32);
        self.at.push(micros(after.updated_at));
        self.outcomes.push(plan.outcome.as_str());
        self.counted.push((plan.outcome == RunOutcome::Success, plan.outcome.is_failure()));
        self.errors.push(plan.error.clone().unwrap_or_default());
        self.tokens_in.push(plan.tokens.0.map(|t| t as i64));
        self.tokens_out.push(plan.tokens.1.map(|t| t as i64));
        if waited_on && after.status.satisfies_deps() && !before.status.satisfies_deps() {
            self.unblocking.push(num);
        }
        let at = after.updated_at;
        self.journal.push(&JournalWrite::change(
            at,
            before,
            after,
            &plan.actor,
            plan.kind,
            plan.error.as_deref(),
        )?);
        Ok(())
    }

    /// The `i`th end's run record, bound as [`run_end_sql`]'s parameters in their order.
    fn run_params(&self, i: usize) -> [&(dyn ToSql + Sync); 9] {
        [
            &self.nums[i],
            &self.attempts[i],
            &self.at[i],
            &self.outcomes[i],
            &self.errors[i],
            &self.tokens_in[i],
            &self.tokens_out[i],
            &self.counted[i].0,
            &self.counted[i].1,
        ]
    }

    /// Whether the ends make no row ready: none goes back to pending, none releases a dependent.
    fn make_nothing_ready(&self) -> bool {
        self.unblocking.is_empty() && !self.statuses.contains(&Status::Pending.as_str())
    }

    /// Writes the ends that make nothing ready ([`Ends::make_nothing_ready`]) and reads `look`
    /// (a head of the ready set, its time and limit at [`LOOK_NOW`] and [`LOOK_LIMIT`]) locked,
    /// in one statement ([`end_rows_sql`]), the further run records pipelined beside it.
    async fn write_with_look(&self, tx: &Tx, look: &str, now: i64, limit: i64) -> Result<Vec<Task>> {
        debug_assert!(self.make_nothing_ready(), "the look would miss the rows the ends make ready");
        let sql = end_rows_sql(Some(&format!("{look} FOR UPDATE OF task SKIP LOCKED")));
        let stmt = tx.prepare_cached(&sql).await.map_err(backend)?;
        let rows = async {
            let params: Vec<&(dyn ToSql + Sync)> =
                self.row_params().chain([&now as _, &limit as _]).collect();
            tx.query(&stmt, &params).await.map_err(backend)
        };
        let (rows, _) = tokio::try_join!(rows, self.further_runs(tx))?;
        rows.iter().map(read_task).collect()
    }

    /// [`Ends::write_with_look`] for one end planned on its row as claimed, whose row version
    /// (`xmin`) the claim answered: the statement ([`end_guarded_sql`]) writes the end only if the
    /// row is still that version and no row waits on it (so the end releases nobody), under the
    /// shared write lock as every end. `None` when that guard failed: nothing was written (the
    /// look's row is locked all the same).
    async fn write_guarded_with_look(
        &self,
        tx: &Tx,
        look: &str,
        now: i64,
        limit: i64,
        version: &str,
    ) -> Result<Option<Vec<Task>>> {
        debug_assert!(self.make_nothing_ready() && self.nums.len() == 1, "one end that makes nothing ready");
        let stmt = tx.prepare_cached(&end_guarded_sql(look)).await.map_err(backend)?;
        let params: Vec<&(dyn ToSql + Sync)> =
            self.row_params().chain([&now as _, &limit as _, &version as _]).collect();
        let rows = tx.query(&stmt, &params).await.map_err(backend)?;
        let written = rows.first().map(|row| row.try_get::<_, i64>(COLUMNS.split(',').count())).transpose();
        match written.map_err(backend)? {
            Some(1) => rows
                .iter()
                .filter(|row| matches!(row.try_get::<_, Option<i64>>(0), Ok(Some(_))))
                .map(read_task)
                .collect::<Result<Vec<Task>>>()
                .map(Some),
            _ => Ok(None),
        }
    }

    /// The parameters of [`end_rows_sql`]: the rows, their journal entries, the first run record.
    fn row_params(&self) -> impl Iterator<Item = &(dyn ToSql + Sync)> {
        let rows: [&(dyn ToSql + Sync); 5] =
            [&self.nums, &self.statuses, &self.results, &self.failures, &self.at];
        rows.into_iter().chain(self.journal.params()).chain(self.run_params(0))
    }

    /// The run records after the first, one statement each by its primary key, pipelined (one
    /// round trip in all): the run table grows from empty with every claim, faster than
    /// autovacuum analyzes it, and a join with the ends planned from its stale size scanned the
    /// whole table at every run end (3,000 rows read per end in a fresh ledger's first seconds).
    /// A key lookup is an index scan whatever the statistics say.
    async fn further_runs(&self, tx: &Tx) -> Result<Vec<u64>> {
        if self.nums.len() < 2 {
            return Ok(Vec::new());
        }
        let stmt = tx.prepare_cached(&END_RUNS).await.map_err(backend)?;
        let each = (1..self.nums.len()).map(|i| tx.execute_raw(&stmt, self.run_params(i)));
        futures_util::future::try_join_all(each).await.map_err(backend)
    }

    /// Writes the ends: the rows, their dependents' counters, the run records and the journal,
    /// and the ready notification, in one round trip (independent statements, pipelined by
    /// tokio-postgres; a finished row is never a dependent of another in the same batch, since it
    /// was claimed with no unmet deps).
    async fn write(&self, tx: &Tx) -> Result<()> {
        self.write_then(tx, async { Ok(()) }).await
    }

    /// [`Ends::write`], with `then` pipelined behind the writes: sent after them on the same
    /// connection (its first poll comes last), so it runs after them and sees what they wrote,
    /// without a round trip of its own.
    async fn write_then<T>(&self, tx: &Tx, then: impl Future<Output = Result<T>>) -> Result<T> {
        if self.nums.is_empty() {
            return then.await;
        }
        // Every statement prepared first (from the connection's cache, after its first use), so
        // that each is sent on its first poll below, in this order, and `then` after them all:
        // a statement still being prepared would be sent after `then`.
        for sql in [END_ROWS.as_str(), END_DEPENDENTS, END_RUNS.as_str(), crate::NOTIFY, END_NOTIFY_IF_READY]
        {
            tx.prepare_cached(sql).await.map_err(backend)?;
        }
        // The rows, their journal entries and the first end's run record: one statement.
        let rows = async {
            let stmt = tx.prepare_cached(&END_ROWS).await.map_err(backend)?;
            tx.execute(&stmt, &self.row_params().collect::<Vec<_>>()).await.map_err(backend)
        };
        let dependents = async {
            if self.unblocking.is_empty() {
                return Ok(0);
            }
            // Under the write lock (shared): the dependents are pending with unmet deps, which no
            // claim touches; two run ends releasing the same dependent meet on its row lock, and
            // each subtracts its own count from what the other left.
            let stmt = tx.prepare_cached(END_DEPENDENTS).await.map_err(backend)?;
            tx.execute(&stmt, &[&self.unblocking]).await.map_err(backend)
        };
        let runs = self.further_runs(tx);
        // Workers waiting for work are told (at commit) when these ends make some ready: rows
        // back to pending (a failure or a lost run) or dependents released. Only then: PostgreSQL
        // serializes the commits of every transaction that notifies (one lock, held through its
        // WAL flush), so a notice on each end kept concurrent workers' commits from sharing
        // flushes (I5); an end that makes nothing ready has nobody to wake.
        let notify = async {
            if self.statuses.contains(&Status::Pending.as_str()) {
                return crate::notify_ready(tx).await;
            }
            if self.unblocking.is_empty() {
                return Ok(());
            }
            // Run after the dependents' update (pipelined in order): a notice only when one of
            // them is ready now.
            let stmt = tx.prepare_cached(END_NOTIFY_IF_READY).await.map_err(backend)?;
            tx.execute(&stmt, &[&crate::READY_CHANNEL, &self.unblocking]).await.map_err(backend).map(|_| ())
        };
        let (_, _, _, (), out) = tokio::try_join!(rows, dependents, runs, notify, then)?;
        Ok(out)
    }
}

/// Run ends' rows: each one's status, result, failures, the lease cleared; with their journal
/// entries ([`JournalRows::params`] from `$6`) and the first end's run record ([`run_end_sql`]
/// from `$13`), in one statement.
static END_ROWS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| end_rows_sql(None));

/// The placeholders of a look read with the ends' rows ([`end_rows_sql`]): its time and limit.
const LOOK_NOW: &str = "$22";
const LOOK_LIMIT: &str = "$23";

/// [`END_ROWS`], or with `look` (a `SELECT`, [`LOOK_NOW`] and [`LOOK_LIMIT`] its parameters)
/// as the statement's answer, the rows' update then one of its CTEs: the look reads the
/// statement's snapshot, taken before its writes.
fn end_rows_sql(look: Option<&str>) -> String {
    let (j, runs) = (crate::rows::journal_insert_sql(6), run_end_sql(13, "true"));
    match look {
        None => format!("WITH j AS ({j}), {runs} {END_UPDATE}"),
        Some(look) => format!("WITH j AS ({j}), {runs}, ending AS ({END_UPDATE}) {look}"),
    }
}

/// Run ends' rows: `$1` to `$5` ([`Ends::row_params`]).
const END_UPDATE: &str = "UPDATE task SET status = e.status, result = e.result, failures = e.failures, \
     lease_owner = NULL, lease_expires_at = NULL, updated_at = e.at \
     FROM unnest($1::BIGINT[], $2::TEXT[], $3::TEXT[], $4::INT[], $5::BIGINT[]) \
     AS e(enum, status, result, failures, at) WHERE num = e.enum";

/// [`end_rows_sql`] with `look` for one end planned on the row as claimed
/// ([`Ends::write_guarded_with_look`]), sent behind [`Tx::first_writing`]'s BEGIN, which takes
/// the write lock shared before this statement's snapshot. First the look, locked, before the
/// end, so that it locks its rows as soon as the snapshot is taken, even when the end then waits
/// for its row (a look that ran after that wait, on the snapshot from before it, found the rows
/// claimed meanwhile and kept each locked, a wait for their owners' ends in turn). Then the row,
/// written only if it is still the version `$24` (its `xmin`), no row has it as a dep, and the
/// statement runs inside the transaction whose BEGIN went before it ([`IN_TX`]); its journal
/// entry and run record only if it was. The answer: the look's rows (or one of NULLs when
/// it found none), each with the number of rows written (1, or 0 when the guard failed).
fn end_guarded_sql(look: &str) -> String {
    let update = format!(
        "{END_UPDATE} AND task.xmin = $24::TEXT::xid AND NOT EXISTS (SELECT 1 FROM task_dep d WHERE d.dep = task.num) \
         AND {IN_TX} AND (SELECT count(*) FROM look) >= 0 RETURNING num"
    );
    let j = crate::rows::journal_insert_where_sql(6, "j.task IN (SELECT num FROM ending)");
    let runs = run_end_sql(13, "EXISTS (SELECT 1 FROM ending)");
    format!(
        "WITH look AS MATERIALIZED ({look} FOR UPDATE OF task SKIP LOCKED), \
         ending AS ({update}), j AS ({j}), {runs} \
         SELECT l.*, e.n FROM (SELECT count(*) AS n FROM ending) AS e LEFT JOIN look AS l ON true"
    )
}

/// The dependents a run end released: one unmet dep fewer for each.
const END_DEPENDENTS: &str = "UPDATE task SET unmet_deps = unmet_deps - d.c FROM (SELECT task AS dnum, count(*)::INT AS c \
     FROM task_dep WHERE dep = ANY($1) GROUP BY task) AS d WHERE num = d.dnum";

/// A run end's run record, and the ended runs' counts (`run_count`, in this backend's shard), as
/// two CTEs (`ended`, `counted`) with their parameters numbered from `$first`: the record's task
/// and attempt, its end (finished, outcome, error, tokens in and out), and whether it counts as a
/// success and as a failure ([`RunOutcome::is_failure`]). The only statement that ends a run
/// record (but migration 10, which closed once, at the upgrade, the records a person's move had
/// left `running`, and counted them the same way), so the counts follow every end (S9, I3); a
/// record already ended is left as it is and not counted again, and so is every record when the
/// SQL condition `only_if` is false.
fn run_end_sql(first: usize, only_if: &str) -> String {
    let [task, attempt, finished, outcome, error, tokens_in, tokens_out, success, failure] =
        std::array::from_fn::<usize, 9, _>(|i| first + i);
    format!(
        "ended AS (UPDATE run SET finished = ${finished}, outcome = ${outcome}, error = ${error}, \
         tokens_in = ${tokens_in}, tokens_out = ${tokens_out} \
         WHERE task = ${task} AND attempt = ${attempt} AND outcome = 'running' AND {only_if} RETURNING action), \
         counted AS (INSERT INTO run_count AS c (action, shard, runs, successes, failures, running, tokens_in, \
         tokens_out) SELECT action, pg_backend_pid() % 64, 1, ${success}::BOOLEAN::INT, ${failure}::BOOLEAN::INT, 0, \
         coalesce(${tokens_in}, 0), coalesce(${tokens_out}, 0) FROM ended \
         ON CONFLICT (action, shard) DO UPDATE SET runs = c.runs + 1, successes = c.successes + excluded.successes, \
         failures = c.failures + excluded.failures, tokens_in = c.tokens_in + excluded.tokens_in, \
         tokens_out = c.tokens_out + excluded.tokens_out)"
    )
}

/// Closes the record of `id`'s run `attempt` as interrupted with `error`, at `now` (a person's
/// edit stopped it, [`daicho_store::ends::run_stopped_by_edit`]), through the one statement that
/// ends run records ([`run_end_sql`]), so the run counts follow.
pub(crate) async fn close_stopped_run(
    tx: &Tx,
    id: TaskId,
    attempt: u32,
    now: Timestamp,
    error: &str,
) -> Result<()> {
    let stmt = tx.prepare_cached(&END_RUNS).await.map_err(backend)?;
    let (num, attempt, at) = (id.num() as i64, attempt as i32, micros(now));
    let outcome = RunOutcome::Interrupted;
    let (tokens, counted): (Option<i64>, (bool, bool)) = (None, (false, outcome.is_failure()));
    let params: [&(dyn ToSql + Sync); 9] =
        [&num, &attempt, &at, &outcome.as_str(), &error, &tokens, &tokens, &counted.0, &counted.1];
    tx.execute(&stmt, &params).await.map_err(backend)?;
    Ok(())
}

/// The run record of an end after the first ([`run_end_sql`]).
static END_RUNS: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("WITH {} SELECT 1", run_end_sql(1, "true")));

/// A notice, when one of the dependents released is ready now.
const END_NOTIFY_IF_READY: &str = "SELECT pg_notify($1, '') WHERE EXISTS (SELECT 1 FROM task_dep d JOIN task t ON t.num = d.task \
     WHERE d.dep = ANY($2) AND t.status = 'pending' AND t.unmet_deps = 0)";

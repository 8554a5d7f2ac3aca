//! Runs done elsewhere: a remote worker over the HTTP API (and an agent over MCP) claims a ready
//! task, keeps its lease with heartbeats and reports the run's end, under the same rules as the
//! engine's own runs: the kill switch, lost runs counted first (S4), the pure eligibility policy
//! (S2, S5–S7, S9, S12), the claim committed before the work starts (S1), every write after it
//! fenced by the attempt, found tasks pushed in a transaction of their own (X2).

use std::sync::Arc;

use daicho_core::format::ItemDefaults;
use daicho_core::policy::{ClaimScope, Gate, correction_for_run, idempotency_key};
use daicho_core::{Actor, Item, Status, Task, TaskId};
use daicho_store::{
    Batch, ClaimOutcome, Finish, RunEnd, RunOutcome, RunRecord, Store, StoreError, UnknownDeps,
};
use jiff::Timestamp;

use crate::Engine;
use crate::work::ClaimPlan;

/// Which ready task a remote worker wants.
#[derive(Clone, Debug, Default)]
pub struct ClaimFilter {
    /// The worker's name; it owns the lease and must name itself again on every later write.
    pub worker: String,
    /// Only tasks of this project.
    pub project: Option<String>,
    /// Only tasks this action would run.
    pub action: Option<String>,
}

/// A claim made for a remote worker: the run may start now.
#[derive(Clone, Debug)]
pub struct RemoteClaim {
    /// The claimed row (`running`, attempt counted, leased).
    pub task: Task,
    /// The action to run it with.
    pub action: String,
    /// `T-0042:<attempt>` (S10): the run's idempotency key.
    pub idempotency_key: String,
    /// The person's correction for this run, at most 4,000 characters (C1, C2).
    pub correction: Option<String>,
    /// When the lease runs out unless a heartbeat extends it.
    pub lease_expires_at: Timestamp,
}

/// What a remote worker's claim got.
#[derive(Clone, Debug)]
pub enum NextClaim {
    /// A task to run.
    Claimed(Box<RemoteClaim>),
    /// The kill switch is on (S8): nothing was claimed.
    Paused(String),
    /// Nothing eligible for this worker now; `held` ready tasks were passed over (each has its
    /// reason in `daicho ready`).
    Nothing {
        /// Ready tasks matching the filter that may not run now.
        held: usize,
    },
}

/// What recording a remote run's end did.
#[derive(Clone, Debug)]
pub struct RemoteEnd {
    /// The row as stored afterwards.
    pub task: Task,
    /// Found tasks pushed: (added, updated, skipped).
    pub pushed: Option<(usize, usize, usize)>,
    /// Why pushing found tasks failed, if it did (the run's end stands).
    pub push_error: Option<String>,
}

/// How many ready rows one remote claim examines at most.
const CLAIM_SCAN: usize = 1_000;

/// Candidates tried in one write: more than the workers that can race for the same head.
const CLAIM_LOT: usize = 32;

/// Looks at the head one remote claim makes while other workers take every candidate first.
const CLAIM_LOOKS: usize = 4;

impl<S: Store + 'static> Engine<S> {
    /// Claims the first ready task that `filter` matches and the policy lets run now: a row a
    /// person ticked ▶ run first, then an automatic run (`ai` tag, `auto` action). Heavy tasks,
    /// external tasks without approval, manual tasks and stalled ones are passed over; external
    /// tasks waiting for approval are put in the approval queue (at most once a second). A row
    /// another worker takes first is passed over too, in the same write.
    ///
    /// # Errors
    ///
    /// A store error.
    pub async fn claim_next(self: &Arc<Self>, filter: &ClaimFilter) -> Result<NextClaim, StoreError> {
        // The ledger's switch is checked by the claim itself, in its transaction (S8).
        if let Some(reason) = self.pause_file_reason() {
            return Ok(NextClaim::Paused(reason));
        }
        let now = self.now();
        // Upkeep at most once a second (each is a write or a walk of the ready set, too dear
        // for every claim of a busy server): lost runs first (S4; a lease that ran out since is
        // a row still `running`, so nobody can claim it before it is counted), and below, the
        // external rows met put in the approval queue (S2).
        let upkeep = self.upkeep_due(now);
        if upkeep {
            // With the switch on, nothing is touched (as a sweep does not).
            if let Some(reason) = self.store.paused().await? {
                return Ok(NextClaim::Paused(reason));
            }
            self.count_lost_runs(now).await?;
        }
        let gate = Gate {
            actions: &self.specs,
            paused: None,
            runs_today: self.gate_counts(now).await?,
            daily_cap: self.config.policy.daily_cap,
            now: Some(now),
        };
        // Only the rows this worker may run are read (I5): any number of rows it may not run
        // (manual, heavy, awaiting approval, another action's) cannot hide the one it may.
        let (project, action) = (filter.project.as_deref(), filter.action.as_deref());
        let scope = ClaimScope::worker(&gate, project, action);
        let plan = ClaimPlan::remote(&filter.worker, action, gate.runs_today.clone(), self.now(), CLAIM_LOT);
        let outcome = self.claim_in_scope(&scope, &plan, now).await?;
        if upkeep {
            let queued = async {
                let to_queue = self.awaiting_approval(now, None).await?;
                if !to_queue.is_empty() {
                    let by = format!("remote:{}", filter.worker);
                    self.store.queue_approvals(to_queue, by, self.now()).await?;
                }
                Ok::<_, StoreError>(())
            };
            match queued.await {
                Ok(()) => {}
                // A claim made is answered whatever the upkeep after it meets (S14): an error
                // here would leave the claimed row to wait out its lease. The queue fills on the
                // next upkeep.
                Err(e) if matches!(outcome, Some(NextClaim::Claimed(_))) => {
                    tracing::warn!("approval queue not filled this time: {e}");
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(outcome) = outcome {
            return Ok(outcome);
        }
        if let Some(reason) = self.store.paused().await? {
            return Ok(NextClaim::Paused(reason));
        }
        // Nothing to claim: the ready rows of the project (a bounded count) are all held.
        let head = self.store.ready_head(now, None, CLAIM_SCAN).await?;
        Ok(NextClaim::Nothing {
            held: head.iter().filter(|t| project.is_none_or(|p| p == t.project)).count(),
        })
    }

    /// Claims the first row of `scope`'s head that the policy lets run, as a worker's one free
    /// slot does ([`Engine::candidates`] through [`Store::claim_next`]): ▶ ticked rows of the
    /// window read first, then the rest in run order, up to [`CLAIM_LOT`] candidates a claim;
    /// the window is read wider while it holds none, up to [`CLAIM_SCAN`] rows. On SQLite the
    /// head is read in the claim's transaction; where every candidate was taken by other workers
    /// first (PostgreSQL), the head is read again without them, up to [`CLAIM_LOOKS`] times.
    async fn claim_in_scope(
        self: &Arc<Self>,
        scope: &ClaimScope,
        plan: &ClaimPlan,
        now: Timestamp,
    ) -> Result<Option<NextClaim>, StoreError> {
        if scope.is_empty() {
            return Ok(None);
        }
        for _ in 0..CLAIM_LOOKS {
            let (engine, plan) = (Arc::clone(self), plan.clone());
            let asked = crate::work::Asked::default();
            let pick = asked.recording(Box::new(move |tasks: &[Task]| engine.candidates(tasks, &plan)));
            let next = match self.store.claim_next(now, scope.clone(), CLAIM_LOT, CLAIM_SCAN, pick).await {
                Ok(next) => next,
                Err(e) => {
                    let tried = asked.take();
                    let row = self.claim_despite(e, &tried).await?;
                    Some(daicho_store::NextClaim { tried, outcome: ClaimOutcome::Claimed(Box::new(row)) })
                }
            };
            let Some(next) = next else {
                return Ok(None);
            };
            match next.outcome {
                ClaimOutcome::Claimed(task) => {
                    let Some(request) = next.tried.iter().find(|r| r.id == task.id) else {
                        return Err(StoreError::backend(format!(
                            "the store claimed {}, which was not asked",
                            task.id
                        )));
                    };
                    return Ok(Some(NextClaim::Claimed(Box::new(RemoteClaim {
                        idempotency_key: idempotency_key(task.id, task.attempt),
                        correction: correction_for_run(&task),
                        lease_expires_at: request.now + request.lease,
                        action: request.action.clone(),
                        task: *task,
                    }))));
                }
                ClaimOutcome::Paused(reason) => return Ok(Some(NextClaim::Paused(reason))),
                // Every one taken by other workers (or changed) meanwhile: look again.
                ClaimOutcome::NotClaimable => {}
            }
        }
        Ok(None)
    }

    /// Extends a remote run's lease by the configured lease length; returns the new expiry.
    ///
    /// # Errors
    ///
    /// [`StoreError::LeaseLost`] unless the row is still running under this attempt and worker.
    pub async fn heartbeat_remote(
        &self,
        id: TaskId,
        attempt: u32,
        worker: &str,
    ) -> Result<Timestamp, StoreError> {
        let until = self.now() + self.config.policy.lease;
        self.store.heartbeat(id, attempt, worker, until).await?;
        Ok(until)
    }

    /// Records a remote run's success: the result, `review` or `done` as its action says, then
    /// the found tasks pushed in a transaction of their own (X2: a refused push never undoes
    /// the run's end; it is noted on the run).
    ///
    /// The same report sent again — its answer was lost on the way, or the push met a store
    /// fault after the end was recorded — is answered as the first was, and its found tasks
    /// are pushed again (an upsert: what is there already is not added twice), so a worker that
    /// retries after a blip neither hears "lost" for work the ledger holds nor loses what it
    /// found (S14, X2).
    ///
    /// # Errors
    ///
    /// [`StoreError::LeaseLost`] when this attempt is no longer the current run (a late or
    /// stale report) and the ledger does not hold this very report: nothing of it is written
    /// (the end of a run a person stopped clears its fence).
    pub async fn complete_remote(
        &self,
        id: TaskId,
        attempt: u32,
        worker: &str,
        result: String,
        found: Option<serde_json::Value>,
        tokens: Option<(u64, u64)>,
    ) -> Result<RemoteEnd, StoreError> {
        let (task, action) = match self.open_run_action(id, attempt, worker, "a success").await {
            Ok(action) => {
                let status =
                    self.config.action(&action).map_or(Status::Review, |a| a.spec.on_success.status());
                let end = RunEnd::Success {
                    result,
                    status,
                    tokens_in: tokens.map(|t| t.0),
                    tokens_out: tokens.map(|t| t.1),
                };
                (self.finish_remote(id, attempt, worker, end).await?, action)
            }
            Err(StoreError::LeaseLost { .. }) => {
                let same = |row: &Task, _: &RunRecord| row.result == result;
                self.recorded_run(id, attempt, worker, RunOutcome::Success, same).await?
            }
            Err(e) => return Err(e),
        };
        // Found tasks are read as a command executor's are: the action is their source, the
        // task's project their project; unreadable ones never undo the run's end (X2).
        let (items, read_error) = match found {
            None => (Vec::new(), None),
            Some(tasks) => {
                let defaults = ItemDefaults { source: action.clone(), project: task.project.clone() };
                let name = format!("<output of run {}>", idempotency_key(id, attempt));
                match daicho_core::format::json::parse(&tasks.to_string(), &name, &defaults) {
                    Ok(items) => (items, None),
                    Err(e) => (Vec::new(), Some(e.to_string())),
                }
            }
        };
        if let Some(error) = &read_error {
            self.store.note_run(id, attempt, format!("found tasks not pushed: {error}")).await?;
        }
        let (pushed, push_error) = self.push_found(&action, id, attempt, items).await?;
        Ok(RemoteEnd { task, pushed, push_error: push_error.or(read_error) })
    }

    /// Records a remote run's failure (S3: one more failure, back to `pending` or to
    /// `needs_human` at the cap; no retry).
    ///
    /// # Errors
    ///
    /// As [`Engine::complete_remote`].
    pub async fn fail_remote(
        &self,
        id: TaskId,
        attempt: u32,
        worker: &str,
        error: String,
    ) -> Result<Task, StoreError> {
        let current = match self.open_run_action(id, attempt, worker, "a failure").await {
            Ok(_) => {
                let end = RunEnd::Failure { error: error.clone(), timeout: false };
                self.finish_remote(id, attempt, worker, end).await
            }
            Err(e) => Err(e),
        };
        match current {
            // The same report again (its answer was lost): answered as the first was.
            Err(StoreError::LeaseLost { .. }) => {
                let same = |_: &Task, run: &RunRecord| run.error == error;
                Ok(self.recorded_run(id, attempt, worker, RunOutcome::Failure, same).await?.0)
            }
            other => other,
        }
    }

    /// The action of the run whose end (`reported`) `worker` reports, while its record is open
    /// ([`Engine::run_action`]); [`StoreError::LeaseLost`] otherwise. A record no longer open may
    /// be of a run a person stopped by moving its row out of `running`: the row kept the run's
    /// lease as a fence, and this end clears it first (S14), so the task may run again at once
    /// instead of when the lease runs out. Nothing of the report is recorded on the row then;
    /// any other stale end writes nothing.
    async fn open_run_action(
        &self,
        id: TaskId,
        attempt: u32,
        worker: &str,
        reported: &str,
    ) -> Result<String, StoreError> {
        match self.run_action(id, attempt).await {
            Err(StoreError::LeaseLost { .. }) => {}
            other => return other,
        }
        // The run's record is closed, so the row is not `running` under this attempt: the end
        // can only clear the fence of a run a person stopped (`plan_finish`), or be refused.
        let end = RunEnd::Interrupted { reason: format!("its remote worker reported its end ({reported})") };
        match self.finish_remote(id, attempt, worker, end).await {
            // Refused: the end of a run a person stopped clears its fence and answers so.
            Ok(_) | Err(StoreError::LeaseLost { .. } | StoreError::NotFound(_)) => {
                Err(StoreError::LeaseLost { id, attempt })
            }
            Err(e) => Err(e),
        }
    }

    /// The row and action of a remote run whose end the ledger holds as `outcome`: reported by
    /// `worker` for `attempt` (no claim since), and `same` as the report made again;
    /// [`StoreError::LeaseLost`] otherwise.
    pub(crate) async fn recorded_run(
        &self,
        id: TaskId,
        attempt: u32,
        worker: &str,
        outcome: RunOutcome,
        same: impl Fn(&Task, &RunRecord) -> bool,
    ) -> Result<(Task, String), StoreError> {
        let (row, runs) = tokio::try_join!(self.store.get(id), self.store.runs(id))?;
        let run = runs.into_iter().find(|r| r.attempt == attempt);
        match (row, run) {
            (Some(row), Some(run))
                if row.attempt == attempt
                    && run.worker == worker
                    && run.outcome == outcome
                    && same(&row, &run) =>
            {
                Ok((row, run.action))
            }
            _ => Err(StoreError::LeaseLost { id, attempt }),
        }
    }

    async fn finish_remote(
        &self,
        id: TaskId,
        attempt: u32,
        worker: &str,
        end: RunEnd,
    ) -> Result<Task, StoreError> {
        self.store
            .finish(Finish {
                id,
                attempt,
                worker: worker.to_owned(),
                now: self.now(),
                end,
                policy: self.config.policy.failures,
            })
            .await
    }

    /// The action of a run as its claim recorded it.
    async fn run_action(&self, id: TaskId, attempt: u32) -> Result<String, StoreError> {
        let runs = self.store.runs(id).await?;
        runs.into_iter()
            .find(|r| r.attempt == attempt && r.outcome == "running")
            .map(|r| r.action)
            .ok_or(StoreError::LeaseLost { id, attempt })
    }

    /// Pushes a run's found tasks in a transaction of their own (X2); a refusal is noted on the
    /// run and returned, never raised. A temporary store fault is raised, not noted: the push is
    /// to be made again (the spooled end, or the remote worker's retried report, keeps the
    /// tasks), and noting it would have answered it as done.
    ///
    /// # Errors
    ///
    /// A temporary store fault ([`StoreError::is_retryable`]), of the push or of the note.
    pub(crate) async fn push_found(
        &self,
        action: &str,
        id: TaskId,
        attempt: u32,
        found: Vec<Item>,
    ) -> Result<(Option<(usize, usize, usize)>, Option<String>), StoreError> {
        if found.is_empty() {
            return Ok((None, None));
        }
        let batch = Batch {
            items: found.into(),
            actor: Actor::Push(action.to_owned()),
            now: self.now(),
            file: format!("<output of run {}>", idempotency_key(id, attempt)),
            unknown_deps: UnknownDeps::Refuse,
        };
        match self.store.upsert(batch).await {
            Ok(pushed) => Ok((Some((pushed.added.len(), pushed.updated.len(), pushed.skipped.len())), None)),
            Err(e) if e.is_retryable() => Err(e),
            Err(e) => {
                self.store.note_run(id, attempt, format!("found tasks not pushed: {e}")).await?;
                Ok((None, Some(e.to_string())))
            }
        }
    }
}

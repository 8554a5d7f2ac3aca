//! What a claim, a run's end (or a person's approval) does to its row, decided once for every
//! backend (pure: no I/O).

use daicho_core::authority::PersonCells;
use daicho_core::policy::FailurePolicy;
use daicho_core::{Actor, Task};
use jiff::Timestamp;

use crate::{ClaimRequest, Finish, JournalKind, Result, RunEnd, RunOutcome, StoreError};

/// A run's end, ready to be written: the row afterwards, the journal entry and the run record.
#[derive(Clone, Debug, PartialEq)]
pub struct EndPlan {
    /// The row as it will be stored (lease cleared).
    pub after: Task,
    /// Who ended it (`worker:<id>`, or `system` for a lost run).
    pub actor: String,
    /// The journal entry's kind: `finish`, `fail` or `lost`.
    pub kind: JournalKind,
    /// The error of a failed, timed-out or lost run.
    pub error: Option<String>,
    /// The run record's outcome: `success`, `failure`, `timeout` or `lost`.
    pub outcome: RunOutcome,
    /// Prompt and completion tokens, if reported.
    pub tokens: (Option<u64>, Option<u64>),
    /// The end of a run a person stopped ([`plan_finish`]): written (it clears the fence), but
    /// refused as the run's end, so the finish answers [`StoreError::LeaseLost`] and its worker
    /// records nothing of the run (no result, no found tasks).
    pub refused: bool,
}

/// The row a claim of `before` makes (S1, S4): `running` under the request's worker until its
/// lease runs out, one attempt more, the ▶ run box cleared and a person's approval spent. Whether
/// `before` may be claimed at all (ready, ▶ ticked or approved when the request requires it) is
/// for the claim's statement to decide, under the row's lock; each backend's statement writes
/// exactly this row (the contract checks it), so a backend that holds the row locked can write
/// the claim's journal entry with the claim itself.
pub fn plan_claim(before: &Task, req: &ClaimRequest) -> Task {
    let mut after = before.clone();
    after.status = daicho_core::Status::Running;
    after.run = false;
    after.approved_by = String::new();
    after.run_at = Some(req.now);
    after.attempt = before.attempt + 1;
    after.lease =
        Some(daicho_core::task::Lease { owner: req.worker.clone(), expires_at: req.now + req.lease });
    after.updated_at = req.now;
    after
}

/// Whether `row` is as `req`'s claim left it: `running` under the request's worker since the
/// request's time (the claim's `run_at`, as stored). A claim whose answer a store fault cut off
/// (the connection lost after the commit went through) is known by it once the store answers
/// again (S1, S14): the claim holds, and its worker may run it. Another claim of the row since,
/// or a person's move, shows a different worker, time or status.
pub fn is_claim_of(row: &Task, req: &ClaimRequest) -> bool {
    row.id == req.id
        && row.status == daicho_core::Status::Running
        && row.lease.as_ref().is_some_and(|lease| lease.owner == req.worker)
        && row.run_at.is_some_and(|at| at.as_microsecond() == req.now.as_microsecond())
}

/// The end `finish` makes of the run on `before`: success sets the result and the action's
/// status; failure adds one to `failures` and sets `pending`, or `needs_human` at the cap (S3).
///
/// # Errors
///
/// [`StoreError::LeaseLost`] unless `before` is still under the finish's attempt and worker's
/// lease (a stale worker's late write). A row a person moved out of `running` during the run, its
/// lease kept as a fence, gets a plan that only clears that fence (`plan_stopped`), marked
/// `refused`: each backend writes it and answers the finish `LeaseLost` all the same.
pub fn plan_finish(before: &Task, finish: &Finish) -> Result<EndPlan> {
    let owned = before.lease.as_ref().is_some_and(|l| l.owner == finish.worker);
    if before.attempt != finish.attempt || !owned {
        return Err(StoreError::LeaseLost { id: finish.id, attempt: finish.attempt });
    }
    if before.status != daicho_core::Status::Running {
        return Ok(plan_stopped(before, finish));
    }
    let mut after = before.clone();
    after.lease = None;
    after.updated_at = finish.now;
    let actor = Actor::Worker(finish.worker.clone()).to_string();
    Ok(match &finish.end {
        RunEnd::Success { result, status, tokens_in, tokens_out } => {
            after.status = *status;
            after.result = result.clone();
            EndPlan {
                after,
                actor,
                kind: JournalKind::Finish,
                error: None,
                outcome: RunOutcome::Success,
                tokens: (*tokens_in, *tokens_out),
                refused: false,
            }
        }
        RunEnd::Failure { error, timeout } => {
            (after.failures, after.status) = finish.policy.after_failure(before.failures);
            let outcome = if *timeout { RunOutcome::Timeout } else { RunOutcome::Failure };
            EndPlan {
                after,
                actor,
                kind: JournalKind::Fail,
                error: Some(error.clone()),
                outcome,
                tokens: (None, None),
                refused: false,
            }
        }
        RunEnd::Interrupted { reason } => {
            // An operator's stop is not the task's fault (S14): no failure, back to pending.
            after.status = daicho_core::Status::Pending;
            EndPlan {
                after,
                actor,
                kind: JournalKind::Interrupted,
                error: Some(reason.clone()),
                outcome: RunOutcome::Interrupted,
                tokens: (None, None),
                refused: false,
            }
        }
    })
}

/// The end of a run whose row a person moved out of `running` while it ran (S14): the row keeps
/// what the person made of it (status, result, failures: the run's outcome neither finishes nor
/// fails it) and only its lease, kept as a fence until now ([`daicho_core::policy::previous_run`]),
/// is cleared, so the row may be claimed again. The run record was closed by the person's edit
/// ([`run_stopped_by_edit`]); this end is journaled with what the run did, and refused as the
/// run's end (`refused`: the finish answers `LeaseLost`, so its worker pushes nothing it found).
fn plan_stopped(before: &Task, finish: &Finish) -> EndPlan {
    let mut after = before.clone();
    after.lease = None;
    after.updated_at = finish.now;
    let did = match &finish.end {
        RunEnd::Success { .. } => "it had succeeded; its result was not written".to_owned(),
        RunEnd::Failure { error, .. } => format!("it had failed, not counted: {error}"),
        RunEnd::Interrupted { reason } => reason.clone(),
    };
    EndPlan {
        after,
        actor: Actor::Worker(finish.worker.clone()).to_string(),
        kind: JournalKind::Interrupted,
        error: Some(format!("the run stopped after a person moved the task to {}: {did}", before.status)),
        outcome: RunOutcome::Interrupted,
        tokens: (None, None),
        refused: true,
    }
}

/// The run a person's edit of `before` into `after` stops (S14): the current run, when the edit
/// moves the row out of `running`, as its attempt and the error its record is closed with (as
/// interrupted, at once: the person's decision ends it, and a worker that has died would never
/// close it). The row keeps the run's lease as a fence until the run's worker has stopped it
/// ([`plan_finish`]) or the lease runs out.
pub fn run_stopped_by_edit(before: &Task, after: &Task, actor: &Actor) -> Option<(u32, String)> {
    (before.status == daicho_core::Status::Running && after.status != daicho_core::Status::Running).then(
        || {
            (
                before.attempt,
                format!("stopped by {actor}, who moved the task to {} during the run", after.status),
            )
        },
    )
}

/// A person's approval (S2) of `before`, whose deps not yet done number `unmet_deps`: the
/// row with `run` ticked and the approving person recorded (`approved_by`, spent by the claim).
///
/// # Errors
///
/// [`StoreError::Refused`] unless `actor` is a person and the row is `pending` with every dep
/// done (S13: a task enters the approval queue, and can be approved, only when it could run).
pub fn plan_approve(before: &Task, unmet_deps: u32, actor: &Actor, now: Timestamp) -> Result<Task> {
    daicho_core::authority::check_approve(actor, before, unmet_deps)?;
    let mut after = before.clone();
    after.run = true;
    after.approved_by = actor.to_string();
    after.updated_at = now;
    Ok(after)
}

/// A person rejects an external task (S2): the edit that drops it with the reason as its
/// correction and clears its ▶ run box.
///
/// # Errors
///
/// [`StoreError::InvalidInput`] for a blank reason.
pub fn reject_edit(reason: &str) -> Result<daicho_core::edit::TaskEdit> {
    let reason = reason.trim();
    if reason.is_empty() {
        let error = daicho_core::InputError::new("<reject>", None, "a rejection needs a reason");
        return Err(crate::StoreError::InvalidInput(error));
    }
    Ok(daicho_core::edit::TaskEdit {
        status: Some(daicho_core::Status::Dropped),
        correction: Some(format!("rejected: {reason}")),
        run: Some(false),
        ..daicho_core::edit::TaskEdit::default()
    })
}

/// A person's edit of `before` (F1), checked against the authority model (S13): the row
/// afterwards.
///
/// # Errors
///
/// [`StoreError::Refused`] when the actor is no person or the edit sets `running`.
pub fn plan_edit(
    before: &Task,
    edit: &daicho_core::edit::TaskEdit,
    actor: &Actor,
    now: Timestamp,
) -> Result<Task> {
    daicho_core::authority::check_edit(actor, before, edit)?;
    let mut after = edit.apply(before, now);
    if matches!(actor, Actor::Human(_)) {
        // The cells a person wrote are theirs: no source fills or overwrites them again (S13),
        // until the person gives them back.
        let written = before.person_cells.union(PersonCells::changed(before, &after));
        after.person_cells = written.without(&edit.give_back);
        if after.person_cells != before.person_cells {
            after.updated_at = now;
        }
    }
    Ok(after)
}

/// A lost run (S4): the `running` row `before` whose lease expired by `now` gets one timeout
/// failure and goes back to `pending`, or to `needs_human` at the cap.
pub fn plan_lost(before: &Task, now: Timestamp, policy: FailurePolicy) -> EndPlan {
    let error = match &before.lease {
        Some(lease) => format!("lost run: the lease of {} expired at {}", lease.owner, lease.expires_at),
        None => "lost run: running without a lease".to_owned(),
    };
    let mut after = before.clone();
    (after.failures, after.status) = policy.after_failure(before.failures);
    after.lease = None;
    after.updated_at = now;
    EndPlan {
        after,
        actor: Actor::System.to_string(),
        kind: JournalKind::Lost,
        error: Some(error),
        outcome: RunOutcome::Lost,
        tokens: (None, None),
        refused: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use daicho_core::task::Lease;
    use daicho_core::{Status, TaskId};
    use jiff::SignedDuration;

    fn running() -> Task {
        let mut task = Task::new(TaskId::new(7), "build", "src", Timestamp::UNIX_EPOCH);
        task.status = Status::Running;
        task.attempt = 2;
        task.failures = 1;
        task.lease = Some(Lease {
            owner: "w1".into(),
            expires_at: Timestamp::UNIX_EPOCH + SignedDuration::from_mins(5),
        });
        task
    }

    fn finish(worker: &str, attempt: u32, end: RunEnd) -> Finish {
        Finish {
            id: TaskId::new(7),
            attempt,
            worker: worker.into(),
            now: Timestamp::UNIX_EPOCH + SignedDuration::from_secs(9),
            end,
            policy: FailurePolicy::default(),
        }
    }

    #[test]
    fn s14_a_claim_whose_answer_was_lost_is_known_by_its_row() {
        let mut before = running();
        (before.status, before.lease) = (Status::Pending, None);
        let req = ClaimRequest {
            id: TaskId::new(7),
            worker: "w1".into(),
            action: "build".into(),
            // Nanoseconds the ledger does not keep: the row holds the time to the microsecond.
            now: Timestamp::UNIX_EPOCH + SignedDuration::new(60, 123_456_789),
            lease: SignedDuration::from_mins(5),
            require_run: false,
            require_approval: false,
        };
        let claimed = crate::codec::as_stored(plan_claim(&before, &req));
        assert!(is_claim_of(&claimed, &req));
        assert!(!is_claim_of(&before, &req), "not claimed");
        let other = ClaimRequest { worker: "w2".into(), ..req.clone() };
        assert!(!is_claim_of(&claimed, &other), "another worker's claim");
        let later = ClaimRequest { now: req.now + SignedDuration::from_micros(1), ..req.clone() };
        assert!(!is_claim_of(&claimed, &later), "a claim of another moment");
        let mut moved = claimed.clone();
        moved.status = Status::Review;
        assert!(!is_claim_of(&moved, &req), "a person moved it out of running");
        let elsewhere = ClaimRequest { id: TaskId::new(8), ..req };
        assert!(!is_claim_of(&claimed, &elsewhere), "another row");
    }

    #[test]
    fn s1_s3_a_finish_is_fenced_and_a_failure_counts_once() {
        let before = running();
        let ok = RunEnd::Success {
            result: "done".into(),
            status: Status::Review,
            tokens_in: Some(3),
            tokens_out: None,
        };
        let plan = plan_finish(&before, &finish("w1", 2, ok.clone())).expect("current");
        assert_eq!(
            (plan.after.status, plan.after.result.as_str(), plan.after.lease.clone()),
            (Status::Review, "done", None)
        );
        assert_eq!(
            (plan.kind.as_str(), plan.outcome.as_str(), plan.actor.as_str(), plan.tokens),
            ("finish", "success", "worker:w1", (Some(3), None))
        );
        assert!(matches!(
            plan_finish(&before, &finish("w2", 2, ok.clone())),
            Err(StoreError::LeaseLost { .. })
        ));
        assert!(matches!(plan_finish(&before, &finish("w1", 1, ok)), Err(StoreError::LeaseLost { .. })));
        let failed =
            plan_finish(&before, &finish("w1", 2, RunEnd::Failure { error: "boom".into(), timeout: true }))
                .expect("current");
        assert_eq!(
            (failed.after.status, failed.after.failures, failed.outcome.as_str()),
            (Status::Pending, 2, "timeout")
        );
        let mut third = before.clone();
        third.failures = 2;
        let parked =
            plan_finish(&third, &finish("w1", 2, RunEnd::Failure { error: "boom".into(), timeout: false }))
                .expect("current");
        assert_eq!((parked.after.status, parked.after.failures), (Status::NeedsHuman, 3));
    }

    #[test]
    fn s14_an_interrupted_run_returns_its_claim_without_a_failure() {
        let plan = plan_finish(
            &running(),
            &finish("w1", 2, RunEnd::Interrupted { reason: "stopped by the operator (SIGTERM)".into() }),
        )
        .expect("current");
        assert_eq!(
            (plan.after.status, plan.after.failures, plan.after.lease.clone()),
            (Status::Pending, 1, None)
        );
        assert_eq!((plan.kind.as_str(), plan.outcome.as_str()), ("interrupted", "interrupted"));
        assert!(matches!(
            plan_finish(&running(), &finish("w1", 1, RunEnd::Interrupted { reason: String::new() })),
            Err(StoreError::LeaseLost { .. })
        ));
    }

    #[test]
    fn s4_a_lost_run_is_one_timeout_failure_by_the_system() {
        let plan = plan_lost(
            &running(),
            Timestamp::UNIX_EPOCH + SignedDuration::from_mins(6),
            FailurePolicy::default(),
        );
        assert_eq!(
            (plan.after.status, plan.after.failures, plan.after.lease.clone()),
            (Status::Pending, 2, None)
        );
        assert_eq!(
            (plan.kind.as_str(), plan.outcome.as_str(), plan.actor.as_str()),
            ("lost", "lost", "system")
        );
        assert!(plan.error.as_deref().is_some_and(|e| e.starts_with("lost run: the lease of w1 expired")));
    }
}

//! The scheduler (R1, R2): each `[[schedule]]` role runs at the times of its cron expression
//! (the machine's local time), under a role lease in the ledger so that two `serve` processes on
//! one ledger never run the same role at the same moment.

use std::time::{Duration, Instant};

use daicho_store::Store;
use jiff::{SignedDuration, Timestamp};

use crate::sync::{Progress, SyncSweepReport};
use crate::view::ViewReport;
use crate::{Engine, Error, Role, ScheduleConfig, ScheduleRole, Stop, SweepReport};

/// What one role run did.
#[derive(Debug)]
pub enum RoleOutcome {
    /// Another `serve` holds the role's lease: nothing ran.
    Skipped,
    /// A sweep (`run-requested`, `auto`).
    Sweep(SweepReport),
    /// A sync sweep.
    Sync(SyncSweepReport),
    /// The view files written.
    View(ViewReport),
}

/// One role run, fired by the schedule.
#[derive(Debug)]
pub struct RoleRun {
    /// The role.
    pub role: ScheduleRole,
    /// What it did.
    pub outcome: RoleOutcome,
    /// How long it took.
    pub seconds: f64,
}

impl RoleRun {
    /// Whether the role reported a failure (a sync source that failed).
    pub fn failed(&self) -> bool {
        matches!(&self.outcome, RoleOutcome::Sync(r) if r.failed > 0)
    }

    /// What the role left for its next run (the budget or the limit).
    pub fn truncated(&self) -> usize {
        match &self.outcome {
            RoleOutcome::Sweep(r) => r.truncated,
            RoleOutcome::Sync(r) => r.truncated,
            RoleOutcome::Skipped | RoleOutcome::View(_) => 0,
        }
    }
}

/// Where the scheduler reports: the binary prints each role run and counts it in `/metrics`.
pub trait ScheduleSink {
    /// A role ran (or was skipped).
    fn role(&mut self, run: &RoleRun);
    /// A sync role's progress over its sources.
    fn sync_progress(&mut self, _progress: Progress<'_>) {}
}

/// How the scheduler runs.
#[derive(Clone, Debug)]
pub struct ScheduleOptions {
    /// Run every scheduled role once right away.
    pub now: bool,
    /// With `now`: return after that first round.
    pub once: bool,
    /// The role leases' owner (`host:pid`).
    pub owner: String,
}

impl<S: Store + 'static> Engine<S> {
    /// Runs the schedule until the operator's stop (S14), and with `now` a first round of every
    /// role right away (only that round with `once`). One role's failure does not stop the
    /// others. Returns how many roles of the first round failed.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] when no schedule has a next time.
    pub async fn run_schedule(
        &self,
        options: &ScheduleOptions,
        sink: &mut dyn ScheduleSink,
    ) -> Result<usize, Error> {
        let schedules = self.config().schedules.clone();
        let mut failed = 0;
        if options.now {
            for schedule in &schedules {
                if self.stop_level() >= Stop::Drain {
                    break;
                }
                match self.run_role(schedule, &options.owner, self.now(), sink).await {
                    Ok(run) => failed += usize::from(run.failed()),
                    Err(e) => {
                        tracing::error!(role = %schedule.role, "{}", crate::error::chain(&e));
                        failed += 1;
                    }
                }
            }
            if options.once {
                return Ok(failed);
            }
        }
        if schedules.is_empty() {
            // The web UI only.
            self.wait_stop(Stop::Drain).await;
            return Ok(failed);
        }
        loop {
            // An operator's stop (S14): the round under way claims nothing new, its runs drain.
            if self.stop_level() >= Stop::Drain {
                return Ok(failed);
            }
            let tz = jiff::tz::TimeZone::system();
            let now = self.now();
            let local = now.to_zoned(tz.clone()).datetime();
            let next = schedules
                .iter()
                .filter_map(|s| s.cron.next_after(local).map(|t| (t, s)))
                .min_by_key(|(t, _)| *t);
            let Some((at, _)) = next else {
                return Err(Error::Invalid("no schedule has a next time".into()));
            };
            let when = tz.to_timestamp(at).unwrap_or(now);
            let wait = Duration::try_from(when.duration_since(now)).unwrap_or_default();
            tracing::info!(next = %at, "waiting for the next scheduled role");
            tokio::select! {
                () = self.wait_stop(Stop::Drain) => return Ok(failed),
                () = tokio::time::sleep(wait) => {}
            }
            // Every role due at this minute runs, in the file's order.
            for schedule in schedules.iter().filter(|s| s.cron.next_after(local) == Some(at)) {
                if let Err(e) = self.run_role(schedule, &options.owner, when, sink).await {
                    tracing::error!(role = %schedule.role, "{}", crate::error::chain(&e));
                }
            }
        }
    }

    /// Runs one role, fired at `fired`, under its lease (skipped when another holder has it).
    /// The lease is kept to the end of the minute the role fired in (another serve firing at the
    /// same minute skips it), then freed whatever happened, so the next time is not blocked.
    ///
    /// # Errors
    ///
    /// The role's error, or a store error taking or freeing the lease.
    pub async fn run_role(
        &self,
        schedule: &ScheduleConfig,
        owner: &str,
        fired: Timestamp,
        sink: &mut dyn ScheduleSink,
    ) -> Result<RoleRun, Error> {
        let role = schedule.role;
        let store = self.store();
        let now = self.now();
        let until = now + schedule.budget + SignedDuration::from_mins(1);
        if !store.lease_role(role.as_str(), owner, now, until).await? {
            let run = RoleRun { role, outcome: RoleOutcome::Skipped, seconds: 0.0 };
            sink.role(&run);
            return Ok(run);
        }
        let budget = Duration::try_from(schedule.budget).unwrap_or(Duration::from_secs(1800));
        let started = Instant::now();
        let outcome = self.role_outcome(schedule, budget, sink).await;
        let now = self.now();
        store.lease_role(role.as_str(), owner, now, (fired + SignedDuration::from_secs(60)).max(now)).await?;
        let run = RoleRun { role, outcome: outcome?, seconds: started.elapsed().as_secs_f64() };
        sink.role(&run);
        Ok(run)
    }

    async fn role_outcome(
        &self,
        schedule: &ScheduleConfig,
        budget: Duration,
        sink: &mut dyn ScheduleSink,
    ) -> Result<RoleOutcome, Error> {
        let (store, config) = (self.store(), self.config());
        let role = match schedule.role {
            ScheduleRole::View => {
                let today = self.now().to_zoned(jiff::tz::TimeZone::system()).date();
                return Ok(RoleOutcome::View(crate::view::write_files(store, config, today).await?));
            }
            ScheduleRole::Sync => {
                let mut progress = |p: Progress<'_>| sink.sync_progress(p);
                let report =
                    crate::sync::sync_sweep(store, config, self.clock(), schedule.max, budget, &mut progress)
                        .await?;
                return Ok(RoleOutcome::Sync(report));
            }
            ScheduleRole::RunRequested => Role::RunRequested,
            ScheduleRole::Auto => Role::Auto,
        };
        let deadline = Instant::now() + budget;
        let report =
            self.sweep_within(role, schedule.max.unwrap_or(role.default_max()), Some(deadline)).await?;
        Ok(RoleOutcome::Sweep(report))
    }
}

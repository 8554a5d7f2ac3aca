//! How each report reads to a person, in one place: `daicho` prints these lines after a command
//! (and the same values as JSON with `--json`), `serve` prints them for each scheduled role.

use std::fmt;

use daicho_core::format::clip;

use crate::doctor::DoctorReport;
use crate::plan::PlanReport;
use crate::sync::{SourceReport, SyncReport, SyncSweepReport};
use crate::view::ViewReport;
use crate::{Held, RunReport, RunResult, SweepReport, WorkTotals};

/// One line about a run.
impl fmt::Display for RunReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.status.map(|s| s.to_string()).unwrap_or_else(|| "unchanged".to_owned());
        write!(f, "ran {} with {} (attempt {}): ", self.id, self.action, self.attempt)?;
        match self.result {
            RunResult::Success => write!(f, "success, now {status}")?,
            RunResult::Failure => {
                write!(f, "failed, now {status}: {}", self.error.as_deref().unwrap_or_default())?
            }
            RunResult::Timeout => {
                write!(f, "timed out, now {status}: {}", self.error.as_deref().unwrap_or_default())?;
            }
            RunResult::LeaseLost => f.write_str("lease lost, result not recorded")?,
            RunResult::Interrupted => {
                write!(f, "interrupted by the operator, now {status} (no failure counted)")?;
            }
        }
        if let Some((added, updated, skipped)) = self.pushed {
            write!(f, "; found tasks: {added} added, {updated} updated, {skipped} skipped")?;
        }
        if let Some(error) = &self.push_error {
            write!(f, "; found tasks not pushed: {error}")?;
        }
        Ok(())
    }
}

/// A ready task that did not run: its id, its title (clipped) and why.
impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.id, clip(&self.title, 40), self.hold)
    }
}

impl SweepReport {
    /// The sweep in one line, as `serve` prints each scheduled sweep.
    pub fn summary(&self) -> String {
        let paused = self.paused.as_deref().map(|r| format!(" (paused: {r})")).unwrap_or_default();
        format!(
            "{} ran, {} held, {} queued for approval, {} lost runs counted, {} truncated{paused}",
            self.ran.len(),
            self.held.len(),
            self.queued.len(),
            self.lost.len(),
            self.truncated,
        )
    }
}

/// Every line of a sweep: lost runs counted, runs, held and queued tasks, then the totals.
impl fmt::Display for SweepReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(reason) = &self.paused {
            return write!(f, "paused ({reason}): nothing ran; `daicho resume` to run again");
        }
        for (id, status) in &self.lost {
            writeln!(f, "lost run of {id} counted as a timeout failure; now {status}")?;
        }
        for run in &self.ran {
            writeln!(f, "{run}")?;
        }
        for held in &self.held {
            writeln!(f, "held {held}")?;
        }
        for id in &self.queued {
            writeln!(f, "queued {id} for approval")?;
        }
        if self.recovered > 0 {
            writeln!(f, "recorded {} run end(s) a crashed process left unrecorded", self.recovered)?;
        }
        write!(
            f,
            "{} ran, {} held, {} queued for approval, truncated: {}",
            self.ran.len(),
            self.held.len(),
            self.queued.len(),
            self.truncated
        )
    }
}

/// One source's line: its counts, fields only a person writes that it carried, or its failure.
impl fmt::Display for SourceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(e) = &self.error {
            return write!(f, "{}: FAILED: {e}", self.source);
        }
        write!(
            f,
            "{}: {} read, {} added, {} updated, {} skipped, {} truncated",
            self.source, self.read, self.added, self.updated, self.skipped, self.truncated
        )?;
        if !self.ignored.is_empty() {
            let mut fields: Vec<&str> = self.ignored.iter().map(|i| i.field).collect();
            fields.sort_unstable();
            fields.dedup();
            let (count, fields) = (self.ignored.len(), fields.join(", "));
            write!(f, ", {count} field(s) ignored ({fields}: only a person writes them)")?;
        }
        Ok(())
    }
}

/// A line per source pulled.
impl fmt::Display for SyncReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.sources.is_empty() {
            return f.write_str("no sources configured (add [[source]] tables to daicho.toml)");
        }
        lines(f, &self.sources)
    }
}

/// A line per source pulled, then what is left for the next sweep.
impl fmt::Display for SyncSweepReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for source in &self.sources {
            writeln!(f, "{source}")?;
        }
        write!(
            f,
            "{} sources synced, {} failed, {} left for the next sweep",
            self.sources.len(),
            self.failed,
            self.truncated
        )
    }
}

/// The files the view role wrote.
impl fmt::Display for ViewReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "view: wrote {}", self.written.join(", "))
    }
}

/// Each finding with the command that fixes it, or `nothing stuck`.
impl fmt::Display for DoctorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.findings.is_empty() {
            return f.write_str("nothing stuck");
        }
        let text = self.findings.iter().map(|finding| {
            let task = finding.task.as_deref().map(|t| format!("{t} ")).unwrap_or_default();
            format!("{}: {task}{}\n  fix: {}", finding.kind, finding.explanation, finding.fix)
        });
        f.write_str(&text.collect::<Vec<_>>().join("\n"))
    }
}

/// The tasks a plan added, and the old plan's tasks it dropped.
impl fmt::Display for PlanReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "planned '{}': {} tasks added ({})", self.goal, self.added.len(), self.added.join(", "))?;
        if !self.dropped.is_empty() {
            write!(f, "; the old plan's open tasks dropped: {}", self.dropped.join(", "))?;
        }
        Ok(())
    }
}

/// What a worker did, when it stops.
impl fmt::Display for WorkTotals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "worker done: {} runs, {} failed, {} interrupted, {} lost runs counted",
            self.ran, self.failed, self.interrupted, self.lost_counted
        )
    }
}

fn lines<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str("\n")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

//! `/metrics` in the Prometheus text exposition format (I3): tasks by project and status, runs
//! and failures by action (from the ledger, so every worker's runs count), the kill switch, the
//! approval queue, and what this process saw: sweep durations and truncated counts per role,
//! responses by class. Written by hand: a dozen lines of the format do not need a crate.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use daicho_store::Store;

use crate::AppState;

/// What this process measured, shared by the scheduler and the server.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Per role: sweeps, seconds in all, truncated in all, truncated by the last one.
    sweeps: BTreeMap<String, SweepFigures>,
    /// Responses by class (`2xx`, `4xx`, …).
    responses: BTreeMap<&'static str, u64>,
}

#[derive(Clone, Copy, Debug, Default)]
struct SweepFigures {
    count: u64,
    seconds: f64,
    truncated: u64,
    last_truncated: u64,
}

impl Metrics {
    /// Records one run of a scheduler role: how long it took and how much it left over (R4).
    pub fn record_sweep(&self, role: &str, seconds: f64, truncated: usize) {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let figures = inner.sweeps.entry(role.to_owned()).or_default();
        figures.count += 1;
        figures.seconds += seconds;
        figures.truncated += truncated as u64;
        figures.last_truncated = truncated as u64;
    }

    /// Counts one HTTP response.
    pub fn count_response(&self, status: u16) {
        let class = match status {
            100..=199 => "1xx",
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *inner.responses.entry(class).or_default() += 1;
    }
}

/// Escapes a label value (backslash, double quote, newline).
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Renders every figure.
async fn render<S: Store + 'static>(state: &AppState<S>) -> Result<String, daicho_store::StoreError> {
    let store = state.store();
    let counts = store.status_counts().await?;
    let stats = store.stats(jiff::Timestamp::UNIX_EPOCH).await?;
    let paused = state.engine.paused().await?;
    let approvals = store.approvals().await?;
    let mut out = String::new();
    family(&mut out, "daicho_tasks", "gauge", "Tasks by project and status.");
    for c in &counts {
        let _ = writeln!(
            out,
            "daicho_tasks{{project=\"{}\",status=\"{}\"}} {}",
            label(&c.project),
            c.status.as_str(),
            c.count
        );
    }
    family(&mut out, "daicho_runs_total", "counter", "Runs started, by action.");
    for s in &stats {
        let _ = writeln!(out, "daicho_runs_total{{action=\"{}\"}} {}", label(&s.action), s.runs);
    }
    family(&mut out, "daicho_run_successes_total", "counter", "Runs that succeeded, by action.");
    for s in &stats {
        let _ =
            writeln!(out, "daicho_run_successes_total{{action=\"{}\"}} {}", label(&s.action), s.successes);
    }
    family(
        &mut out,
        "daicho_run_failures_total",
        "counter",
        "Runs that failed, timed out or were lost, by action.",
    );
    for s in &stats {
        let _ = writeln!(out, "daicho_run_failures_total{{action=\"{}\"}} {}", label(&s.action), s.failures);
    }
    family(&mut out, "daicho_runs_running", "gauge", "Runs under way, by action.");
    for s in &stats {
        let _ = writeln!(out, "daicho_runs_running{{action=\"{}\"}} {}", label(&s.action), s.running);
    }
    family(
        &mut out,
        "daicho_tokens_total",
        "counter",
        "Tokens reported by LLM APIs, by action and direction.",
    );
    for s in &stats {
        let action = label(&s.action);
        let _ = writeln!(out, "daicho_tokens_total{{action=\"{action}\",direction=\"in\"}} {}", s.tokens_in);
        let _ =
            writeln!(out, "daicho_tokens_total{{action=\"{action}\",direction=\"out\"}} {}", s.tokens_out);
    }
    family(&mut out, "daicho_paused", "gauge", "1 while the kill switch is on.");
    let _ = writeln!(out, "daicho_paused {}", u8::from(paused.is_some()));
    family(&mut out, "daicho_approvals_waiting", "gauge", "External tasks waiting in the approval queue.");
    let _ = writeln!(out, "daicho_approvals_waiting {}", approvals.len());
    let inner = state.metrics.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    family(
        &mut out,
        "daicho_sweep_duration_seconds",
        "summary",
        "Scheduled role runs of this process, by role.",
    );
    for (role, f) in &inner.sweeps {
        let role = label(role);
        let _ = writeln!(out, "daicho_sweep_duration_seconds_sum{{role=\"{role}\"}} {:.6}", f.seconds);
        let _ = writeln!(out, "daicho_sweep_duration_seconds_count{{role=\"{role}\"}} {}", f.count);
    }
    family(
        &mut out,
        "daicho_sweep_truncated_total",
        "counter",
        "Work left for a later run of the role (R4), in all.",
    );
    for (role, f) in &inner.sweeps {
        let _ = writeln!(out, "daicho_sweep_truncated_total{{role=\"{}\"}} {}", label(role), f.truncated);
    }
    // Not `daicho_sweep_truncated`: a parser takes `_total` samples for that family's.
    family(&mut out, "daicho_sweep_last_truncated", "gauge", "Work left over by the role's last run.");
    for (role, f) in &inner.sweeps {
        let _ = writeln!(out, "daicho_sweep_last_truncated{{role=\"{}\"}} {}", label(role), f.last_truncated);
    }
    family(
        &mut out,
        "daicho_http_responses_total",
        "counter",
        "HTTP responses of this process, by status class.",
    );
    for (class, n) in &inner.responses {
        let _ = writeln!(out, "daicho_http_responses_total{{class=\"{class}\"}} {n}");
    }
    Ok(out)
}

/// `GET /metrics`.
pub(crate) async fn handler<S: Store + 'static>(State(state): State<Arc<AppState<S>>>) -> Response {
    match render(&state).await {
        Ok(text) => {
            ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("# error: {e}\n")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i3_label_values_are_escaped() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn i3_sweeps_and_responses_accumulate() {
        let m = Metrics::default();
        m.record_sweep("auto", 0.5, 3);
        m.record_sweep("auto", 0.25, 1);
        m.count_response(200);
        m.count_response(403);
        let inner = m.inner.lock().expect("lock");
        let auto = inner.sweeps["auto"];
        assert_eq!((auto.count, auto.truncated, auto.last_truncated), (2, 4, 1));
        assert!((auto.seconds - 0.75).abs() < 1e-9);
        assert_eq!((inner.responses["2xx"], inner.responses["4xx"]), (1, 1));
    }
}

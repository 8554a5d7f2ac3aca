//! Stuck states found and explained, each with the command that fixes it (F3).

use daicho_core::lang::Lang;
use std::collections::BTreeMap;

use daicho_core::policy::Hold;
use daicho_core::{Status, TaskId};
use daicho_store::{ListFilter, Store, StoreError};
use serde::Serialize;

use crate::{Engine, Role};

/// One stuck state.
#[derive(Debug, Serialize)]
pub struct Finding {
    /// `paused`, `expired_lease`, `dead_owner`, `stalled`, `awaiting_approval`, `needs_human`
    /// or `cycle`.
    pub kind: &'static str,
    /// The task, when the finding is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// What is wrong.
    pub explanation: String,
    /// The command that fixes it.
    pub fix: String,
}

/// What `daicho doctor` found.
#[derive(Debug, Serialize)]
pub struct DoctorReport {
    /// Every stuck state, nothing when all is well.
    pub findings: Vec<Finding>,
}

impl<S: Store + 'static> Engine<S> {
    /// Finds the stuck states: the kill switch on, runs whose lease expired (lost runs not yet
    /// counted) or whose owner is gone, rows a person moved out of `running` whose run's daicho
    /// died before it stopped the run (the fence waits for the lease), ready tasks nothing can run (stalled), external tasks
    /// waiting for approval, tasks parked for a person, and dependency cycles.
    ///
    /// # Errors
    ///
    /// A store error.
    pub async fn doctor(&self) -> Result<DoctorReport, StoreError> {
        self.doctor_in(Lang::En).await
    }

    /// [`Engine::doctor`] with the explanations in `lang` (kinds and fixes stay as typed).
    ///
    /// # Errors
    ///
    /// A store error.
    pub async fn doctor_in(&self, lang: Lang) -> Result<DoctorReport, StoreError> {
        let t = |en: String, ja: String| if lang.is_ja() { ja } else { en };
        let store = self.store();
        let now = self.now();
        let mut findings = Vec::new();
        if let Some(reason) = self.paused().await? {
            findings.push(Finding {
                kind: "paused",
                task: None,
                explanation: t(
                    format!("the kill switch is on ({reason}): nothing runs"),
                    format!("停止スイッチが入っています ({reason}): 何も実行されません"),
                ),
                fix: "daicho resume   (and remove a PAUSED file beside daicho.toml, if there is one)".into(),
            });
        }
        let running =
            store.list(ListFilter { statuses: vec![Status::Running], ..ListFilter::default() }).await?;
        for task in running.iter().filter(|t| t.lease.as_ref().is_none_or(|l| l.expires_at <= now)) {
            let explanation = match &task.lease {
                Some(lease) => t(
                    format!(
                        "running, but the lease of {} expired at {}: a lost run",
                        lease.owner, lease.expires_at
                    ),
                    format!(
                        "実行中ですが {} のリースが {} に切れています: 失われた実行です",
                        lease.owner, lease.expires_at
                    ),
                ),
                None => t(
                    "running without a lease: a lost run".into(),
                    "リースなしで実行中: 失われた実行です".into(),
                ),
            };
            findings.push(Finding {
                kind: "expired_lease",
                task: Some(task.id.to_string()),
                explanation,
                fix: "daicho sweep --role run-requested --max 0   (counts every lost run as one failure; runs nothing)".into(),
            });
        }
        let all = store.list(ListFilter::default()).await?;
        // A live lease whose daicho is gone from this machine: a run that is lost although its
        // lease has not run out, or the fence a person's move out of `running` left (S14), which
        // nobody will clear now that the run's daicho is gone. The person's `set` on this machine
        // kills what is left of the run and clears either (`edit_as_person`).
        for task in &all {
            let Some(lease) = task.lease.as_ref().filter(|l| l.expires_at > now) else { continue };
            if !crate::owner_is_gone(&lease.owner) {
                continue;
            }
            let (owner, until, id) = (&lease.owner, lease.expires_at, task.id);
            let (explanation, fix) = if task.status == Status::Running {
                (
                    t(
                        format!(
                            "running under {owner}, a process of this machine that is gone: the run is lost (its lease ends at {until})"
                        ),
                        format!(
                            "このマシンの終了したプロセス {owner} のもとで実行中: 実行は失われています (リースは {until} まで)"
                        ),
                    ),
                    format!(
                        "wait until {until} and `daicho sweep --role run-requested --max 0` counts it as a lost run, or (what is left of the run here is killed, and it may run again at once) return it now: daicho set {id} --status pending"
                    ),
                )
            } else {
                (
                    t(
                        format!(
                            "{}, moved out of `running` while it ran under {owner}, a process of this machine that is gone before it stopped the run: nothing runs it again until {until}",
                            task.status
                        ),
                        format!(
                            "実行中に{}へ移されましたが、実行を止める前にこのマシンのプロセス {owner} が終了しました: {until} まで再実行されません",
                            task.status.label(true)
                        ),
                    ),
                    format!(
                        "wait until {until}, or (what is left of the run here is killed) clear it now: daicho set {id} --status {}",
                        task.status
                    ),
                )
            };
            findings.push(Finding { kind: "dead_owner", task: Some(id.to_string()), explanation, fix });
        }
        let ready = store.ready(now, 5_000).await?;
        let reasons = self.explain_unpaused(&ready.tasks, Role::Auto).await?;
        for (task, reason) in ready.tasks.iter().zip(reasons) {
            match reason {
                Err(hold @ Hold::Stalled(_)) => findings.push(Finding {
                    kind: "stalled",
                    task: Some(task.id.to_string()),
                    explanation: t(format!("ready, but {hold}"), format!("実行可能ですが、{}", hold.text(lang))),
                    fix: format!(
                        "add an [[action]] that accepts it to daicho.toml, or: daicho set {} --status dropped",
                        task.id
                    ),
                }),
                Err(Hold::AwaitingApproval) => findings.push(Finding {
                    kind: "awaiting_approval",
                    task: Some(task.id.to_string()),
                    explanation: t(
                        "external: waits for a person's approval".into(),
                        "外部送信: 人の承認を待っています".into(),
                    ),
                    fix: format!("daicho approve {}   (or: daicho set {} --status dropped)", task.id, task.id),
                }),
                _ => {}
            }
        }
        let parked =
            store.list(ListFilter { statuses: vec![Status::NeedsHuman], ..ListFilter::default() }).await?;
        for task in &parked {
            findings.push(Finding {
                kind: "needs_human",
                task: Some(task.id.to_string()),
                explanation: t(
                    format!("parked after {} failures; see `daicho log {}`", task.failures, task.id),
                    format!(
                        "{} 回の失敗で人の手に戻されました。`daicho log {}` を見てください",
                        task.failures, task.id
                    ),
                ),
                fix: format!(
                    "daicho set {} --status pending --correction \"what to do differently\"",
                    task.id
                ),
            });
        }
        let graph: BTreeMap<TaskId, Vec<TaskId>> = all.iter().map(|t| (t.id, t.deps.clone())).collect();
        if let Some(cycle) = daicho_core::dag::find_cycle(&graph) {
            let path: Vec<String> = cycle.iter().map(ToString::to_string).collect();
            let (first, second) = (&path[0], path.get(1).unwrap_or(&path[0]));
            findings.push(Finding {
                kind: "cycle",
                task: Some(first.clone()),
                explanation: t(
                    format!("dependency cycle: {} (none of them can ever be ready)", path.join(" → ")),
                    format!("依存の循環: {} (どれも実行可能になりません)", path.join(" → ")),
                ),
                fix: format!("daicho set {first} --deps \"…\"   (its deps without {second})"),
            });
        }
        Ok(DoctorReport { findings })
    }
}

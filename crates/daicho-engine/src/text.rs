//! How each report reads to a person, in one place and in either language (`Lang`): `daicho`
//! prints these lines after a command (and the same values as JSON with `--json`), `serve`
//! prints them for each scheduled role. `Display` is the English text.

use std::fmt::{self, Write as _};

use daicho_core::format::clip;
use daicho_core::lang::Lang;

use crate::doctor::DoctorReport;
use crate::outbound::{ApprovalQueue, Decisions};
use crate::plan::PlanReport;
use crate::purge::{SourcePurge, SourceRestore};
use crate::schedule::{RoleOutcome, RoleRun};
use crate::sync::{SourceReport, SyncReport, SyncSweepReport};
use crate::view::ViewReport;
use crate::{Held, RunReport, RunResult, RunStats, SweepReport, WorkTotals};

/// A report that reads to a person in either language.
pub trait Text {
    /// The report's text in `lang`.
    fn text(&self, lang: Lang) -> String;
}

/// Implements [`Text`] by a type's own `text(lang)`, and `Display` as its English text.
macro_rules! english {
    ($($ty:ty),*) => {$(
        impl Text for $ty {
            fn text(&self, lang: Lang) -> String {
                <$ty>::text(self, lang)
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&<$ty>::text(self, Lang::En))
            }
        }
    )*};
}

english!(
    RunReport,
    Held,
    SweepReport,
    SourceReport,
    SyncReport,
    SyncSweepReport,
    ViewReport,
    DoctorReport,
    PlanReport,
    WorkTotals,
    ApprovalQueue,
    Decisions,
    RunStats,
    RoleRun,
    SourcePurge,
    SourceRestore
);

impl RunReport {
    /// One line about the run.
    pub fn text(&self, lang: Lang) -> String {
        let ja = lang.is_ja();
        let status = self
            .status
            .map(|s| s.label(ja).to_owned())
            .unwrap_or_else(|| lang.pick("unchanged", "変更なし").into());
        let error = self.error.as_deref().unwrap_or_default();
        let (id, action, attempt) = (self.id, &self.action, self.attempt);
        let mut line = match (&self.result, lang) {
            (RunResult::Success, Lang::En) => {
                format!("ran {id} with {action} (attempt {attempt}): success, now {status}")
            }
            (RunResult::Success, Lang::Ja) => {
                format!("{id} を {action} で実行 (試行 {attempt}): 成功、状態は{status}")
            }
            (RunResult::Failure, Lang::En) => {
                format!("ran {id} with {action} (attempt {attempt}): failed, now {status}: {error}")
            }
            (RunResult::Failure, Lang::Ja) => {
                format!("{id} を {action} で実行 (試行 {attempt}): 失敗、状態は{status}: {error}")
            }
            (RunResult::Timeout, Lang::En) => {
                format!("ran {id} with {action} (attempt {attempt}): timed out, now {status}: {error}")
            }
            (RunResult::Timeout, Lang::Ja) => {
                format!("{id} を {action} で実行 (試行 {attempt}): 時間切れ、状態は{status}: {error}")
            }
            (RunResult::LeaseLost, Lang::En) => {
                format!("ran {id} with {action} (attempt {attempt}): lease lost, result not recorded")
            }
            (RunResult::LeaseLost, Lang::Ja) => {
                format!("{id} を {action} で実行 (試行 {attempt}): リースを失い、結果は記録されません")
            }
            (RunResult::Interrupted, Lang::En) => format!(
                "ran {id} with {action} (attempt {attempt}): interrupted by the operator, now {status} (no failure counted)"
            ),
            (RunResult::Stopped, Lang::En) => format!(
                "ran {id} with {action} (attempt {attempt}): stopped, a person moved the task out of running (no failure counted)"
            ),
            (RunResult::Stopped, Lang::Ja) => format!(
                "{id} を {action} で実行 (試行 {attempt}): 人が実行中から移したため停止 (失敗に数えません)"
            ),
            (RunResult::Interrupted, Lang::Ja) => {
                format!(
                    "{id} を {action} で実行 (試行 {attempt}): 操作者が中断、状態は{status} (失敗に数えません)"
                )
            }
        };
        if let Some((added, updated, skipped)) = self.pushed {
            let _ = match lang {
                Lang::En => {
                    write!(line, "; found tasks: {added} added, {updated} updated, {skipped} skipped")
                }
                Lang::Ja => {
                    write!(line, "; 見つかったタスク: 追加 {added}、更新 {updated}、スキップ {skipped}")
                }
            };
        }
        if let Some(error) = &self.push_error {
            let _ = write!(
                line,
                "; {}: {error}",
                lang.pick("found tasks not pushed", "見つかったタスクを登録できません")
            );
        }
        line
    }
}

impl Held {
    /// The task's id, its title (clipped) and why it did not run.
    pub fn text(&self, lang: Lang) -> String {
        format!("{} {}: {}", self.id, clip(&self.title, 40), self.hold.text(lang))
    }
}

impl SweepReport {
    /// The sweep in one line, as `serve` prints each scheduled sweep.
    pub fn summary(&self) -> String {
        self.summary_in(Lang::En)
    }

    /// The sweep in one line, in `lang`.
    pub fn summary_in(&self, lang: Lang) -> String {
        let (ran, held, queued, lost, truncated) =
            (self.ran.len(), self.held.len(), self.queued.len(), self.lost.len(), self.truncated);
        match (lang, self.paused.as_deref()) {
            (Lang::En, paused) => {
                let paused = paused.map(|r| format!(" (paused: {r})")).unwrap_or_default();
                format!(
                    "{ran} ran, {held} held, {queued} queued for approval, {lost} lost runs counted, {truncated} truncated{paused}"
                )
            }
            (Lang::Ja, paused) => {
                let paused = paused.map(|r| format!(" (一時停止中: {r})")).unwrap_or_default();
                format!(
                    "実行 {ran}、保留 {held}、承認待ちへ {queued}、失われた実行 {lost}、持ち越し {truncated}{paused}"
                )
            }
        }
    }

    /// Every line of the sweep: lost runs counted, runs, held and queued tasks, then the totals.
    pub fn text(&self, lang: Lang) -> String {
        if let Some(reason) = &self.paused {
            return match lang {
                Lang::En => format!("paused ({reason}): nothing ran; `daicho resume` to run again"),
                Lang::Ja => format!("一時停止中 ({reason}): 何も実行していません。`daicho resume` で再開"),
            };
        }
        let mut lines = Vec::new();
        for (id, status) in &self.lost {
            lines.push(match lang {
                Lang::En => format!("lost run of {id} counted as a timeout failure; now {status}"),
                Lang::Ja => {
                    format!("{id} の失われた実行を時間切れの失敗に数えました。状態は{}", status.label(true))
                }
            });
        }
        lines.extend(self.ran.iter().map(|run| run.text(lang)));
        lines.extend(
            self.held.iter().map(|held| format!("{} {}", lang.pick("held", "保留"), held.text(lang))),
        );
        lines.extend(self.queued.iter().map(|id| match lang {
            Lang::En => format!("queued {id} for approval"),
            Lang::Ja => format!("{id} を承認待ちにしました"),
        }));
        if self.recovered > 0 {
            lines.push(match lang {
                Lang::En => {
                    format!("recorded {} run end(s) a crashed process left unrecorded", self.recovered)
                }
                Lang::Ja => {
                    format!("異常終了したプロセスが残した実行結果 {} 件を記録しました", self.recovered)
                }
            });
        }
        let (ran, held, queued, truncated) =
            (self.ran.len(), self.held.len(), self.queued.len(), self.truncated);
        lines.push(match lang {
            Lang::En => {
                format!("{ran} ran, {held} held, {queued} queued for approval, truncated: {truncated}")
            }
            Lang::Ja => format!("実行 {ran}、保留 {held}、承認待ちへ {queued}、持ち越し: {truncated}"),
        });
        lines.join("\n")
    }
}

impl SourceReport {
    /// One source's line: its counts, fields only a person writes that it carried, or its failure.
    pub fn text(&self, lang: Lang) -> String {
        if let Some(e) = &self.error {
            return format!("{}: {}: {e}", self.source, lang.pick("FAILED", "失敗"));
        }
        let (source, read, added, updated, skipped, truncated) =
            (&self.source, self.read, self.added, self.updated, self.skipped, self.truncated);
        let mut line = match lang {
            Lang::En => format!(
                "{source}: {read} read, {added} added, {updated} updated, {skipped} skipped, {truncated} truncated"
            ),
            Lang::Ja => format!(
                "{source}: 読込 {read}、追加 {added}、更新 {updated}、スキップ {skipped}、持ち越し {truncated}"
            ),
        };
        if let Some((count, fields)) = ignored_fields(self.ignored.iter().map(|i| i.field)) {
            let _ = match lang {
                Lang::En => write!(line, ", {count} field(s) ignored ({fields}: only a person writes them)"),
                Lang::Ja => write!(line, "、無視した欄 {count} ({fields}: 人だけが書く欄です)"),
            };
        }
        if let Some(back) = &self.write_back {
            let (rewritten, moved) = (back.rewritten, back.moved);
            let _ = match (&back.conflict, back.written, lang) {
                (Some(conflict), _, _) => write!(line, "; {conflict}"),
                (None, false, Lang::En) => write!(line, "; {} up to date", back.file),
                (None, false, Lang::Ja) => write!(line, "; {} は最新です", back.file),
                (None, true, Lang::En) => {
                    write!(
                        line,
                        "; {} written back: {rewritten} line(s) updated, {moved} moved to done",
                        back.file
                    )
                }
                (None, true, Lang::Ja) => {
                    write!(line, "; {} に書き戻し: 更新 {rewritten} 行、完了へ移動 {moved} 行", back.file)
                }
            };
        }
        line
    }
}

impl SyncReport {
    /// A line per source pulled.
    pub fn text(&self, lang: Lang) -> String {
        if self.sources.is_empty() {
            return lang
                .pick(
                    "no sources configured (add [[source]] tables to daicho.toml)",
                    "取り込み元がありません (daicho.toml に [[source]] を加えます)",
                )
                .to_owned();
        }
        self.sources.iter().map(|s| s.text(lang)).collect::<Vec<_>>().join("\n")
    }
}

impl SyncSweepReport {
    /// A line per source pulled, then what is left for the next sweep.
    pub fn text(&self, lang: Lang) -> String {
        let mut lines: Vec<String> = self.sources.iter().map(|s| s.text(lang)).collect();
        let (synced, failed, left) = (self.sources.len(), self.failed, self.truncated);
        lines.push(match lang {
            Lang::En => format!("{synced} sources synced, {failed} failed, {left} left for the next sweep"),
            Lang::Ja => format!("取り込み {synced} 件、失敗 {failed} 件、次回に持ち越し {left} 件"),
        });
        lines.join("\n")
    }
}

impl ViewReport {
    /// The files the view role wrote.
    pub fn text(&self, lang: Lang) -> String {
        format!("{}{}", lang.pick("view: wrote ", "一覧を書き出しました: "), self.written.join(", "))
    }
}

impl DoctorReport {
    /// Each finding with the command that fixes it, or that nothing is stuck.
    pub fn text(&self, lang: Lang) -> String {
        if self.findings.is_empty() {
            return lang.pick("nothing stuck", "詰まっているものはありません").to_owned();
        }
        let fix = lang.pick("fix", "直し方");
        let text = self.findings.iter().map(|finding| {
            let task = finding.task.as_deref().map(|t| format!("{t} ")).unwrap_or_default();
            format!("{}: {task}{}\n  {fix}: {}", finding.kind, finding.explanation, finding.fix)
        });
        text.collect::<Vec<_>>().join("\n")
    }
}

impl PlanReport {
    /// The tasks a plan added, and the old plan's tasks it dropped.
    pub fn text(&self, lang: Lang) -> String {
        let (goal, count, added) = (&self.goal, self.added.len(), self.added.join(", "));
        let mut line = match lang {
            Lang::En => format!("planned '{goal}': {count} tasks added ({added})"),
            Lang::Ja => format!("'{goal}' の計画: タスク {count} 件を追加 ({added})"),
        };
        if !self.dropped.is_empty() {
            let label = lang.pick("the old plan's open tasks dropped", "前の計画の未完了タスクを中止");
            let _ = write!(line, "; {label}: {}", self.dropped.join(", "));
        }
        line
    }
}

impl WorkTotals {
    /// What a worker did, when it stops.
    pub fn text(&self, lang: Lang) -> String {
        let (ran, failed, interrupted, lost) = (self.ran, self.failed, self.interrupted, self.lost_counted);
        let stopped = self.stopped;
        match lang {
            Lang::En => format!(
                "worker done: {ran} runs, {failed} failed, {interrupted} interrupted, {stopped} stopped by a \
                 person, {lost} lost runs counted"
            ),
            Lang::Ja => format!(
                "ワーカー終了: 実行 {ran}、失敗 {failed}、中断 {interrupted}、人による停止 {stopped}、失われた実行 {lost}"
            ),
        }
    }
}

impl ApprovalQueue {
    /// A line per queued task: its id, title, action and what it would run or send, and who
    /// queued it when.
    pub fn text(&self, lang: Lang) -> String {
        if self.0.is_empty() {
            return lang.pick("the approval queue is empty", "承認待ちはありません").to_owned();
        }
        let queued_word = lang.pick("queued", "登録");
        let lines = self.0.iter().map(|a| {
            let out = &a.outbound;
            let does = match out.kind {
                "command" => out.command.join(" "),
                "llm" => format!("POST {} ({})", out.endpoint, out.model),
                _ => out.problem.clone().unwrap_or_default(),
            };
            let (title, does) = (clip(&a.title, 50), clip(&does, 60));
            format!(
                "{}  {title}  [{}] {does}  ({queued_word} {} {})",
                a.id, out.action, a.queued_at, a.queued_by
            )
        });
        lines.collect::<Vec<_>>().join("\n")
    }
}

impl Decisions {
    /// A line per decision: when, which task, what, by whom and why.
    pub fn text(&self, lang: Lang) -> String {
        if self.0.is_empty() {
            return lang.pick("no decisions yet", "判断の記録はまだありません").to_owned();
        }
        let lines = self.0.iter().map(|d| {
            let reason = if d.reason.is_empty() { String::new() } else { format!(": {}", d.reason) };
            format!("{}  {} {} by {}{reason}", d.decided_at, d.id, d.decision, d.decided_by)
        });
        lines.collect::<Vec<_>>().join("\n")
    }
}

impl RunStats {
    /// A line per action: runs, successes, failures, runs under way and tokens.
    pub fn text(&self, lang: Lang) -> String {
        let since = self.since;
        let mut lines = vec![match (self.actions.is_empty(), lang) {
            (true, Lang::En) => format!("no runs since {since}"),
            (false, Lang::En) => format!("runs since {since}:"),
            (true, Lang::Ja) => format!("{since} 以降の実行はありません"),
            (false, Lang::Ja) => format!("{since} 以降の実行:"),
        }];
        lines.extend(self.actions.iter().map(|s| {
            let (action, runs, running) = (&s.action, s.runs, s.running);
            let (ok, failed, tokens_in, tokens_out) = (s.successes, s.failures, s.tokens_in, s.tokens_out);
            match lang {
                Lang::En => format!(
                    "  {action}: {runs} runs, {ok} ok, {failed} failed, {running} running; tokens {tokens_in} in, {tokens_out} out"
                ),
                Lang::Ja => format!(
                    "  {action}: 実行 {runs}、成功 {ok}、失敗 {failed}、実行中 {running}; トークン 入力 {tokens_in}、出力 {tokens_out}"
                ),
            }
        }));
        lines.join("\n")
    }
}

impl RoleRun {
    /// The line `serve` prints for a role run: its name and what it did.
    pub fn text(&self, lang: Lang) -> String {
        let name = self.role.as_str();
        match &self.outcome {
            RoleOutcome::Skipped => format!(
                "{name}: {}",
                lang.pick(
                    "skipped, another serve holds this role",
                    "スキップ: 別の serve がこの役割を持っています"
                )
            ),
            RoleOutcome::View(report) => report.text(lang),
            RoleOutcome::Sync(report) => format!("sync: {}", report.text(lang).replace('\n', "; ")),
            RoleOutcome::Sweep(report) => format!("{name}: {}", report.summary_in(lang)),
        }
    }
}

/// `ids` as a comma-separated list after a colon (nothing when there are none).
fn ids(ids: &[daicho_core::TaskId]) -> String {
    match ids.is_empty() {
        true => String::new(),
        false => format!(": {}", ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    }
}

impl SourcePurge {
    /// How many rows go (or would), which stay and why, and how to apply a dry run.
    pub fn text(&self, lang: Lang) -> String {
        let (source, count, list) = (&self.source, self.purged.len(), ids(&self.purged));
        let mut lines = vec![match (self.applied, lang) {
            (true, Lang::En) => format!("purged {count} rows of {source}{list}"),
            (false, Lang::En) => format!("would purge {count} rows of {source}{list}"),
            (true, Lang::Ja) => format!("{source} の {count} 行を削除しました{list}"),
            (false, Lang::Ja) => format!("{source} の {count} 行を削除します (試行){list}"),
        }];
        lines.extend(
            self.kept.iter().map(|k| format!("  {} {}: {}", lang.pick("kept", "残す"), k.id, k.reason)),
        );
        if !self.applied && count > 0 {
            lines.push(match lang {
                Lang::En => format!("nothing written; `daicho purge-source {source} --apply` deletes them"),
                Lang::Ja => {
                    format!("何も書き込んでいません。`daicho purge-source {source} --apply` で削除します")
                }
            });
        }
        lines.join("\n")
    }
}

impl SourceRestore {
    /// How many rows came back, and which did not and why.
    pub fn text(&self, lang: Lang) -> String {
        let (source, count, list) = (&self.source, self.restored.len(), ids(&self.restored));
        let mut lines = vec![match lang {
            Lang::En => format!("restored {count} rows of {source}{list}"),
            Lang::Ja => format!("{source} の {count} 行を戻しました{list}"),
        }];
        let not = lang.pick("not restored", "戻さない");
        lines.extend(self.skipped.iter().map(|k| format!("  {not} {}: {}", k.id, k.reason)));
        lines.join("\n")
    }
}

/// How many person-only fields were ignored, and their names once each, sorted; `None` for none.
fn ignored_fields<'a>(fields: impl Iterator<Item = &'a str>) -> Option<(usize, String)> {
    let mut names: Vec<&str> = fields.collect();
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    (count > 0).then(|| (count, names.join(", ")))
}

/// What an import of `files` did: the counts, then the person-only fields it did not write, then
/// up to `shown` skipped items with their line and reason (`--json` lists every one).
pub fn imported(files: &str, report: &daicho_store::UpsertReport, shown: usize, lang: Lang) -> String {
    let (added, updated, skipped) = (report.added.len(), report.updated.len(), report.skipped.len());
    let mut text = match lang {
        Lang::En => format!("imported {files}: {added} added, {updated} updated, {skipped} skipped"),
        Lang::Ja => format!("{files} を取り込みました: 追加 {added}、更新 {updated}、スキップ {skipped}"),
    };
    if let Some((count, fields)) = ignored_fields(report.ignored.iter().map(|i| i.field)) {
        let _ = match lang {
            Lang::En => write!(
                text,
                "\n  {count} field(s) ignored ({fields}: only a person writes them; `daicho import --ledger` keeps them from an export of your own ledger)"
            ),
            Lang::Ja => write!(
                text,
                "\n  無視した欄 {count} ({fields}: 人だけが書く欄です。自分の台帳のエクスポートなら `daicho import --ledger` で保たれます)"
            ),
        };
    }
    for skip in report.skipped.iter().take(shown) {
        // Of an import of several files, the file too.
        let at = match (skip.file.as_deref().filter(|&file| file != files), skip.line) {
            (Some(file), Some(l)) => format!("{file}:{l}: "),
            (None, Some(l)) => format!("line {l}: "),
            (_, None) => String::new(),
        };
        let id = skip.id.map(|i| format!("{i} ")).unwrap_or_default();
        let word = lang.pick("skipped", "スキップ");
        let _ = write!(text, "\n  {word} {at}{id}{}: {}", clip(&skip.title, 50), skip.reason);
    }
    if let Some(more) = skipped.checked_sub(shown).filter(|&more| more > 0) {
        let _ = match lang {
            Lang::En => write!(text, "\n  … and {more} more skipped (--json lists every one)"),
            Lang::Ja => write!(text, "\n  … ほか {more} 件をスキップ (--json ですべて表示)"),
        };
    }
    text
}

//! Actions and policy from `daicho.toml`: parsed, then validated, before anything runs.
//!
//! ```toml
//! [policy]
//! max_failures = 3        # S3: failures before a row goes to needs_human
//! lease = "30m"           # S4: a run without a heartbeat for this long is lost
//! daily_cap = 200         # S9: runs per day in all
//!
//! [[action]]
//! name = "research"
//! kind = "command"                       # command | llm
//! command = ["./scripts/research.sh"]    # argv (a relative path is beside this file); task text is never interpolated
//! types = ["調査/記事"]                   # S12: routed by work type …
//! assignees = ["qiita-writer"]           # … or by assignee
//! auto = true                            # S6: may run automatically on tasks tagged ai
//! external = false                       # S2: runs only with a person's approval
//! heavy = false                          # S5: only through `daicho run-heavy`
//! timeout = "10m"                        # S11
//! on_success = "review"                  # review | done
//! daily_cap = 20                         # S9
//!
//! [[source]]
//! name = "inbox"
//! kind = "jsonl"                         # markdown | json | jsonl | csv | command
//! path = "inbox.jsonl"                   # relative to this file
//! project = "support"                    # the default project of its items
//! aggregate = "Get the unanswered questions answered"   # M10: one refresh row
//! dashboard = true                       # V2: a count line in the cross view
//!
//! [[schedule]]                           # R1: `daicho serve` runs each role on its cron
//! role = "auto"                          # run-requested | auto | sync | view
//! cron = "0 3 * * *"                     # local time; @hourly, @daily … too
//! max = 2                                # runs (or sources) per invocation
//! budget = "30m"                         # R4: nothing new starts after this long
//!
//! [view]                                 # what the view role writes (V5)
//! html = "view.html"
//! markdown = "view.md"
//! per_project = 10                       # V3
//! ```

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use daicho_core::format::Format;
use daicho_core::mapping::Mapping;
use daicho_core::policy::{ActionSpec, FailurePolicy, OnSuccess};
use jiff::SignedDuration;
use serde::Deserialize;

/// A configuration error: the file, the line (when known) and the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {reason}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ConfigError {
    /// The configuration file.
    pub file: String,
    /// The 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub reason: String,
}

/// The engine's configuration.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// The configured actions, by name.
    pub actions: Vec<ActionConfig>,
    /// Failure counting, leases, caps.
    pub policy: Policy,
    /// The sources `daicho sync` pulls (X1), in the file's order.
    pub sources: Vec<SourceConfig>,
    /// The directory relative source paths and commands start from: the configuration file's.
    pub dir: PathBuf,
    /// When `daicho serve` runs each role (R1).
    pub schedules: Vec<ScheduleConfig>,
    /// Where the `view` role writes the cross view.
    pub view: ViewConfig,
}

/// The cross view's files (`[view]`), written by the `view` role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewConfig {
    /// The HTML page, relative to the configuration's directory.
    pub html: Option<PathBuf>,
    /// The Markdown file, relative to the configuration's directory.
    pub markdown: Option<PathBuf>,
    /// At most this many rows per project (V3).
    pub per_project: usize,
}

impl Default for ViewConfig {
    fn default() -> ViewConfig {
        ViewConfig { html: None, markdown: None, per_project: 10 }
    }
}

/// One scheduled role (R1): `daicho serve` runs it at the times of its cron expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleConfig {
    /// The role it runs.
    pub role: ScheduleRole,
    /// When, in the machine's local time.
    pub cron: daicho_core::cron::Cron,
    /// Runs (or sources) per invocation; the role's default when absent.
    pub max: Option<usize>,
    /// The time budget of one invocation (R4).
    pub budget: SignedDuration,
}

/// The roles a schedule may name.
pub const ROLES: [&str; 4] = ["run-requested", "auto", "sync", "view"];

/// A role a `[[schedule]]` runs (R1, R2). An unknown name is a configuration error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScheduleRole {
    /// A sweep of rows a person ticked ▶ run.
    RunRequested,
    /// A sweep of automatic runs.
    Auto,
    /// The configured sources, round-robin (R3).
    Sync,
    /// The `[view]` files (V5).
    View,
}

impl ScheduleRole {
    /// Every role, in the order of [`ROLES`].
    pub const ALL: [ScheduleRole; 4] =
        [ScheduleRole::RunRequested, ScheduleRole::Auto, ScheduleRole::Sync, ScheduleRole::View];

    /// Its name in daicho.toml, the role lease and `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleRole::RunRequested => "run-requested",
            ScheduleRole::Auto => "auto",
            ScheduleRole::Sync => "sync",
            ScheduleRole::View => "view",
        }
    }

    /// The role of a name, if it is one.
    pub fn parse(name: &str) -> Option<ScheduleRole> {
        ScheduleRole::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

impl std::fmt::Display for ScheduleRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One source to pull (X1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceConfig {
    /// Its name: the default `source` of its items, and the journal's `sync:<name>`.
    pub name: String,
    /// The default project of its items.
    pub project: String,
    /// Where and how it is read.
    pub kind: SourceKind,
    /// M10: collapse the source into one `refresh` row with this title.
    pub aggregate: Option<String>,
    /// Shown as one count line per project in the cross view (V2).
    pub dashboard: bool,
    /// X5: how a source with columns of its own becomes items (csv, json and jsonl).
    pub mapping: Option<Mapping>,
    /// X6: a Markdown source with a done file gets the ledger written back into its lines.
    pub write_back: bool,
    /// X6: with `write_back`, a row's result that is a link is written as the line's 実行結果.
    pub result_link: bool,
    /// Its line in the configuration file.
    pub line: Option<usize>,
}

/// Where a source's items come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// A file: Markdown task lines (with an optional done file), JSON, JSON Lines or CSV.
    File {
        /// Its format.
        format: Format,
        /// The file, relative to the configuration's directory unless absolute.
        path: PathBuf,
        /// Markdown only: a second file of finished lines (`tasks-done.md`).
        done: Option<PathBuf>,
    },
    /// A spreadsheet (xlsx, xls, xlsb, ods): one sheet, its header row and the rows below.
    Sheet {
        /// The file, relative to the configuration's directory unless absolute.
        path: PathBuf,
        /// The sheet (the first one when absent).
        sheet: Option<String>,
        /// The header's row, 1-based (the first row with a value when absent).
        header_row: Option<usize>,
    },
    /// A command whose standard output is JSON (a tasks.json document or an item array).
    Command {
        /// The program and its arguments (run in the configuration's directory).
        argv: Vec<String>,
        /// Killed after this long.
        timeout: SignedDuration,
    },
}

/// Failure counting, leases and caps.
#[derive(Clone, Debug)]
pub struct Policy {
    /// S3, S4.
    pub failures: FailurePolicy,
    /// How long a claim lasts without a heartbeat (S4).
    pub lease: SignedDuration,
    /// Runs per day in all (S9).
    pub daily_cap: Option<u32>,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy { failures: FailurePolicy::default(), lease: SignedDuration::from_mins(30), daily_cap: None }
    }
}

/// One configured action: what the policies need, and how to run it.
#[derive(Clone, Debug)]
pub struct ActionConfig {
    /// Name, flags and routing.
    pub spec: ActionSpec,
    /// How it runs.
    pub kind: ActionKind,
    /// The run is killed (with its process group) after this long (S11).
    pub timeout: SignedDuration,
}

/// How an action runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActionKind {
    /// A child process: argv, task JSON on stdin, result on stdout.
    Command {
        /// The program and its arguments.
        argv: Vec<String>,
    },
    /// An OpenAI-compatible chat-completions endpoint.
    Llm(LlmConfig),
}

/// An OpenAI-compatible endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlmConfig {
    /// Base URL, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// The environment variable holding the API key (none for local servers).
    pub api_key_env: Option<String>,
    /// The system message.
    pub system: String,
    /// The user message template: `{title}`, `{body}`, `{id}`, `{project}`, `{evidence}`, `{type}`.
    pub prompt: String,
    /// The completion's token limit.
    pub max_tokens: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    policy: RawPolicy,
    #[serde(default)]
    action: Vec<toml::Spanned<RawAction>>,
    #[serde(default)]
    source: Vec<toml::Spanned<RawSource>>,
    #[serde(default)]
    schedule: Vec<toml::Spanned<RawSchedule>>,
    #[serde(default)]
    view: RawView,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawView {
    html: Option<String>,
    markdown: Option<String>,
    per_project: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchedule {
    role: String,
    cron: String,
    max: Option<usize>,
    budget: Option<toml::Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    name: String,
    kind: String,
    #[serde(default)]
    project: String,
    path: Option<String>,
    done_path: Option<String>,
    /// X6: write the ledger back into the Markdown file (needs done_path).
    #[serde(default)]
    write_back: bool,
    /// X6: write a result that is a link into the line (with write_back).
    #[serde(default)]
    result_link: bool,
    #[serde(default)]
    command: Vec<String>,
    timeout: Option<String>,
    aggregate: Option<RawAggregate>,
    #[serde(default)]
    dashboard: bool,
    /// X5: ledger field = source column (or JSON Pointer).
    #[serde(default)]
    fields: BTreeMap<String, String>,
    /// X5: keep rows whose column holds one of these values.
    #[serde(default, rename = "where")]
    filter: BTreeMap<String, RawValues>,
    /// X5: templates over a row's columns.
    title: Option<String>,
    body: Option<String>,
    /// Spreadsheets: the sheet and the header's row.
    sheet: Option<String>,
    header_row: Option<usize>,
}

/// One value or a list of them (`where = { status = "未回答" }` or `["未回答", "保留"]`).
#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "expected a value or a list of values")]
enum RawValues {
    One(String),
    Many(Vec<String>),
}

impl RawSource {
    /// The source it configures, checked; the error is the reason (the caller adds file and line).
    fn into_config(self, line: Option<usize>) -> Result<SourceConfig, String> {
        let r = self;
        if r.name.trim().is_empty() {
            return Err("a source needs a name".into());
        }
        let path = |what: &str| {
            r.path
                .as_deref()
                .filter(|p| !p.trim().is_empty())
                .map(PathBuf::from)
                .ok_or_else(|| format!("source '{}' ({what}) needs path = \"…\"", r.name))
        };
        let kind = match r.kind.as_str() {
            "markdown" | "md" => SourceKind::File {
                format: Format::Markdown,
                path: path("markdown")?,
                done: r.done_path.as_deref().map(PathBuf::from),
            },
            "json" | "jsonl" | "csv" => {
                if r.done_path.is_some() {
                    return Err(format!("source '{}': done_path is for markdown sources", r.name));
                }
                let format = match r.kind.as_str() {
                    "json" => Format::Json,
                    "jsonl" => Format::JsonLines,
                    _ => Format::Csv,
                };
                SourceKind::File { format, path: path(&r.kind)?, done: None }
            }
            "xlsx" | "xls" | "xlsb" | "ods" => {
                if r.header_row == Some(0) {
                    return Err(format!("source '{}': header_row counts from 1", r.name));
                }
                SourceKind::Sheet { path: path(&r.kind)?, sheet: r.sheet.clone(), header_row: r.header_row }
            }
            "command" => {
                if r.command.first().is_none_or(|p| p.trim().is_empty()) {
                    return Err(format!("source '{}' (command) needs command = [\"program\", …]", r.name));
                }
                let timeout =
                    positive_duration(r.timeout.as_deref(), SignedDuration::from_mins(5), "timeout")?;
                SourceKind::Command { argv: r.command.clone(), timeout }
            }
            other => {
                return Err(format!(
                    "unknown source kind '{other}' (known: markdown, json, jsonl, csv, xlsx, xls, xlsb, ods, command)"
                ));
            }
        };
        if r.write_back && !(matches!(r.kind.as_str(), "markdown" | "md") && r.done_path.is_some()) {
            return Err(format!(
                "source '{}': write_back is for markdown sources with a done_path (where done lines go)",
                r.name
            ));
        }
        if r.result_link && !r.write_back {
            return Err(format!("source '{}': result_link needs write_back = true", r.name));
        }
        let mapping = r.mapping()?;
        if (r.sheet.is_some() || r.header_row.is_some()) && !matches!(kind, SourceKind::Sheet { .. }) {
            return Err(format!("source '{}': sheet and header_row are for spreadsheet sources", r.name));
        }
        let aggregate = match r.aggregate {
            None | Some(RawAggregate::On(false)) => None,
            Some(RawAggregate::On(true)) => Some(format!("Work through {}", r.name)),
            Some(RawAggregate::Title(title)) if title.trim().is_empty() => {
                return Err(format!("source '{}': aggregate needs a title or true", r.name));
            }
            Some(RawAggregate::Title(title)) => Some(title),
        };
        Ok(SourceConfig {
            name: r.name,
            project: r.project,
            kind,
            aggregate,
            dashboard: r.dashboard,
            mapping,
            write_back: r.write_back,
            result_link: r.result_link,
            line,
        })
    }

    /// The source's mapping (X5), when it has `fields`, `where` or a template.
    fn mapping(&self) -> Result<Option<Mapping>, String> {
        if self.fields.is_empty() && self.filter.is_empty() && self.title.is_none() && self.body.is_none() {
            return Ok(None);
        }
        if !matches!(self.kind.as_str(), "csv" | "json" | "jsonl" | "xlsx" | "xls" | "xlsb" | "ods") {
            return Err(format!(
                "source '{}': fields, where, title and body apply to csv, json, jsonl and spreadsheet sources, not {}",
                self.name, self.kind
            ));
        }
        let fields = self.fields.iter().map(|(f, c)| (f.clone(), c.trim().to_owned())).collect();
        let filter = self
            .filter
            .iter()
            .map(|(column, values)| {
                let values = match values {
                    RawValues::One(v) => vec![v.clone()],
                    RawValues::Many(vs) => vs.clone(),
                };
                (column.clone(), values)
            })
            .collect();
        Mapping::new(fields, filter, self.title.as_deref(), self.body.as_deref())
            .map(Some)
            .map_err(|e| format!("source '{}': {e}", self.name))
    }
}

/// `aggregate = true` (a title made from the source's name) or `aggregate = "Title"`.
#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "expected a title, or true")]
enum RawAggregate {
    On(bool),
    Title(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    max_failures: Option<toml::Spanned<u32>>,
    lease: Option<toml::Spanned<String>>,
    daily_cap: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAction {
    name: String,
    kind: String,
    #[serde(default)]
    command: Vec<String>,
    base_url: Option<String>,
    model: Option<String>,
    api_key_env: Option<String>,
    #[serde(default)]
    system: String,
    prompt: Option<String>,
    max_tokens: Option<u32>,
    #[serde(default)]
    types: Vec<String>,
    #[serde(default)]
    assignees: Vec<String>,
    #[serde(default)]
    auto: bool,
    #[serde(default)]
    external: bool,
    #[serde(default)]
    heavy: bool,
    timeout: Option<toml::Spanned<String>>,
    #[serde(default)]
    on_success: OnSuccess,
    daily_cap: Option<u32>,
}

/// A positive duration (`30m`, `10s`), or `default` when absent.
fn positive_duration(
    value: Option<&str>,
    default: SignedDuration,
    what: &str,
) -> Result<SignedDuration, String> {
    value.map_or(Ok(default), |v| {
        v.parse::<SignedDuration>()
            .ok()
            .filter(|d| d.is_positive())
            .ok_or_else(|| format!("{what} '{v}' is not a positive duration (e.g. \"30m\", \"10s\")"))
    })
}

/// The default prompt of an `llm` action.
pub const DEFAULT_PROMPT: &str = "Task {id}: {title}\n\n{body}";

impl Config {
    /// The commented example configuration `daicho init` writes: every table commented out, so
    /// as written it configures nothing, and each part works once uncommented.
    pub const EXAMPLE: &str = include_str!("example.toml");

    /// Reads and validates a configuration file.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the file, the line and the reason.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            line: None,
            reason: format!("cannot read: {e}"),
        })?;
        let mut config = Config::parse(&text, &file)?;
        config.dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        // A program named by a relative path (`./scripts/step.sh`) lives beside the file; a bare
        // name (`python3`) is looked up in PATH as usual.
        let dir = config.dir.clone();
        let anchor = |argv: &mut Vec<String>| {
            if let Some(program) = argv.first_mut()
                && program.contains('/')
                && Path::new(program.as_str()).is_relative()
            {
                *program = dir.join(program.as_str()).display().to_string();
            }
        };
        for action in &mut config.actions {
            if let ActionKind::Command { argv } = &mut action.kind {
                anchor(argv);
            }
        }
        for source in &mut config.sources {
            if let SourceKind::Command { argv, .. } = &mut source.kind {
                anchor(argv);
            }
        }
        Ok(config)
    }

    /// Parses and validates configuration text (pure: no environment, no files).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for bad TOML, an unknown key, a wrong type, an unknown action kind, a
    /// command action without a command, an llm action without base_url or model, a bad
    /// duration, or a duplicated action name.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let line_at = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError {
            file: file.to_owned(),
            line: e.span().map(|s| line_at(s.start)),
            reason: e.message().trim().to_owned(),
        })?;
        // A duration's error names the line of its key, else of its table (`line`).
        let duration = |value: &Option<toml::Spanned<String>>, default: SignedDuration, what: &str, line| {
            let line = value.as_ref().map(|v| line_at(v.span().start)).or(line);
            positive_duration(value.as_ref().map(|v| v.get_ref().as_str()), default, what)
                .map_err(|reason| ConfigError { file: file.to_owned(), line, reason })
        };
        // Parked after 0 failures would park every task before it ran: refused, as
        // DAICHO_MAX_FAILURES=0 is, not quietly raised to 1.
        if let Some(zero) = raw.policy.max_failures.as_ref().filter(|n| *n.get_ref() == 0) {
            return Err(ConfigError {
                file: file.to_owned(),
                line: Some(line_at(zero.span().start)),
                reason: "policy.max_failures: 0 is not a whole number of at least 1".to_owned(),
            });
        }
        let policy = Policy {
            failures: FailurePolicy {
                max_failures: raw.policy.max_failures.as_ref().map_or(3, |n| *n.get_ref()),
            },
            lease: duration(&raw.policy.lease, SignedDuration::from_mins(30), "policy.lease", None)?,
            daily_cap: raw.policy.daily_cap,
        };
        let mut names = HashSet::new();
        let mut actions = Vec::new();
        for spanned in raw.action {
            let line = Some(line_at(spanned.span().start));
            let a = spanned.into_inner();
            let error = |reason: String| ConfigError { file: file.to_owned(), line, reason };
            if a.name.trim().is_empty() {
                return Err(error("an action needs a name".into()));
            }
            if !names.insert(a.name.clone()) {
                return Err(error(format!("action '{}' is defined twice", a.name)));
            }
            let kind = match a.kind.as_str() {
                "command" => {
                    if a.command.is_empty() || a.command[0].trim().is_empty() {
                        return Err(error(format!(
                            "action '{}' (command) needs command = [\"program\", …]",
                            a.name
                        )));
                    }
                    ActionKind::Command { argv: a.command }
                }
                "llm" => {
                    let base_url = a.base_url.filter(|u| !u.trim().is_empty()).ok_or_else(|| {
                        error(format!(
                            "action '{}' (llm) needs base_url, e.g. \"http://127.0.0.1:11434/v1\"",
                            a.name
                        ))
                    })?;
                    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                        return Err(error(format!(
                            "action '{}': base_url must start with http:// or https://",
                            a.name
                        )));
                    }
                    let model = a
                        .model
                        .filter(|m| !m.trim().is_empty())
                        .ok_or_else(|| error(format!("action '{}' (llm) needs model", a.name)))?;
                    ActionKind::Llm(LlmConfig {
                        base_url,
                        model,
                        api_key_env: a.api_key_env.filter(|v| !v.trim().is_empty()),
                        system: a.system,
                        prompt: a.prompt.unwrap_or_else(|| DEFAULT_PROMPT.to_owned()),
                        max_tokens: a.max_tokens,
                    })
                }
                other => return Err(error(format!("unknown action kind '{other}' (known: command, llm)"))),
            };
            let timeout = duration(&a.timeout, SignedDuration::from_mins(30), "timeout", line)?;
            actions.push(ActionConfig {
                spec: ActionSpec {
                    name: a.name,
                    external: a.external,
                    heavy: a.heavy,
                    auto: a.auto,
                    on_success: a.on_success,
                    types: a.types,
                    assignees: a.assignees,
                    daily_cap: a.daily_cap,
                },
                kind,
                timeout,
            });
        }
        let mut sources = Vec::new();
        let mut source_names = HashSet::new();
        for spanned in raw.source {
            let line = Some(line_at(spanned.span().start));
            let source = spanned.into_inner().into_config(line).map_err(|reason| ConfigError {
                file: file.to_owned(),
                line,
                reason,
            })?;
            if !source_names.insert(source.name.clone()) {
                let reason = format!("source '{}' is defined twice", source.name);
                return Err(ConfigError { file: file.to_owned(), line, reason });
            }
            sources.push(source);
        }
        let mut schedules: Vec<ScheduleConfig> = Vec::new();
        for (entry, spanned) in raw.schedule.into_iter().enumerate() {
            let line = Some(line_at(spanned.span().start));
            let r = spanned.into_inner();
            let error = |reason: String| ConfigError { file: file.to_owned(), line, reason };
            let Some(role) = ScheduleRole::parse(&r.role) else {
                return Err(error(format!(
                    "[[schedule]] #{}: unknown role '{}' (known: {})",
                    entry + 1,
                    r.role,
                    ROLES.join(", ")
                )));
            };
            if schedules.iter().any(|s| s.role == role) {
                return Err(error(format!("role '{role}' is scheduled twice")));
            }
            let cron = daicho_core::cron::Cron::parse(&r.cron).map_err(error)?;
            let budget = duration(&r.budget, SignedDuration::from_mins(30), "budget", line)?;
            schedules.push(ScheduleConfig { role, cron, max: r.max, budget });
        }
        let view = ViewConfig {
            html: raw.view.html.filter(|p| !p.trim().is_empty()).map(PathBuf::from),
            markdown: raw.view.markdown.filter(|p| !p.trim().is_empty()).map(PathBuf::from),
            per_project: raw.view.per_project.unwrap_or(10),
        };
        if schedules.iter().any(|s| s.role == ScheduleRole::View)
            && view.html.is_none()
            && view.markdown.is_none()
        {
            return Err(ConfigError {
                file: file.to_owned(),
                line: None,
                reason: "the view role is scheduled but [view] names no html or markdown file".into(),
            });
        }
        Ok(Config { actions, policy, sources, dir: PathBuf::new(), schedules, view })
    }

    /// The configuration file in force: `explicit` (`--config`), else `daicho.toml` in the
    /// current directory when it exists.
    pub fn in_force(explicit: Option<&Path>) -> Option<PathBuf> {
        explicit.map(Path::to_owned).or_else(|| {
            let default = PathBuf::from("daicho.toml");
            default.exists().then_some(default)
        })
    }

    /// The kill switch's `PAUSED` file (S8): beside the configuration file, else in the current
    /// directory.
    pub fn pause_file(config_file: Option<&Path>) -> PathBuf {
        let dir = config_file.and_then(Path::parent).unwrap_or(Path::new(""));
        dir.join("PAUSED")
    }

    /// Loads the configuration file (an empty configuration without one), layers the
    /// environment over it and checks what the environment must provide (I6).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the file or the variable, the line and the reason.
    pub fn load_layered(
        file: Option<&Path>,
        env: impl Fn(&str) -> Option<String> + Copy,
    ) -> Result<Config, ConfigError> {
        let Some(path) = file else {
            return Config::default().with_env(env);
        };
        let config = Config::load(path)?.with_env(env)?;
        config.check_environment(&path.display().to_string(), env)?;
        Ok(config)
    }

    /// Layers the environment over the file (I6: defaults → file → `DAICHO_*` → flags):
    /// `DAICHO_MAX_FAILURES`, `DAICHO_LEASE` and `DAICHO_DAILY_CAP` replace the `[policy]` values.
    /// Pure: `env` looks a variable up.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable when its value is not valid.
    pub fn with_env(mut self, env: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let bad = |var: &str, reason: String| ConfigError {
            file: format!("environment {var}"),
            line: None,
            reason,
        };
        if let Some(v) = env("DAICHO_MAX_FAILURES").filter(|v| !v.trim().is_empty()) {
            let n: u32 = v.trim().parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                bad("DAICHO_MAX_FAILURES", format!("'{v}' is not a whole number of at least 1"))
            })?;
            self.policy.failures.max_failures = n;
        }
        if let Some(v) = env("DAICHO_LEASE").filter(|v| !v.trim().is_empty()) {
            self.policy.lease =
                v.trim().parse::<SignedDuration>().ok().filter(|d| d.is_positive()).ok_or_else(|| {
                    bad("DAICHO_LEASE", format!("'{v}' is not a positive duration (e.g. \"30m\")"))
                })?;
        }
        if let Some(v) = env("DAICHO_DAILY_CAP").filter(|v| !v.trim().is_empty()) {
            let n: u32 = v
                .trim()
                .parse()
                .map_err(|_| bad("DAICHO_DAILY_CAP", format!("'{v}' is not a whole number")))?;
            self.policy.daily_cap = Some(n);
        }
        Ok(self)
    }

    /// The source with this name.
    pub fn source(&self, name: &str) -> Option<&SourceConfig> {
        self.sources.iter().find(|s| s.name == name)
    }

    /// A path of the configuration, resolved against its directory.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        if path.is_absolute() { path.to_owned() } else { self.dir.join(path) }
    }

    /// Checks what the environment must provide (API key variables), before anything runs.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the action whose key variable is not set.
    pub fn check_environment(
        &self,
        file: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        for action in &self.actions {
            if let ActionKind::Llm(llm) = &action.kind
                && let Some(var) = &llm.api_key_env
                && env(var).is_none_or(|v| v.trim().is_empty())
            {
                return Err(ConfigError {
                    file: file.to_owned(),
                    line: None,
                    reason: format!("action '{}': the API key variable {var} is not set", action.spec.name),
                });
            }
        }
        Ok(())
    }

    /// The policies' view of the actions.
    pub fn specs(&self) -> Vec<ActionSpec> {
        self.actions.iter().map(|a| a.spec.clone()).collect()
    }

    /// The action with this name.
    pub fn action(&self, name: &str) -> Option<&ActionConfig> {
        self.actions.iter().find(|a| a.spec.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// I6: the example is valid as written (all commented out) and once uncommented.
    #[test]
    fn i6_the_example_configuration_parses_commented_and_uncommented() {
        let empty = Config::parse(Config::EXAMPLE, "daicho.toml").expect("as written");
        assert!(empty.actions.is_empty() && empty.sources.is_empty() && empty.schedules.is_empty());
        let uncommented: String = Config::EXAMPLE
            .lines()
            .map(|l| l.strip_prefix("# ").unwrap_or(l))
            .map(|l| format!("{l}\n"))
            .collect();
        let config = Config::parse(&uncommented, "daicho.toml").expect("uncommented");
        assert_eq!((config.sources.len(), config.actions.len(), config.schedules.len()), (4, 3, 4));
        let questions = config.source("questions").and_then(|s| s.mapping.as_ref()).expect("a mapping");
        assert_eq!(questions.filter, [("status".to_owned(), vec!["未回答".to_owned(), "保留".to_owned()])]);
        assert_eq!(config.view.html.as_deref(), Some(std::path::Path::new("view.html")));
        assert_eq!(config.policy.failures.max_failures, 3);
        assert_eq!(
            config.source("inbox").and_then(|s| s.aggregate.as_deref()),
            Some("Get the unanswered questions answered")
        );
    }

    /// X5: a spreadsheet source takes `sheet` and `header_row`; other kinds refuse them, a
    /// header row counts from 1, and a mapping on a Markdown source is refused, each at its line.
    #[test]
    fn x5_spreadsheet_keys_and_mappings_are_checked_where_they_are_written() {
        let ok = "[[source]]\nname = \"q\"\nkind = \"xlsx\"\npath = \"q.xlsx\"\nsheet = \"確認事項\"\nheader_row = 2\ntitle = \"{question}\"\n";
        let config = Config::parse(ok, "daicho.toml").unwrap();
        assert_eq!(
            config.sources[0].kind,
            SourceKind::Sheet {
                path: "q.xlsx".into(), sheet: Some("確認事項".into()), header_row: Some(2)
            }
        );
        assert!(config.sources[0].mapping.is_some());
        for (text, expect) in [
            (
                "kind = \"csv\"\npath = \"q.csv\"\nsheet = \"x\"\n",
                "sheet and header_row are for spreadsheet sources",
            ),
            ("kind = \"ods\"\npath = \"q.ods\"\nheader_row = 0\n", "header_row counts from 1"),
            (
                "kind = \"markdown\"\npath = \"t.md\"\ntitle = \"{a}\"\n",
                "apply to csv, json, jsonl and spreadsheet sources",
            ),
        ] {
            let text = format!("\n[[source]]\nname = \"q\"\n{text}");
            let err = Config::parse(&text, "daicho.toml").unwrap_err().to_string();
            assert!(err.starts_with("daicho.toml:2: ") && err.contains(expect), "{err}");
        }
    }

    #[test]
    fn a_full_configuration_parses() {
        let text = r#"
[policy]
max_failures = 5
lease = "2s"
daily_cap = 10

[[action]]
name = "research"
kind = "command"
command = ["./research.sh", "--fast"]
types = ["調査/記事"]
auto = true
timeout = "10m"
on_success = "done"

[[action]]
name = "draft"
kind = "llm"
base_url = "http://127.0.0.1:9/v1"
model = "tiny"
api_key_env = "DRAFT_KEY"
"#;
        let config = Config::parse(text, "daicho.toml").unwrap();
        assert_eq!(config.policy.failures.max_failures, 5);
        assert_eq!(config.policy.lease, SignedDuration::from_secs(2));
        assert_eq!(config.actions.len(), 2);
        let research = config.action("research").unwrap();
        assert_eq!(research.spec.on_success, OnSuccess::Done);
        assert_eq!(research.timeout, SignedDuration::from_mins(10));
        assert!(
            matches!(&config.action("draft").unwrap().kind, ActionKind::Llm(l) if l.prompt == DEFAULT_PROMPT)
        );
        let missing = config.check_environment("daicho.toml", |_| None).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "daicho.toml: action 'draft': the API key variable DRAFT_KEY is not set"
        );
        assert!(config.check_environment("daicho.toml", |_| Some("k".into())).is_ok());
    }

    /// I6, S3: no failure before a person takes over is refused in the file as in the
    /// environment, not quietly raised to one.
    #[test]
    fn i6_s3_max_failures_of_zero_is_refused_in_the_file() {
        let err = Config::parse("[policy]\n\nmax_failures = 0\n", "daicho.toml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "daicho.toml:3: policy.max_failures: 0 is not a whole number of at least 1"
        );
        let one = Config::parse("[policy]\nmax_failures = 1\n", "daicho.toml").unwrap();
        assert_eq!(one.policy.failures.max_failures, 1);
    }

    #[test]
    fn i6_the_environment_overrides_the_file_and_bad_values_name_the_variable() {
        let file = Config::parse("[policy]\nmax_failures = 5\nlease = \"10m\"\n", "daicho.toml").unwrap();
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned())
        };
        let same = file.clone().with_env(vars(&[])).unwrap();
        assert_eq!(
            (same.policy.failures.max_failures, same.policy.lease),
            (5, SignedDuration::from_mins(10))
        );
        let layered = file
            .clone()
            .with_env(vars(&[
                ("DAICHO_MAX_FAILURES", "2"),
                ("DAICHO_LEASE", "90s"),
                ("DAICHO_DAILY_CAP", "7"),
            ]))
            .unwrap();
        assert_eq!(layered.policy.failures.max_failures, 2);
        assert_eq!(layered.policy.lease, SignedDuration::from_secs(90));
        assert_eq!(layered.policy.daily_cap, Some(7));
        let defaults = Config::default().with_env(vars(&[("DAICHO_LEASE", "1h")])).unwrap();
        assert_eq!(
            (defaults.policy.lease, defaults.policy.failures.max_failures),
            (SignedDuration::from_hours(1), 3)
        );
        let err = file.clone().with_env(vars(&[("DAICHO_LEASE", "soon")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment DAICHO_LEASE: 'soon' is not a positive duration (e.g. \"30m\")"
        );
        assert!(file.with_env(vars(&[("DAICHO_MAX_FAILURES", "0")])).is_err());
    }

    #[test]
    fn x1_sources_parse_with_their_kinds_and_aggregate_titles() {
        let text = r#"
[[source]]
name = "plan"
kind = "markdown"
path = "tasks.md"
done_path = "tasks-done.md"

[[source]]
name = "inbox"
kind = "jsonl"
path = "/var/inbox.jsonl"
project = "support"
aggregate = true
dashboard = true

[[source]]
name = "scan"
kind = "command"
command = ["./scan.sh", "--json"]
timeout = "20s"
aggregate = "Fix the findings"
"#;
        let mut config = Config::parse(text, "daicho.toml").unwrap();
        config.dir = PathBuf::from("/srv/ledger");
        let plan = config.source("plan").unwrap();
        assert_eq!(
            plan.kind,
            SourceKind::File {
                format: Format::Markdown,
                path: "tasks.md".into(),
                done: Some("tasks-done.md".into())
            }
        );
        assert_eq!((plan.aggregate.as_deref(), plan.line), (None, Some(2)));
        let inbox = config.source("inbox").unwrap();
        assert_eq!(inbox.aggregate.as_deref(), Some("Work through inbox"));
        assert!(inbox.dashboard);
        assert_eq!(config.resolve(Path::new("tasks.md")), PathBuf::from("/srv/ledger/tasks.md"));
        assert_eq!(config.resolve(Path::new("/var/inbox.jsonl")), PathBuf::from("/var/inbox.jsonl"));
        let scan = config.source("scan").unwrap();
        assert_eq!(
            scan.kind,
            SourceKind::Command {
                argv: vec!["./scan.sh".into(), "--json".into()],
                timeout: SignedDuration::from_secs(20)
            }
        );
        assert_eq!(scan.aggregate.as_deref(), Some("Fix the findings"));
    }

    #[test]
    fn bad_configuration_is_refused_with_file_line_and_reason() {
        let cases = [
            ("[[action]]\nname = \"x\"\nkind = \"shell\"\n", Some(1), "unknown action kind 'shell'"),
            ("[[action]]\nname = \"x\"\nkind = \"command\"\n", Some(1), "needs command"),
            ("\n\n[[action]]\nname = \"x\"\nkind = \"llm\"\nmodel = \"m\"\n", Some(3), "needs base_url"),
            ("[policy]\nlease = \"soon\"\n", Some(2), "not a positive duration"),
            (
                "[[action]]\nname = \"x\"\nkind = \"command\"\ncommand = [\"a\"]\n\ntimeout = \"thirty\"\n",
                Some(6),
                "timeout 'thirty' is not a positive duration",
            ),
            ("[policy]\ncolour = 1\n", Some(2), "unknown field `colour`"),
            (
                "[[action]]\nname = \"x\"\nkind = \"command\"\ncommand = [\"a\"]\nauto = \"yes\"\n",
                Some(5),
                "invalid type",
            ),
            (
                "[[action]]\nname = \"x\"\nkind = \"command\"\ncommand = [\"a\"]\n[[action]]\nname = \"x\"\nkind = \"command\"\ncommand = [\"b\"]\n",
                Some(5),
                "defined twice",
            ),
            ("[[source]]\nname = \"a\"\nkind = \"json\"\n", Some(1), "needs path"),
            (
                "[[source]]\nname = \"a\"\nkind = \"csv\"\npath = \"a.csv\"\ndone_path = \"d.csv\"\n",
                Some(1),
                "done_path is for markdown",
            ),
            ("\n[[source]]\nname = \"a\"\nkind = \"command\"\n", Some(2), "needs command"),
            (
                "[[source]]\nname = \"a\"\nkind = \"jsonl\"\npath = \"a\"\naggregate = \" \"\n",
                Some(1),
                "aggregate needs a title",
            ),
            (
                "[[source]]\nname = \"a\"\nkind = \"md\"\npath = \"a\"\n[[source]]\nname = \"a\"\nkind = \"md\"\npath = \"b\"\n",
                Some(5),
                "source 'a' is defined twice",
            ),
            (
                "[[source]]\nname = \"a\"\nkind = \"md\"\npath = \"a\"\ncolour = 1\n",
                Some(5),
                "unknown field `colour`",
            ),
            ("[[schedule]]\nrole = \"views\"\ncron = \"@daily\"\n", Some(1), "unknown role 'views'"),
            (
                "[[schedule]]\nrole = \"view\"\ncron = \"@daily\"\n",
                None,
                "[view] names no html or markdown file",
            ),
            ("\n[[schedule]]\nrole = \"auto\"\ncron = \"61 * * * *\"\n", Some(2), "out of range"),
            (
                "[[schedule]]\nrole = \"sync\"\ncron = \"@daily\"\n[[schedule]]\nrole = \"sync\"\ncron = \"@hourly\"\n",
                Some(4),
                "scheduled twice",
            ),
        ];
        for (text, line, reason) in cases {
            let err = Config::parse(text, "daicho.toml").unwrap_err();
            assert!(err.reason.contains(reason), "{text:?}: {err}");
            assert_eq!(err.line, line, "{text:?}: {err}");
            assert!(err.to_string().starts_with("daicho.toml"), "{err}");
        }
    }

    /// An unknown schedule role is a configuration error naming the entry and the known roles,
    /// never a run-requested sweep in disguise.
    #[test]
    fn unknown_schedule_role_names_the_entry_and_the_known_roles() {
        let text = "[[schedule]]\nrole = \"auto\"\ncron = \"@daily\"\n\n[[schedule]]\nrole = \"run_requested\"\ncron = \"@hourly\"\n";
        let err = Config::parse(text, "daicho.toml").unwrap_err();
        assert_eq!(err.line, Some(5), "{err}");
        assert_eq!(
            err.reason,
            "[[schedule]] #2: unknown role 'run_requested' (known: run-requested, auto, sync, view)"
        );
        let ok = Config::parse("[[schedule]]\nrole = \"run-requested\"\ncron = \"@daily\"\n", "daicho.toml")
            .unwrap();
        assert_eq!(ok.schedules[0].role, ScheduleRole::RunRequested);
        for role in ScheduleRole::ALL {
            assert_eq!(ScheduleRole::parse(role.as_str()), Some(role));
        }
    }
}

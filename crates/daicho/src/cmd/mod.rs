//! One module per subcommand, each a clap `Args` struct and a `run` function.

pub mod add;
pub mod approve;
pub mod completions;
pub mod doctor;
pub mod export;
pub mod graph;
pub mod import;
pub mod init;
pub mod list;
pub mod log;
pub mod mcp;
pub mod pause;
pub mod plan;
pub mod purge;
pub mod push;
pub mod ready;
pub mod run;
pub mod serve;
pub mod set;
pub mod show;
pub mod stats;
pub mod sweep;
pub mod sync;
pub mod view;
pub mod worker;

use std::path::PathBuf;
use std::process::ExitCode;

use daicho_engine::{Config, Engine};
use daicho_ledger::{Access, AnyStore, Ledger};

use crate::cli::{Cli, Command};

/// What every subcommand knows besides its own arguments.
#[derive(Debug)]
pub struct Context {
    /// The ledger (`--db`): a SQLite file or a PostgreSQL URL.
    pub db: Ledger,
    /// `--json`: machine-readable output.
    pub json: bool,
    /// The language of messages and labels (`DAICHO_LANG`, or the locale).
    pub lang: daicho_core::lang::Lang,
    /// The person running the command, for the journal (`human:<name>`).
    pub user: String,
    /// `--config`, if given.
    pub config: Option<PathBuf>,
    /// `--grace`: how long runs under way may finish after an operator's stop.
    pub grace: std::time::Duration,
    /// A command synchronous at heart ([`synchronous`]): SQLite runs on its own thread, with no
    /// hand-off to a blocking thread per call (I5).
    pub inline: bool,
    /// Whether stdout is a terminal (tables wrap to fit it).
    pub terminal: bool,
}

impl Context {
    /// The person running the command, for the journal. Refused inside a run (S13): a daicho
    /// that finds the task variable every executor is given ([`daicho_engine::runner::TASK_VAR`])
    /// was started by an agent, which may not tick ▶ run, correct, approve, close, edit or add
    /// rows as a person, run a task as a person does (`run`, `run-heavy`), nor pause or resume;
    /// it reports through its output or `daicho push`.
    pub fn actor(&self) -> anyhow::Result<daicho_core::Actor> {
        if let Some(task) = in_run() {
            anyhow::bail!(
                "this daicho runs inside the run of {task} ({} is set), and an agent acts for no person \
                 (S13): only a person ticks ▶ run, writes a correction, approves, closes or edits a row; a run \
                 reports its result and the tasks it found through its output, or with `daicho push`",
                daicho_engine::runner::TASK_VAR
            );
        }
        Ok(daicho_core::Actor::Human(self.user.clone()))
    }

    /// Opens the ledger.
    pub async fn store(&self) -> anyhow::Result<AnyStore> {
        Ok(self.db.open(self.access(false)).await?)
    }

    /// Opens the ledger for a command that only reads it: nothing is written, so a ledger in a
    /// read-only place can still be listed, shown and exported.
    pub async fn reader(&self) -> anyhow::Result<AnyStore> {
        Ok(self.db.open(self.access(true)).await?)
    }

    /// Prints a result: `json` with `--json`, else `text`.
    pub fn emit(&self, json: &impl serde::Serialize, text: impl std::fmt::Display) -> anyhow::Result<()> {
        self.emit_with(|| json, || text)
    }

    /// [`Context::emit`] for output that is large to build: only the form asked for is built
    /// (a 100,000-row ready table is a few hundred MB as a table).
    pub fn emit_with<J: serde::Serialize, T: std::fmt::Display>(
        &self,
        json: impl FnOnce() -> J,
        text: impl FnOnce() -> T,
    ) -> anyhow::Result<()> {
        if self.json { crate::output::print_json(&json()) } else { crate::output::print(&text().to_string()) }
    }

    /// Prints a report that reads both ways (JSON with `--json`, else its text in the
    /// person's language).
    pub fn report<R: serde::Serialize + daicho_engine::Text>(&self, report: &R) -> anyhow::Result<()> {
        self.emit(report, report.text(self.lang))
    }

    /// Japanese labels.
    pub fn ja(&self) -> bool {
        self.lang.is_ja()
    }

    /// The `PAUSED` file beside the configuration (or in the current directory without one).
    pub fn pause_file(&self) -> PathBuf {
        Config::pause_file(Config::in_force(self.config.as_deref()).as_deref())
    }

    /// Loads and checks the configuration (an empty one without a file).
    pub fn load_config(&self) -> anyhow::Result<Config> {
        let file = Config::in_force(self.config.as_deref());
        Ok(Config::load_layered(file.as_deref(), |var| std::env::var(var).ok())?)
    }

    /// The engine over the ledger, with the configuration loaded and checked first.
    pub async fn engine(&self) -> anyhow::Result<Engine<AnyStore>> {
        Ok(self.db.engine(self.load_config()?, self.pause_file(), self.access(false)).await?)
    }

    /// The engine over the ledger opened for reading only, for a command that writes nothing
    /// (`ready`, `doctor`, the approval queue): a ledger in a read-only place still answers.
    pub async fn reading_engine(&self) -> anyhow::Result<Engine<AnyStore>> {
        Ok(self.db.engine(self.load_config()?, self.pause_file(), self.access(true)).await?)
    }

    /// The engine of a command that runs executors (`run`, `sweep`), under the operator's stop
    /// (S14; [`Ledger::running_engine`]).
    pub async fn running_engine(&self, config: Config) -> anyhow::Result<Engine<AnyStore>> {
        Ok(self.db.running_engine(config, self.pause_file(), self.grace, self.inline).await?)
    }

    /// [`Context::running_engine`] for the long-running commands (`worker`, `serve`): a ledger
    /// out of reach for now is waited for ([`Ledger::running_engine_patiently`]).
    pub async fn running_engine_patiently(&self, config: Config) -> anyhow::Result<Engine<AnyStore>> {
        Ok(self.db.running_engine_patiently(config, self.pause_file(), self.grace, self.inline).await?)
    }

    /// How this command opens the ledger: `read_only` for a command that writes nothing.
    fn access(&self, read_only: bool) -> Access {
        Access { read_only, inline: self.inline }
    }
}

/// A file format named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// Markdown task lines (`- [ ] [T-0001] title | PJ:… | 依存:…`).
    Md,
    /// A tasks.json document or a JSON array of tasks.
    Json,
    /// JSON Lines: one task object per line.
    Jsonl,
    /// CSV with the ledger's columns (English or Japanese headers).
    Csv,
}

impl FormatArg {
    /// The core format.
    pub fn format(self) -> daicho_core::format::Format {
        use daicho_core::format::Format;
        match self {
            FormatArg::Md => Format::Markdown,
            FormatArg::Json => Format::Json,
            FormatArg::Jsonl => Format::JsonLines,
            FormatArg::Csv => Format::Csv,
        }
    }
}

/// A bad argument value found after clap parsed the line (a status name, a date that may also be
/// "" to clear): a usage error, exit 2 like clap's own.
#[derive(Debug)]
pub struct Usage(anyhow::Error);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for Usage {}

/// Marks `err` as a usage error ([`Usage`]).
pub fn usage(err: impl Into<anyhow::Error>) -> anyhow::Error {
    anyhow::Error::new(Usage(err.into()))
}

/// Whether the error is a usage error ([`Usage`]).
pub fn is_usage(err: &anyhow::Error) -> bool {
    err.chain().any(|c| c.is::<Usage>())
}

/// Whether trying again later may help: the error is a temporary store fault.
pub fn is_retryable(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<daicho_store::StoreError>().is_some_and(|e| e.is_retryable())
            || c.downcast_ref::<daicho_engine::Error>().is_some_and(|e| e.is_retryable())
            || c.downcast_ref::<daicho_ledger::LedgerError>().is_some_and(|e| e.is_retryable())
    })
}

/// Parses a duration argument such as `30s`, `2m` or `500ms` (clap's value parser for
/// `--grace`, `--poll` and `--budget`).
pub fn duration(text: &str) -> Result<std::time::Duration, String> {
    let parsed: jiff::SignedDuration =
        text.parse().map_err(|_| format!("'{text}' is not a duration such as 30s, 2m or 500ms"))?;
    std::time::Duration::try_from(parsed).map_err(|_| format!("'{text}' must not be negative"))
}

/// Whether `command` is synchronous at heart: it reads or writes the ledger and prints, and runs
/// no executor, source command, timer or server meanwhile (those keep SQLite off their thread);
/// or it is a worker with one slot, which claims, runs and records in turn: its loop awaits
/// nothing else while it reads or writes (the run's keepers are tasks of their own, on the
/// runtime's other thread), and a hand-off per call was about a fifth of its CPU (I5).
fn synchronous(command: &Command) -> bool {
    if let Command::Worker(args) = command {
        return args.concurrency == 1;
    }
    matches!(
        command,
        Command::Add(_)
            | Command::Push(_)
            | Command::Ready(_)
            | Command::List(_)
            | Command::Show(_)
            | Command::Set(_)
            | Command::Log(_)
            | Command::Import(_)
            | Command::Doctor(_)
            | Command::PurgeSource(_)
            | Command::Restore(_)
            | Command::Export(_)
            | Command::Graph(_)
            | Command::Approve(_)
            | Command::Pause(_)
            | Command::Resume(_)
            | Command::Stats(_)
    )
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let ctx = Context {
        db: Ledger::new(cli.db.as_deref()),
        json: cli.json,
        lang: crate::output::locale(),
        user: std::env::var("DAICHO_USER")
            .or_else(|_| std::env::var("USER"))
            .unwrap_or_else(|_| "local".to_owned()),
        config: cli.config.clone(),
        grace: cli.grace,
        inline: synchronous(&cli.command),
        terminal: std::io::IsTerminal::is_terminal(&std::io::stdout()),
    };
    // A configuration named (`--config`, DAICHO_CONFIG) must exist and be valid for every
    // command, also those that do not use it, so a typo is never silently ignored; `init`
    // writes it.
    if let Some(file) = &ctx.config
        && !matches!(cli.command, Command::Init(_) | Command::Completions(_) | Command::Man(_))
    {
        Config::load(file)?;
    }
    match cli.command {
        Command::Init(args) => init::run(args, &ctx).await,
        Command::Add(args) => add::run(args, &ctx).await,
        Command::Push(args) => push::run(args, &ctx).await,
        Command::Ready(args) => ready::run(args, &ctx).await,
        Command::List(args) => list::run(args, &ctx).await,
        Command::Show(args) => show::run(args, &ctx).await,
        Command::Set(args) => set::run(args, &ctx).await,
        Command::Log(args) => log::run(args, &ctx).await,
        Command::Import(args) => import::run(args, &ctx).await,
        Command::Sync(args) => sync::run(args, &ctx).await,
        Command::Plan(args) => plan::run(args, &ctx).await,
        Command::Serve(args) => serve::run(args, &ctx).await,
        Command::Mcp(args) => mcp::run(args, &ctx).await,
        Command::View(args) => view::run(args, &ctx).await,
        Command::Doctor(args) => doctor::run(args, &ctx).await,
        Command::PurgeSource(args) => purge::purge(args, &ctx).await,
        Command::Restore(args) => purge::restore(args, &ctx).await,
        Command::Export(args) => export::run(args, &ctx).await,
        Command::Graph(args) => graph::run(args, &ctx).await,
        Command::Run(args) => run::run(args, &ctx, false).await,
        Command::RunHeavy(args) => run::run(args, &ctx, true).await,
        Command::Sweep(args) => sweep::run(args, &ctx).await,
        Command::Approve(args) => approve::run(args, &ctx).await,
        Command::Pause(args) => pause::pause(args, &ctx).await,
        Command::Resume(args) => pause::resume(args, &ctx).await,
        Command::Stats(args) => stats::run(args, &ctx).await,
        Command::Worker(args) => worker::run(args, &ctx).await,
        Command::Completions(args) => completions::completions(&args, &ctx),
        Command::Man(args) => completions::man(&args, &ctx),
    }
}

/// The task whose run this daicho runs inside (its executor set `DAICHO_TASK_ID`), if any: an
/// agent's, acting for no person (S13).
pub fn in_run() -> Option<String> {
    std::env::var_os(daicho_engine::runner::TASK_VAR)
        .filter(|task| !task.is_empty())
        .map(|task| task.to_string_lossy().into_owned())
}

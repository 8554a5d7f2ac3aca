//! The command-line grammar: plain data parsed by clap, resolved by the subcommands.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::cmd;

/// daicho (台帳): one durable ledger of tasks per project, with dependencies, a journal and
/// safe automation.
///
/// Tasks come in from Markdown checklists, JSON, CSV and producers that push them; daicho
/// deduplicates them (never deleting a row, never overwriting what a person wrote), keeps the
/// dependency graph, and lists the work that is ready.
#[derive(Debug, Parser)]
#[command(name = "daicho", version, propagate_version = true, max_term_width = 100)]
#[command(
    after_help = "Exit codes: 0 ok, 1 error, 2 usage, 75 temporary (the ledger's database out of reach or \
                        locked: try again)."
)]
pub struct Cli {
    /// The ledger: a SQLite file, or a PostgreSQL URL (postgres://…). Default: .daicho/ledger.db
    /// under the current directory.
    #[arg(long, global = true, env = "DAICHO_DB", value_name = "PATH")]
    pub db: Option<PathBuf>,

    /// The configuration (actions, policy). Default: ./daicho.toml when it exists. A PAUSED file
    /// beside it turns the kill switch on.
    #[arg(long, global = true, env = "DAICHO_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Print machine-readable JSON on stdout instead of tables.
    #[arg(long, global = true)]
    pub json: bool,

    /// On the first SIGINT or SIGTERM, how long runs under way may still finish before they are
    /// killed and their claims returned (a second signal stops them at once).
    #[arg(long, global = true, env = "DAICHO_GRACE", value_name = "DURATION", default_value = "30s", value_parser = cmd::duration)]
    pub grace: std::time::Duration,

    /// Log more on stderr (-v info, -vv debug). DAICHO_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the ledger (.daicho/ledger.db, or --db).
    Init(cmd::init::Args),
    /// Add one task by hand.
    Add(cmd::add::Args),
    /// Register tasks from a producer (JSON on stdin or a file); prints {"added","updated","skipped"}.
    Push(cmd::push::Args),
    /// List the tasks that are ready to run, in run order.
    Ready(cmd::ready::Args),
    /// List tasks, filtered by project, status, source or tag.
    List(cmd::list::Args),
    /// Show one task with every field.
    Show(cmd::show::Args),
    /// Change a task's status, correction, run checkbox or other fields; prints what is stored.
    Set(cmd::set::Args),
    /// Show a task's journal: every change, by whom, before and after.
    Log(cmd::log::Args),
    /// Import tasks from Markdown, JSON, JSON Lines or CSV files (one transaction).
    Import(cmd::import::Args),
    /// Pull the configured sources into the ledger, each in its own transaction.
    Sync(cmd::sync::Args),
    /// Save a goal's plan (tasks with deps) in one transaction.
    Plan(cmd::plan::Args),
    /// Serve the web UI and HTTP API, and run the scheduled roles of daicho.toml at their cron times.
    Serve(cmd::serve::Args),
    /// Serve the MCP tools to a coding agent on stdin/stdout (or over HTTP with --http).
    Mcp(cmd::mcp::Args),
    /// The open work of every project in one view (terminal, Markdown, HTML, JSON).
    View(cmd::view::Args),
    /// Find stuck states and print the command that fixes each.
    Doctor(cmd::doctor::Args),
    /// Remove a source's untouched rows (a dry run unless --apply).
    PurgeSource(cmd::purge::PurgeArgs),
    /// Bring back the rows purge-source removed from a source.
    Restore(cmd::purge::RestoreArgs),
    /// Export the ledger as Markdown, JSON or CSV.
    Export(cmd::export::Args),
    /// Draw a project's dependency graph as SVG, Graphviz DOT or Mermaid.
    Graph(cmd::graph::Args),
    /// Run one task now, by the same rules as a sweep (external tasks need approval).
    Run(cmd::run::Args),
    /// Run one heavy task now (heavy actions are never run by a sweep).
    RunHeavy(cmd::run::Args),
    /// Run one sweep role once, for cron or systemd timers.
    Sweep(cmd::sweep::Args),
    /// Approve an external task: tick its run box so the next sweep may run it.
    Approve(cmd::approve::Args),
    /// Turn the kill switch on: every run and sweep does nothing until `daicho resume`.
    Pause(cmd::pause::PauseArgs),
    /// Turn the kill switch off.
    Resume(cmd::pause::ResumeArgs),
    /// Runs per action: outcomes and tokens used.
    Stats(cmd::stats::Args),
    /// Claim and run ready tasks until stopped: add one per machine on a shared PostgreSQL ledger.
    Worker(cmd::worker::Args),
    /// Print the shell completion script (bash, zsh, fish, powershell, elvish).
    Completions(cmd::completions::CompletionsArgs),
    /// Print the man page, or write one page per command into a directory.
    Man(cmd::completions::ManArgs),
}

//! One module per subcommand, each a clap `Args` struct and a `run` function.

pub mod add;
pub mod export;
pub mod import;
pub mod init;
pub mod list;
pub mod log;
pub mod push;
pub mod ready;
pub mod set;
pub mod show;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::{Cli, Command};

/// What every subcommand knows besides its own arguments.
#[derive(Debug)]
pub struct Context {
    /// The ledger file.
    pub db: PathBuf,
    /// `--json`: machine-readable output.
    pub json: bool,
    /// Japanese labels (locale `ja`).
    pub ja: bool,
    /// The person running the command, for the journal (`human:<name>`).
    pub user: String,
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let ctx = Context {
        db: crate::ledger::path(cli.db.as_deref()),
        json: cli.json,
        ja: crate::output::locale_is_ja(),
        user: std::env::var("DAICHO_USER")
            .or_else(|_| std::env::var("USER"))
            .unwrap_or_else(|_| "local".to_owned()),
    };
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
        Command::Export(args) => export::run(args, &ctx).await,
    }
}

//! `daicho completions` and `daicho man` (I7): shell completions and man pages generated from
//! the command-line grammar itself, so they never drift from `--help`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::CommandFactory as _;

use super::Context;

/// Print the completion script for a shell. Install (bash): `daicho completions bash >
/// ~/.local/share/bash-completion/completions/daicho`; zsh: into a directory of `$fpath` as
/// `_daicho`; fish: `~/.config/fish/completions/daicho.fish`; PowerShell: add
/// `daicho completions powershell | Out-String | Invoke-Expression` to `$PROFILE`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Print the man page (roff) of daicho, or with --out write one page per command into a
/// directory. Read it with `daicho man | man -l -`; install with `daicho man --out
/// ~/.local/share/man/man1` (or /usr/local/share/man/man1).
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write daicho.1 and a page per command (daicho-add.1, …) into this directory (created
    /// when missing) instead of printing daicho.1.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Runs `daicho completions`.
pub fn completions(args: &CompletionsArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut crate::cli::Cli::command(), "daicho", &mut script);
    let script = String::from_utf8(script)?;
    ctx.emit(&serde_json::json!({ "shell": args.shell.to_string(), "script": script }), &script)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `daicho man`.
pub fn man(args: &ManArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let Some(dir) = &args.out else {
        let mut page = Vec::new();
        clap_mangen::Man::new(crate::cli::Cli::command()).render(&mut page)?;
        let page = String::from_utf8(page)?;
        ctx.emit(&serde_json::json!({ "page": page }), &page)?;
        return Ok(ExitCode::SUCCESS);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    clap_mangen::generate_to(crate::cli::Cli::command(), dir)
        .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
    let mut written: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("daicho") && name.ends_with(".1"))
        .collect();
    written.sort();
    let text = format!("{} man pages written into {}", written.len(), dir.display());
    ctx.emit(&serde_json::json!({ "dir": dir, "written": written }), text)?;
    Ok(ExitCode::SUCCESS)
}

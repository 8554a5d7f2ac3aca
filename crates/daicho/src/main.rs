//! `daicho` (台帳, "ledger"): a durable, dependency-aware task ledger for AI-agent work with
//! people in the loop. This binary is the command line: it parses arguments (clap), opens the
//! ledger and runs one subcommand. Results go to stdout (a table, or JSON with `--json`); logs
//! and errors go to stderr. Exit codes: 0 ok, 1 error, 2 usage, 75 a temporary failure (the
//! database out of reach or busy: try again).

mod cli;
mod cmd;
mod output;
use daicho_server::wire;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // `daicho __supervise -- PROGRAM ARGS…` is the run supervisor (S14), not a command; every
    // other invocation makes its command runs go through it.
    if let Some(code) = daicho_engine::supervise::enter() {
        return ExitCode::from(code);
    }
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // --help and --version print to stdout and exit 0; usage errors exit 2.
            let _ = err.print();
            if err.exit_code() == 0 {
                return ExitCode::SUCCESS;
            }
            if std::env::args().any(|a| a == "--json") {
                // The message as printed on stderr, without its styling and its hint lines:
                // which argument, which value, why.
                let rendered = err.render().to_string();
                let message = rendered.lines().next().unwrap_or_default();
                let message = message.strip_prefix("error: ").unwrap_or(message);
                let _ = output::print_json(&serde_json::json!({ "error": format!("usage: {message}") }));
            }
            return ExitCode::from(2);
        }
    };
    init_logging(cli.verbose);
    let json = cli.json;
    // The long-running commands get two worker threads, so that the web UI, the scheduler and a
    // large merge do not share one; one-shot commands stay on a cheap single thread.
    let long_running = matches!(cli.command, cli::Command::Serve(_) | cli::Command::Worker(_));
    let mut builder = if long_running {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(2);
        builder
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("daicho: error: cannot start the async runtime: {err}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(cmd::run(cli)) {
        Ok(code) => code,
        Err(err) if output::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            output::report_error(&err, json);
            exit_code_of(&err)
        }
    }
}

/// 75 (EX_TEMPFAIL) when trying again later may succeed — the database out of reach or busy
/// (S14) —, 2 for a bad argument value, else 1.
fn exit_code_of(err: &anyhow::Error) -> ExitCode {
    ExitCode::from(if cmd::is_retryable(err) {
        75
    } else if cmd::is_usage(err) {
        2
    } else {
        1
    })
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("DAICHO_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a person at a terminal: a log file or a pipe gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

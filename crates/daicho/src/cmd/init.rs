//! `daicho init`: create the ledger.

use std::process::ExitCode;

use super::Context;

/// Create the ledger file (and its directory) if it does not exist yet, and a commented
/// example configuration (./daicho.toml, or the --config path) if there is none.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Do not write the example configuration.
    #[arg(long)]
    pub no_config: bool,
}

/// Runs `daicho init`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;

    let (_store, created) = ctx.db.create().await?;
    let config = ctx.config.clone().unwrap_or_else(|| "daicho.toml".into());
    let config_created = !args.no_config && !config.exists();
    if config_created {
        std::fs::write(&config, daicho_engine::Config::EXAMPLE)
            .with_context(|| format!("cannot write {}", config.display()))?;
    }
    let db = ctx.db.display();
    let mut lines = Vec::new();
    if config_created {
        lines.push(format!("wrote a commented example configuration to {}", config.display()));
    }
    lines.push(match created {
        true => format!("created the ledger {db}"),
        false => format!("the ledger {db} already exists; nothing changed"),
    });
    let json = serde_json::json!({
        "db": db, "created": created, "config": config.display().to_string(), "config_created": config_created,
    });
    ctx.emit(&json, lines.join("\n"))?;
    Ok(ExitCode::SUCCESS)
}

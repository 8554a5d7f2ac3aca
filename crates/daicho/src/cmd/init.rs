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

/// The commented example configuration `daicho init` writes.
pub const EXAMPLE_CONFIG: &str = include_str!("../example.toml");

/// Runs `daicho init`.
pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;

    let (_store, created) = crate::ledger::create(&ctx.db).await?;
    let config = ctx.config.clone().unwrap_or_else(|| "daicho.toml".into());
    let config_created = !args.no_config && !config.exists();
    if config_created {
        std::fs::write(&config, EXAMPLE_CONFIG)
            .with_context(|| format!("cannot write {}", config.display()))?;
    }
    let db = crate::ledger::display(&ctx.db);
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

#[cfg(test)]
mod tests {
    use super::EXAMPLE_CONFIG;

    /// I6: the example is valid as written (all commented out) and once uncommented.
    #[test]
    fn i6_the_example_configuration_parses_commented_and_uncommented() {
        let empty = daicho_engine::Config::parse(EXAMPLE_CONFIG, "daicho.toml").expect("as written");
        assert!(empty.actions.is_empty() && empty.sources.is_empty() && empty.schedules.is_empty());
        let uncommented: String = EXAMPLE_CONFIG
            .lines()
            .map(|l| l.strip_prefix("# ").unwrap_or(l))
            .map(|l| format!("{l}\n"))
            .collect();
        let config = daicho_engine::Config::parse(&uncommented, "daicho.toml").expect("uncommented");
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
}

//! Printing results: tables for people, JSON for machines, errors on stderr.

use std::io::Write as _;

use daicho_core::format::clip;
use daicho_core::lang::Lang;
use serde::Serialize;

/// The language of messages: the first of `DAICHO_LANG`, `LC_ALL`, `LC_MESSAGES` and `LANG` that
/// is set; Japanese when it starts with `ja`.
pub fn locale() -> Lang {
    ["DAICHO_LANG", "LC_ALL", "LC_MESSAGES", "LANG"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .map_or(Lang::En, |v| Lang::of_locale(&v))
}

/// Writes text to stdout; a closed pipe surfaces as an error that `main` treats as quiet.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

/// Writes a value as JSON on one line of stdout.
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    // Written as it is serialized: a large result is never held as one string too.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    serde_json::to_writer(&mut out, value).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// Progress of long work on the terminal: a bar on stderr when stderr is a terminal, nothing on a
/// pipe or a file (so scripts and logs stay clean).
#[derive(Debug)]
pub struct Progress {
    what: &'static str,
    total: usize,
    done: usize,
    on: bool,
}

impl Progress {
    /// Progress over `total` steps of `what` (`sources`, `files`).
    pub fn new(what: &'static str, total: usize) -> Progress {
        use std::io::IsTerminal as _;
        Progress { what, total, done: 0, on: std::io::stderr().is_terminal() }
    }

    /// Shows that the next step, `label`, is under way.
    pub fn start(&mut self, label: &str) {
        if self.on {
            let width = 24;
            let filled = (self.done * width).checked_div(self.total).unwrap_or(width).min(width);
            let bar = format!("{}{}", "#".repeat(filled), "-".repeat(width - filled));
            eprint!("\r\x1b[2K[{bar}] {}/{} {}: {}", self.done, self.total, self.what, clip(label, 40));
        }
    }

    /// Marks the current step done.
    pub fn step(&mut self) {
        self.done += 1;
    }

    /// Takes one of the engine's sync progress events.
    pub fn on(&mut self, event: daicho_engine::sync::Progress<'_>) {
        use daicho_engine::sync::Progress as P;
        match event {
            P::Total(total) => self.total = total,
            P::Start(label) => self.start(label),
            P::Step => self.step(),
        }
    }

    /// Clears the bar.
    pub fn finish(self) {
        if self.on {
            eprint!("\r\x1b[2K");
        }
    }
}

/// Whether an error is a closed stdout (`daicho list | head`): exit quietly then.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Reports an error once: on stderr, and as `{"error": …}` on stdout with `--json`.
pub fn report_error(err: &anyhow::Error, json: bool) {
    let message = error_text(err);
    eprintln!("daicho: error: {message}");
    if json {
        let _ = print_json(&serde_json::json!({ "error": message }));
    }
}

/// An error and its causes, as `{:#}` writes them but each said once: a cause the message
/// already ends with is left out (SQLite's error repeats in its wrapper), and SQLite's own
/// "Error code 8: attempt to write a readonly database" adds only its code when its words are
/// there already, so a person reads "attempt to write a readonly database (code 8)".
pub fn error_text(err: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        let said = |words: &str| message.ends_with(words) || message.contains(&format!("{words}: "));
        if said(&text) {
            continue;
        }
        if let Some((code, words)) = text.strip_prefix("Error code ").and_then(|rest| rest.split_once(": "))
            && code.bytes().all(|b| b.is_ascii_digit())
            && said(words)
        {
            message.push_str(&format!(" (code {code})"));
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::error_text;

    /// An error with a message and a cause, as a store error wraps SQLite's.
    #[derive(Debug)]
    struct Wrapped(&'static str, Option<Box<Wrapped>>);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    /// X4: each cause of an error is said once, SQLite's code kept, and causes with words of their
    /// own are kept.
    #[test]
    fn x4_an_error_says_each_cause_once() {
        let code = Wrapped("Error code 8: attempt to write a readonly database", None);
        let sqlite = Wrapped("attempt to write a readonly database", Some(Box::new(code)));
        let store = Wrapped("SQLite: attempt to write a readonly database", Some(Box::new(sqlite)));
        let err = anyhow::Error::new(store).context("database");
        assert_eq!(error_text(&err), "database: SQLite: attempt to write a readonly database (code 8)");
        let err = anyhow::anyhow!("unable to open database file").context("cannot open x.db");
        assert_eq!(error_text(&err), "cannot open x.db: unable to open database file");
        let other = Wrapped("Error code 14: unable to open database file", None);
        let err = anyhow::Error::new(other).context("cannot open x.db");
        assert_eq!(error_text(&err), "cannot open x.db: Error code 14: unable to open database file");
        // A short cause that happens to be inside the message is still said.
        let err = anyhow::anyhow!("x.db").context("cannot open x.db for writing");
        assert_eq!(error_text(&err), "cannot open x.db for writing: x.db");
    }
}

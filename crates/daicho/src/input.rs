//! Reading task files and standard input into items.

use std::io::Read;
use std::path::Path;

use anyhow::{Context as _, bail};
use daicho_core::Item;
use daicho_core::error::decode_utf8;
use daicho_core::format::{self, Format, ItemDefaults};

/// The largest input read (256 MiB); a larger one is refused before it is read whole.
const MAX_INPUT_BYTES: u64 = 256 << 20;

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
    pub fn format(self) -> Format {
        match self {
            FormatArg::Md => Format::Markdown,
            FormatArg::Json => Format::Json,
            FormatArg::Jsonl => Format::JsonLines,
            FormatArg::Csv => Format::Csv,
        }
    }
}

/// Reads a file, or standard input for `-`; returns its display name and bytes.
pub fn read(path: &Path) -> anyhow::Result<(String, Vec<u8>)> {
    if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .context("cannot read standard input")?;
        if bytes.len() as u64 > MAX_INPUT_BYTES {
            bail!("<stdin>: input is larger than {MAX_INPUT_BYTES} bytes");
        }
        return Ok(("<stdin>".to_owned(), bytes));
    }
    let name = path.display().to_string();
    let size = std::fs::metadata(path).with_context(|| format!("cannot read {name}"))?.len();
    if size > MAX_INPUT_BYTES {
        bail!("{name}: file is {size} bytes, larger than the limit of {MAX_INPUT_BYTES}");
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {name}"))?;
    Ok((name, bytes))
}

/// The format of an input: the one asked for, else the file extension's, else `fallback`.
pub fn format_of(asked: Option<FormatArg>, name: &str, fallback: Option<Format>) -> anyhow::Result<Format> {
    if let Some(asked) = asked {
        return Ok(asked.format());
    }
    Format::from_file_name(name).or(fallback).with_context(|| {
        format!("{name}: cannot tell the format from the name; pass --format md|json|jsonl|csv")
    })
}

/// Decodes and parses one input.
pub fn parse(name: &str, bytes: &[u8], format: Format, defaults: &ItemDefaults) -> anyhow::Result<Vec<Item>> {
    let text = decode_utf8(bytes, name)?;
    Ok(format::parse(format, text, name, defaults)?)
}

/// The default source of a file's items: its name without directories and extension.
pub fn source_name(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "stdin".to_owned())
}

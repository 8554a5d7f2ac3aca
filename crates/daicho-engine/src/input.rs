//! Reading task inputs exactly and within bounds, for every way items arrive: a configured
//! source's file, and the files or standard input of `import`, `push` and `plan`. An input is
//! at most [`MAX_INPUT_BYTES`], refused before it is read whole; its text is decoded by the core
//! (a UTF-8 byte order mark skipped, UTF-16 refused by name) and parsed in the format it has.

use std::io::Read as _;
use std::path::Path;

use daicho_core::error::decode_utf8;
use daicho_core::format::{self, Format, ItemDefaults};
use daicho_core::item::Items;
use daicho_core::mapping::Mapping;
use daicho_core::{InputError, Item};

/// The largest input read (256 MiB).
pub const MAX_INPUT_BYTES: u64 = 256 << 20;

/// The name standard input goes by in messages.
pub const STDIN: &str = "<stdin>";

/// Reads a file, or standard input for `-`: its name for messages and its bytes.
///
/// # Errors
///
/// An [`InputError`] naming the input: unreadable, or larger than [`MAX_INPUT_BYTES`].
pub fn read(path: &Path) -> Result<(String, Vec<u8>), InputError> {
    let (name, bytes) = if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| InputError::new(STDIN, None, format!("cannot read: {e}")))?;
        if bytes.len() as u64 > MAX_INPUT_BYTES {
            let reason = format!("more than {MAX_INPUT_BYTES} bytes, larger than the limit");
            return Err(InputError::new(STDIN, None, reason));
        }
        (STDIN.to_owned(), bytes)
    } else {
        let name = check_size(path)?;
        let bytes =
            std::fs::read(path).map_err(|e| InputError::new(&name, None, format!("cannot read: {e}")))?;
        (name, bytes)
    };
    Ok((name, bytes))
}

/// Refuses a file larger than [`MAX_INPUT_BYTES`] before it is read; returns its name.
///
/// # Errors
///
/// An [`InputError`] naming the file: unreadable, or its size and the limit.
pub fn check_size(path: &Path) -> Result<String, InputError> {
    let name = path.display().to_string();
    let size =
        std::fs::metadata(path).map_err(|e| InputError::new(&name, None, format!("cannot read: {e}")))?.len();
    if size > MAX_INPUT_BYTES {
        let reason = format!("{size} bytes, larger than the limit of {MAX_INPUT_BYTES}");
        return Err(InputError::new(&name, None, reason));
    }
    Ok(name)
}

/// Decodes and parses one input's bytes.
///
/// # Errors
///
/// An [`InputError`] with the input's name, the line when known and the reason.
pub fn parse(
    name: &str,
    bytes: &[u8],
    format: Format,
    defaults: &ItemDefaults,
) -> Result<Vec<Item>, InputError> {
    format::parse(format, decode_utf8(bytes, name)?, name, defaults)
}

/// Decodes and reads one input's bytes as [`parse`] does, every item checked, into [`Items`]
/// that keep the text and parse it again a range at a time (JSON, JSON Lines, CSV), so that a
/// large import or push never holds all its items at once.
///
/// # Errors
///
/// As [`parse`].
pub fn parse_items(
    name: &str,
    bytes: Vec<u8>,
    format: Format,
    defaults: &ItemDefaults,
) -> Result<Items, InputError> {
    decode_utf8(&bytes, name)?;
    let text = String::from_utf8(bytes).map_err(|e| InputError::new(name, None, e.to_string()))?;
    format::read_items(format, text, name, defaults)
}

/// Reads and parses one input ([`read`], then [`parse`]).
///
/// # Errors
///
/// As [`read`] and [`parse`].
pub fn load(path: &Path, format: Format, defaults: &ItemDefaults) -> Result<Vec<Item>, InputError> {
    let (name, bytes) = read(path)?;
    parse(&name, &bytes, format, defaults)
}

/// Reads and parses one input of a source with columns of its own through its mapping (X5):
/// CSV rows, JSON records (an array, a document's `tasks`, or one object) or JSON Lines.
///
/// # Errors
///
/// As [`read`]; bad CSV or JSON at its line; a column the mapping names that a CSV header
/// lacks; a value a field cannot hold; an empty title.
pub fn load_mapped(
    path: &Path,
    format: Format,
    defaults: &ItemDefaults,
    mapping: &Mapping,
) -> Result<Vec<Item>, InputError> {
    let (name, bytes) = read(path)?;
    let text = decode_utf8(&bytes, &name)?;
    match format {
        Format::Csv => mapping.table_items(&format::csv::table(text, &name)?, &name, defaults),
        Format::Json => mapping.json_items(&format::json::records(text, &name)?, &name, defaults),
        Format::JsonLines => mapping.json_items(&format::json::record_lines(text, &name)?, &name, defaults),
        Format::Markdown => Err(InputError::new(&name, None, "a Markdown source has no columns to map")),
    }
}

/// The format of an input: `asked`, else its file extension's, else `fallback`.
///
/// # Errors
///
/// An [`InputError`] when none of them names a format.
pub fn format_of(asked: Option<Format>, name: &str, fallback: Option<Format>) -> Result<Format, InputError> {
    asked.or_else(|| Format::from_file_name(name)).or(fallback).ok_or_else(|| {
        InputError::new(name, None, "cannot tell the format from the name; pass --format md|json|jsonl|csv")
    })
}

/// The default source of a file's items: its name without directories and extension.
pub fn source_name(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "stdin".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// X4: a file over the limit is refused by its size, before it is read; one under it reads.
    #[test]
    fn x4_an_input_is_read_whole_only_under_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("tasks.md");
        std::fs::write(&small, "- [ ] one\n").unwrap();
        let items = load(&small, Format::Markdown, &ItemDefaults::default()).unwrap();
        assert_eq!(items.len(), 1);
        let big = dir.path().join("big.md");
        std::fs::File::create(&big).unwrap().set_len(MAX_INPUT_BYTES + 1).unwrap();
        let err = read(&big).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}: ", big.display())) && err.contains("larger than"), "{err}");
    }

    #[test]
    fn the_format_comes_from_the_flag_then_the_name_then_the_fallback() {
        assert_eq!(format_of(Some(Format::Csv), "a.md", None).unwrap(), Format::Csv);
        assert_eq!(format_of(None, "a.md", Some(Format::Json)).unwrap(), Format::Markdown);
        assert_eq!(format_of(None, "<stdin>", Some(Format::Json)).unwrap(), Format::Json);
        assert!(format_of(None, "a.txt", None).unwrap_err().to_string().contains("--format"));
        assert_eq!(source_name(Path::new("dir/tasks-done.md")), "tasks-done");
    }
}

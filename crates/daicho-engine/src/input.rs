//! Reading task inputs exactly and within bounds, for every way items arrive: a configured
//! source's file, and the files or standard input of `import`, `push` and `plan`. An input is
//! at most [`MAX_INPUT_BYTES`], refused before it is read whole; its text is decoded by the core
//! (a UTF-8 byte order mark skipped, UTF-16 refused by name) and parsed in the format it has.

use std::io::Read as _;
use std::path::Path;

use daicho_core::error::decode_utf8;
use daicho_core::format::{self, Format, Indexed, ItemDefaults, Text};
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
        let (name, bytes, _) = read_file(path)?;
        (name, bytes)
    };
    Ok((name, bytes))
}

/// Opens a file and reads it whole, refused by its size (taken from the open file) when over
/// [`MAX_INPUT_BYTES`]: its name, its bytes, and the file still open.
fn read_file(path: &Path) -> Result<(String, Vec<u8>, std::fs::File), InputError> {
    let name = path.display().to_string();
    let cannot = |e: std::io::Error| InputError::new(&name, None, format!("cannot read: {e}"));
    let mut file = std::fs::File::open(path).map_err(cannot)?;
    let size = file.metadata().map_err(cannot)?.len();
    if size > MAX_INPUT_BYTES {
        let reason = format!("{size} bytes, larger than the limit of {MAX_INPUT_BYTES}");
        return Err(InputError::new(&name, None, reason));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    (&mut file).take(MAX_INPUT_BYTES + 1).read_to_end(&mut bytes).map_err(cannot)?;
    Ok((name, bytes, file))
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

/// Reads one input — a file, or standard input for `-` — as [`parse`] does, every item
/// checked, into [`Items`] that parse it again a range at a time, in `asked` format, else its
/// name's, else `fallback`. Standard input's text is held; a file's is not: its ranges are read
/// again from the file opened here, each block of items checked against a digest of the bytes
/// first read, so a million-row import holds where each item starts and no more, and a file
/// changed in the meantime refuses the write instead of feeding it other bytes. Markdown is held
/// parsed.
///
/// # Errors
///
/// As [`read`] and [`parse`]; a format the name does not tell.
pub fn read_items(
    path: &Path,
    asked: Option<Format>,
    fallback: Option<Format>,
    defaults: &ItemDefaults,
) -> Result<(String, Items), InputError> {
    let (name, bytes, file) = if path == Path::new("-") {
        let (name, bytes) = read(path)?;
        (name, bytes, None)
    } else {
        let (name, bytes, file) = read_file(path)?;
        (name, bytes, Some(file))
    };
    let format = format_of(asked, &name, fallback)?;
    decode_utf8(&bytes, &name)?;
    let text = String::from_utf8(bytes).map_err(|e| InputError::new(&name, None, e.to_string()))?;
    let items = match format::index_items(format, &text, &name, defaults)? {
        Indexed::Held(items) => Items::from(items),
        Indexed::Text(index) => {
            let text: Box<dyn Text> = match file {
                Some(file) => Box::new(FileText::new(file, &name, &text, index.starts())),
                None => Box::new(text),
            };
            let mut items = Items::default();
            items.push_text(index.with_text(text));
            items
        }
    };
    Ok((name, items))
}

/// The text of a file read again a block at a time ([`read_items`]).
#[derive(Debug)]
struct FileText {
    file: std::fs::File,
    name: String,
    /// Where each block of [`FileText::BLOCK`] items starts, then the text's end.
    bounds: Vec<usize>,
    /// A digest of each block's bytes as first read.
    digests: Vec<u64>,
}

impl FileText {
    /// Items per block: an upsert's range, so its ranges read whole blocks.
    const BLOCK: usize = daicho_store::UPSERT_RANGE;

    fn new(file: std::fs::File, name: &str, text: &str, starts: impl Iterator<Item = usize>) -> FileText {
        let mut bounds: Vec<usize> = starts.step_by(Self::BLOCK).collect();
        bounds.push(text.len());
        let digests = bounds.windows(2).map(|w| digest(&text.as_bytes()[w[0]..w[1]])).collect();
        FileText { file, name: name.to_owned(), bounds, digests }
    }
}

fn digest(bytes: &[u8]) -> u64 {
    use std::hash::Hasher as _;
    let mut hasher = std::hash::DefaultHasher::new();
    hasher.write(bytes);
    hasher.finish()
}

impl Text for FileText {
    fn get(&self, range: std::ops::Range<usize>) -> Result<std::borrow::Cow<'_, str>, InputError> {
        use std::os::unix::fs::FileExt as _;

        let changed =
            || InputError::new(&self.name, None, "the file changed while it was being read; run again");
        // The blocks that hold the range.
        let first = self.bounds.partition_point(|&b| b <= range.start).saturating_sub(1);
        let last = self.bounds.partition_point(|&b| b < range.end).min(self.bounds.len() - 1);
        let (from, to) = (self.bounds[first], self.bounds[last]);
        if range.start < from || range.end > to {
            return Err(InputError::new(&self.name, None, "a range outside the text read"));
        }
        let mut bytes = vec![0; to - from];
        self.file.read_exact_at(&mut bytes, from as u64).map_err(|_| changed())?;
        for block in first..last {
            let (start, end) = (self.bounds[block] - from, self.bounds[block + 1] - from);
            if digest(&bytes[start..end]) != self.digests[block] {
                return Err(changed());
            }
        }
        bytes.truncate(range.end - from);
        bytes.drain(..range.start - from);
        String::from_utf8(bytes).map(std::borrow::Cow::Owned).map_err(|_| changed())
    }
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

    /// I1: a file's items are read again from the file, a block at a time, and are the items
    /// parsed from it; a file changed in place since is refused, not read as other items; a file
    /// replaced by another (a rename) is still read as it was when it was checked.
    #[test]
    fn i1_a_file_is_read_again_as_it_was_checked() {
        use std::io::Write as _;

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.csv");
        let mut text = String::from("\u{feff}id,title,body\r\n");
        for i in 0..10_000 {
            text.push_str(&format!("t{i},task {i},\"a body\r\nof two lines\"\r\n"));
            if i % 1000 == 0 {
                text.push_str(",,\r\n");
            }
        }
        std::fs::write(&path, &text).unwrap();
        let defaults = ItemDefaults { source: "big".into(), project: String::new() };
        let parsed = format::parse(Format::Csv, &text, &path.display().to_string(), &defaults).unwrap();
        let (name, items) = read_items(&path, None, None, &defaults).unwrap();
        assert_eq!(name, path.display().to_string());
        assert_eq!(items.len(), 10_000);
        let mut again = Vec::new();
        for start in (0..10_000).step_by(daicho_store::UPSERT_RANGE) {
            let range = start..(start + daicho_store::UPSERT_RANGE).min(10_000);
            again.extend(items.range(range).unwrap().iter().cloned());
        }
        assert!(again == parsed, "the items read again are the items parsed");
        assert_eq!(items.get(9_999).as_ref(), parsed.last(), "one item, across a block");
        assert_eq!(items.range(4_000..4_200).unwrap().to_vec(), parsed[4_000..4_200]);

        // Another file renamed over it: the open file is still the one checked.
        let other = dir.path().join("other.csv");
        std::fs::write(&other, text.replace("task ", "TASK ")).unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert_eq!(items.range(9_000..10_000).unwrap().to_vec(), parsed[9_000..]);

        // The same file changed in place, one byte in the third block: that block is refused,
        // the others still read.
        let (_, items) = read_items(&path, None, None, &defaults).unwrap();
        let at = text.find("task 9000,").unwrap() + 5;
        let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(at as u64)).unwrap();
        file.write_all(b"X").unwrap();
        drop(file);
        let err = items.range(8_192..10_000).unwrap_err().to_string();
        assert!(err.contains("changed while it was being read"), "{err}");
        assert_eq!(items.range(0..4_096).unwrap().len(), 4_096);
        // Cut short: refused too.
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(100).unwrap();
        assert!(items.range(4_096..8_192).is_err());
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

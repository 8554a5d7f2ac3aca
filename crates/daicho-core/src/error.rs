//! Errors of reading input: every one names the file, the line and the reason (X4).

use std::fmt;

/// Bad input: which file, which line (1-based, when known) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct InputError {
    /// The file (or stream name, such as `<stdin>`).
    pub file: String,
    /// The 1-based line, when the error belongs to one.
    pub line: Option<usize>,
    /// What is wrong, in lower case.
    pub reason: String,
}

impl InputError {
    /// An error at `line` of `file`.
    pub fn new(file: &str, line: Option<usize>, reason: impl Into<String>) -> InputError {
        InputError { file: file.to_owned(), line, reason: reason.into() }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.file, line, self.reason),
            None => write!(f, "{}: {}", self.file, self.reason),
        }
    }
}

/// The largest text field accepted from any input (1 MiB); larger ones are refused.
pub const MAX_FIELD_BYTES: usize = 1 << 20;

/// Decodes `bytes` as UTF-8, naming the line of the first invalid byte.
///
/// # Errors
///
/// An [`InputError`] at the line holding the first byte that is not UTF-8.
pub fn decode_utf8<'a>(bytes: &'a [u8], file: &str) -> Result<&'a str, InputError> {
    if let Some(encoding) = utf16_encoding(bytes) {
        return Err(InputError::new(
            file,
            Some(1),
            format!("the file is {encoding}; daicho reads UTF-8 text: save it as UTF-8 and try again"),
        ));
    }
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        InputError::new(file, Some(line), format!("invalid UTF-8 at byte {at} (the file must be UTF-8 text)"))
    })
}

/// Names the UTF-16 encoding of `bytes` when they are UTF-16: a byte order mark, or (without
/// one) text whose first characters are ASCII with a NUL byte beside each.
fn utf16_encoding(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0xFF, 0xFE, ..] => return Some("UTF-16 (little-endian, with a byte order mark)"),
        [0xFE, 0xFF, ..] => return Some("UTF-16 (big-endian, with a byte order mark)"),
        _ => {}
    }
    let head = &bytes[..bytes.len().min(64) & !1];
    if head.len() < 4 {
        return None;
    }
    let pairs = || head.chunks_exact(2);
    if pairs().all(|p| p[1] == 0 && p[0] != 0) {
        Some("UTF-16 (little-endian)")
    } else if pairs().all(|p| p[0] == 0 && p[1] != 0) {
        Some("UTF-16 (big-endian)")
    } else {
        None
    }
}

/// `text` without a leading UTF-8 byte order mark (which editors on some systems write): the
/// mark is not part of the first line.
pub fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x4_invalid_utf8_names_the_line() {
        let bytes = b"- [ ] a\n- [ ] b\n- [ ] \xff\xfe\n";
        let err = decode_utf8(bytes, "tasks.md").unwrap_err();
        assert_eq!(err.line, Some(3));
        assert!(err.to_string().starts_with("tasks.md:3: invalid UTF-8"), "{err}");
    }

    #[test]
    fn x4_utf16_is_refused_naming_the_encoding() {
        let text = "- [ ] a task\n";
        let le: Vec<u8> =
            [0xFF, 0xFE].into_iter().chain(text.encode_utf16().flat_map(u16::to_le_bytes)).collect();
        let be: Vec<u8> =
            [0xFE, 0xFF].into_iter().chain(text.encode_utf16().flat_map(u16::to_be_bytes)).collect();
        let bare: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
        for (bytes, encoding) in [
            (le, "UTF-16 (little-endian, with a byte order mark)"),
            (be, "UTF-16 (big-endian, with a byte order mark)"),
            (bare, "UTF-16 (little-endian)"),
        ] {
            let err = decode_utf8(&bytes, "tasks.md").unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "tasks.md:1: the file is {encoding}; daicho reads UTF-8 text: save it as UTF-8 and try again"
                )
            );
        }
        assert_eq!(decode_utf8("a\0b\0c\0d\0".as_bytes(), "f").unwrap_err().line, Some(1));
        assert_eq!(decode_utf8(b"plain text", "f").unwrap(), "plain text");
    }
}

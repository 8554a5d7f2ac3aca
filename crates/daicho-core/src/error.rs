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
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        InputError::new(file, Some(line), format!("invalid UTF-8 at byte {at} (the file must be UTF-8 text)"))
    })
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
}

//! Task ids: `T-0001`, assigned once and never changed.
//!
//! An id is a number with the width it was written in. `T-500` and `T-0500` name the same task
//! (equality, ordering and hashing use the number only), and an imported `T-500` keeps showing
//! as `T-500`. Ids the ledger assigns itself are at least four digits wide.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

/// The width of ids the ledger assigns itself (`T-0001`).
pub const DEFAULT_ID_WIDTH: u8 = 4;

/// The largest id number accepted (15 digits): fresh ids counting on from it still fit
/// every store's integer and parse back.
pub const MAX_ID_NUM: u64 = 999_999_999_999_999;

/// A task id such as `T-0042`.
#[derive(Clone, Copy, Debug)]
pub struct TaskId {
    num: u64,
    width: u8,
}

impl TaskId {
    /// An id with the number `num`, shown at least four digits wide.
    pub const fn new(num: u64) -> TaskId {
        TaskId { num, width: DEFAULT_ID_WIDTH }
    }

    /// An id with an explicit display width (the number of digits it was written with).
    pub fn with_width(num: u64, width: u8) -> TaskId {
        TaskId { num, width: width.max(1) }
    }

    /// The number of the id; `T-0042` → 42.
    pub fn num(self) -> u64 {
        self.num
    }

    /// The display width in digits.
    pub fn width(self) -> u8 {
        self.width
    }

    /// Parses `T-0042` (also `t-42`, surrounding blanks ignored). `None` when `text` is not an id.
    pub fn parse(text: &str) -> Option<TaskId> {
        let text = text.trim();
        let rest = text.strip_prefix("T-").or_else(|| text.strip_prefix("t-"))?;
        if rest.is_empty() || rest.len() > 20 || !rest.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let num: u64 = rest.parse().ok()?;
        if num == 0 || num > MAX_ID_NUM {
            return None;
        }
        Some(TaskId { num, width: rest.len() as u8 })
    }
}

impl PartialEq for TaskId {
    fn eq(&self, other: &TaskId) -> bool {
        self.num == other.num
    }
}

impl Eq for TaskId {}

impl Hash for TaskId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.num.hash(state);
    }
}

impl PartialOrd for TaskId {
    fn partial_cmp(&self, other: &TaskId) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TaskId {
    fn cmp(&self, other: &TaskId) -> Ordering {
        self.num.cmp(&other.num)
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "T-{:0width$}", self.num, width = usize::from(self.width))
    }
}

/// The error of [`TaskId::from_str`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a task id (expected the form T-0001)")]
pub struct BadTaskId(pub String);

impl FromStr for TaskId {
    type Err = BadTaskId;

    fn from_str(s: &str) -> Result<TaskId, BadTaskId> {
        TaskId::parse(s).ok_or_else(|| BadTaskId(s.to_owned()))
    }
}

impl serde::Serialize for TaskId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for TaskId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<TaskId, D::Error> {
        let text = String::deserialize(deserializer)?;
        TaskId::parse(&text).ok_or_else(|| serde::de::Error::custom(BadTaskId(text)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_their_written_width_and_compare_by_number() {
        let a = TaskId::parse("T-500").unwrap();
        let b = TaskId::parse("T-0500").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "T-500");
        assert_eq!(b.to_string(), "T-0500");
        assert_eq!(TaskId::new(7).to_string(), "T-0007");
        assert_eq!(TaskId::new(12345).to_string(), "T-12345");
        assert!(TaskId::parse("T-0002").unwrap() < TaskId::parse("T-0003").unwrap());
    }

    #[test]
    fn malformed_ids_are_refused() {
        for bad in ["", "T-", "T-x1", "500", "T-0", "T--1", "X-1", "T-1.5", "T-1000000000000000"] {
            assert_eq!(TaskId::parse(bad), None, "{bad}");
        }
    }
}

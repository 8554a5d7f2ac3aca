//! The typed states a store records: journal entry kinds and run outcomes. Each is stored, and
//! shown in `--json` output, as the same lowercase word as before they were types.

use std::fmt;

macro_rules! word_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal { $($(#[$vmeta:meta])* $variant:ident = $word:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The stored word.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }

            /// The value of a stored word, `None` for an unknown one.
            pub fn parse(word: &str) -> Option<$name> {
                match word {
                    $($word => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<$name, D::Error> {
                let word = String::deserialize(deserializer)?;
                $name::parse(&word)
                    .ok_or_else(|| serde::de::Error::custom(format!(concat!("unknown ", $what, " '{}'"), word)))
            }
        }
    };
}

word_enum! {
    /// What a journal entry records.
    JournalKind, "journal kind" {
        /// A row was added (`after` is the whole row).
        Add = "add",
        /// A sync or push patched a row.
        Patch = "patch",
        /// A person edited a row.
        Edit = "edit",
        /// A row was purged (`before` is the whole row, versioned: [`crate::writes::decode_record`]).
        Purge = "purge",
        /// A purged row was brought back (`after` is the whole row).
        Restore = "restore",
        /// A worker claimed the row for a run.
        Claim = "claim",
        /// A run succeeded.
        Finish = "finish",
        /// A run failed or timed out.
        Fail = "fail",
        /// The operator stopped a run; its claim was returned.
        Interrupted = "interrupted",
        /// A run's lease expired (S4).
        Lost = "lost",
        /// A person approved a run (S2).
        Approve = "approve",
        /// The kill switch was turned on (a ledger event).
        Pause = "pause",
        /// The kill switch was turned off (a ledger event).
        Resume = "resume",
    }
}

word_enum! {
    /// How a run ended, as its run record says.
    RunOutcome, "run outcome" {
        /// Still under way.
        Running = "running",
        /// The executor succeeded.
        Success = "success",
        /// The executor failed.
        Failure = "failure",
        /// The executor timed out (S11).
        Timeout = "timeout",
        /// The lease expired (S4).
        Lost = "lost",
        /// The operator stopped it (S14).
        Interrupted = "interrupted",
    }
}

impl RunOutcome {
    /// Whether the run counts as a failure in the stats (failure, timeout, lost).
    pub fn is_failure(self) -> bool {
        matches!(self, RunOutcome::Failure | RunOutcome::Timeout | RunOutcome::Lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_serialize_as_the_stored_word() {
        for kind in JournalKind::ALL {
            assert_eq!(JournalKind::parse(kind.as_str()), Some(*kind));
            assert_eq!(serde_json::to_string(kind).expect("json"), format!("\"{kind}\""));
        }
        for outcome in RunOutcome::ALL {
            assert_eq!(RunOutcome::parse(outcome.as_str()), Some(*outcome));
            let back: RunOutcome = serde_json::from_str(&format!("\"{outcome}\"")).expect("json");
            assert_eq!(back, *outcome);
        }
        assert_eq!(JournalKind::parse("nonsense"), None);
        assert!(serde_json::from_str::<RunOutcome>("\"nonsense\"").is_err());
        assert!(
            RunOutcome::Lost == "lost" && RunOutcome::Lost.is_failure() && !RunOutcome::Success.is_failure()
        );
    }
}

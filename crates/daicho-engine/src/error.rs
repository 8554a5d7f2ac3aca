//! The error of the engine's orchestration (sync, plan, view role, scheduler): what went wrong,
//! in words a person can act on.

use daicho_store::StoreError;

/// Why an orchestration step failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The ledger refused or was out of reach.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An input (a plan, a decomposer's output) was malformed.
    #[error(transparent)]
    Input(#[from] daicho_core::InputError),
    /// A file could not be written.
    #[error("cannot write {path}: {cause}")]
    Write {
        /// The file.
        path: String,
        /// The cause (in the message, so not a `source`).
        cause: std::io::Error,
    },
    /// The request or the configuration does not allow it.
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// Whether trying again later may help: a temporary store fault (S14).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Store(e) if e.is_retryable())
    }
}

/// An error and its causes, `: `-joined (as `{:#}` of an `anyhow::Error` prints them).
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

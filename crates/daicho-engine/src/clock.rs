//! The engine's clock: every instant the engine writes to the ledger (claims, leases, lost-run
//! expiry, run ends, schedule times) comes from the [`Clock`] it was given. Production uses the
//! [`SystemClock`]; tests use a [`ManualClock`] and move it instead of sleeping.

use std::sync::Mutex;

use jiff::{SignedDuration, Timestamp};

/// Where the engine reads the time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The machine's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that moves only when told: for tests of lease expiry, due schedules and backoff.
#[derive(Debug)]
pub struct ManualClock(Mutex<Timestamp>);

impl ManualClock {
    /// A clock standing at `at`.
    pub fn new(at: Timestamp) -> ManualClock {
        ManualClock(Mutex::new(at))
    }

    /// Moves the clock forward (or back, with a negative duration).
    pub fn advance(&self, by: SignedDuration) {
        let mut now = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *now += by;
    }

    /// Sets the clock.
    pub fn set(&self, at: Timestamp) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = at;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

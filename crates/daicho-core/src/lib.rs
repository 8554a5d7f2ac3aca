//! The pure core of daicho (台帳, "ledger").
//!
//! Everything here is a function of its arguments: no I/O, no clock, no runtime. `now`, ids and
//! inputs are passed in. The rules the seeds call rules live here, each tested by the
//! requirement id it implements:
//!
//! - [`task`]: the task model (SPEC §1);
//! - [`key`]: title normalization and the dedupe key (M1);
//! - [`merge`]: `merge_plan`, the upsert decision (M1–M9);
//! - [`dag`]: the ready set, unknown deps and cycles (D1, D2);
//! - [`format`]: Markdown, JSON and CSV parsers and renderers (X1, X3, X4);
//! - [`edit`]: a person's edit of a row and the journal's view of a change (F1);
//! - [`authority`]: who may write what, whatever the channel (S13).
//!
//! The requirement ids (M1, D1, S13, …) are defined, with the tests that prove each, in
//! `docs/requirements.md` at the root of the repository; `scripts/requirements` checks that
//! every id cited anywhere is defined there.

pub mod aggregate;
pub mod authority;
pub mod cron;
pub mod dag;
pub mod edit;
pub mod error;
pub mod format;
pub mod graph;
pub mod id;
pub mod item;
pub mod key;
pub mod lang;
pub mod mapping;
pub mod merge;
pub mod policy;
pub mod purge;
pub mod schedule;
pub mod task;
pub mod view;

pub use error::InputError;
pub use id::TaskId;
pub use item::Item;
pub use merge::{Plan, merge_plan};
pub use task::{Actor, Status, Tags, Task};

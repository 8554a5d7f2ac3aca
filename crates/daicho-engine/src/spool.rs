//! The run-end spool (S14, D3): finished work is not thrown away.
//!
//! When an executor ends, its outcome is written to a file of this machine's spool directory
//! (written whole, renamed into place) before the finish is committed, and removed once the
//! ledger has recorded it. The file is not synced to disk while the finish commits as usual: a
//! crash or a kill of daicho leaves it in the page cache, where the next daicho finds it, and a
//! run costs one fsync (its commit's), not three. Only when the ledger does not record the end
//! promptly — the finish fails, or has not committed within [`SYNC_AFTER`] — is the file
//! synced, with its directory ([`Spool::persist`]), so that it outlasts a loss of power too. If daicho dies in between — a crash, a kill, the store out of
//! reach for longer than the process lived — the next daicho on this machine that sweeps, works
//! or runs reads the spool first and records each end whose attempt is still current, fenced as
//! every finish is (same attempt, same worker). A run that finished is recorded, not counted as
//! lost and re-run. Ends whose attempt is no longer current (its lease expired and was counted,
//! or it was recorded after all) are dropped.
//!
//! A successful end carries the tasks its run found (X2), and its file is removed only once
//! they are pushed, not when the end is recorded: a daicho that dies between the two leaves the
//! push to the next, which makes it when the ledger holds this very end (the same attempt, ended
//! with the spooled status). A push is an upsert, so one made twice adds nothing twice.
//!
//! Between an executor's end and its spooled end lies the time daicho takes to read the
//! output and write the file; a daicho killed (or frozen, then killed) in that moment would
//! leave a finished run to be counted lost and run again. So a `command` run's supervisor
//! ([`crate::supervise`]), which outlives daicho, keeps the run's own account beside the spool:
//! a copy of its stdout (`T-0042-2.out`, up to [`crate::executor::READ_CAP`]) and, once the
//! executor ended by itself and its output is all copied, how it ended (`T-0042-2.exit`, a
//! [`RunExit`], renamed into place). daicho removes both once it has spooled the end itself;
//! the next daicho finds them only when their worker died first, and reads the run's end from
//! them as the worker would have ([`crate::Engine::recover_spooled`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use daicho_core::{Item, Status, TaskId};
use serde::{Deserialize, Serialize};

/// How long a finish may take to commit before the spooled ends it records are synced to disk.
pub const SYNC_AFTER: Duration = Duration::from_secs(1);

/// The room kept for a run's end before the run starts ([`Spool::reserve`]), in bytes: an end
/// of up to this size is written into blocks the file already has, so a disk that fills up
/// during the run still takes it (S14, D3). A larger end grows the file, as any write does. The
/// room is spaces, which a JSON reader skips after the end: an end file keeps its room's size
/// until the ledger has recorded it.
pub const END_ROOM: usize = 64 * 1024;

/// One spooled run end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpooledEnd {
    /// The task, as written (`T-0042`).
    pub task: String,
    /// The attempt that ended.
    pub attempt: u32,
    /// The worker that held the claim.
    pub worker: String,
    /// The action that ran.
    pub action: String,
    /// How it ended.
    pub end: SpooledOutcome,
}

/// How a spooled run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SpooledOutcome {
    /// It succeeded: the row goes to `status` with `result`.
    Success {
        /// The result.
        result: String,
        /// `review` or `done`.
        status: Status,
        /// Prompt tokens.
        tokens_in: Option<u64>,
        /// Completion tokens.
        tokens_out: Option<u64>,
        /// The tasks the run found, to be pushed once the end is recorded (X2). The spooled
        /// end stays until they are: a daicho that dies in between leaves them to the next.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        found: Vec<Item>,
        /// Why the run's found tasks could not be read, if they could not.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        push_error: Option<String>,
    },
    /// It failed or timed out.
    Failure {
        /// What went wrong.
        error: String,
        /// Whether it timed out.
        timeout: bool,
    },
    /// The operator stopped it.
    Interrupted {
        /// Why.
        reason: String,
    },
}

/// How a supervised run's executor ended, written by its supervisor (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunExit {
    /// The worker that held the claim (the daicho that started the run).
    pub worker: String,
    /// The executor's wait status, as the kernel gave it (exit code or signal).
    pub status: i32,
    /// Bytes the executor wrote on stdout (the `.out` copy keeps the first
    /// [`crate::executor::READ_CAP`]).
    pub out_bytes: u64,
}

impl SpooledEnd {
    /// The task id.
    pub fn id(&self) -> Option<TaskId> {
        TaskId::parse(&self.task)
    }
}

/// A spool directory on this machine.
#[derive(Clone, Debug)]
pub struct Spool {
    dir: PathBuf,
}

impl Spool {
    /// The spool in `dir` (created when first written).
    pub fn new(dir: impl Into<PathBuf>) -> Spool {
        Spool { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, task: TaskId, attempt: u32) -> PathBuf {
        self.dir.join(format!("{task}-{attempt}.json"))
    }

    /// Where a supervised run of `task`'s `attempt` keeps its own account: the path without its
    /// extension (`.out`, `.exit`).
    pub fn run_base(&self, task: TaskId, attempt: u32) -> PathBuf {
        self.dir.join(format!("{task}-{attempt}"))
    }

    /// Whether the spooled end of `task`'s `attempt` has waited longer than [`SYNC_AFTER`]
    /// to be recorded (false when there is none).
    pub fn overdue(&self, task: TaskId, attempt: u32) -> bool {
        std::fs::metadata(self.path(task, attempt))
            .and_then(|m| m.modified())
            .is_ok_and(|at| at.elapsed().is_ok_and(|waited| waited > SYNC_AFTER))
    }

    /// Whether daicho spooled this run's end itself.
    pub fn has_end(&self, task: TaskId, attempt: u32) -> bool {
        self.path(task, attempt).exists()
    }

    /// The runs whose supervisor recorded how they ended, with that record; records that
    /// cannot be read are left out (their run is counted lost, as it was before records).
    pub fn run_exits(&self) -> Vec<(TaskId, u32, RunExit)> {
        let mut exits = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return exits };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "exit") {
                continue;
            }
            let Some((task, attempt)) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.rsplit_once('-'))
                .and_then(|(task, attempt)| Some((TaskId::parse(task)?, attempt.parse::<u32>().ok()?)))
            else {
                continue;
            };
            if let Some(exit) = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok()) {
                exits.push((task, attempt, exit));
            }
        }
        exits.sort_by_key(|(task, attempt, _)| (task.num(), *attempt));
        exits
    }

    /// The run's stdout as its supervisor copied it (empty when there is none).
    pub fn run_output(&self, task: TaskId, attempt: u32) -> Vec<u8> {
        std::fs::read(self.run_base(task, attempt).with_extension("out")).unwrap_or_default()
    }

    /// Removes a run's own account (its `.exit` first, so that a half-removed one is never read),
    /// and the room this process kept for its end, if still unused.
    pub fn remove_run(&self, task: TaskId, attempt: u32) {
        let base = self.run_base(task, attempt);
        let _ = std::fs::remove_file(base.with_extension("exit"));
        let _ = std::fs::remove_file(base.with_extension("out"));
        let _ = std::fs::remove_file(self.temp(task, attempt));
    }

    /// The temporary file this process writes the end of `attempt` of `task` into.
    fn temp(&self, task: TaskId, attempt: u32) -> PathBuf {
        self.dir.join(format!(".{task}-{attempt}.{}.tmp", std::process::id()))
    }

    /// Keeps room for the end of a run about to start: its temporary file, [`END_ROOM`] bytes
    /// written, whose blocks [`Spool::put`] writes the end into. On a file system that
    /// overwrites in place (ext4, XFS, tmpfs) a full disk then still takes the end; a
    /// copy-on-write one (Btrfs, ZFS) may not. Left by a daicho that was killed, it is removed
    /// like any temporary file ([`Spool::list`]).
    ///
    /// # Errors
    ///
    /// The file system's error (the disk is full already): the end then needs room of its own.
    pub fn reserve(&self, task: TaskId, attempt: u32) -> std::io::Result<()> {
        use std::io::Write as _;

        std::fs::create_dir_all(&self.dir)?;
        let temp = self.temp(task, attempt);
        let written = std::fs::File::create(&temp).and_then(|mut file| file.write_all(&[b' '; END_ROOM]));
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written
    }

    /// Writes an end: a temporary file, renamed into place (whole or not at all). It survives a
    /// crash of this process; [`Spool::persist`] makes it survive the machine's.
    ///
    /// # Errors
    ///
    /// The file system's error (the run's end is then only as durable as the finish commit).
    pub fn put(&self, task: TaskId, end: &SpooledEnd) -> std::io::Result<()> {
        use std::io::Write as _;

        std::fs::create_dir_all(&self.dir)?;
        let path = self.path(task, end.attempt);
        let temp = self.temp(task, end.attempt);
        let bytes = serde_json::to_vec(end).map_err(std::io::Error::other)?;
        // Into the room kept before the run, when there is one: no block to find now, and what
        // is left of the room stays spaces after the end (never cut: that would give its blocks
        // back before the end is safe).
        let written = match std::fs::OpenOptions::new().write(true).open(&temp) {
            Ok(room) => Ok(room),
            Err(_) => std::fs::File::create(&temp),
        }
        .and_then(|mut file| file.write_all(&bytes))
        .and_then(|()| std::fs::rename(&temp, &path));
        if written.is_err() {
            // A room too small on a full disk is given back, not left behind.
            let _ = std::fs::remove_file(&temp);
        }
        written
    }

    /// Syncs the spooled ends of `runs` (task, attempt) to disk, and the directory that names
    /// them: for ends the ledger has not recorded promptly. An end already removed is skipped.
    ///
    /// # Errors
    ///
    /// The file system's error.
    pub fn persist(&self, runs: &[(TaskId, u32)]) -> std::io::Result<()> {
        let mut synced = false;
        for &(task, attempt) in runs {
            match std::fs::File::open(self.path(task, attempt)) {
                Ok(file) => {
                    file.sync_all()?;
                    synced = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        if synced {
            std::fs::File::open(&self.dir)?.sync_all()?;
        }
        Ok(())
    }

    /// Removes an end once the ledger has recorded it (or it is no longer current).
    pub fn remove(&self, task: TaskId, attempt: u32) {
        let _ = std::fs::remove_file(self.path(task, attempt));
    }

    /// Renames an unreadable spool file to `….bad`, where [`Spool::list`] no longer reads it and
    /// a person can; returns the name it has now.
    pub fn set_aside(&self, path: &str) -> String {
        let bad = format!("{path}.bad");
        match std::fs::rename(path, &bad) {
            Ok(()) => bad,
            Err(_) => path.to_owned(),
        }
    }

    /// Every spooled end, with the files that cannot be read (named, so they can be looked at).
    /// The temporary file of a write whose daicho was killed before it renamed it into place
    /// ([`Spool::put`]: `.{task}-{attempt}.{pid}.tmp`) is never renamed now: it is removed.
    pub fn list(&self) -> (Vec<SpooledEnd>, Vec<String>) {
        let mut ends = Vec::new();
        let mut bad = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return (ends, bad) };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "tmp") {
                let writer = path.file_stem().and_then(|s| s.to_str()).and_then(|s| s.rsplit_once('.'));
                let writer = writer.and_then(|(_, pid)| pid.parse::<u32>().ok());
                if writer.is_some_and(|pid| pid != std::process::id() && crate::daicho_is_gone(pid)) {
                    let _ = std::fs::remove_file(&path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            match std::fs::read(&path).ok().and_then(|b| serde_json::from_slice::<SpooledEnd>(&b).ok()) {
                Some(end) => ends.push(end),
                None => bad.push(path.display().to_string()),
            }
        }
        ends.sort_by(|a, b| (&a.task, a.attempt).cmp(&(&b.task, b.attempt)));
        (ends, bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// S14, D3: an end is written into the room kept for it before the run: the same file (its
    /// inode), still the room's size (its blocks never given back: a full disk could not give
    /// them again), read as the end, renamed into place; nothing else is left.
    #[test]
    fn s14_an_end_is_written_into_the_room_kept_before_the_run() {
        use std::os::unix::fs::MetadataExt as _;

        let dir = tempfile::tempdir().expect("temp dir");
        let spool = Spool::new(dir.path().join("spool"));
        let id = TaskId::new(7);
        spool.reserve(id, 2).expect("room");
        // Held open, so that a file made anew could not take the room's inode number.
        let held = std::fs::File::open(spool.temp(id, 2)).expect("the room");
        let room = held.metadata().expect("its metadata");
        assert_eq!(room.len(), END_ROOM as u64);
        let end = SpooledEnd {
            task: "T-0007".into(),
            attempt: 2,
            worker: "w".into(),
            action: "a".into(),
            end: SpooledOutcome::Failure { error: "exit 1".into(), timeout: false },
        };
        spool.put(id, &end).expect("put");
        let written = std::fs::metadata(spool.path(id, 2)).expect("the end");
        assert_eq!((written.ino(), written.len()), (room.ino(), END_ROOM as u64), "written into the room");
        drop(held);
        assert_eq!(spool.list(), (vec![end], Vec::new()));
        assert!(!spool.temp(id, 2).exists());
        // A room whose run had no end to spool goes with the run's account.
        spool.reserve(id, 3).expect("room");
        spool.remove_run(id, 3);
        assert!(!spool.temp(id, 3).exists());
    }

    /// S14: the temporary file of a write whose daicho was killed before its rename is removed
    /// when the spool is read; one whose writer lives (this process) is left to it.
    #[test]
    fn s14_a_killed_writers_temporary_file_is_removed_and_a_living_ones_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        let spool = Spool::new(dir.path().to_owned());
        let mut gone = std::process::Command::new("true").spawn().expect("a child");
        let gone_pid = gone.id();
        gone.wait().expect("reaped");
        let dead = dir.path().join(format!(".T-0001-1.{gone_pid}.tmp"));
        let living = dir.path().join(format!(".T-0002-1.{}.tmp", std::process::id()));
        std::fs::write(&dead, "{").expect("write");
        std::fs::write(&living, "{").expect("write");
        assert_eq!(spool.list(), (Vec::new(), Vec::new()), "a temporary file is no end");
        assert!(!dead.exists(), "a killed writer's temporary file is removed");
        assert!(living.exists(), "a living writer's is left to it");
    }

    #[test]
    fn s14_a_spooled_end_survives_and_is_removed_once_recorded() {
        let dir = tempfile::tempdir().expect("temp dir");
        let spool = Spool::new(dir.path().join("spool"));
        let end = SpooledEnd {
            task: "T-0042".into(),
            attempt: 2,
            worker: "host:7".into(),
            action: "work".into(),
            end: SpooledOutcome::Success {
                result: "done".into(),
                status: Status::Review,
                tokens_in: Some(3),
                tokens_out: None,
                found: vec![Item::new("found on the way", "work")],
                push_error: None,
            },
        };
        spool.put(TaskId::new(42), &end).expect("put");
        spool.persist(&[(TaskId::new(42), 2), (TaskId::new(43), 1)]).expect("synced, one of them gone");
        std::fs::write(spool.dir().join("garbage.json"), "{").expect("write");
        let (ends, bad) = spool.list();
        assert_eq!(ends, [end]);
        assert_eq!(bad.len(), 1);
        let kept = spool.set_aside(&bad[0]);
        assert!(kept.ends_with("garbage.json.bad") && std::path::Path::new(&kept).exists(), "{kept}");
        assert!(spool.list().1.is_empty(), "set aside, it is not read again");
        spool.remove(TaskId::new(42), 2);
        assert!(spool.list().0.is_empty());
    }

    /// S14: a supervisor's account of a run is listed by task and attempt, read back with its
    /// output, and removed whole; an unreadable one is left out.
    #[test]
    fn s14_a_kept_run_exit_reads_back_and_is_removed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let spool = Spool::new(dir.path());
        let base = spool.run_base(TaskId::new(42), 3);
        let exit = RunExit { worker: "host:7".into(), status: 0, out_bytes: 5 };
        std::fs::write(base.with_extension("exit"), serde_json::to_vec(&exit).expect("json")).expect("write");
        std::fs::write(base.with_extension("out"), "hello").expect("write");
        std::fs::write(dir.path().join("T-0043-1.exit"), "{").expect("write");
        std::fs::write(dir.path().join("T-0044-1.out"), "no exit, no account").expect("write");
        assert_eq!(spool.run_exits(), [(TaskId::new(42), 3, exit)]);
        assert_eq!(spool.run_output(TaskId::new(42), 3), b"hello");
        assert!(!spool.has_end(TaskId::new(42), 3));
        spool.remove_run(TaskId::new(42), 3);
        assert!(!base.with_extension("exit").exists() && !base.with_extension("out").exists());
        assert!(spool.list().0.is_empty(), "accounts are not spooled ends");
    }

    /// X2, S14: an end spooled before its found tasks were kept (no `found`) still reads back.
    #[test]
    fn x2_an_end_spooled_without_found_tasks_reads_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let spool = Spool::new(dir.path());
        let old = r#"{"task":"T-0007","attempt":1,"worker":"host:9","action":"work","end":{"outcome":"success","result":"ok","status":"done","tokens_in":null,"tokens_out":null}}"#;
        std::fs::write(dir.path().join("T-0007-1.json"), old).expect("write");
        let (ends, bad) = spool.list();
        assert!(bad.is_empty(), "{bad:?}");
        let SpooledOutcome::Success { found, push_error, .. } = &ends[0].end else { panic!("{ends:?}") };
        assert!(found.is_empty() && push_error.is_none());
    }
}

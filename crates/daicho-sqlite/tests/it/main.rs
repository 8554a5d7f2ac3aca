//! Integration tests of the SQLite backend: the store contract suite and SQLite specifics.

use daicho_sqlite::{SqliteOptions, SqliteStore};
use daicho_store::contract::Backend;

/// A fresh ledger file in a temporary directory of its own.
struct SqliteBackend {
    dir: tempfile::TempDir,
}

impl SqliteBackend {
    fn temp() -> SqliteBackend {
        SqliteBackend { dir: tempfile::tempdir().expect("a temporary directory") }
    }
}

impl Backend for SqliteBackend {
    type Store = SqliteStore;

    async fn open(&self) -> SqliteStore {
        SqliteStore::open(self.dir.path().join("ledger.db"), SqliteOptions::default())
            .await
            .expect("open the ledger")
    }
}

daicho_store::store_contract_tests!(SqliteBackend::temp());

mod sqlite_specifics {
    use super::*;
    use daicho_store::{Batch, Store, UnknownDeps};

    #[tokio::test]
    async fn ready_is_an_index_range_scan_without_a_sort() {
        let backend = SqliteBackend::temp();
        let store = backend.open().await;
        let plan = daicho_sqlite::ready_query_plan(&store).await.unwrap();
        assert!(plan.contains("USING INDEX task_ready"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "ready must not sort: {plan}");
        assert!(!plan.contains("SCAN task"), "ready must not scan the table: {plan}");
    }

    /// I3: a ledger of schema version 6 (before the ready count was kept) is counted once when it is
    /// upgraded, and kept counted after; the count's query reads the not-due index, never the
    /// table.
    #[tokio::test]
    async fn i3_an_upgraded_ledger_counts_its_ready_rows_once_and_keeps_them_counted() {
        let backend = SqliteBackend::temp();
        let store = backend.open().await;
        let later = jiff::Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_hours(1);
        let batch = daicho_store::contract::thirty_rows_some_waiting(later);
        let added = store.upsert(batch).await.unwrap().added;
        let at = jiff::Timestamp::UNIX_EPOCH;
        let before = store.ready(at, 100).await.unwrap();
        assert_eq!((before.total, before.tasks.len()), (16, 16), "20 without deps, 4 of them not due");
        drop(store);
        let raw = rusqlite::Connection::open(backend.dir.path().join("ledger.db")).unwrap();
        raw.execute_batch(UNDO_THE_TALLY).unwrap();
        raw.execute_batch(
            "DROP INDEX task_not_due; ALTER TABLE task DROP COLUMN person_cells; DROP TRIGGER run_action_kept; \
             PRAGMA user_version = 6;",
        )
        .unwrap();
        drop(raw);
        let store = backend.open().await;
        assert_eq!(store.ready(at, 100).await.unwrap().total, 16, "counted when upgraded");
        assert_eq!(store.ready(later, 100).await.unwrap().total, 20, "the four are due an hour later");
        // r3 done: r4, which waits for it, is ready instead.
        let first = added[3];
        let edit = daicho_core::edit::TaskEdit {
            status: Some(daicho_core::Status::Done),
            ..daicho_core::edit::TaskEdit::default()
        };
        store.edit(first, edit, daicho_core::Actor::Human("ana".into()), at).await.unwrap();
        let after = store.ready(at, 100).await.unwrap();
        assert_eq!((after.total, after.tasks.len()), (16, 16), "one done, the one waiting for it ready");
        assert!(after.tasks.iter().any(|t| t.id == added[4]));
        let raw = rusqlite::Connection::open(backend.dir.path().join("ledger.db")).unwrap();
        let plan: Vec<String> = raw
            .prepare(&format!("EXPLAIN QUERY PLAN {}", daicho_sqlite::ready_count_sql()))
            .unwrap()
            .query_map([0i64], |r| r.get::<_, String>(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let plan = plan.join("; ");
        assert!(plan.contains("task_not_due") && !plan.contains("SCAN task"), "{plan}");
    }

    /// S9, I3: a ledger of schema version 8 (before runs were counted per action) counts its run
    /// history once when it is upgraded, and keeps it counted after.
    #[tokio::test]
    async fn s9_i3_an_upgraded_ledger_counts_its_runs_once_and_keeps_them_counted() {
        let backend = SqliteBackend::temp();
        let store = backend.open().await;
        daicho_store::contract::some_runs(&store, "before").await;
        drop(store);
        let raw = rusqlite::Connection::open(backend.dir.path().join("ledger.db")).unwrap();
        raw.execute_batch(UNDO_THE_TALLY).unwrap();
        raw.execute_batch("DROP TRIGGER run_action_kept; PRAGMA user_version = 8;").unwrap();
        drop(raw);
        let store = backend.open().await;
        daicho_store::contract::check_stats_agree(&store, "the upgrade").await;
        let all = store.stats(jiff::Timestamp::UNIX_EPOCH).await.unwrap();
        assert_eq!(all.iter().map(|s| s.runs).sum::<u64>(), 4, "{all:?}");
        daicho_store::contract::some_runs(&store, "after").await;
        daicho_store::contract::check_stats_agree(&store, "runs after the upgrade").await;
        // The counts rely on a run record keeping its action: a change of it is refused.
        let raw = rusqlite::Connection::open(backend.dir.path().join("ledger.db")).unwrap();
        let moved = raw.execute("UPDATE run SET action = 'other' WHERE action = 'mail'", []);
        assert!(moved.unwrap_err().to_string().contains("keeps the action it ran with"));
    }

    /// Takes migration 10's counters out (the table, its views and triggers), as a ledger of
    /// schema 10 or earlier lacks them; the tests that upgrade an older ledger start with it.
    const UNDO_THE_TALLY: &str = "DROP VIEW task_count; DROP VIEW ready_count; DROP VIEW run_count; \
        DROP TRIGGER tally_task_insert; DROP TRIGGER tally_task_delete; DROP TRIGGER tally_task_update; \
        DROP TRIGGER tally_ready_insert; DROP TRIGGER tally_ready_delete; DROP TRIGGER tally_ready_update; \
        DROP TRIGGER tally_run_insert; DROP TRIGGER tally_run_update; DROP TRIGGER tally_run_delete; \
        DROP TABLE tally;";

    /// I5, I3, S9: a ledger of schema version 10 (three counter tables, a journal numbered by
    /// AUTOINCREMENT) is upgraded to one table of counts, counted afresh from the rows (its old
    /// counts, made wrong here, are not carried over), and its journal goes on numbering after
    /// the entries it has. Commits after it write no `sqlite_sequence`.
    #[tokio::test]
    async fn i5_an_upgraded_ledger_keeps_its_counts_in_one_table_and_its_journal_numbered_on() {
        let backend = SqliteBackend::temp();
        let store = backend.open().await;
        let at = jiff::Timestamp::UNIX_EPOCH;
        let added = store.upsert(daicho_store::contract::thirty_rows_some_waiting(at)).await.unwrap().added;
        daicho_store::contract::some_runs(&store, "before").await;
        let (ready, counts, stats) = (
            store.ready(at, 100).await.unwrap().total,
            store.status_counts().await.unwrap(),
            store.stats(at).await.unwrap(),
        );
        let journal = store.journal(added[0]).await.unwrap();
        drop(store);
        let path = backend.dir.path().join("ledger.db");
        let raw = rusqlite::Connection::open(&path).unwrap();
        let last: i64 = raw.query_row("SELECT max(seq) FROM journal", [], |r| r.get(0)).unwrap();
        raw.execute_batch(UNDO_THE_TALLY).unwrap();
        raw.execute_batch(
            "CREATE TABLE task_count (project TEXT NOT NULL, status TEXT NOT NULL, n INTEGER NOT NULL, \
                 PRIMARY KEY (project, status)) WITHOUT ROWID; \
             INSERT INTO task_count VALUES ('', 'pending', 999); \
             CREATE TABLE ready_count (one INTEGER PRIMARY KEY CHECK (one = 1), n INTEGER NOT NULL); \
             INSERT INTO ready_count VALUES (1, 999); \
             CREATE TABLE run_count (action TEXT PRIMARY KEY, runs INTEGER NOT NULL) WITHOUT ROWID; \
             INSERT INTO run_count VALUES ('mail', 999); \
             CREATE TABLE old_journal (seq INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, \
                 task INTEGER NOT NULL, task_id TEXT NOT NULL, actor TEXT NOT NULL, kind TEXT NOT NULL, \
                 before TEXT NOT NULL, after TEXT NOT NULL); \
             INSERT INTO old_journal SELECT * FROM journal; DROP TABLE journal; \
             ALTER TABLE old_journal RENAME TO journal; CREATE INDEX journal_task ON journal (task, seq); \
             PRAGMA user_version = 10;",
        )
        .unwrap();
        let kept: i64 = raw
            .query_row("SELECT seq FROM sqlite_sequence WHERE name = 'journal'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(kept, last, "the doctored ledger numbers its journal by AUTOINCREMENT");
        drop(raw);
        let store = backend.open().await;
        assert_eq!(store.ready(at, 100).await.unwrap().total, ready, "the ready set counted afresh");
        assert_eq!(store.status_counts().await.unwrap(), counts, "project × status counted afresh");
        assert_eq!(store.stats(at).await.unwrap(), stats, "runs counted afresh");
        daicho_store::contract::check_stats_agree(&store, "the upgrade").await;
        assert_eq!(store.journal(added[0]).await.unwrap(), journal, "the journal kept whole");
        let edit = daicho_core::edit::TaskEdit {
            status: Some(daicho_core::Status::Done),
            ..daicho_core::edit::TaskEdit::default()
        };
        store.edit(added[0], edit, daicho_core::Actor::Human("ana".into()), at).await.unwrap();
        let after = store.journal(added[0]).await.unwrap();
        assert_eq!(after.len(), journal.len() + 1);
        assert_eq!(after.last().unwrap().seq, last + 1, "numbered on after the last entry");
        let set = store.ready(at, 100).await.unwrap();
        assert_eq!(set.total, set.tasks.len(), "kept counted after: the count and the walk agree");
        drop(store);
        let raw = rusqlite::Connection::open(&path).unwrap();
        let sequences: i64 = raw.query_row("SELECT count(*) FROM sqlite_sequence", [], |r| r.get(0)).unwrap();
        assert_eq!(sequences, 0, "nothing numbers by AUTOINCREMENT");
        let tables: i64 = raw
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name LIKE '%count'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 0, "the counts are views of one table");
    }

    /// I5: SQLite is built without its own directory sync (`.cargo/config.toml`), which daicho
    /// does itself when it creates the ledger or its WAL: without the flag every one-shot change
    /// pays a second fsync (the binary's strace test counts them).
    #[test]
    fn i5_sqlite_is_built_without_its_own_directory_sync() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let options: Vec<String> = conn
            .prepare("PRAGMA compile_options")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(options.iter().any(|o| o == "DISABLE_DIRSYNC"), "{options:?}");
    }

    /// I5: opening a ledger whose WAL is gone (another tool checkpointed it away on close)
    /// creates the WAL again, and a write in it commits and reads back after a reopen.
    #[tokio::test]
    async fn i5_a_ledger_whose_wal_was_removed_gets_it_back() {
        let backend = SqliteBackend::temp();
        let path = backend.dir.path().join("ledger.db");
        let store = backend.open().await;
        store
            .upsert(daicho_store::contract::thirty_rows_some_waiting(jiff::Timestamp::UNIX_EPOCH))
            .await
            .unwrap();
        drop(store);
        let raw = rusqlite::Connection::open(&path).unwrap();
        raw.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
        drop(raw);
        let wal = backend.dir.path().join("ledger.db-wal");
        assert!(!wal.exists(), "the last connection without NO_CKPT_ON_CLOSE removes the WAL");
        let store = backend.open().await;
        assert!(wal.exists(), "opened again, the WAL is there before any commit");
        let edit = daicho_core::edit::TaskEdit { title: Some("again".into()), ..Default::default() };
        let id = daicho_core::TaskId::new(1);
        store
            .edit(id, edit, daicho_core::Actor::Human("ana".into()), jiff::Timestamp::UNIX_EPOCH)
            .await
            .unwrap();
        drop(store);
        let store = backend.open().await;
        assert_eq!(store.get(id).await.unwrap().unwrap().title, "again");
    }

    #[tokio::test]
    async fn the_ledger_uses_wal_and_survives_reopen_with_unmet_counts() {
        let backend = SqliteBackend::temp();
        let store = backend.open().await;
        let mut a = daicho_core::Item::new("a", "s");
        a.ref_id = Some("T-0001".into());
        let mut b = daicho_core::Item::new("b", "s");
        b.deps = vec!["T-0001".into()];
        let batch = Batch {
            items: vec![a, b].into(),
            actor: daicho_core::Actor::System,
            now: jiff::Timestamp::UNIX_EPOCH,
            file: "x".into(),
            unknown_deps: UnknownDeps::Refuse,
        };
        store.upsert(batch).await.unwrap();
        drop(store);
        let store = backend.open().await;
        let raw = rusqlite::Connection::open(backend.dir.path().join("ledger.db")).unwrap();
        let mode: String = raw.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal", "the ledger file is in WAL mode");
        let ready = store.ready(jiff::Timestamp::UNIX_EPOCH, 10).await.unwrap();
        assert_eq!(ready.tasks.len(), 1, "T-0002 still waits for T-0001 after a reopen");
    }

    /// S14, S9: a ledger of schema version 11, where a person's move of a running row left the
    /// run's record `running` for good, is upgraded with that record closed as interrupted and
    /// counted as ended; a run under way stays running.
    #[tokio::test]
    async fn s14_s9_an_upgraded_ledger_closes_the_run_records_a_persons_move_left_running() {
        let backend = SqliteBackend::temp();
        let store = backend.open().await;
        daicho_store::contract::some_runs(&store, "before").await;
        daicho_store::contract::some_runs(&store, "live").await;
        drop(store);
        let raw = rusqlite::Connection::open(backend.dir.path().join("ledger.db")).unwrap();
        let num = daicho_store::contract::LEFT_RUNNING.num();
        raw.execute_batch(&format!(
            "UPDATE task SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL WHERE num = {num}; \
             PRAGMA user_version = 11;"
        ))
        .unwrap();
        drop(raw);
        let store = backend.open().await;
        daicho_store::contract::check_a_left_running_record_is_closed(&store).await;
    }

    /// I3: a WAL another process left large (its truncation held up by a reader, then the log
    /// started again at the top of the file, so no frame count says it is large any more) is
    /// truncated by the first write of the next store that opens the ledger.
    #[tokio::test]
    async fn i3_a_wal_another_process_left_large_is_truncated_by_the_next_stores_first_write() {
        let backend = SqliteBackend::temp();
        let path = backend.dir.path().join("ledger.db");
        let wal = backend.dir.path().join("ledger.db-wal");
        let wal_size = || std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
        let store = SqliteStore::open(&path, SqliteOptions::default()).await.unwrap();
        let reader = rusqlite::Connection::open(&path).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader.query_row("SELECT count(*) FROM task", [], |r| r.get(0)).unwrap();
        let items = (0..20_000)
            .map(|n| daicho_core::Item::new(&format!("row {n} of a batch large enough"), "s"))
            .collect();
        let actor = daicho_core::Actor::System;
        let now = jiff::Timestamp::UNIX_EPOCH;
        store
            .upsert(Batch { items, actor, now, file: "x".into(), unknown_deps: UnknownDeps::Refuse })
            .await
            .unwrap();
        drop(store);
        reader.execute_batch("COMMIT").unwrap();
        drop(reader);
        // Another tool folds the log into the file and writes again: the log starts at the top
        // of the WAL, which keeps its size.
        let other = rusqlite::Connection::open(&path).unwrap();
        let _: (i64, i64, i64) = other
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap();
        other.execute("INSERT INTO setting (name, value) VALUES ('other', 'x')", []).unwrap();
        assert!(wal_size() > 4 << 20, "the WAL keeps its size: {} bytes", wal_size());
        // (`other` stays open, idle: closed last, it would fold and remove the WAL itself.)
        let store = SqliteStore::open(&path, SqliteOptions::default()).await.unwrap();
        store.set_cursor("next", "1").await.unwrap();
        assert!(wal_size() <= 4 << 20, "the next store's first write truncates it: {} bytes", wal_size());
        drop(other);
    }

    /// I5: under a stream of small commits the WAL is checkpointed at 1,000 frames (by the WAL
    /// hook, which replaces SQLite's automatic checkpoint) and then written again from its top,
    /// in place: the file reaches about 1,000 frames and never grows past them by more than a
    /// commit's worth (without the checkpoint it grows to the truncation limit, 1,500 frames).
    #[tokio::test]
    async fn i5_small_commits_are_checkpointed_and_rewrite_the_wal_in_place() {
        let backend = SqliteBackend::temp();
        let options =
            SqliteOptions { durability: daicho_sqlite::Durability::Normal, ..SqliteOptions::default() };
        let store = SqliteStore::open(backend.dir.path().join("ledger.db"), options).await.unwrap();
        let wal = backend.dir.path().join("ledger.db-wal");
        let frame = 4096 + 24;
        let mut largest = 0;
        for n in 0..2500 {
            store.set_cursor("stream", &format!("{n}")).await.unwrap();
            largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
        }
        assert!(largest >= 990 * frame, "the stream filled the WAL to its checkpoint: {largest} bytes");
        assert!(
            largest <= 1010 * frame,
            "checkpointed at 1,000 frames, then rewritten in place: {largest} bytes"
        );
        assert_eq!(store.cursor("stream").await.unwrap().as_deref(), Some("2499"));
    }

    /// I3: a write that grows the WAL past its limit truncates it, but never waits on a reader
    /// for it: with another connection holding a snapshot, a large write returns well within the
    /// busy timeout and the WAL stays; once the reader is gone, the next write truncates it.
    #[tokio::test]
    async fn i3_a_large_wal_is_truncated_without_waiting_on_readers() {
        let backend = SqliteBackend::temp();
        let options =
            SqliteOptions { busy_timeout: std::time::Duration::from_secs(60), ..SqliteOptions::default() };
        let store = SqliteStore::open(backend.dir.path().join("ledger.db"), options).await.unwrap();
        let batch = |titles: std::ops::Range<u32>| Batch {
            items: titles
                .map(|n| daicho_core::Item::new(&format!("row {n} of a batch large enough"), "s"))
                .collect(),
            actor: daicho_core::Actor::System,
            now: jiff::Timestamp::UNIX_EPOCH,
            file: "x".into(),
            unknown_deps: UnknownDeps::Refuse,
        };
        let wal = backend.dir.path().join("ledger.db-wal");
        let wal_size = || std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
        store.upsert(batch(0..10)).await.unwrap();
        let reader = rusqlite::Connection::open(backend.dir.path().join("ledger.db")).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader.query_row("SELECT count(*) FROM task", [], |r| r.get(0)).unwrap();
        let started = std::time::Instant::now();
        store.upsert(batch(10..20_000)).await.unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "the write waited on the reader");
        assert!(wal_size() > 4 << 20, "the reader keeps the WAL: {} bytes", wal_size());
        reader.execute_batch("COMMIT").unwrap();
        drop(reader);
        store.upsert(batch(20_000..20_001)).await.unwrap();
        assert!(wal_size() <= 4 << 20, "the next write truncates it: {} bytes", wal_size());
    }
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_based_walks_keep_every_ledger_invariant() {
    daicho_store::model::model_based_walks_keep_every_ledger_invariant(48, SqliteBackend::temp).await;
}

/// F2: an old-form purge entry (written before the record was versioned and before newer `Task`
/// fields) is restored.
#[tokio::test]
async fn f2_an_old_purge_entry_is_restored() {
    use daicho_store::Store;
    use daicho_store::contract::{OLD_PURGE_ENTRY, f2_an_old_purge_entry_is_restored, old_purge_setup};
    let backend = SqliteBackend::temp();
    let store = backend.open().await;
    store.upsert(old_purge_setup()).await.expect("setup");
    let raw = rusqlite::Connection::open(backend.dir.path().join("ledger.db")).expect("open");
    raw.execute(
        "INSERT INTO journal (at, task, task_id, actor, kind, before, after) \
         VALUES (0, 42, 'T-0042', 'human:ana', 'purge', ?1, '{}')",
        [OLD_PURGE_ENTRY],
    )
    .expect("an old entry");
    f2_an_old_purge_entry_is_restored(&store).await;
}

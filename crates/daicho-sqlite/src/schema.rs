//! The SQLite schema and its migrations (`PRAGMA user_version` counts the applied ones).

use rusqlite::{Connection, TransactionBehavior};

use daicho_store::{Result, StoreError};

use crate::backend;

/// Migrations in order; the n-th brings the schema to version n + 1. Never edit a released
/// one: add another.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE task (
    num              INTEGER PRIMARY KEY,
    id_width         INTEGER NOT NULL,
    project          TEXT    NOT NULL DEFAULT '',
    status           TEXT    NOT NULL,
    run              INTEGER NOT NULL DEFAULT 0,
    title            TEXT    NOT NULL,
    body             TEXT    NOT NULL DEFAULT '',
    source           TEXT    NOT NULL DEFAULT '',
    evidence         TEXT    NOT NULL DEFAULT '',
    due              TEXT,
    assignee         TEXT    NOT NULL DEFAULT '',
    work_type        TEXT    NOT NULL DEFAULT '',
    priority         INTEGER NOT NULL DEFAULT 0,
    not_before       INTEGER,
    action           TEXT    NOT NULL DEFAULT '',
    result           TEXT    NOT NULL DEFAULT '',
    run_at           INTEGER,
    correction       TEXT    NOT NULL DEFAULT '',
    deps             TEXT    NOT NULL DEFAULT '',
    tags             TEXT    NOT NULL DEFAULT '',
    key              TEXT    NOT NULL,
    failures         INTEGER NOT NULL DEFAULT 0,
    refresh          INTEGER NOT NULL DEFAULT 0,
    attempt          INTEGER NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    unmet_deps       INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
CREATE UNIQUE INDEX task_key ON task (key);
CREATE INDEX task_ready ON task (status, unmet_deps, priority DESC, num, not_before);
CREATE INDEX task_project ON task (project, num);

CREATE TABLE task_dep (
    task INTEGER NOT NULL,
    dep  INTEGER NOT NULL,
    PRIMARY KEY (task, dep)
) WITHOUT ROWID;
CREATE INDEX task_dep_reverse ON task_dep (dep, task);

CREATE TABLE journal (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL,
    task    INTEGER NOT NULL,
    task_id TEXT    NOT NULL,
    actor   TEXT    NOT NULL,
    kind    TEXT    NOT NULL,
    before  TEXT    NOT NULL,
    after   TEXT    NOT NULL
);
CREATE INDEX journal_task ON journal (task, seq);

CREATE TABLE meta (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO meta (name, value) VALUES ('next_id', 1);
"#,
    r#"
CREATE TABLE run (
    task            INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    worker          TEXT    NOT NULL,
    action          TEXT    NOT NULL,
    started         INTEGER NOT NULL,
    finished        INTEGER,
    outcome         TEXT    NOT NULL DEFAULT 'running',
    error           TEXT    NOT NULL DEFAULT '',
    tokens_in       INTEGER,
    tokens_out      INTEGER,
    idempotency_key TEXT    NOT NULL,
    note            TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (task, attempt)
) WITHOUT ROWID;
CREATE INDEX run_started ON run (started, action);

CREATE TABLE approval (
    task       INTEGER PRIMARY KEY,
    queued_at  INTEGER NOT NULL,
    decided_at INTEGER,
    decided_by TEXT
);

CREATE TABLE setting (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
"#,
    // 2: project × status counts (the web UI's header, /metrics) from an index alone.
    "CREATE INDEX IF NOT EXISTS task_project_status ON task (project, status);",
    // 3: who approved an external task's next run (S2, S13); the claim clears it.
    "ALTER TABLE task ADD COLUMN approved_by TEXT NOT NULL DEFAULT '';",
    // 4 (I3): project × status counts kept with the rows by triggers, in the transaction of
    // every write, so pages and /metrics read a few rows instead of scanning the ledger; and the
    // cross view's first open rows of a project read from an index in the view's order.
    r#"
CREATE TABLE task_count (
    project TEXT    NOT NULL,
    status  TEXT    NOT NULL,
    n       INTEGER NOT NULL,
    PRIMARY KEY (project, status)
) WITHOUT ROWID;
INSERT INTO task_count (project, status, n) SELECT project, status, count(*) FROM task GROUP BY project, status;
CREATE TRIGGER task_count_insert AFTER INSERT ON task BEGIN
    INSERT INTO task_count (project, status, n) VALUES (NEW.project, NEW.status, 1)
        ON CONFLICT (project, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER task_count_delete AFTER DELETE ON task BEGIN
    UPDATE task_count SET n = n - 1 WHERE project = OLD.project AND status = OLD.status;
END;
CREATE TRIGGER task_count_update AFTER UPDATE OF project, status ON task
WHEN OLD.project IS NOT NEW.project OR OLD.status IS NOT NEW.status BEGIN
    UPDATE task_count SET n = n - 1 WHERE project = OLD.project AND status = OLD.status;
    INSERT INTO task_count (project, status, n) VALUES (NEW.project, NEW.status, 1)
        ON CONFLICT (project, status) DO UPDATE SET n = n + 1;
END;
CREATE INDEX task_view ON task (project, (due IS NULL), due, num)
    WHERE status IN ('pending', 'running', 'review', 'needs_human');
"#,
    // 5 (S2, I2): the approval queue records who queued a task, and each decision what it was
    // and why (rejections were edits only, so the history could not show them).
    r#"
ALTER TABLE approval ADD COLUMN queued_by TEXT NOT NULL DEFAULT '';
ALTER TABLE approval ADD COLUMN decision TEXT;
ALTER TABLE approval ADD COLUMN reason TEXT NOT NULL DEFAULT '';
UPDATE approval SET decision = 'approved' WHERE decided_at IS NOT NULL;
CREATE INDEX approval_decided ON approval (decided_at) WHERE decided_at IS NOT NULL;
"#,
    // 6 (I3): the number of rows that are pending with every dep met, kept by triggers in the
    // transaction of every write, and the few of them not due yet (`not_before` ahead) in an
    // index of their own: `ready`'s count reads a row and an index range instead of walking
    // the ready set (50,000 rows: about 3 ms on every `daicho ready`, page and API call).
    r#"
CREATE TABLE ready_count (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    n   INTEGER NOT NULL
);
INSERT INTO ready_count (one, n) SELECT 1, count(*) FROM task WHERE status = 'pending' AND unmet_deps = 0;
CREATE TRIGGER ready_count_insert AFTER INSERT ON task
WHEN NEW.status = 'pending' AND NEW.unmet_deps = 0 BEGIN
    UPDATE ready_count SET n = n + 1 WHERE one = 1;
END;
CREATE TRIGGER ready_count_delete AFTER DELETE ON task
WHEN OLD.status = 'pending' AND OLD.unmet_deps = 0 BEGIN
    UPDATE ready_count SET n = n - 1 WHERE one = 1;
END;
CREATE TRIGGER ready_count_update AFTER UPDATE OF status, unmet_deps ON task
WHEN (OLD.status = 'pending' AND OLD.unmet_deps = 0) <> (NEW.status = 'pending' AND NEW.unmet_deps = 0) BEGIN
    UPDATE ready_count SET n = n + (CASE WHEN NEW.status = 'pending' AND NEW.unmet_deps = 0 THEN 1 ELSE -1 END)
        WHERE one = 1;
END;
CREATE INDEX task_not_due ON task (not_before)
    WHERE status = 'pending' AND unmet_deps = 0 AND not_before IS NOT NULL;
"#,
    // 7 (S13, M5): the cells of a row a person wrote, one bit each (`PersonCells`): no source
    // fills or overwrites them again, even once the person emptied them.
    "ALTER TABLE task ADD COLUMN person_cells INTEGER NOT NULL DEFAULT 0;",
    // 8 (S9, I3): runs per action since the first — `/metrics` and `stats --since all` — kept
    // with the run records by triggers in the transaction of every claim and run end, instead
    // of a pass over the whole run history (1,000,000 runs: about 1.5 s on every scrape).
    // Classified as `stats` classifies a run: failures are failure, timeout and lost. A run
    // record keeps its action (nothing changes it; the counts rely on it).
    r#"
CREATE TABLE run_count (
    action     TEXT PRIMARY KEY,
    runs       INTEGER NOT NULL,
    successes  INTEGER NOT NULL,
    failures   INTEGER NOT NULL,
    running    INTEGER NOT NULL,
    tokens_in  INTEGER NOT NULL,
    tokens_out INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO run_count (action, runs, successes, failures, running, tokens_in, tokens_out)
    SELECT action, count(*), sum(outcome = 'success'), sum(outcome IN ('failure', 'timeout', 'lost')),
        sum(outcome = 'running'), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0)
    FROM run GROUP BY action;
CREATE TRIGGER run_count_insert AFTER INSERT ON run BEGIN
    INSERT INTO run_count (action, runs, successes, failures, running, tokens_in, tokens_out)
        VALUES (NEW.action, 1, NEW.outcome = 'success', NEW.outcome IN ('failure', 'timeout', 'lost'),
            NEW.outcome = 'running', coalesce(NEW.tokens_in, 0), coalesce(NEW.tokens_out, 0))
        ON CONFLICT (action) DO UPDATE SET runs = runs + 1, successes = successes + excluded.successes,
            failures = failures + excluded.failures, running = running + excluded.running,
            tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out;
END;
CREATE TRIGGER run_count_update AFTER UPDATE OF outcome, tokens_in, tokens_out ON run BEGIN
    UPDATE run_count SET successes = successes + (NEW.outcome = 'success') - (OLD.outcome = 'success'),
        failures = failures + (NEW.outcome IN ('failure', 'timeout', 'lost'))
            - (OLD.outcome IN ('failure', 'timeout', 'lost')),
        running = running + (NEW.outcome = 'running') - (OLD.outcome = 'running'),
        tokens_in = tokens_in + coalesce(NEW.tokens_in, 0) - coalesce(OLD.tokens_in, 0),
        tokens_out = tokens_out + coalesce(NEW.tokens_out, 0) - coalesce(OLD.tokens_out, 0)
        WHERE action = NEW.action;
END;
CREATE TRIGGER run_action_kept BEFORE UPDATE OF action ON run WHEN OLD.action <> NEW.action BEGIN
    SELECT RAISE(ABORT, 'a run record keeps the action it ran with');
END;
CREATE TRIGGER run_count_delete AFTER DELETE ON run BEGIN
    UPDATE run_count SET runs = runs - 1, successes = successes - (OLD.outcome = 'success'),
        failures = failures - (OLD.outcome IN ('failure', 'timeout', 'lost')),
        running = running - (OLD.outcome = 'running'), tokens_in = tokens_in - coalesce(OLD.tokens_in, 0),
        tokens_out = tokens_out - coalesce(OLD.tokens_out, 0)
        WHERE action = OLD.action;
END;
"#,
    // 9 (I5): no `task_project_status`: the project × status counts have been kept in
    // `task_count` since 4, and the index cost every claim and every run end two or three more
    // pages in its commit (the row's old and new status); a filter by project and status reads
    // `task_project` or `task_ready` instead.
    "DROP INDEX IF EXISTS task_project_status;",
    // 10 (I5): fewer pages in every commit. The counts kept with the rows (4, 6, 8: project ×
    // status, the ready set, runs per action) move into one table, `tally`, so a claim or a run
    // end writes one page of counts where it wrote three; the old names stay as views and every
    // reader reads them as before. They are counted afresh from the rows. And the journal loses
    // AUTOINCREMENT: its rows are never deleted, so the next `seq` is still the largest plus one,
    // without a write to `sqlite_sequence` in every commit that journals.
    r#"
DROP TRIGGER IF EXISTS task_count_insert;
DROP TRIGGER IF EXISTS task_count_delete;
DROP TRIGGER IF EXISTS task_count_update;
DROP TRIGGER IF EXISTS ready_count_insert;
DROP TRIGGER IF EXISTS ready_count_delete;
DROP TRIGGER IF EXISTS ready_count_update;
DROP TRIGGER IF EXISTS run_count_insert;
DROP TRIGGER IF EXISTS run_count_update;
DROP TRIGGER IF EXISTS run_count_delete;
DROP TABLE IF EXISTS task_count;
DROP TABLE IF EXISTS ready_count;
DROP TABLE IF EXISTS run_count;
CREATE TABLE tally (
    kind       TEXT    NOT NULL CHECK (kind IN ('task', 'ready', 'run')),
    name       TEXT    NOT NULL,
    status     TEXT    NOT NULL,
    n          INTEGER NOT NULL,
    successes  INTEGER NOT NULL DEFAULT 0,
    failures   INTEGER NOT NULL DEFAULT 0,
    running    INTEGER NOT NULL DEFAULT 0,
    tokens_in  INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, name, status)
) WITHOUT ROWID;
INSERT INTO tally (kind, name, status, n) SELECT 'task', project, status, count(*) FROM task GROUP BY project, status;
INSERT INTO tally (kind, name, status, n)
    SELECT 'ready', '', '', count(*) FROM task WHERE status = 'pending' AND unmet_deps = 0;
INSERT INTO tally (kind, name, status, n, successes, failures, running, tokens_in, tokens_out)
    SELECT 'run', action, '', count(*), sum(outcome = 'success'), sum(outcome IN ('failure', 'timeout', 'lost')),
        sum(outcome = 'running'), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0)
    FROM run GROUP BY action;
CREATE VIEW task_count AS SELECT name AS project, status, n FROM tally WHERE kind = 'task';
CREATE VIEW ready_count AS SELECT n FROM tally WHERE kind = 'ready';
CREATE VIEW run_count AS SELECT name AS action, n AS runs, successes, failures, running, tokens_in, tokens_out
    FROM tally WHERE kind = 'run';
CREATE TRIGGER tally_task_insert AFTER INSERT ON task BEGIN
    INSERT INTO tally (kind, name, status, n) VALUES ('task', NEW.project, NEW.status, 1)
        ON CONFLICT (kind, name, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER tally_task_delete AFTER DELETE ON task BEGIN
    UPDATE tally SET n = n - 1 WHERE kind = 'task' AND name = OLD.project AND status = OLD.status;
END;
CREATE TRIGGER tally_task_update AFTER UPDATE OF project, status ON task
WHEN OLD.project IS NOT NEW.project OR OLD.status IS NOT NEW.status BEGIN
    UPDATE tally SET n = n - 1 WHERE kind = 'task' AND name = OLD.project AND status = OLD.status;
    INSERT INTO tally (kind, name, status, n) VALUES ('task', NEW.project, NEW.status, 1)
        ON CONFLICT (kind, name, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER tally_ready_insert AFTER INSERT ON task
WHEN NEW.status = 'pending' AND NEW.unmet_deps = 0 BEGIN
    UPDATE tally SET n = n + 1 WHERE kind = 'ready' AND name = '' AND status = '';
END;
CREATE TRIGGER tally_ready_delete AFTER DELETE ON task
WHEN OLD.status = 'pending' AND OLD.unmet_deps = 0 BEGIN
    UPDATE tally SET n = n - 1 WHERE kind = 'ready' AND name = '' AND status = '';
END;
CREATE TRIGGER tally_ready_update AFTER UPDATE OF status, unmet_deps ON task
WHEN (OLD.status = 'pending' AND OLD.unmet_deps = 0) <> (NEW.status = 'pending' AND NEW.unmet_deps = 0) BEGIN
    UPDATE tally SET n = n + (CASE WHEN NEW.status = 'pending' AND NEW.unmet_deps = 0 THEN 1 ELSE -1 END)
        WHERE kind = 'ready' AND name = '' AND status = '';
END;
CREATE TRIGGER tally_run_insert AFTER INSERT ON run BEGIN
    INSERT INTO tally (kind, name, status, n, successes, failures, running, tokens_in, tokens_out)
        VALUES ('run', NEW.action, '', 1, NEW.outcome = 'success', NEW.outcome IN ('failure', 'timeout', 'lost'),
            NEW.outcome = 'running', coalesce(NEW.tokens_in, 0), coalesce(NEW.tokens_out, 0))
        ON CONFLICT (kind, name, status) DO UPDATE SET n = n + 1, successes = successes + excluded.successes,
            failures = failures + excluded.failures, running = running + excluded.running,
            tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out;
END;
CREATE TRIGGER tally_run_update AFTER UPDATE OF outcome, tokens_in, tokens_out ON run BEGIN
    UPDATE tally SET successes = successes + (NEW.outcome = 'success') - (OLD.outcome = 'success'),
        failures = failures + (NEW.outcome IN ('failure', 'timeout', 'lost'))
            - (OLD.outcome IN ('failure', 'timeout', 'lost')),
        running = running + (NEW.outcome = 'running') - (OLD.outcome = 'running'),
        tokens_in = tokens_in + coalesce(NEW.tokens_in, 0) - coalesce(OLD.tokens_in, 0),
        tokens_out = tokens_out + coalesce(NEW.tokens_out, 0) - coalesce(OLD.tokens_out, 0)
        WHERE kind = 'run' AND name = NEW.action AND status = '';
END;
CREATE TRIGGER tally_run_delete AFTER DELETE ON run BEGIN
    UPDATE tally SET n = n - 1, successes = successes - (OLD.outcome = 'success'),
        failures = failures - (OLD.outcome IN ('failure', 'timeout', 'lost')),
        running = running - (OLD.outcome = 'running'), tokens_in = tokens_in - coalesce(OLD.tokens_in, 0),
        tokens_out = tokens_out - coalesce(OLD.tokens_out, 0)
        WHERE kind = 'run' AND name = OLD.action AND status = '';
END;
CREATE TABLE journal_v10 (
    seq     INTEGER PRIMARY KEY,
    at      INTEGER NOT NULL,
    task    INTEGER NOT NULL,
    task_id TEXT    NOT NULL,
    actor   TEXT    NOT NULL,
    kind    TEXT    NOT NULL,
    before  TEXT    NOT NULL,
    after   TEXT    NOT NULL
);
INSERT INTO journal_v10 (seq, at, task, task_id, actor, kind, before, after)
    SELECT seq, at, task, task_id, actor, kind, before, after FROM journal ORDER BY seq;
DROP TABLE journal;
ALTER TABLE journal_v10 RENAME TO journal;
CREATE INDEX journal_task ON journal (task, seq);
"#,
    // 11 (S14, S9): a run record is `running` only while its row runs that attempt. A person's
    // move of a running row out of `running` left the record `running` for good before the move
    // closed it (`ends::run_stopped_by_edit`): such records are closed as interrupted (when the
    // row last changed), so `stats`, `/metrics` and the counts stop showing them as running.
    r#"
UPDATE run SET outcome = 'interrupted',
    finished = coalesce((SELECT updated_at FROM task WHERE task.num = run.task), started),
    error = 'stopped by a person, who moved the task out of running during the run (closed when the ledger was upgraded)'
WHERE outcome = 'running' AND NOT EXISTS (
    SELECT 1 FROM task WHERE task.num = run.task AND task.status = 'running' AND task.attempt = run.attempt);
"#,
];

/// Checks, without writing, that the ledger's schema is the one this daicho knows (a read-only
/// open migrates nothing).
pub(crate) fn check_current(conn: &mut Connection) -> Result<()> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(backend)?;
    let known = MIGRATIONS.len();
    match version as usize {
        v if v == known => Ok(()),
        0 => Err(refuse_foreign(conn).err().unwrap_or_else(|| {
            StoreError::backend("not a daicho ledger (no schema); run `daicho init` to create one")
        })),
        v if v < known => Err(StoreError::backend(format!(
            "the ledger has schema version {v}, older than this daicho's {known}; any command that writes upgrades it"
        ))),
        v => Err(StoreError::backend(format!(
            "the ledger has schema version {v}, newer than this daicho knows ({known}); upgrade daicho"
        ))),
    }
}

/// Refuses a database of something else: another program's tables and no daicho schema. Its
/// owner named the wrong file, and it is never made a ledger. Only reads: it runs before the
/// connection switches the file to WAL (a write), so the file is left exactly as it was.
pub(crate) fn refuse_foreign(conn: &Connection) -> Result<()> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(backend)?;
    if version != 0 {
        return Ok(());
    }
    let objects: i64 =
        conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0)).map_err(backend)?;
    match objects {
        0 => Ok(()),
        _ => Err(StoreError::backend(
            "not a daicho ledger: a SQLite database of something else (it has tables, but no daicho schema); nothing was written",
        )),
    }
}

/// Brings the schema up to date in one immediate transaction (so two processes opening a new
/// ledger at once migrate it once).
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    // The common case, an up-to-date ledger, reads one pragma and takes no write lock.
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(backend)?;
    if version as usize == MIGRATIONS.len() {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
    let version: usize =
        tx.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0)).map_err(backend)? as usize;
    if version > MIGRATIONS.len() {
        return Err(StoreError::backend(format!(
            "the ledger has schema version {version}, newer than this daicho knows ({}); upgrade daicho",
            MIGRATIONS.len()
        )));
    }
    if version == 0 {
        refuse_foreign(&tx)?;
    }
    for sql in &MIGRATIONS[version..] {
        tx.execute_batch(sql).map_err(backend)?;
    }
    tx.pragma_update(None, "user_version", MIGRATIONS.len() as i64).map_err(backend)?;
    tx.commit().map_err(backend)
}

//! The PostgreSQL schema and its migrations, applied under an advisory lock so that many
//! workers starting together migrate once.

use daicho_store::{Result, StoreError};
use deadpool_postgres::Client;

use crate::backend;

/// The advisory lock key that serializes migrations ("daicho" in ASCII).
const MIGRATION_LOCK: i64 = 0x6461_6963_686f;

/// Migrations in order; never edit a released one.
pub(crate) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE task (
    num              BIGINT PRIMARY KEY,
    id_width         INT     NOT NULL,
    project          TEXT    NOT NULL DEFAULT '',
    status           TEXT    NOT NULL,
    run              BOOLEAN NOT NULL DEFAULT false,
    title            TEXT    NOT NULL,
    body             TEXT    NOT NULL DEFAULT '',
    source           TEXT    NOT NULL DEFAULT '',
    evidence         TEXT    NOT NULL DEFAULT '',
    due              TEXT,
    assignee         TEXT    NOT NULL DEFAULT '',
    work_type        TEXT    NOT NULL DEFAULT '',
    priority         BIGINT  NOT NULL DEFAULT 0,
    not_before       BIGINT,
    action           TEXT    NOT NULL DEFAULT '',
    result           TEXT    NOT NULL DEFAULT '',
    run_at           BIGINT,
    correction       TEXT    NOT NULL DEFAULT '',
    deps             TEXT    NOT NULL DEFAULT '',
    tags             TEXT    NOT NULL DEFAULT '',
    key              TEXT    COLLATE "C" NOT NULL,
    failures         INT     NOT NULL DEFAULT 0,
    refresh          BOOLEAN NOT NULL DEFAULT false,
    attempt          INT     NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_expires_at BIGINT,
    unmet_deps       INT     NOT NULL DEFAULT 0,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL
);
CREATE UNIQUE INDEX task_key ON task (key);
CREATE INDEX task_ready ON task (status, unmet_deps, priority DESC, num) INCLUDE (not_before);
CREATE INDEX task_project ON task (project, num);

CREATE TABLE task_dep (
    task BIGINT NOT NULL,
    dep  BIGINT NOT NULL,
    PRIMARY KEY (task, dep)
);
CREATE INDEX task_dep_reverse ON task_dep (dep, task);

CREATE TABLE journal (
    seq     BIGSERIAL PRIMARY KEY,
    at      BIGINT NOT NULL,
    task    BIGINT NOT NULL,
    task_id TEXT   NOT NULL,
    actor   TEXT   NOT NULL,
    kind    TEXT   NOT NULL,
    before  TEXT   NOT NULL,
    after   TEXT   NOT NULL
);
CREATE INDEX journal_task ON journal (task, seq);

CREATE TABLE meta (
    name  TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO meta (name, value) VALUES ('next_id', 1);

CREATE TABLE run (
    task            BIGINT NOT NULL,
    attempt         INT    NOT NULL,
    worker          TEXT   NOT NULL,
    action          TEXT   NOT NULL,
    started         BIGINT NOT NULL,
    finished        BIGINT,
    outcome         TEXT   NOT NULL DEFAULT 'running',
    error           TEXT   NOT NULL DEFAULT '',
    tokens_in       BIGINT,
    tokens_out      BIGINT,
    idempotency_key TEXT   NOT NULL,
    note            TEXT   NOT NULL DEFAULT '',
    PRIMARY KEY (task, attempt)
);
CREATE INDEX run_started ON run (started, action);

CREATE TABLE approval (
    task       BIGINT PRIMARY KEY,
    queued_at  BIGINT NOT NULL,
    decided_at BIGINT,
    decided_by TEXT
);

CREATE TABLE setting (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"#,
    // 2: project × status counts (the web UI's header, /metrics) from an index alone.
    "CREATE INDEX IF NOT EXISTS task_project_status ON task (project, status);",
    // 3: who approved an external task's next run (S2, S13); the claim clears it.
    "ALTER TABLE task ADD COLUMN IF NOT EXISTS approved_by TEXT NOT NULL DEFAULT ''",
    // 4 (I3): the cross view's first open rows of a project, from an index in the view's
    // order. (Counts stay a GROUP BY over task_project_status: a counter row every claim
    // updated would make concurrent workers queue on it.)
    "CREATE INDEX IF NOT EXISTS task_view ON task (project, (due IS NULL), due, num) \
     WHERE status IN ('pending', 'running', 'review', 'needs_human')",
    // 5 (S2, I2): the approval queue records who queued a task, and each decision what it was
    // and why (rejections were edits only, so the history could not show them).
    r#"
ALTER TABLE approval ADD COLUMN IF NOT EXISTS queued_by TEXT NOT NULL DEFAULT '';
ALTER TABLE approval ADD COLUMN IF NOT EXISTS decision TEXT;
ALTER TABLE approval ADD COLUMN IF NOT EXISTS reason TEXT NOT NULL DEFAULT '';
UPDATE approval SET decision = 'approved' WHERE decided_at IS NOT NULL AND decision IS NULL;
CREATE INDEX IF NOT EXISTS approval_decided ON approval (decided_at) WHERE decided_at IS NOT NULL;
"#,
    // 6 (I3): the number of rows pending with every dep met, kept by statement triggers in the
    // transaction of every write, in 64 shards (each backend adds to its own, so concurrent
    // claims do not queue on one counter row); the few not due yet (`not_before` ahead) in an
    // index of their own. `ready`'s count sums 64 rows and reads an index range instead of
    // walking the ready set (31,000 rows: about 10 ms per call). Writers wait while it is
    // counted; like the others, it may run again over itself (and counts afresh).
    r#"
LOCK TABLE task IN SHARE ROW EXCLUSIVE MODE;
CREATE TABLE IF NOT EXISTS ready_count (
    shard INT PRIMARY KEY,
    n     BIGINT NOT NULL
);
INSERT INTO ready_count (shard, n) SELECT s, 0 FROM generate_series(0, 63) AS s ON CONFLICT (shard) DO NOTHING;
UPDATE ready_count SET n = CASE WHEN shard = 0
    THEN (SELECT count(*) FROM task WHERE status = 'pending' AND unmet_deps = 0) ELSE 0 END;
CREATE OR REPLACE FUNCTION daicho_ready_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    delta BIGINT := 0;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        SELECT delta + count(*) INTO delta FROM new_rows WHERE status = 'pending' AND unmet_deps = 0;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        SELECT delta - count(*) INTO delta FROM old_rows WHERE status = 'pending' AND unmet_deps = 0;
    END IF;
    IF delta <> 0 THEN
        UPDATE ready_count SET n = n + delta WHERE shard = pg_backend_pid() % 64;
    END IF;
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER ready_count_insert AFTER INSERT ON task REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION daicho_ready_count();
CREATE OR REPLACE TRIGGER ready_count_update AFTER UPDATE ON task REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION daicho_ready_count();
CREATE OR REPLACE TRIGGER ready_count_delete AFTER DELETE ON task REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION daicho_ready_count();
CREATE INDEX IF NOT EXISTS task_not_due ON task (not_before)
    WHERE status = 'pending' AND unmet_deps = 0 AND not_before IS NOT NULL;
"#,
    // 7 (S13, M5): the cells of a row a person wrote, one bit each (`PersonCells`): no source
    // fills or overwrites them again, even once the person emptied them.
    "ALTER TABLE task ADD COLUMN IF NOT EXISTS person_cells INT NOT NULL DEFAULT 0",
    // 8 (S9, I3): runs per action since the first — `/metrics` and `stats --since all` — kept
    // with the run records by statement triggers in the transaction of every claim and run end,
    // in 64 shards per action (each backend adds to its own, so concurrent workers do not queue
    // on one counter row), instead of a pass over the whole run history. Classified as `stats`
    // classifies a run: failures are failure, timeout and lost.
    r#"
LOCK TABLE run IN SHARE ROW EXCLUSIVE MODE;
CREATE TABLE IF NOT EXISTS run_count (
    action     TEXT   NOT NULL,
    shard      INT    NOT NULL,
    runs       BIGINT NOT NULL,
    successes  BIGINT NOT NULL,
    failures   BIGINT NOT NULL,
    running    BIGINT NOT NULL,
    tokens_in  BIGINT NOT NULL,
    tokens_out BIGINT NOT NULL,
    PRIMARY KEY (action, shard)
);
DELETE FROM run_count;
INSERT INTO run_count (action, shard, runs, successes, failures, running, tokens_in, tokens_out)
    SELECT action, 0, count(*), count(*) FILTER (WHERE outcome = 'success'),
        count(*) FILTER (WHERE outcome IN ('failure', 'timeout', 'lost')), count(*) FILTER (WHERE outcome = 'running'),
        coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0)
    FROM run GROUP BY action;
CREATE OR REPLACE FUNCTION daicho_run_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Each changed run record adds its classification (inserted, or the new side of an update)
    -- and takes back its old one (deleted, or the old side of an update), summed per action.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO run_count AS c (action, shard, runs, successes, failures, running, tokens_in, tokens_out)
            SELECT action, pg_backend_pid() % 64, count(*), count(*) FILTER (WHERE outcome = 'success'),
                count(*) FILTER (WHERE outcome IN ('failure', 'timeout', 'lost')),
                count(*) FILTER (WHERE outcome = 'running'), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0)
            FROM new_rows GROUP BY action
            ON CONFLICT (action, shard) DO UPDATE SET runs = c.runs + excluded.runs,
                successes = c.successes + excluded.successes, failures = c.failures + excluded.failures,
                running = c.running + excluded.running, tokens_in = c.tokens_in + excluded.tokens_in,
                tokens_out = c.tokens_out + excluded.tokens_out;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO run_count AS c (action, shard, runs, successes, failures, running, tokens_in, tokens_out)
            SELECT action, pg_backend_pid() % 64, -count(*), -count(*) FILTER (WHERE outcome = 'success'),
                -count(*) FILTER (WHERE outcome IN ('failure', 'timeout', 'lost')),
                -count(*) FILTER (WHERE outcome = 'running'), -coalesce(sum(tokens_in), 0), -coalesce(sum(tokens_out), 0)
            FROM old_rows GROUP BY action
            ON CONFLICT (action, shard) DO UPDATE SET runs = c.runs + excluded.runs,
                successes = c.successes + excluded.successes, failures = c.failures + excluded.failures,
                running = c.running + excluded.running, tokens_in = c.tokens_in + excluded.tokens_in,
                tokens_out = c.tokens_out + excluded.tokens_out;
    ELSE
        INSERT INTO run_count AS c (action, shard, runs, successes, failures, running, tokens_in, tokens_out)
            SELECT action, pg_backend_pid() % 64, sum(n), sum(n * (outcome = 'success')::INT),
                sum(n * (outcome IN ('failure', 'timeout', 'lost'))::INT), sum(n * (outcome = 'running')::INT),
                sum(n * coalesce(tokens_in, 0)), sum(n * coalesce(tokens_out, 0))
            FROM (
                SELECT action, -1 AS n, outcome, tokens_in, tokens_out FROM old_rows
                UNION ALL
                SELECT action, 1, outcome, tokens_in, tokens_out FROM new_rows
            ) AS d
            GROUP BY action
            HAVING sum(n) <> 0 OR sum(n * (outcome = 'success')::INT) <> 0
                OR sum(n * (outcome IN ('failure', 'timeout', 'lost'))::INT) <> 0
                OR sum(n * (outcome = 'running')::INT) <> 0
                OR sum(n * coalesce(tokens_in, 0)) <> 0 OR sum(n * coalesce(tokens_out, 0)) <> 0
            ON CONFLICT (action, shard) DO UPDATE SET runs = c.runs + excluded.runs,
                successes = c.successes + excluded.successes, failures = c.failures + excluded.failures,
                running = c.running + excluded.running, tokens_in = c.tokens_in + excluded.tokens_in,
                tokens_out = c.tokens_out + excluded.tokens_out;
    END IF;
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER run_count_insert AFTER INSERT ON run REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION daicho_run_count();
CREATE OR REPLACE TRIGGER run_count_update AFTER UPDATE ON run REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION daicho_run_count();
CREATE OR REPLACE TRIGGER run_count_delete AFTER DELETE ON run REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION daicho_run_count();
"#,
    // 9 (S9, I3, I5): `run_count` holds the runs that ended, counted by the one statement that
    // ends a run record (`runs::run_end_sql`) in its own transaction; the runs under way are read
    // from an index of their own (a few rows: one per live run). No trigger: a claim writes no
    // counter row, and a run end writes one without a call into PL/pgSQL (the triggers took a
    // quarter of the server's time per task under 16 workers). The column `running` stays, at 0,
    // so that migration 8 can still run again over this one, as every migration may.
    r#"
LOCK TABLE run IN SHARE ROW EXCLUSIVE MODE;
DROP TRIGGER IF EXISTS run_count_insert ON run;
DROP TRIGGER IF EXISTS run_count_update ON run;
DROP TRIGGER IF EXISTS run_count_delete ON run;
DROP FUNCTION IF EXISTS daicho_run_count();
DELETE FROM run_count;
INSERT INTO run_count (action, shard, runs, successes, failures, running, tokens_in, tokens_out)
    SELECT action, 0, count(*), count(*) FILTER (WHERE outcome = 'success'),
        count(*) FILTER (WHERE outcome IN ('failure', 'timeout', 'lost')), 0,
        coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0)
    FROM run WHERE outcome <> 'running' GROUP BY action;
CREATE INDEX IF NOT EXISTS run_running ON run (action) WHERE outcome = 'running';
"#,
    // 10 (S14, S9): a run record is `running` only while its row runs that attempt. A person's
    // move of a running row out of `running` left the record `running` for good before the move
    // closed it (`ends::run_stopped_by_edit`): such records are closed as interrupted (when the
    // row last changed) and counted as ended, as `runs::run_end_sql` counts a run's end, so
    // `stats`, `/metrics` and the counts stop showing them as running. Runs again over itself
    // finding nothing.
    r#"
LOCK TABLE run IN SHARE ROW EXCLUSIVE MODE;
WITH closed AS (
    UPDATE run SET outcome = 'interrupted',
        finished = coalesce((SELECT updated_at FROM task WHERE task.num = run.task), run.started),
        error = 'stopped by a person, who moved the task out of running during the run (closed when the ledger was upgraded)'
    WHERE outcome = 'running' AND NOT EXISTS (
        SELECT 1 FROM task WHERE task.num = run.task AND task.status = 'running' AND task.attempt = run.attempt)
    RETURNING action)
INSERT INTO run_count AS c (action, shard, runs, successes, failures, running, tokens_in, tokens_out)
    SELECT action, 0, count(*), 0, 0, 0, 0, 0 FROM closed GROUP BY action
    ON CONFLICT (action, shard) DO UPDATE SET runs = c.runs + excluded.runs;
"#,
];

/// Checks, without writing, that the database holds a ledger of this daicho's schema version.
pub(crate) async fn check_current(client: &Client) -> Result<()> {
    let exists: bool = client
        .query_one("SELECT to_regclass('daicho_schema') IS NOT NULL", &[])
        .await
        .map_err(backend)?
        .get(0);
    let version: Option<i32> = match exists {
        true => client
            .query_opt("SELECT version FROM daicho_schema", &[])
            .await
            .map_err(backend)?
            .map(|r| r.get(0)),
        false => None,
    };
    let known = MIGRATIONS.len();
    match version.map(|v| v as usize) {
        None | Some(0) => {
            Err(StoreError::backend("not a daicho ledger (no schema); run `daicho init` to create one"))
        }
        Some(v) if v == known => Ok(()),
        Some(v) if v < known => Err(StoreError::backend(format!(
            "the ledger has schema version {v}, older than this daicho's {known}; any command that writes upgrades it"
        ))),
        Some(v) => Err(StoreError::backend(format!(
            "the ledger has schema version {v}, newer than this daicho knows ({known}); upgrade daicho"
        ))),
    }
}

/// Brings the schema up to date. The first process to take the advisory lock migrates; the
/// others wait for it and then find nothing to do.
pub(crate) async fn migrate(client: &mut Client) -> Result<usize> {
    let tx = client.transaction().await.map_err(backend)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await.map_err(backend)?;
    // A database of something else (another program's tables, no daicho schema) is never made a
    // ledger (X4): its owner named the wrong database. Refused before anything is created. The
    // tables of an extension (PostGIS's `spatial_ref_sys`) are the server's, not a program's.
    let foreign: bool = tx
        .query_one(
            "SELECT to_regclass('daicho_schema') IS NULL AND EXISTS (SELECT 1 FROM pg_class c \
             WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') \
             AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass \
             AND d.objid = c.oid AND d.deptype = 'e'))",
            &[],
        )
        .await
        .map_err(backend)?
        .get(0);
    if foreign {
        return Err(StoreError::backend(
            "not a daicho ledger: a PostgreSQL database of something else (it has tables, but no daicho schema); nothing was written",
        ));
    }
    tx.batch_execute("CREATE TABLE IF NOT EXISTS daicho_schema (version INT NOT NULL)")
        .await
        .map_err(backend)?;
    let version: i32 = match tx.query_opt("SELECT version FROM daicho_schema", &[]).await.map_err(backend)? {
        Some(row) => row.get(0),
        None => {
            tx.execute("INSERT INTO daicho_schema (version) VALUES (0)", &[]).await.map_err(backend)?;
            0
        }
    };
    let version = version as usize;
    if version > MIGRATIONS.len() {
        return Err(StoreError::backend(format!(
            "the ledger has schema version {version}, newer than this daicho knows ({}); upgrade daicho",
            MIGRATIONS.len()
        )));
    }
    let applied = MIGRATIONS.len() - version;
    for sql in &MIGRATIONS[version..] {
        tx.batch_execute(sql).await.map_err(backend)?;
    }
    tx.execute("UPDATE daicho_schema SET version = $1", &[&(MIGRATIONS.len() as i32)])
        .await
        .map_err(backend)?;
    tx.commit().await.map_err(backend)?;
    Ok(applied)
}

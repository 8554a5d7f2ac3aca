//! `daicho-bench pages`: every web page on a large ledger (issue 18: under 100 ms each on
//! 100,000 rows), timed from a loopback client against `daicho serve`, next to the limit.

use std::process::Command;
use std::time::{Duration, Instant};

/// The limit a page must stay under.
const LIMIT: Duration = Duration::from_millis(100);

/// Seeds one project of `DAICHO_BENCH_PAGE_ROWS` rows (default 100,000: 60 % done, every tenth
/// waiting on the one before, a few queued for approval) and two small projects, with a run
/// history of `DAICHO_BENCH_PAGE_RUNS` run records (default: as many as rows; `/metrics` counts
/// every run since the first), serves it, and prints the median and slowest of 10 requests per
/// page.
pub fn bench_pages() {
    let rows = crate::load::env_usize("DAICHO_BENCH_PAGE_ROWS", 100_000);
    let bin = crate::daicho_bin();
    let dir = std::env::temp_dir().join(format!("daicho-bench-pages-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let db = dir.join("ledger.db");
    crate::run(&bin, &db, &["init", "--no-config"], None);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let started = Instant::now();
    let sample = runtime.block_on(seed(&db, rows));
    let runs = crate::load::env_usize("DAICHO_BENCH_PAGE_RUNS", rows);
    seed_runs(&db, rows, runs);
    eprintln!("pages: seeded {rows} rows and {runs} runs in {:.1} s", started.elapsed().as_secs_f64());
    let (port, mut serve) = crate::load::serve(&bin, &db, None, &dir);
    let pages = [
        "/".to_owned(),
        "/p/PJ-01".to_owned(),
        "/p/PJ-01?status=open&sort=due".to_owned(),
        "/p/PJ-01?sort=priority&assignee=ann".to_owned(),
        "/p/PJ-01?q=needle".to_owned(),
        format!("/p/PJ-01?sort=updated&after={sample}"),
        "/p/PJ-01/graph".to_owned(),
        "/approvals".to_owned(),
        format!("/t/{sample}"),
        "/metrics".to_owned(),
    ];
    let mut over = 0;
    runtime.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        for _ in 0..100 {
            if http.get(format!("{base}/")).send().await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for page in &pages {
            let mut times = Vec::new();
            for i in 0..11 {
                let t = Instant::now();
                let answer = http.get(format!("{base}{page}")).send().await.expect("request");
                let status = answer.status();
                let body = answer.bytes().await.expect("body");
                assert!(status.is_success(), "{page}: {status}");
                if i > 0 {
                    times.push(t.elapsed());
                }
                let _ = body;
            }
            times.sort();
            let (median, slowest) = (times[times.len() / 2], times[times.len() - 1]);
            over += usize::from(median > LIMIT);
            println!(
                "pages: {page:<40} median {}, slowest {} (limit {} ms, {rows} rows)",
                crate::ms(median),
                crate::ms(slowest),
                LIMIT.as_millis()
            );
        }
    });
    let _ = Command::new("kill").args(["-TERM", &serve.id().to_string()]).status();
    let _ = serve.wait();
    let _ = std::fs::remove_dir_all(&dir);
    if over > 0 {
        std::process::exit(1);
    }
}

/// Writes `runs` run records (attempts 1, 2, … of the large project's rows in turn, under five
/// actions, most succeeded) straight into the run table, in one transaction: the history a
/// ledger gathers over months, which the counts kept with it (`run_count`) answer without reading.
fn seed_runs(db: &std::path::Path, rows: usize, runs: usize) {
    let mut conn = rusqlite::Connection::open(db).expect("open");
    let tx = conn.transaction().expect("begin");
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO run (task, attempt, worker, action, started, finished, outcome, tokens_in, \
                 tokens_out, idempotency_key) VALUES (?1, ?2, 'worker:bench', ?3, ?4, ?4 + 500000, ?5, ?6, ?6, ?7)",
            )
            .expect("prepare");
        let start = jiff::Timestamp::now().as_microsecond() - runs as i64 * 1_000_000;
        for n in 0..runs {
            let (task, attempt) = (1 + n % rows, 1 + n / rows);
            let action = ["claude", "summarize", "mail", "build", "review"][n % 5];
            let outcome = if n % 7 == 0 { "failure" } else { "success" };
            let tokens = (n % 3 == 0).then_some(100 + (n % 50) as i64);
            let key = format!("T-{task:04}:{attempt}");
            let started = start + n as i64 * 1_000_000;
            insert
                .execute(rusqlite::params![
                    task as i64,
                    attempt as i64,
                    action,
                    started,
                    outcome,
                    tokens,
                    key
                ])
                .expect("run");
        }
    }
    tx.commit().expect("commit");
}

/// Seeds the ledger; returns a task id in the middle of the large project.
async fn seed(db: &std::path::Path, rows: usize) -> String {
    use daicho_core::edit::TaskEdit;
    use daicho_core::{Item, Status};
    use daicho_store::Store;
    let store =
        daicho_sqlite::SqliteStore::open(db, daicho_sqlite::SqliteOptions::default()).await.expect("open");
    let items: Vec<Item> = (0..rows)
        .map(|n| {
            let mut it = Item::new(
                &format!("row {n} of the large project{}", if n % 997 == 0 { " needle" } else { "" }),
                "bench",
            );
            it.project = "PJ-01".into();
            it.assignee = ["ann", "bob", "cy"][n % 3].into();
            it.priority = (n % 5) as i64;
            it.due = (n % 4 != 0).then(|| jiff::civil::date(2026, 1 + (n % 12) as i8, 1 + (n % 28) as i8));
            it.status = Some(if n * 10 < rows * 6 { Status::Done } else { Status::Pending });
            it.ref_id = Some(format!("r{n}"));
            if n % 10 == 9 {
                // The row before, in the same batch of 10,000.
                it.deps = vec![format!("r{}", n - 1)];
            }
            it
        })
        .chain((0..40).map(|n| {
            let mut it = Item::new(&format!("small {n}"), "bench");
            it.project = ["PJ-02", "PJ-03"][n % 2].into();
            it
        }))
        .collect();
    crate::seed_items(&store, items).await;
    let sample = daicho_core::TaskId::new((rows * 7 / 10) as u64);
    let edit = TaskEdit { correction: Some("a person's note".into()), ..TaskEdit::default() };
    store
        .edit(sample, edit, daicho_core::Actor::Human("bench".into()), jiff::Timestamp::now())
        .await
        .expect("edit");
    let queued: Vec<_> = (0..5).map(|n| daicho_core::TaskId::new((rows - n) as u64)).collect();
    store.queue_approvals(queued, "bench".into(), jiff::Timestamp::now()).await.expect("queue");
    sample.to_string()
}

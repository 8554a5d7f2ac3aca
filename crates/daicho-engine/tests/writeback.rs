//! Writing the ledger back into a Markdown source (X6) on a real SQLite ledger and real files:
//! a person's edit between the pull and the write is never lost.

use daicho_core::edit::TaskEdit;
use daicho_core::{Actor, Status};
use daicho_engine::Config;
use daicho_engine::clock::SystemClock;
use daicho_engine::writeback::pull_and_write_back;
use daicho_sqlite::{SqliteOptions, SqliteStore};
use daicho_store::{ListFilter, Store};

const CONFIG: &str = r#"
[[source]]
name = "tasks"
kind = "markdown"
path = "tasks.md"
done_path = "tasks-done.md"
write_back = true
"#;

const TASKS: &str = "# work\n- [ ] first | PJ:A\n- [ ] second | PJ:A\n";

struct Fixture {
    dir: tempfile::TempDir,
    store: SqliteStore,
    config: Config,
}

impl Fixture {
    async fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let store =
            SqliteStore::open(dir.path().join("ledger.db"), SqliteOptions::default()).await.expect("open");
        let mut config = Config::parse(CONFIG, "daicho.toml").expect("config");
        config.dir = dir.path().to_owned();
        std::fs::write(dir.path().join("tasks.md"), TASKS).expect("tasks.md");
        Fixture { dir, store, config }
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }

    /// Pulls and writes back, with `between` run after each pull.
    async fn write_back(
        &self,
        between: &mut (dyn FnMut() + Send),
    ) -> daicho_engine::writeback::WriteBackReport {
        let (pulled, report) =
            pull_and_write_back(&self.store, &self.config, &SystemClock, &self.config.sources[0], between)
                .await
                .expect("write back");
        assert_eq!(pulled.error, None);
        report.expect("a write-back source reports")
    }

    /// A person closes the row titled `title`.
    async fn close(&self, title: &str) {
        let rows = self.store.list(ListFilter::default()).await.expect("list");
        let row = rows.iter().find(|t| t.title == title).expect("row");
        let edit = TaskEdit { status: Some(Status::Done), ..TaskEdit::default() };
        self.store
            .edit(row.id, edit, Actor::Human("ana".into()), jiff::Timestamp::now())
            .await
            .expect("edit");
    }
}

/// X6: a line a person adds while daicho writes back is kept (the write is retried from a fresh
/// pull, so the new line is also in the ledger); when the file changes under both attempts,
/// nothing is written and a conflict is reported.
#[tokio::test]
async fn x6_a_persons_edit_between_pull_and_write_is_never_lost() {
    let fx = Fixture::new().await;
    fx.write_back(&mut || {}).await;
    fx.close("first").await;
    let tasks = fx.dir.path().join("tasks.md");
    let mut edits = 0;
    let report = fx
        .write_back(&mut || {
            if edits == 0 {
                let text =
                    std::fs::read_to_string(&tasks).expect("read") + "- [ ] third, added by a person\n";
                std::fs::write(&tasks, text).expect("edit");
            }
            edits += 1;
        })
        .await;
    assert_eq!(edits, 2, "the edit made it pull and try again");
    assert!(report.written && report.conflict.is_none(), "{report:?}");
    assert_eq!(fx.file("tasks.md"), "# work\n- [ ] second | PJ:A\n- [ ] third, added by a person\n");
    assert_eq!(fx.file("tasks-done.md"), "- [x] first | PJ:A\n");
    let titles: Vec<String> =
        fx.store.list(ListFilter::default()).await.expect("list").into_iter().map(|t| t.title).collect();
    assert!(titles.contains(&"third, added by a person".to_owned()), "{titles:?}");

    // A person editing through both attempts: the file is left as they wrote it.
    fx.close("second").await;
    let mut n = 0;
    let report = fx
        .write_back(&mut || {
            n += 1;
            let text = std::fs::read_to_string(&tasks).expect("read") + &format!("- [ ] edit {n}\n");
            std::fs::write(&tasks, text).expect("edit");
        })
        .await;
    assert!(!report.written && report.conflict.is_some(), "{report:?}");
    assert_eq!(
        fx.file("tasks.md"),
        "# work\n- [ ] second | PJ:A\n- [ ] third, added by a person\n- [ ] edit 1\n- [ ] edit 2\n"
    );
    // The next write-back, undisturbed, moves `second` (once) and keeps the person's lines.
    let report = fx.write_back(&mut || {}).await;
    assert!(report.written, "{report:?}");
    assert_eq!(fx.file("tasks.md"), "# work\n- [ ] third, added by a person\n- [ ] edit 1\n- [ ] edit 2\n");
    assert_eq!(fx.file("tasks-done.md"), "- [x] first | PJ:A\n- [x] second | PJ:A\n");
}

/// X6: the file keeps its mode, and a write-back with nothing to change writes nothing.
#[tokio::test]
async fn x6_the_file_keeps_its_mode_and_an_unchanged_ledger_writes_nothing() {
    use std::os::unix::fs::PermissionsExt as _;
    let fx = Fixture::new().await;
    let tasks = fx.dir.path().join("tasks.md");
    std::fs::set_permissions(&tasks, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let report = fx.write_back(&mut || {}).await;
    assert!(!report.written, "nothing to change: {report:?}");
    fx.close("second").await;
    let report = fx.write_back(&mut || {}).await;
    assert!(report.written && report.moved == 1, "{report:?}");
    let mode = std::fs::metadata(&tasks).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

//! Markdown write-back (X6): the person working in `tasks.md` sees what daicho ran, in their own
//! file, with every other byte kept.

use serde_json::Value;

use crate::{Ledger, fixture};

const CONFIG: &str = r#"
[[source]]
name = "tasks"
kind = "markdown"
path = "tasks.md"
done_path = "tasks-done.md"
write_back = true

[[action]]
name = "write"
kind = "command"
command = ["true"]
auto = true
on_success = "done"
assignees = ["qiita-writer"]

[[action]]
name = "record"
kind = "command"
command = ["true"]
auto = true
on_success = "done"
assignees = ["secretary"]

[[action]]
name = "publish"
kind = "command"
command = ["true"]
auto = true
external = true
assignees = ["publisher"]
"#;

/// X6: seed 004's T-500…T-504, in a file with a BOM, CRLF line ends, a comment and prose, swept
/// to the end: `tasks.md` keeps T-504 only (awaiting approval, unchecked) and every other line
/// byte for byte; `tasks-done.md` gets T-500…T-503, checked, otherwise as they were written.
#[test]
fn x6_seed_004_swept_to_the_end_leaves_t504_and_moves_the_rest_to_the_done_file() {
    let ledger = Ledger::new();
    ledger.file("daicho.toml", CONFIG);
    let seed = std::fs::read_to_string(fixture("seed-004-tasks.md")).expect("fixture");
    let lines: Vec<&str> = seed.lines().filter(|l| l.starts_with("- [ ]")).collect();
    assert_eq!(lines.len(), 5);
    let head = "\u{feff}# PJ-03 article\r\n<!-- the worker's ledger -->\r\n\r\n";
    let tail = "\r\nNotes stay where they are.\r\n";
    ledger.file("tasks.md", format!("{head}{}\r\n{tail}", lines.join("\r\n")));
    let synced: Value = ledger.run(&["sync", "--json"]).ok().json();
    assert_eq!(synced["sources"][0]["added"], 5, "{synced}");
    assert_eq!(synced["sources"][0]["write_back"]["written"], false, "nothing to write yet: {synced}");
    for _ in 0..6 {
        let swept: Value = ledger.run(&["sweep", "--role", "auto", "--max", "2", "--json"]).ok().json();
        if swept["ran"].as_array().is_some_and(Vec::is_empty) {
            break;
        }
    }
    let tasks = std::fs::read_to_string(ledger.dir.path().join("tasks.md")).expect("tasks.md");
    assert_eq!(tasks, format!("{head}{}\r\n{tail}", lines[4]));
    let done = std::fs::read_to_string(ledger.dir.path().join("tasks-done.md")).expect("tasks-done.md");
    let checked: Vec<String> = lines[..4].iter().map(|l| l.replacen("- [ ]", "- [x]", 1)).collect();
    assert_eq!(done, format!("{}\r\n", checked.join("\r\n")));
    let t504: Value = ledger.run(&["show", "T-504", "--json"]).ok().json();
    assert_eq!((t504["status"].as_str(), t504["run"].as_bool()), (Some("pending"), Some(false)));
    // Pulled again, the files change nothing in the ledger and are not rewritten.
    let again: Value = ledger.run(&["sync", "--json"]).ok().json();
    assert_eq!(
        (again["sources"][0]["added"].as_u64(), again["sources"][0]["updated"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(again["sources"][0]["write_back"]["written"], false, "{again}");
    assert_eq!(std::fs::read_to_string(ledger.dir.path().join("tasks.md")).expect("tasks.md"), tasks);
}

/// X6: a sweep that runs 1,000 tasks of the file rewrites it once, not once per task (counted
/// with strace: renames onto tasks.md).
#[test]
fn x6_a_round_of_1000_tasks_rewrites_the_file_once() {
    let ledger = Ledger::new();
    ledger.file("daicho.toml", CONFIG);
    let lines: String = (0..1000).map(|n| format!("- [ ] task {n} | 担当:qiita-writer | 🤖\n")).collect();
    ledger.file("tasks.md", format!("# many\n{lines}"));
    ledger.run(&["sync"]).ok();
    let (output, calls) =
        ledger.traced("rename,renameat,renameat2", &["sweep", "--role", "auto", "--max", "1000", "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let swept: Value = serde_json::from_slice(&output.stdout).expect("sweep JSON");
    assert_eq!(swept["ran"].as_array().map(Vec::len), Some(1000));
    let onto_tasks = calls.iter().filter(|l| l.contains("rename") && l.contains("tasks.md\"")).count();
    assert_eq!(onto_tasks, 1, "{calls:#?}");
    assert_eq!(std::fs::read_to_string(ledger.dir.path().join("tasks.md")).expect("tasks.md"), "# many\n");
    let done = std::fs::read_to_string(ledger.dir.path().join("tasks-done.md")).expect("done");
    assert_eq!(done.lines().count(), 1000);
}

/// X6: `daicho run` of one task writes its line back too.
#[test]
fn x6_a_run_of_one_task_writes_its_line_back() {
    let ledger = Ledger::new();
    ledger.file("daicho.toml", CONFIG);
    ledger.file("tasks.md", "- [ ] [T-7] one | 担当:qiita-writer\n- [ ] [T-8] two | 担当:qiita-writer\n");
    ledger.run(&["sync"]).ok();
    ledger.run(&["run", "T-8"]).ok();
    let tasks = std::fs::read_to_string(ledger.dir.path().join("tasks.md")).expect("tasks.md");
    assert_eq!(tasks, "- [ ] [T-7] one | 担当:qiita-writer\n");
    let done = std::fs::read_to_string(ledger.dir.path().join("tasks-done.md")).expect("done");
    assert_eq!(done, "- [x] [T-8] two | 担当:qiita-writer\n");
}

/// X6: with `result_link`, a result that is a link is written into the line as 実行結果; the
/// next pull carries it back and, since it is what the row holds, reports nothing ignored (S13).
#[test]
fn x6_a_result_link_is_written_into_the_line_and_pulled_back_quietly() {
    let ledger = Ledger::new();
    ledger.file(
        "daicho.toml",
        "[[source]]\nname = \"tasks\"\nkind = \"markdown\"\npath = \"tasks.md\"\ndone_path = \"tasks-done.md\"\n\
         write_back = true\nresult_link = true\n\n[[action]]\nname = \"pr\"\nkind = \"command\"\n\
         command = [\"echo\", \"https://example.test/pr/42\"]\n",
    );
    ledger.file("tasks.md", "- [ ] open a PR | AI機能:pr\n");
    ledger.run(&["sync"]).ok();
    ledger.run(&["run", "T-0001"]).ok();
    let tasks = std::fs::read_to_string(ledger.dir.path().join("tasks.md")).expect("tasks.md");
    assert_eq!(
        tasks,
        "- [ ] open a PR | AI機能:pr | 状態:AI実行済(要確認) | 実行結果:https://example.test/pr/42\n"
    );
    let synced: Value = ledger.run(&["sync", "--json"]).ok().json();
    assert_eq!(synced["sources"][0]["ignored"], Value::Null, "nothing to report: {synced}");
    assert_eq!(synced["sources"][0]["write_back"]["written"], false, "{synced}");
    ledger.file(
        "daicho.toml",
        "[[source]]\nname = \"t\"\nkind = \"markdown\"\npath = \"tasks.md\"\nresult_link = true\n",
    );
    let run = ledger.run(&["sync"]);
    assert!(run.stderr.contains("result_link needs write_back = true"), "{}", run.stderr);
}

/// X6: write_back is refused where it cannot work, naming the source.
#[test]
fn x6_write_back_needs_a_markdown_source_with_a_done_file() {
    let ledger = Ledger::new();
    ledger.file(
        "daicho.toml",
        "[[source]]\nname = \"todo\"\nkind = \"markdown\"\npath = \"todo.md\"\nwrite_back = true\n",
    );
    let refused = ledger.run(&["sync"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("source 'todo': write_back is for markdown sources with a done_path"),
        "{}",
        refused.stderr
    );
}

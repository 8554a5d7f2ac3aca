//! X4: bad input gets an error naming file, line and reason, and the ledger is unchanged.

use crate::{Ledger, fixture};

/// Imports `contents` as `name`; asserts exit 1, the message, and an unchanged ledger.
#[track_caller]
fn refused(ledger: &Ledger, name: &str, contents: &[u8], expect: &str) {
    let before = ledger.export();
    let path = ledger.file(name, contents);
    let run = ledger.run(&["import", &path]);
    assert_eq!(run.code, 1, "{name}: expected a refusal\n{}", run.stderr);
    let want = format!("{path}{expect}");
    assert!(run.stderr.contains(&want), "{name}: expected {want:?} in:\n{}", run.stderr);
    assert_eq!(ledger.export(), before, "{name}: the ledger changed");
}

fn seeded() -> Ledger {
    let ledger = Ledger::new();
    ledger.run(&["import", &fixture("seed-004-tasks.md")]).ok();
    ledger.run(&["set", "T-500", "--correction", "keep it short"]).ok();
    ledger
}

#[test]
fn x4_malformed_markdown_line() {
    let ledger = seeded();
    let text = "- [ ] [T-0100] fine line\n- [ ] [T-0101] another | 依存:T-0100\n- [?] [T-0102] odd box\n";
    refused(&ledger, "bad.md", text.as_bytes(), ":3: malformed checkbox '[?]'");
}

#[test]
fn x4_invalid_json() {
    let ledger = seeded();
    refused(
        &ledger,
        "bad.json",
        b"[\n  {\"title\": \"ok\"},\n  {\"title\": \"broken\",,}\n]",
        ":3: invalid JSON",
    );
}

#[test]
fn x4_csv_with_a_missing_column() {
    let ledger = seeded();
    refused(
        &ledger,
        "bad.csv",
        "id,status,body\nT-0100,pending,x\n".as_bytes(),
        ":1: missing column 'title'",
    );
}

#[test]
fn x4_d2_a_dependency_cycle() {
    let ledger = seeded();
    let text = "- [ ] [T-0100] fine\n- [ ] [T-0101] a | 依存:T-0102\n- [ ] [T-0102] b | 依存:T-0101\n";
    refused(&ledger, "cycle.md", text.as_bytes(), ":2: dependency cycle: T-0101 → T-0102 → T-0101");
}

#[test]
fn x4_d2_a_dependency_on_an_unknown_id() {
    let ledger = seeded();
    let text = "- [ ] [T-0100] fine\n- [ ] [T-0101] waits | 依存:T-0999\n";
    refused(
        &ledger,
        "unknown.md",
        text.as_bytes(),
        ":2: T-0101 depends on T-0999, which is not in the ledger",
    );
}

#[test]
fn x4_invalid_utf8() {
    let ledger = seeded();
    refused(&ledger, "latin1.md", b"- [ ] [T-0100] fine\n- [ ] caf\xe9 au lait\n", ":2: invalid UTF-8");
}

#[test]
fn x4_a_10_mb_field() {
    let ledger = seeded();
    let body = "x".repeat(10 << 20);
    let text = format!("[{{\"title\": \"fine\"}},\n{{\"title\": \"huge\", \"body\": \"{body}\"}}]");
    refused(&ledger, "big.json", text.as_bytes(), ":2: field 'body' is 10485760 bytes, over the limit");
}

#[test]
fn x4_one_bad_file_refuses_the_whole_import() {
    let ledger = seeded();
    let before = ledger.export();
    let bad = ledger.file("bad.md", "- [ ] ok\n- [ ] [T-x] bad id\n");
    let run = ledger.run(&["import", &fixture("tasks-open.md"), &bad]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains(&format!("{bad}:2: malformed id")), "{}", run.stderr);
    assert_eq!(ledger.export(), before);
}

#[test]
fn x4_push_refuses_bad_input_with_json_error_and_writes_nothing() {
    let ledger = seeded();
    let before = ledger.export();
    let run = ledger.run_with_input(&["push"], b"[{\"title\": \"a\", \"deps\": [\"T-0404\"]}]");
    assert_eq!(run.code, 1);
    let error: serde_json::Value = run.json();
    let message = error["error"].as_str().unwrap();
    // The item is named by its title: the id the ledger would have chosen for it is no row's.
    assert_eq!(message, "<stdin>:1: task 'a' depends on T-0404, which is not in the ledger");
    assert_eq!(ledger.export(), before);
}

/// X4: an id twice in an import of several files names both places, each with its file, and
/// a skipped item of such an import names its file.
#[test]
fn x4_an_id_twice_across_files_names_both_files() {
    let ledger = seeded();
    let before = ledger.export();
    let a = ledger.file("a1.csv", "id,title\nT-0950,alpha\n");
    let b = ledger.file("b1.csv", "id,title\nT-0951,other\nT-0950,beta\n");
    let run = ledger.run(&["import", &a, &b]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let expected = format!("{b}:3: id 'T-0950' appears twice in this input: here and at {a}:2");
    assert!(run.stderr.contains(&expected), "{}", run.stderr);
    assert_eq!(ledger.export(), before);
    // A skip of an import of several files names its file too.
    let c = ledger.file("c1.csv", "id,title\nT-0952,alpha\n");
    let run = ledger.run(&["import", &a, &c]).ok();
    assert!(run.stdout.contains(&format!("skipped {c}:2: alpha: duplicate key")), "{}", run.stdout);
    let json = ledger.run(&["import", &a, &c, "--json"]).ok().json::<serde_json::Value>();
    assert_eq!(
        (json["skips"][0]["file"].as_str(), json["skips"][1]["file"].as_str()),
        (Some(a.as_str()), Some(c.as_str())),
        "{json}"
    );
}

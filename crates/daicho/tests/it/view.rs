//! `daicho view` (V1–V5): snapshots of every format, the cap line, dashboard counts, undated
//! last, overdue marked, text escaped.

use crate::Ledger;

/// A ledger of three projects: PJ-03 over the cap of 3, a dashboard source, an overdue row, a
/// review and a needs_human row, undated rows, closed rows that never show.
fn ledger() -> Ledger {
    let ledger = Ledger::new();
    ledger.file(
        "daicho.toml",
        "[[source]]\nname = \"inbox\"\nkind = \"jsonl\"\npath = \"inbox.jsonl\"\nproject = \"support\"\ndashboard = true\n",
    );
    ledger.file("inbox.jsonl", "{\"title\": \"q1\"}\n{\"title\": \"q2\"}\n");
    ledger.run(&["sync"]).ok();
    let rows = r#"[
      {"id": "T-0010", "title": "undated early", "project": "PJ-03"},
      {"id": "T-0011", "title": "due later", "project": "PJ-03", "due": "2999-12-31"},
      {"id": "T-0012", "title": "overdue <b>report</b> | urgent", "project": "PJ-03", "due": "2001-01-01"},
      {"id": "T-0013", "title": "undated late", "project": "PJ-03"},
      {"id": "T-0014", "title": "in review", "project": "PJ-03", "status": "review", "due": "2999-06-01"},
      {"id": "T-0020", "title": "parked", "project": "PJ-04", "status": "needs_human"},
      {"id": "T-0021", "title": "finished", "project": "PJ-04", "status": "done"},
      {"id": "T-0022", "title": "abandoned", "project": "PJ-04", "status": "dropped"}
    ]"#;
    ledger.run(&["import", &ledger.file("rows.json", rows), "--source", "plan"]).ok();
    ledger
}

fn view(ledger: &Ledger, format: &str) -> String {
    ledger.run(&["view", "--format", format, "--per-project", "3"]).ok().stdout
}

#[test]
fn v1_v5_markdown_snapshot() {
    insta::assert_snapshot!(view(&ledger(), "md"));
}

#[test]
fn v1_v5_json_snapshot() {
    insta::assert_snapshot!(view(&ledger(), "json"));
}

#[test]
fn v1_v5_html_snapshot() {
    insta::assert_snapshot!(view(&ledger(), "html"));
}

#[test]
fn v1_v5_terminal_snapshot() {
    insta::assert_snapshot!(view(&ledger(), "term"));
}

/// V3 never cuts silently; V4 marks; text is escaped in HTML; `--out` writes the file.
#[test]
fn v3_the_cap_line_counts_what_is_left_and_html_escapes_text() {
    let ledger = ledger();
    let md = view(&ledger, "md");
    assert!(md.contains("… 2 more in the PJ-03 ledger"), "{md}");
    assert!(md.contains("support: 2 open in inbox (its own dashboard)"), "{md}");
    assert!(!md.contains("finished") && !md.contains("abandoned"), "closed rows never show");
    let html = view(&ledger, "html");
    assert!(html.contains("overdue &lt;b&gt;report&lt;/b&gt; | urgent"), "{html}");
    assert!(!html.contains("<b>report</b>"));
    assert!(html.contains("<tr class=\"overdue\">"), "{html}");
    assert!(html.contains("<tr class=\"needs_human\">"), "{html}");
    let out = ledger.dir.path().join("view.html");
    ledger.run(&["view", "--format", "html", "--out", out.to_str().unwrap()]).ok();
    assert_eq!(std::fs::read_to_string(out).unwrap(), ledger.run(&["view", "--format", "html"]).ok().stdout);
}

/// R1, V5: the view role writes the HTML and Markdown files named in [view], beside the config.
#[test]
fn v5_the_view_role_writes_its_files() {
    let ledger = ledger();
    let mut config = std::fs::read_to_string(ledger.dir.path().join("daicho.toml")).unwrap();
    config.push_str("\n[view]\nhtml = \"out/view.html\"\nmarkdown = \"out/view.md\"\nper_project = 3\n\n[[schedule]]\nrole = \"view\"\ncron = \"0 6 * * *\"\n");
    std::fs::create_dir_all(ledger.dir.path().join("out")).unwrap();
    ledger.file("daicho.toml", config);
    let report: serde_json::Value = ledger.run(&["sweep", "--role", "view", "--json"]).ok().json();
    assert_eq!(report["written"].as_array().unwrap().len(), 2, "{report}");
    let md = std::fs::read_to_string(ledger.dir.path().join("out/view.md")).unwrap();
    assert_eq!(md.trim_end(), view(&ledger, "md").trim_end());
    let html = std::fs::read_to_string(ledger.dir.path().join("out/view.html")).unwrap();
    assert!(html.contains("… 2 more in the PJ-03 ledger"));
    let served = ledger.run(&["serve", "--now", "--once", "--json"]).ok().stdout;
    assert!(served.contains("\"role\":\"view\""), "{served}");
}

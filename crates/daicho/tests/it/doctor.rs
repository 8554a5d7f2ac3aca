//! `daicho doctor` (F3): stuck states found, explained, and fixed by the command it offers.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Ledger;

fn findings(ledger: &Ledger) -> (i32, Vec<(String, String, String)>) {
    let run = ledger.run(&["doctor", "--json"]);
    let report: Value = run.json();
    let list = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_owned(),
                f["task"].as_str().unwrap_or("").to_owned(),
                f["fix"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (run.code, list)
}

#[test]
fn f3_doctor_finds_stuck_states_and_offers_the_fix() {
    let ledger = Ledger::new();
    let slow = ledger.script("slow.sh", "cat > /dev/null\nsleep 5\necho late\n");
    ledger.file(
        "daicho.toml",
        format!(
            "[policy]\nlease = \"1s\"\n\n[[action]]\nname = \"work\"\nkind = \"command\"\ncommand = [\"{slow}\"]\ntypes = [\"dev\"]\nauto = true\n\n\
             [[action]]\nname = \"publish\"\nkind = \"command\"\ncommand = [\"{slow}\"]\ntypes = [\"release\"]\nexternal = true\nauto = true\n"
        ),
    );
    let (code, list) = findings(&ledger);
    assert_eq!((code, list.len()), (0, 0), "a fresh ledger is healthy: {list:?}");
    assert_eq!(ledger.run(&["doctor"]).ok().stdout.trim(), "nothing stuck");

    let tasks = r#"[
      {"id": "T-0001", "title": "build", "type": "dev", "tags": ["ai"]},
      {"id": "T-0002", "title": "translate", "type": "i18n", "tags": ["ai"]},
      {"id": "T-0003", "title": "ship", "type": "release", "tags": ["ai"]},
      {"id": "T-0004", "title": "stuck", "status": "needs_human"}
    ]"#;
    ledger.run(&["import", &ledger.file("t.json", tasks)]).ok();
    // A worker killed mid-run leaves its row running; its lease (1 s) expires.
    let mut run = ledger.command(&["run", "T-0001"]).spawn().unwrap();
    let started = Instant::now();
    while ledger.tasks().iter().find(|t| t.id == "T-0001").unwrap().status != "running" {
        assert!(started.elapsed() < Duration::from_secs(20), "the run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    run.kill().unwrap();
    run.wait().unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    ledger.run(&["pause", "--reason", "maintenance"]).ok();

    let (code, list) = findings(&ledger);
    assert_eq!(code, 1);
    let kinds: Vec<(&str, &str)> = list.iter().map(|(k, t, _)| (k.as_str(), t.as_str())).collect();
    assert_eq!(
        kinds,
        [
            ("paused", ""),
            ("expired_lease", "T-0001"),
            ("stalled", "T-0002"),
            ("awaiting_approval", "T-0003"),
            ("needs_human", "T-0004")
        ]
    );
    // The fixes offered work.
    ledger.run(&["resume"]).ok();
    let fix = &list[1].2;
    let argv: Vec<&str> = fix.split("   ").next().unwrap().split_whitespace().skip(1).collect();
    assert_eq!(argv, ["sweep", "--role", "run-requested", "--max", "0"]);
    ledger.run(&argv).ok();
    let (_, after) = findings(&ledger);
    assert!(after.iter().all(|(k, _, _)| k != "expired_lease" && k != "paused"), "{after:?}");
    let row = ledger.tasks().into_iter().find(|t| t.id == "T-0001").unwrap();
    assert_eq!((row.status.as_str(), row.failures), ("pending", 1), "the lost run counted once, nothing run");
}

/// F2 from the command line: a dry run lists what would go and what stays with its reason and
/// writes nothing; `--apply` deletes; `restore` brings the rows back identical.
#[test]
fn f2_purge_source_is_a_dry_run_unless_applied_and_restore_undoes_it() {
    let ledger = Ledger::new();
    let rows = r#"[{"title": "noise 1"}, {"title": "noise 2"}, {"title": "kept"}]"#;
    ledger.run(&["import", &ledger.file("scan.json", rows), "--source", "scan"]).ok();
    ledger.run(&["set", "T-0003", "--correction", "look at this one"]).ok();
    let before = ledger.tasks();
    let dry: Value = ledger.run(&["purge-source", "scan", "--json"]).ok().json();
    assert_eq!(dry["purged"], serde_json::json!(["T-0001", "T-0002"]));
    assert_eq!(dry["kept"][0]["id"], "T-0003");
    assert!(dry["kept"][0]["reason"].as_str().unwrap().contains("correction"), "{dry}");
    assert_eq!(ledger.tasks(), before, "a dry run writes nothing");
    let text = ledger.run(&["purge-source", "scan"]).ok().stdout;
    assert!(text.contains("would purge 2 rows of scan") && text.contains("kept T-0003"), "{text}");

    ledger.run(&["purge-source", "scan", "--apply"]).ok();
    let left: Vec<String> = ledger.tasks().into_iter().map(|t| t.id).collect();
    assert_eq!(left, ["T-0003"]);
    let restored: Value = ledger.run(&["restore", "scan", "--json"]).ok().json();
    assert_eq!(restored["restored"], serde_json::json!(["T-0001", "T-0002"]));
    assert_eq!(ledger.tasks(), before, "restored identical");
}

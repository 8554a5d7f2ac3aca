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

//! The web UI end to end (I2, S2, S3, V6; issue 18): `daicho serve` as a real process, a real
//! headless Chromium doing what a person does, and every write read back through the CLI.

use std::process::Child;
use std::time::Duration;

use fantoccini::Locator;
use serde_json::Value;

use crate::Ledger;
use crate::chrome::{browser, driver, free_port, save_screenshot, submit, text};

/// `daicho serve`, stopped when dropped.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const CONFIG: &str = r#"
[[action]]
name = "publish"
kind = "command"
command = ["true"]
external = true
auto = true
"#;

/// I2, S2, S3, V6: a person filters, sorts and pages the ledger, opens the graph and follows a
/// node, approves two external tasks at once and rejects a third with one reason, and gives a
/// parked task its tries back — in Chromium against `daicho serve`; `daicho show`, `daicho
/// approve --history` and `daicho list` see each write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i2_a_person_works_the_web_ui_and_the_cli_sees_every_write() {
    let Some(driver) = driver().await else { return };
    let ledger = Ledger::new();
    ledger.file("daicho.toml", CONFIG);
    // 205 rows of PJ-01 (two pages), three invoices among them.
    let rows: Vec<String> = (0..205)
        .map(|n| {
            let title = if n % 70 == 0 { format!("Send invoice {n}") } else { format!("row {n}") };
            serde_json::json!({ "title": title, "project": "PJ-01", "priority": n % 5 }).to_string()
        })
        .collect();
    ledger.file("rows.jsonl", rows.join("\n") + "\n");
    ledger.run(&["import", "rows.jsonl"]).ok();
    // A chain to draw, three external tasks to decide, and a task parked after three failures.
    ledger.run(&["add", "collect the figures", "-p", "PJ-02"]).ok();
    ledger.run(&["add", "write the report", "-p", "PJ-02", "--deps", "T-0206"]).ok();
    for title in ["publish the report", "mail the client", "order the banner"] {
        ledger.run(&["add", title, "-p", "PJ-02", "--action", "publish", "--tag", "ai"]).ok();
    }
    let parked = r#"[{"id": "T-0300", "title": "flaky build", "project": "PJ-02", "source": "manual",
                     "status": "needs_human", "failures": 3}]"#;
    ledger.file("parked.json", parked);
    ledger.run(&["import", "--ledger", "parked.json"]).ok();
    ledger.run(&["set", "T-0206", "--status", "done"]).ok();
    let swept: Value = ledger.run(&["sweep", "--json", "--role", "auto", "--max", "5"]).ok().json();
    assert_eq!(swept["queued"], serde_json::json!(["T-0208", "T-0209", "T-0210"]), "{swept}");

    let port = free_port();
    let child = ledger.command(&["serve", "--bind", &format!("127.0.0.1:{port}")]).spawn().expect("serve");
    let _serve = Serve(child);
    let base = format!("http://127.0.0.1:{port}");
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let client = browser(&driver).await;
    client.set_window_size(1280, 800).await.expect("window size");
    let rows_shown = "return document.querySelectorAll('#ledger tbody tr').length";

    // The ledger: a search, a sort, the next page.
    client.goto(&format!("{base}/p/PJ-01")).await.expect("ledger");
    client.find(Locator::Css("#f-q")).await.expect("search").send_keys("invoice").await.expect("type");
    submit(&client, "#f-apply").await;
    assert_eq!(client.execute(rows_shown, vec![]).await.expect("rows"), serde_json::json!(3));
    client.goto(&format!("{base}/p/PJ-01?sort=priority")).await.expect("sorted");
    let first = text(&client, "#ledger tbody tr:first-child td.id").await;
    assert_eq!(first, "T-0005", "the first row of the largest priority");
    client.find(Locator::Css("#next-page")).await.expect("next").click().await.expect("click");
    assert_eq!(client.execute(rows_shown, vec![]).await.expect("rows"), serde_json::json!(5));

    // The graph of PJ-02, and a node followed to its task.
    client.goto(&format!("{base}/p/PJ-02/graph")).await.expect("graph");
    let fill = client
        .execute("return document.querySelector('#node-T-0206 rect').getAttribute('fill')", vec![])
        .await
        .expect("fill");
    assert_eq!(fill, serde_json::json!("#2e7d32"), "done is green");
    client.find(Locator::Css("#node-T-0207")).await.expect("node").click().await.expect("click");
    assert_eq!(client.current_url().await.expect("url").path(), "/t/T-0207");

    // Two approved at once, one rejected with a reason.
    client.goto(&format!("{base}/approvals")).await.expect("approvals");
    assert!(text(&client, "#approval-T-0208").await.contains("publish (command)"));
    for id in ["T-0208", "T-0209"] {
        client.find(Locator::Css(&format!("#pick-{id}"))).await.expect("box").click().await.expect("tick");
    }
    submit(&client, "#approve-selected").await;
    client.find(Locator::Css("#pick-T-0210")).await.expect("box").click().await.expect("tick");
    client
        .find(Locator::Css("#bulk-reason"))
        .await
        .expect("reason")
        .send_keys("no banner this year")
        .await
        .expect("type");
    submit(&client, "#reject-selected").await;
    save_screenshot(&client, "e2e-approvals-history.png").await;
    for id in ["T-0208", "T-0209"] {
        let shown: Value = ledger.run(&["show", "--json", id]).ok().json();
        assert_eq!(
            (shown["run"].as_bool(), shown["status"].as_str()),
            (Some(true), Some("pending")),
            "{shown}"
        );
    }
    let rejected: Value = ledger.run(&["show", "--json", "T-0210"]).ok().json();
    assert_eq!(rejected["status"], "dropped");
    assert_eq!(rejected["correction"], "rejected: no banner this year");
    let history: Vec<Value> = ledger.run(&["approve", "--history", "--json"]).ok().json();
    let decided: Vec<(&str, &str, &str)> = history
        .iter()
        .map(|d| {
            (d["id"].as_str().unwrap(), d["decision"].as_str().unwrap(), d["decided_by"].as_str().unwrap())
        })
        .collect();
    assert_eq!(decided.len(), 3, "{history:?}");
    assert!(decided.contains(&("T-0210", "rejected", "human:web")), "{decided:?}");

    // The parked task: failures reset, run again.
    client.goto(&format!("{base}/t/T-0300")).await.expect("task");
    submit(&client, "#fix-retry").await;
    let retried: Value = ledger.run(&["show", "--json", "T-0300"]).ok().json();
    assert_eq!(
        (retried["status"].as_str(), retried["run"].as_bool(), retried["failures"].as_u64()),
        (Some("pending"), Some(true), Some(0)),
        "{retried}"
    );
    let parked: Vec<Value> = ledger.run(&["list", "--json", "--status", "needs_human"]).ok().json();
    assert!(parked.is_empty());
    client.close().await.expect("close the browser");
}

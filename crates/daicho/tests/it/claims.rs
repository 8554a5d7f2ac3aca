//! Claims that find work (I5): rows a claimer may not run, however many, never hide the one it
//! may — over MCP, the HTTP API and a worker alike.

use std::io::{Read as _, Write as _};
use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::transport::TokioChildProcess;
use serde_json::Value;

use crate::Ledger;
use crate::mcp::CONFIG;
use crate::serve::free_port;

/// How many ready rows no claim may take.
const HELD: usize = 100_000;

/// One HTTP/1.0 POST of a JSON body; the response's body, or `None` while nothing listens.
pub(crate) fn http_post(port: u16, path: &str, body: &str) -> Option<String> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split_once("\r\n\r\n").map(|(_, body)| body.to_owned())
}

/// Pushes one row every claimer may run (an `ai` task of the auto action `write`), last in run
/// order behind the held ones; returns its id.
fn push_eligible(ledger: &Ledger, title: &str) -> String {
    let item = format!(r#"[{{"title": "{title}", "action": "write", "tags": "ai", "priority": 0}}]"#);
    let pushed: Value = ledger.run_with_input(&["push", "--project", "PJ-01"], item.as_bytes()).ok().json();
    assert_eq!(pushed["added"], 1, "{pushed}");
    let rows = ledger.run(&["list", "--json", "--status", "pending"]).ok().stdout;
    let rows: Vec<Value> = serde_json::from_str(&rows).expect("list JSON");
    let row = rows.iter().find(|r| r["title"] == title).expect("the pushed row");
    row["id"].as_str().expect("id").to_owned()
}

/// I5: with 100,000 ready rows ahead in run order that no claimer may take — manual tasks,
/// external ones awaiting approval, heavy ones — an MCP agent's `claim_next`, a remote worker's
/// `POST /api/v1/claim` and a `daicho worker` each get the one eligible row in one call, and
/// the external rows met are put in the approval queue. Before claims chose rows in the query,
/// each looked at the first 1,000 (or 5,000) ready rows only and answered "nothing".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i3_i4_i5_a_claim_gets_the_one_eligible_row_behind_100000_held_ones() {
    let ledger = Ledger::new();
    ledger.file("daicho.toml", CONFIG);
    let mut held = String::new();
    for n in 0..HELD {
        let (action, tags) = match n % 3 {
            0 => ("", ""),
            1 => ("publish", "ai"),
            _ => ("render", "ai"),
        };
        held.push_str(&format!(
            "{{\"title\": \"held {n}\", \"action\": \"{action}\", \"tags\": \"{tags}\", \"priority\": 5}}\n"
        ));
    }
    let file = ledger.file("held.jsonl", held);
    let pushed: Value = ledger.run(&["push", "--project", "PJ-01", &file]).ok().json();
    assert_eq!(pushed["added"], HELD, "{pushed}");

    // An agent over MCP.
    let first = push_eligible(&ledger, "for the agent");
    let transport = TokioChildProcess::new(tokio::process::Command::from(ledger.command(&["mcp"])))
        .expect("daicho mcp starts");
    let info = ClientConfig::new(ClientCapabilities::default(), Implementation::new("test-agent", "1.0"));
    let client = info.serve(transport).await.expect("MCP handshake");
    let result = client.call_tool(CallToolRequestParams::new("claim_next")).await.expect("claim_next");
    let text: String = result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect();
    let claimed: Value = serde_json::from_str(&text).expect("claim JSON");
    assert_eq!(claimed["id"], first.as_str(), "{claimed}");
    client.cancel().await.expect("close");

    // A remote worker over the HTTP API.
    let second = push_eligible(&ledger, "for the remote worker");
    let port = free_port();
    let mut serve = ledger
        .command(&["serve", "--bind", &format!("127.0.0.1:{port}")])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut answer = None;
    for _ in 0..200 {
        answer = http_post(port, "/api/v1/claim", r#"{"worker": "remote-1"}"#);
        if answer.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = std::process::Command::new("kill").args(["-TERM", &serve.id().to_string()]).status();
    let _ = serve.wait();
    let answer: Value = serde_json::from_str(&answer.expect("serve answers")).expect("claim JSON");
    assert_eq!(
        (answer["outcome"].as_str(), answer["task"]["id"].as_str()),
        (Some("claimed"), Some(&*second))
    );

    // A worker on this machine: it runs the row and nothing else.
    let third = push_eligible(&ledger, "for the worker");
    let totals: Value = ledger.run(&["worker", "--once", "--poll", "100ms", "--json"]).ok().json();
    assert_eq!(totals["ran"], 1, "{totals}");
    let row: Value = ledger.run(&["show", &third, "--json"]).ok().json();
    assert_eq!(row["status"], "review", "{row}");
    let pending = ledger.run(&["list", "--json", "--status", "pending"]).ok().stdout;
    let pending: Vec<Value> = serde_json::from_str(&pending).expect("list JSON");
    assert_eq!(pending.len(), HELD, "every held row is still pending");
    assert!(totals["queued"].as_u64().is_some_and(|n| n > 0), "external rows met are queued: {totals}");
}

/// S2, I5: a sweep whose 5,000-row window is full of rows it may not run still puts an external
/// row past the window in the approval queue, so the person sees it.
#[test]
fn s2_i5_a_sweep_queues_an_external_row_past_its_window() {
    let ledger = Ledger::new();
    ledger.file("daicho.toml", CONFIG);
    let held: String =
        (0..6_000).map(|n| format!("{{\"title\": \"by hand {n}\", \"priority\": 5}}\n")).collect();
    let file = ledger.file("held.jsonl", held);
    ledger.run(&["push", "--project", "PJ-01", &file]).ok();
    let mail = r#"[{"title": "mail the customer", "action": "publish", "tags": "ai"}]"#;
    ledger.run_with_input(&["push", "--project", "PJ-01"], mail.as_bytes()).ok();
    let swept: Value = ledger.run(&["sweep", "--role", "auto", "--json"]).ok().json();
    assert_eq!(swept["queued"], serde_json::json!(["T-6001"]), "queued: {}", swept["queued"]);
}

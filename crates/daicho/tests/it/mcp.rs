//! `daicho mcp` (I4) driven by a real MCP client (the official SDK's) over stdio, as a coding
//! agent would: initialize, list tools, claim, heartbeat, complete, push.

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::{Value, json};

use crate::Ledger;

/// Three actions: `write` (auto), `publish` (external), `render` (heavy).
pub const CONFIG: &str = r#"
[[action]]
name = "write"
kind = "command"
command = ["true"]
auto = true

[[action]]
name = "publish"
kind = "command"
command = ["true"]
auto = true
external = true

[[action]]
name = "render"
kind = "command"
command = ["true"]
auto = true
heavy = true
"#;

async fn connect(ledger: &Ledger, args: &[&str]) -> RunningService<RoleClient, ClientConfig> {
    let command = tokio::process::Command::from(ledger.command(args));
    let transport = TokioChildProcess::new(command).expect("daicho mcp starts");
    let info = ClientConfig::new(ClientCapabilities::default(), Implementation::new("test-agent", "1.0"));
    info.serve(transport).await.expect("MCP handshake")
}

/// Calls a tool; returns its JSON answer and whether it was a tool error.
async fn call(
    client: &RunningService<RoleClient, ClientConfig>,
    tool: &'static str,
    args: Value,
) -> (Value, bool) {
    let Value::Object(args) = args else { panic!("arguments must be an object") };
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let text = result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect::<String>();
    let is_error = result.is_error.unwrap_or(false);
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (value, is_error)
}

fn push(ledger: &Ledger, items: &str) {
    ledger.run_with_input(&["push", "--source", "plan", "--project", "PJ-01"], items.as_bytes()).ok();
}

/// I4: an agent's whole loop; the ledger shows the result and the journal names the agent.
#[tokio::test]
async fn i4_an_agent_claims_heartbeats_completes_and_pushes_over_mcp() {
    let ledger = Ledger::new();
    ledger.file("daicho.toml", CONFIG);
    push(
        &ledger,
        r#"[{"title": "Write the parser", "action": "write", "tags": "ai", "body": "handle nested lists"},
            {"title": "Write the tests", "action": "write", "tags": "ai"}]"#,
    );
    ledger.run(&["set", "T-0001", "--correction", "use the streaming API"]).ok();
    let client = connect(&ledger, &["mcp"]).await;

    let info = client.peer_info().expect("server info");
    assert!(info.instructions.as_deref().unwrap_or_default().contains("claim_next"));
    let server = info.server_info.as_ref().expect("serverInfo");
    assert_eq!(
        (server.name.as_str(), server.version.as_str()),
        ("daicho", env!("CARGO_PKG_VERSION")),
        "the agent is told which server and version it talks to"
    );
    let tools: Vec<String> =
        client.list_all_tools().await.expect("tools").iter().map(|t| t.name.to_string()).collect();
    assert_eq!(tools, ["claim_next", "complete", "fail", "heartbeat", "list", "push", "ready", "show"]);

    let (ready, _) = call(&client, "ready", json!({})).await;
    assert_eq!(ready["total"], 2, "{ready}");
    assert_eq!(
        ready["tasks"][0],
        json!({ "id": "T-0001", "t": "Write the parser", "p": "PJ-01", "a": "write" })
    );

    let (claimed, error) = call(&client, "claim_next", json!({})).await;
    assert!(!error, "{claimed}");
    assert_eq!(claimed["id"], "T-0001");
    assert_eq!(claimed["status"], "running");
    assert_eq!(claimed["correction"], "use the streaming API");
    assert_eq!(claimed["body"], "handle nested lists");
    assert_eq!(claimed["attempt"], 1);
    assert_eq!(claimed["key"], "T-0001:1");
    assert!(claimed["lease_until"].is_string());
    assert!(claimed.get("result").is_none(), "no empty fields: {claimed}");

    let (beat, error) = call(&client, "heartbeat", json!({ "id": "T-0001", "attempt": 1 })).await;
    assert!(!error && beat["lease_until"].is_string(), "{beat}");
    let (stale, error) = call(&client, "heartbeat", json!({ "id": "T-0001", "attempt": 7 })).await;
    assert!(error, "{stale}");
    assert!(stale.as_str().unwrap_or_default().contains("lease lost"), "{stale}");

    let (done, error) = call(
        &client,
        "complete",
        json!({ "id": "T-0001", "attempt": 1, "result": "parser in src/parse.rs",
                "tasks": [{ "title": "Document the parser" }] }),
    )
    .await;
    assert!(!error, "{done}");
    assert_eq!(done["status"], "review");
    assert_eq!(done["pushed"]["added"], 1);
    // The same report again (its answer lost on the way: S14, X2) is answered as the first,
    // and what it found is not added twice.
    let (replayed, error) = call(
        &client,
        "complete",
        json!({ "id": "T-0001", "attempt": 1, "result": "parser in src/parse.rs",
                "tasks": [{ "title": "Document the parser" }] }),
    )
    .await;
    assert!(!error, "{replayed}");
    assert_eq!(
        (replayed["status"].as_str(), replayed["pushed"]["added"].as_u64()),
        (Some("review"), Some(0))
    );
    // Another report of the same claim is refused (fenced).
    let (again, error) =
        call(&client, "complete", json!({ "id": "T-0001", "attempt": 1, "result": "x" })).await;
    assert!(error, "{again}");

    let (pushed, error) =
        call(&client, "push", json!({ "tasks": [{ "title": "Flaky test in CI" }], "project": "PJ-01" }))
            .await;
    assert!(!error, "{pushed}");
    assert_eq!(pushed["added"], 1);

    // The next claim gets the next ready task.
    let (next, _) = call(&client, "claim_next", json!({})).await;
    assert_eq!(next["id"], "T-0002", "{next}");
    client.cancel().await.expect("close");

    // The ledger shows the result; the journal names the agent.
    let row: Value = serde_json::from_str(&ledger.run(&["show", "T-0001", "--json"]).ok().stdout).unwrap();
    assert_eq!(
        (row["status"].as_str(), row["result"].as_str()),
        (Some("review"), Some("parser in src/parse.rs"))
    );
    let log = ledger.run(&["log", "T-0001", "--json"]).ok().stdout;
    assert!(log.contains("worker:mcp:test-agent"), "{log}");
    let titles: Vec<String> = ledger.tasks().into_iter().map(|t| t.title).collect();
    assert!(
        titles.contains(&"Document the parser".to_owned()) && titles.contains(&"Flaky test in CI".to_owned())
    );
    assert_eq!(titles.iter().filter(|t| *t == "Document the parser").count(), 1, "{titles:?}");
}

/// I4, S2, S5, S8: an agent can neither approve nor run an external task, never gets a heavy
/// one, and hears "paused" while the kill switch is on.
#[tokio::test]
async fn i4_s2_s5_s8_an_agent_cannot_run_external_or_heavy_tasks_and_hears_paused() {
    let ledger = Ledger::new();
    ledger.file("daicho.toml", CONFIG);
    push(
        &ledger,
        r#"[{"title": "Mail the customer", "action": "publish", "tags": "ai"},
            {"title": "Render the film", "action": "render", "tags": "ai"}]"#,
    );
    let client = connect(&ledger, &["mcp", "--agent", "codex"]).await;
    let tools: Vec<String> =
        client.list_all_tools().await.expect("tools").iter().map(|t| t.name.to_string()).collect();
    assert!(!tools.iter().any(|t| t.contains("approve")), "{tools:?}");

    let (none, error) = call(&client, "claim_next", json!({})).await;
    assert!(!error);
    assert_eq!(none, json!({ "none": 2 }));
    let (ready, _) = call(&client, "ready", json!({})).await;
    let why: Vec<&str> =
        ready["tasks"].as_array().unwrap().iter().filter_map(|t| t["why"].as_str()).collect();
    assert_eq!(why.len(), 2, "{ready}");
    // Naming the task does not help: the claim passes over it.
    let (still, _) = call(&client, "claim_next", json!({ "action": "publish" })).await;
    assert_eq!(still, json!({ "none": 2 }));
    // Unknown arguments (an approval flag, say) are refused, not ignored.
    let result = client
        .call_tool(
            CallToolRequestParams::new("claim_next")
                .with_arguments(json!({ "approve": true }).as_object().unwrap().clone()),
        )
        .await;
    assert!(result.is_err() || result.unwrap().is_error == Some(true));
    let row: Value = serde_json::from_str(&ledger.run(&["show", "T-0001", "--json"]).ok().stdout).unwrap();
    assert_eq!((row["status"].as_str(), row["run"].as_bool()), (Some("pending"), Some(false)));

    // A person approves it; then the agent may run it.
    ledger.run(&["approve", "T-0001"]).ok();
    ledger.run(&["pause", "--reason", "budget review"]).ok();
    let (paused, _) = call(&client, "claim_next", json!({})).await;
    assert_eq!(paused, json!({ "paused": "budget review" }));
    ledger.run(&["resume"]).ok();
    let (claimed, _) = call(&client, "claim_next", json!({})).await;
    assert_eq!(claimed["id"], "T-0001", "{claimed}");
    client.cancel().await.expect("close");
    let log = ledger.run(&["log", "T-0001", "--json"]).ok().stdout;
    assert!(log.contains("worker:mcp:codex"), "{log}");
}

/// I4: the tools and their schemas, so that an SDK upgrade (or a careless edit) shows its diff.
#[tokio::test]
async fn i4_tools_list_schema_snapshot() {
    let ledger = Ledger::new();
    let client = connect(&ledger, &["mcp"]).await;
    let tools = client.list_all_tools().await.expect("tools");
    client.cancel().await.expect("close");
    let tools: Value = serde_json::to_value(&tools).unwrap();
    insta::assert_snapshot!("mcp_tools_list", serde_json::to_string_pretty(&tools).unwrap());
}

/// I4: the size of a typical `ready` answer for 20 tasks (token frugality; the figure goes in
/// the notes), and that long text is cut with a way to fetch the rest.
#[tokio::test]
async fn i4_answers_are_compact_and_long_text_is_cut() {
    let ledger = Ledger::new();
    ledger.file("daicho.toml", CONFIG);
    let items: Vec<Value> = (1..=20)
        .map(|i| json!({ "title": format!("Fix lint warning {i} in crates/parser/src/lib.rs"), "action": "write", "tags": "ai" }))
        .collect();
    push(&ledger, &serde_json::to_string(&items).unwrap());
    let long = "x".repeat(5000);
    ledger.run(&["set", "T-0001", "--correction", &long]).ok();
    let client = connect(&ledger, &["mcp"]).await;
    let result = client
        .call_tool(CallToolRequestParams::new("ready").with_arguments(json!({}).as_object().unwrap().clone()))
        .await
        .unwrap();
    let text: String = result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect();
    eprintln!("ready answer for 20 tasks: {} bytes", text.len());
    assert!(text.len() < 2_500, "{} bytes: {text}", text.len());
    let (shown, _) = call(&client, "show", json!({ "id": "T-0001" })).await;
    let cut = shown["correction"].as_str().unwrap();
    assert!(cut.ends_with("more chars; call show with id=T-0001 full=true]"), "{cut}");
    assert!(cut.len() < 1_000);
    let (whole, _) = call(&client, "show", json!({ "id": "T-0001", "full": true })).await;
    assert_eq!(whole["correction"].as_str().unwrap().len(), 5000);
    client.cancel().await.expect("close");
}

/// S13, M4, I4: the MCP `push` tool is a producer's: an item carrying a field only a person
/// writes (a correction, ▶ run) is refused naming it, and nothing is written.
#[tokio::test]
async fn s13_the_mcp_push_tool_never_writes_a_persons_fields() {
    let ledger = Ledger::new();
    ledger.file("daicho.toml", CONFIG);
    push(&ledger, r#"[{"title": "Write the parser", "action": "write", "tags": "ai"}]"#);
    let before = (ledger.export(), ledger.run(&["log", "T-0001", "--json"]).ok().stdout);
    let client = connect(&ledger, &["mcp"]).await;
    for (field, value) in
        [("correction", json!("ignore the review")), ("run", json!(true)), ("result", json!("ok"))]
    {
        let tasks = json!([{ "title": "post it", "action": "publish", field: value }]);
        let (answer, is_error) = call(&client, "push", json!({ "tasks": tasks })).await;
        assert!(is_error, "{field}: {answer}");
        let text = answer.as_str().unwrap_or_default();
        assert!(text.contains(&format!("field '{field}' is written only by a person")), "{text}");
    }
    let (answer, is_error) = call(
        &client,
        "push",
        json!({ "tasks": [{ "id": "T-0001", "title": "other", "action": "publish" }] }),
    )
    .await;
    assert!(is_error && answer.as_str().unwrap_or_default().contains("another task"), "{answer}");
    client.cancel().await.expect("close");
    assert_eq!((ledger.export(), ledger.run(&["log", "T-0001", "--json"]).ok().stdout), before);
}

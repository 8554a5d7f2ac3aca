//! The authority model (S13) over HTTP: the API's push is a producer's and never writes a
//! person's fields; an approval is a person's, of a ready task only.

use daicho_store::{ListFilter, Store};
use serde_json::{Value, json};

use crate::{TestServer, item};

/// Every row and its journal, to show that nothing changed.
async fn snapshot(server: &TestServer) -> Vec<(daicho_core::Task, Vec<daicho_store::JournalEntry>)> {
    let mut rows = Vec::new();
    for task in server.store.list(ListFilter::default()).await.expect("list") {
        let journal = server.store.journal(task.id).await.expect("journal");
        rows.push((task, journal));
    }
    rows
}

/// S13, M4, X2: `POST /api/v1/push` refuses an item carrying a field only a person writes,
/// naming it, and writes nothing; an id of another source's row is refused with both keys.
#[tokio::test]
async fn s13_api_push_never_writes_a_persons_fields_or_another_tasks_row() {
    let server = TestServer::start(daicho_server::ServerOptions::default()).await;
    server.push(vec![item("Call the customer", "PJ-01", "", "")]).await;
    let before = snapshot(&server).await;
    for (field, value) in [
        ("run", json!(true)),
        ("correction", json!("send to everyone")),
        ("result", json!("sent")),
        ("failures", json!(1)),
        ("run_at", json!("2026-11-30T00:00:00Z")),
    ] {
        let body = json!([{ "title": "new" }, { "title": "carrier", "type": "対外/メール", field: value }]);
        let response =
            server.client.post(server.url("/api/v1/push?source=bot")).json(&body).send().await.expect("post");
        assert_eq!(response.status().as_u16(), 400, "{field}");
        let answer: Value = response.json().await.expect("json");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains(&format!("field '{field}' is written only by a person")), "{answer}");
    }
    let hijack = json!([{ "id": "T-0001", "title": "x", "tags": ["ai"], "action": "publish" }]);
    let response =
        server.client.post(server.url("/api/v1/push?source=bot")).json(&hijack).send().await.expect("post");
    assert_eq!(response.status().as_u16(), 400);
    let answer: Value = response.json().await.expect("json");
    assert!(
        answer["error"].as_str().unwrap_or_default().contains("names T-0001, which is another task"),
        "{answer}"
    );
    assert_eq!(snapshot(&server).await, before, "nothing written, no journal entry");
}

/// S2, S13: the API's approve is refused (409) until the task is ready, and records the person.
#[tokio::test]
async fn s2_s13_api_approve_needs_a_ready_task() {
    let server = TestServer::start(daicho_server::ServerOptions::default()).await;
    let mut draft = item("draft", "PJ-01", "work", "ai");
    draft.ref_id = Some("d".into());
    let mut publish = item("publish", "PJ-01", "publish", "");
    publish.deps = vec!["d".into()];
    let ids = server.push(vec![draft, publish]).await;
    let path = format!("/api/v1/tasks/{}/approve", ids[1]);
    let early =
        server.client.post(server.url(&path)).json(&json!({ "by": "ana" })).send().await.expect("post");
    assert_eq!(early.status().as_u16(), 409);
    let answer: Value = early.json().await.expect("json");
    assert!(answer["error"].as_str().unwrap_or_default().contains("is not ready to approve"), "{answer}");
    let edit = daicho_core::edit::TaskEdit { status: Some(daicho_core::Status::Done), ..Default::default() };
    server
        .store
        .edit(ids[0], edit, daicho_core::Actor::Human("ana".into()), jiff::Timestamp::now())
        .await
        .expect("done");
    let approved =
        server.client.post(server.url(&path)).json(&json!({ "by": "ana" })).send().await.expect("post");
    assert_eq!(approved.status().as_u16(), 200);
    let row = server.store.get(ids[1]).await.expect("get").expect("row");
    assert_eq!((row.run, row.approved_by.as_str()), (true, "human:ana"));
}

/// S13, D2: a push never registers a row as `done` or `dropped` — such a row would satisfy at
/// once the dep a waiting task names — in English or Japanese, as a whole input refused; the
/// same item pushed open is taken, and the task waiting for it stays blocked.
#[tokio::test]
async fn s13_api_push_never_registers_closed_work() {
    let server = TestServer::start(daicho_server::ServerOptions::default()).await;
    // A pulled checklist's task that waits for one not written yet (kept, D2).
    let mut waiting = item("publish the report", "PJ-01", "work", "ai");
    waiting.deps = vec!["T-0500".into()];
    let pulled = daicho_store::Batch {
        items: vec![waiting].into(),
        actor: daicho_core::Actor::Sync("plan".into()),
        now: jiff::Timestamp::now(),
        file: "plan.md".into(),
        unknown_deps: daicho_store::UnknownDeps::Keep,
    };
    let ids = server.store.upsert(pulled).await.expect("sync").added;
    let ready = |server: &TestServer| {
        let store = server.store.clone();
        async move { store.ready(jiff::Timestamp::now(), 10).await.expect("ready").total }
    };
    assert_eq!(ready(&server).await, 0, "it waits for T-0500");
    let before = snapshot(&server).await;
    for status in ["done", "dropped", "完了", "不要"] {
        let body =
            json!([{ "title": "other work" }, { "id": "T-0500", "title": "the review", "status": status }]);
        let response =
            server.client.post(server.url("/api/v1/push?source=bot")).json(&body).send().await.expect("post");
        assert_eq!(response.status().as_u16(), 400, "{status}");
        let answer: Value = response.json().await.expect("json");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains("status 'done' or 'dropped' is set only by a person"), "{status}: {answer}");
        assert!(error.starts_with("<request body>:1: "), "the file and line: {answer}");
        assert_eq!(snapshot(&server).await, before, "{status}: nothing written");
    }
    let open = json!([{ "id": "T-0500", "title": "the review", "status": "pending" }]);
    let response =
        server.client.post(server.url("/api/v1/push?source=bot")).json(&open).send().await.expect("post");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(ready(&server).await, 1, "the review is ready; the report still waits for it");
    let row = server.store.get(ids[0]).await.expect("get").expect("row");
    assert_eq!(row.status, daicho_core::Status::Pending);
}

//! The HTTP JSON API (I3) and the server's access rules (I2).

use daicho_core::Status;
use daicho_server::{ServerError, ServerOptions};
use daicho_store::Store;
use serde_json::{Value, json};

use crate::{TestServer, item};

async fn post(server: &TestServer, path: &str, body: Value) -> (u16, Value) {
    let response = server.client.post(server.url(path)).json(&body).send().await.expect("post");
    let status = response.status().as_u16();
    (status, response.json().await.expect("json body"))
}

async fn get(server: &TestServer, path: &str) -> (u16, Value) {
    let response = server.client.get(server.url(path)).send().await.expect("get");
    let status = response.status().as_u16();
    (status, response.json().await.expect("json body"))
}

#[tokio::test]
async fn i3_a_remote_worker_claims_heartbeats_and_completes_over_http() {
    let server = TestServer::start(ServerOptions::default()).await;
    let ids =
        server.push(vec![item("first", "PJ-01", "work", "ai"), item("second", "PJ-01", "work", "ai")]).await;

    let (status, claim) = post(&server, "/api/v1/claim", json!({ "worker": "box-7:12" })).await;
    assert_eq!(status, 200, "{claim}");
    assert_eq!(claim["outcome"], "claimed");
    assert_eq!(claim["task"]["id"], ids[0].to_string());
    assert_eq!(claim["task"]["status"], "running");
    assert_eq!(claim["attempt"], 1);
    assert_eq!(claim["action"], "work");
    assert_eq!(claim["idempotency_key"], format!("{}:1", ids[0]));
    let first_expiry: jiff::Timestamp =
        claim["lease_expires_at"].as_str().expect("expiry").parse().expect("time");

    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let path = format!("/api/v1/tasks/{}/heartbeat", ids[0]);
    let (status, beat) = post(&server, &path, json!({ "worker": "box-7:12", "attempt": 1 })).await;
    assert_eq!(status, 200, "{beat}");
    let extended: jiff::Timestamp = beat["lease_expires_at"].as_str().expect("expiry").parse().expect("time");
    assert!(extended > first_expiry, "{extended} > {first_expiry}");
    // Another worker's heartbeat for this claim is refused.
    let (status, _) = post(&server, &path, json!({ "worker": "intruder", "attempt": 1 })).await;
    assert_eq!(status, 409);

    let path = format!("/api/v1/tasks/{}/complete", ids[0]);
    let body = json!({
        "worker": "box-7:12", "attempt": 1, "result": "written remotely",
        "tasks": [{ "title": "found while working" }], "tokens_in": 10, "tokens_out": 4
    });
    let (status, end) = post(&server, &path, body).await;
    assert_eq!(status, 200, "{end}");
    assert_eq!(end["task"]["status"], "review");
    assert_eq!(end["task"]["result"], "written remotely");
    assert_eq!(end["pushed"]["added"], 1);

    // The ledger shows it; the journal names the worker; the found task is in the ledger.
    let (status, shown) = get(&server, &format!("/api/v1/tasks/{}", ids[0])).await;
    assert_eq!(status, 200);
    assert_eq!(shown["task"]["status"], "review");
    let actors: Vec<&str> =
        shown["journal"].as_array().expect("journal").iter().filter_map(|e| e["actor"].as_str()).collect();
    assert!(actors.contains(&"worker:box-7:12"), "{actors:?}");
    assert_eq!(shown["runs"][0]["outcome"], "success");
    assert_eq!(shown["runs"][0]["tokens_in"], 10);
    let found = server.store.list(daicho_store::ListFilter::default()).await.expect("list");
    let found = found.iter().find(|t| t.title == "found while working").expect("found task pushed");
    assert_eq!((found.source.as_str(), found.project.as_str()), ("work", "PJ-01"));

    // The next claim gets the next ready task.
    let (_, next) = post(&server, "/api/v1/claim", json!({ "worker": "box-7:12" })).await;
    assert_eq!(next["task"]["id"], ids[1].to_string(), "{next}");
}

/// S14: a person moves a remotely claimed row back to `pending` (PATCH) while its remote worker
/// runs it: the worker's heartbeat is refused (409: stop the work), no claim gets the row while
/// that run may live, and the worker's report of its end — a completion, or a failure — is
/// refused too (nothing of it is recorded) but clears the lease the move kept as a fence, so the
/// next claim gets the row at once.
#[tokio::test]
async fn s14_a_remote_run_a_person_stopped_is_refused_and_its_end_lets_the_task_run_again() {
    let server = TestServer::start(ServerOptions::default()).await;
    for (title, report) in [
        ("first", json!({ "result": "written anyway", "tasks": [{ "title": "found by a stopped run" }] })),
        ("second", json!({ "error": "gave up" })),
    ] {
        // One ready row at a time: the row the remote worker claims is the only one ready.
        let id = server.push(vec![item(title, "PJ-01", "work", "ai")]).await[0];
        let (_, claim) = post(&server, "/api/v1/claim", json!({ "worker": "box-7:12" })).await;
        assert_eq!(claim["task"]["id"], id.to_string(), "{claim}");
        let path = server.url(&format!("/api/v1/tasks/{id}"));
        let moved = server.client.patch(&path).json(&json!({ "status": "pending", "by": "hanako" })).send();
        assert_eq!(moved.await.expect("patch").status().as_u16(), 200);
        let tasks = |what: &str| format!("/api/v1/tasks/{id}/{what}");
        let (status, beat) =
            post(&server, &tasks("heartbeat"), json!({ "worker": "box-7:12", "attempt": 1 })).await;
        assert_eq!(status, 409, "{beat}");
        let (_, claim) = post(&server, "/api/v1/claim", json!({ "worker": "other:1" })).await;
        assert_eq!(claim["outcome"], "nothing", "the fenced row is not claimed: {claim}");
        let mut body = report.clone();
        body["worker"] = json!("box-7:12");
        body["attempt"] = json!(1);
        let what = if report.get("error").is_some() { "fail" } else { "complete" };
        let (status, end) = post(&server, &tasks(what), body.clone()).await;
        assert_eq!(status, 409, "{what}: {end}");
        let (status, again) = post(&server, &tasks(what), body).await;
        assert_eq!(status, 409, "{what} again: {again}");
        let row = server.store.get(id).await.expect("get").expect("row");
        assert_eq!(
            (row.status, row.failures, row.result.as_str(), &row.lease),
            (Status::Pending, 0, "", &None)
        );
        let (_, claim) = post(&server, "/api/v1/claim", json!({ "worker": "other:1" })).await;
        assert_eq!((&claim["task"]["id"], &claim["attempt"]), (&json!(id.to_string()), &json!(2)), "{claim}");
        let (_, shown) = get(&server, &format!("/api/v1/tasks/{id}")).await;
        assert_eq!(shown["runs"][0]["outcome"], "interrupted", "{shown}");
    }
    let found = server.store.list(daicho_store::ListFilter::default()).await.expect("list");
    assert!(found.iter().all(|t| t.title != "found by a stopped run"), "a refused report pushed nothing");
}

/// S14, X2: a remote worker that sends its report again (the answer was lost in a blip) is
/// answered as the first time: the run's end is not recorded twice, a failure is not counted
/// twice, and the tasks it found are in the ledger once. Another report for that attempt (other
/// words, another worker, another outcome) is still refused.
/// The remote worker `box-7:12` claims the next row, which must be `id`; returns the path of its
/// `complete` and a report of attempt 1 that found the task `found`.
async fn claimed_by_box_7(server: &TestServer, id: daicho_core::TaskId, found: &str) -> (String, Value) {
    let (_, claim) = post(server, "/api/v1/claim", json!({ "worker": "box-7:12" })).await;
    assert_eq!(claim["task"]["id"], id.to_string(), "{claim}");
    let body = json!({
        "worker": "box-7:12", "attempt": 1, "result": "written remotely", "tasks": [{ "title": found }]
    });
    (format!("/api/v1/tasks/{id}/complete"), body)
}

/// S14: a report that meets a temporary store fault (another process holds the ledger's write
/// lock past the busy timeout) is answered 503, not 500, and changes nothing; the same report
/// sent again once the lock is gone is recorded once, with its found task.
#[tokio::test]
async fn s14_a_report_that_meets_a_locked_ledger_is_answered_503_and_its_retry_lands() {
    let sqlite = daicho_sqlite::SqliteOptions {
        busy_timeout: std::time::Duration::from_millis(200),
        ..daicho_sqlite::SqliteOptions::default()
    };
    let server = TestServer::start_with(ServerOptions::default(), sqlite).await;
    let ids = server.push(vec![item("first", "PJ-01", "work", "ai")]).await;
    let (path, body) = claimed_by_box_7(&server, ids[0], "found while locked").await;
    let lock = rusqlite::Connection::open(server.store.path()).expect("another connection");
    lock.execute_batch("BEGIN EXCLUSIVE").expect("the write lock");
    let (status, answer) = post(&server, &path, body.clone()).await;
    assert_eq!(status, 503, "{answer}");
    lock.execute_batch("COMMIT").expect("released");
    assert_eq!(server.store.get(ids[0]).await.expect("get").expect("row").status, Status::Running);
    let (status, answer) = post(&server, &path, body).await;
    assert_eq!((status, answer["pushed"]["added"].as_u64()), (200, Some(1)), "{answer}");
    let rows = server.store.list(daicho_store::ListFilter::default()).await.expect("list");
    assert_eq!(rows.iter().filter(|t| t.title == "found while locked").count(), 1);
    assert_eq!(server.store.runs(ids[0]).await.expect("runs").len(), 1, "one run, ended once");
}

#[tokio::test]
async fn s14_x2_a_report_sent_again_is_answered_as_the_first() {
    let server = TestServer::start(ServerOptions::default()).await;
    let ids =
        server.push(vec![item("first", "PJ-01", "work", "ai"), item("second", "PJ-01", "work", "ai")]).await;
    let (path, body) = claimed_by_box_7(&server, ids[0], "found while working").await;
    let (status, first) = post(&server, &path, body.clone()).await;
    assert_eq!((status, first["pushed"]["added"].as_u64()), (200, Some(1)), "{first}");
    let (status, again) = post(&server, &path, body).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["task"], first["task"], "answered as the first time");
    let rows = server.store.list(daicho_store::ListFilter::default()).await.expect("list");
    assert_eq!(rows.iter().filter(|t| t.title == "found while working").count(), 1, "found once");
    assert_eq!(server.store.runs(ids[0]).await.expect("runs").len(), 1, "one run, ended once");
    for (body, why) in [
        (json!({ "worker": "box-7:12", "attempt": 1, "result": "other words" }), "another result"),
        (json!({ "worker": "intruder", "attempt": 1, "result": "written remotely" }), "another worker"),
    ] {
        let (status, refused) = post(&server, &path, body).await;
        assert_eq!(status, 409, "{why}: {refused}");
    }
    let fail = json!({ "worker": "box-7:12", "attempt": 1, "error": "broke" });
    let (status, _) = post(&server, &format!("/api/v1/tasks/{}/fail", ids[0]), fail).await;
    assert_eq!(status, 409, "a failure of a run that succeeded");

    let (_, claim) = post(&server, "/api/v1/claim", json!({ "worker": "box-7:12" })).await;
    assert_eq!(claim["task"]["id"], ids[1].to_string(), "{claim}");
    let path = format!("/api/v1/tasks/{}/fail", ids[1]);
    let body = json!({ "worker": "box-7:12", "attempt": 1, "error": "broke" });
    let (status, first) = post(&server, &path, body.clone()).await;
    assert_eq!((status, first["task"]["failures"].as_u64()), (200, Some(1)), "{first}");
    let (status, again) = post(&server, &path, body).await;
    assert_eq!((status, again["task"]["failures"].as_u64()), (200, Some(1)), "counted once: {again}");
    let other = json!({ "worker": "box-7:12", "attempt": 1, "error": "another error" });
    assert_eq!(post(&server, &path, other).await.0, 409);
    let done = json!({ "worker": "box-7:12", "attempt": 1, "result": "after all" });
    assert_eq!(post(&server, &format!("/api/v1/tasks/{}/complete", ids[1]), done).await.0, 409);
}

#[tokio::test]
async fn i3_s1_a_late_complete_with_an_old_attempt_is_refused() {
    let server = TestServer::start(ServerOptions::default()).await;
    let ids = server.push(vec![item("slow", "PJ-01", "work", "ai")]).await;
    let (_, claim) = post(&server, "/api/v1/claim", json!({ "worker": "old" })).await;
    assert_eq!(claim["attempt"], 1);
    // The old worker goes silent; its lease expires and the lost run is counted (S4).
    let later = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1);
    let lost = server.store.expire_leases(later, Default::default()).await.expect("expire");
    assert_eq!(lost.len(), 1);
    let (_, again) = post(&server, "/api/v1/claim", json!({ "worker": "new" })).await;
    assert_eq!(again["attempt"], 2, "{again}");

    let path = format!("/api/v1/tasks/{}/complete", ids[0]);
    let (status, refused) =
        post(&server, &path, json!({ "worker": "old", "attempt": 1, "result": "stale" })).await;
    assert_eq!(status, 409, "{refused}");
    assert!(refused["error"].as_str().expect("error").contains("attempt 1"), "{refused}");
    let fail_path = format!("/api/v1/tasks/{}/fail", ids[0]);
    let (status, _) = post(&server, &fail_path, json!({ "worker": "old", "attempt": 1, "error": "x" })).await;
    assert_eq!(status, 409);
    let row = server.store.get(ids[0]).await.expect("get").expect("row");
    assert_eq!((row.status, row.attempt, row.result.as_str()), (Status::Running, 2, ""));

    let (status, end) =
        post(&server, &fail_path, json!({ "worker": "new", "attempt": 2, "error": "broke" })).await;
    assert_eq!(status, 200, "{end}");
    // S3: the failure is counted (the lost run was the first), the row goes back, no retry.
    assert_eq!(end["task"]["status"], "pending");
    assert_eq!(end["task"]["failures"], 2);
}

#[tokio::test]
async fn s2_s5_s8_a_remote_claim_passes_over_heavy_and_external_tasks_and_says_paused() {
    let server = TestServer::start(ServerOptions::default()).await;
    let ids = server
        .push(vec![
            item("render the film", "PJ-01", "render", "ai"),
            item("mail the customer", "PJ-01", "publish", "ai"),
            item("by hand", "PJ-01", "", ""),
        ])
        .await;
    let (status, nothing) = post(&server, "/api/v1/claim", json!({ "worker": "w" })).await;
    assert_eq!(status, 200);
    assert_eq!(nothing, json!({ "outcome": "nothing", "held": 3 }));
    // The external task waits in the approval queue; a worker cannot approve it.
    let queue = server.store.approvals().await.expect("approvals");
    assert_eq!(queue.iter().map(|q| q.id).collect::<Vec<_>>(), [ids[1]]);
    let (status, _) = post(&server, "/api/v1/claim", json!({ "worker": "w", "action": "publish" })).await;
    assert_eq!(status, 200);
    assert_eq!(server.store.get(ids[1]).await.expect("get").expect("row").status, Status::Pending);

    // A person approves it; then a worker may run it.
    let (status, approved) =
        post(&server, &format!("/api/v1/tasks/{}/approve", ids[1]), json!({ "by": "hanako" })).await;
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["run"], true);

    server
        .store
        .set_paused(Some("maintenance".into()), daicho_core::Actor::System, jiff::Timestamp::now())
        .await
        .expect("pause");
    let (_, paused) = post(&server, "/api/v1/claim", json!({ "worker": "w" })).await;
    assert_eq!(paused, json!({ "outcome": "paused", "reason": "maintenance" }));
    server.store.set_paused(None, daicho_core::Actor::System, jiff::Timestamp::now()).await.expect("resume");
    let (_, claimed) = post(&server, "/api/v1/claim", json!({ "worker": "w" })).await;
    assert_eq!(claimed["task"]["id"], ids[1].to_string(), "{claimed}");
}

/// S2, I3: the approval queue and the latest decisions over the API, as the approvals page shows
/// them: each queued task with what its run would do; a person rejects one (a reason required)
/// and approves the other, and both decisions are listed, newest first.
#[tokio::test]
async fn s2_i3_the_approval_queue_and_its_decisions_over_the_api() {
    let server = TestServer::start(ServerOptions::default()).await;
    let ids = server
        .push(vec![
            item("mail the customer", "PJ-01", "publish", "ai"),
            item("post the news", "PJ-01", "publish", "ai"),
        ])
        .await;
    // A claim's upkeep queues the external tasks; nothing runs.
    let (status, _) = post(&server, "/api/v1/claim", json!({ "worker": "w" })).await;
    assert_eq!(status, 200);
    let (status, approvals) = get(&server, "/api/v1/approvals").await;
    assert_eq!(status, 200, "{approvals}");
    let queue = approvals["queue"].as_array().expect("a queue");
    let queued: Vec<&str> = queue.iter().map(|a| a["id"].as_str().expect("id")).collect();
    assert_eq!(queued, [ids[0].to_string(), ids[1].to_string()]);
    assert_eq!(queue[0]["title"], "mail the customer");
    assert_eq!(
        (&queue[0]["outbound"]["action"], &queue[0]["outbound"]["external"]),
        (&json!("publish"), &json!(true))
    );
    assert_eq!(queue[0]["queued_by"], "remote:w", "queued by the claim that found it");
    assert_eq!(approvals["decisions"], json!([]));

    let reject = format!("/api/v1/tasks/{}/reject", ids[1]);
    let (status, refused) = post(&server, &reject, json!({ "reason": "  " })).await;
    assert_eq!(status, 400, "a rejection needs a reason: {refused}");
    let (status, refused) = post(&server, &reject, json!({ "reason": "no", "status": "done" })).await;
    assert_eq!(status, 422, "{refused}");
    let (status, rejected) =
        post(&server, &reject, json!({ "reason": "not this week", "by": "hanako" })).await;
    assert_eq!(status, 200, "{rejected}");
    assert_eq!(
        (&rejected["status"], &rejected["correction"]),
        (&json!("dropped"), &json!("rejected: not this week"))
    );
    let (status, _) =
        post(&server, &format!("/api/v1/tasks/{}/approve", ids[0]), json!({ "by": "taro" })).await;
    assert_eq!(status, 200);

    let (_, approvals) = get(&server, "/api/v1/approvals?decisions=5").await;
    assert_eq!(approvals["queue"], json!([]), "{approvals}");
    let decided: Vec<(&str, &str, &str)> = approvals["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .map(|d| {
            (d["id"].as_str().unwrap(), d["decision"].as_str().unwrap(), d["decided_by"].as_str().unwrap())
        })
        .collect();
    let (approved, rejected) = (ids[0].to_string(), ids[1].to_string());
    assert_eq!(
        decided,
        [(approved.as_str(), "approved", "human:taro"), (rejected.as_str(), "rejected", "human:hanako")]
    );
    assert_eq!(approvals["decisions"][1]["reason"], "not this week");
}

#[tokio::test]
async fn i3_patch_changes_only_status_correction_and_run() {
    let server = TestServer::start(ServerOptions::default()).await;
    let ids = server.push(vec![item("draft", "PJ-01", "work", "ai")]).await;
    let path = server.url(&format!("/api/v1/tasks/{}", ids[0]));
    let patch = |body: Value| server.client.patch(&path).json(&body).send();

    let refused = patch(json!({ "title": "renamed" })).await.expect("patch");
    assert_eq!(refused.status().as_u16(), 422);
    let message: Value = refused.json().await.expect("json");
    assert!(message["error"].as_str().expect("error").contains("unknown field `title`"), "{message}");
    let refused = patch(json!({ "status": "running" })).await.expect("patch");
    assert_eq!(refused.status().as_u16(), 400);
    let refused = patch(json!({ "status": "sideways" })).await.expect("patch");
    assert_eq!(refused.status().as_u16(), 400);

    let ok =
        patch(json!({ "correction": "cite the source", "run": true, "status": "要人手", "by": "hanako" }))
            .await
            .expect("patch");
    assert_eq!(ok.status().as_u16(), 200);
    let row: Value = ok.json().await.expect("json");
    assert_eq!(
        (row["correction"].as_str(), row["run"].as_bool(), row["status"].as_str()),
        (Some("cite the source"), Some(true), Some("needs_human"))
    );
    let journal = server.store.journal(ids[0]).await.expect("journal");
    let last = journal.last().expect("entry");
    assert_eq!(last.actor, "human:hanako");
    assert_eq!(last.after["correction"], "cite the source");

    let missing = server
        .client
        .patch(server.url("/api/v1/tasks/T-9999"))
        .json(&json!({ "run": true }))
        .send()
        .await
        .expect("patch");
    assert_eq!(missing.status().as_u16(), 404);
    let bad = server
        .client
        .patch(server.url("/api/v1/tasks/nope"))
        .json(&json!({ "run": true }))
        .send()
        .await
        .expect("patch");
    assert_eq!(bad.status().as_u16(), 400);
}

#[tokio::test]
async fn x2_i3_push_list_ready_view_and_metrics() {
    let server = TestServer::start(ServerOptions::default()).await;
    let body = r#"[{"id": "a", "title": "first", "tags": "ai", "action": "work"}, {"title": "second", "deps": "a"}]"#;
    let response = server
        .client
        .post(server.url("/api/v1/push?source=scanner&project=PJ-02"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("push");
    let status = response.status().as_u16();
    let pushed: Value = response.json().await.expect("json");
    assert_eq!(status, 200, "{pushed}");
    assert_eq!(pushed, json!({ "added": 2, "updated": 0, "skipped": 0 }));
    // The same push again adds nothing (M8).
    let again: Value = server
        .client
        .post(server.url("/api/v1/push?source=scanner&project=PJ-02"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("push")
        .json()
        .await
        .expect("json");
    assert_eq!(again["added"], 0);
    // Bad input names the line and the reason; nothing is stored.
    let bad = server
        .client
        .post(server.url("/api/v1/push?source=scanner"))
        .header("content-type", "application/json")
        .body("[{\"title\": \"x\"},\n{\"title\": 5}]")
        .send()
        .await
        .expect("push");
    assert_eq!(bad.status().as_u16(), 400);
    let message: Value = bad.json().await.expect("json");
    assert!(message["error"].as_str().expect("error").contains("<request body>:2"), "{message}");

    let (_, page) = get(&server, "/api/v1/tasks?project=PJ-02&limit=1").await;
    assert_eq!(page["tasks"].as_array().expect("tasks").len(), 1);
    let next = page["next_after"].as_str().expect("next page");
    let (_, page2) = get(&server, &format!("/api/v1/tasks?project=PJ-02&limit=1&after={next}")).await;
    assert_eq!(page2["tasks"][0]["title"], "second");
    assert!(page2.get("next_after").is_none(), "{page2}");
    let (status, _) = get(&server, "/api/v1/tasks?status=nonsense").await;
    assert_eq!(status, 400);

    let (_, ready) = get(&server, "/api/v1/ready").await;
    assert_eq!(ready["total"], 1);
    assert_eq!(ready["why"][0]["runs"], true);
    assert_eq!(ready["why"][0]["reason"], "runs with work");

    let (_, view) = get(&server, "/api/v1/view").await;
    assert_eq!(view["rows"].as_array().expect("rows").len(), 2);

    let metrics = server.client.get(server.url("/metrics")).send().await.expect("metrics");
    assert!(
        metrics.headers()["content-type"].to_str().expect("type").starts_with("text/plain; version=0.0.4")
    );
    let text = metrics.text().await.expect("text");
    assert!(text.contains("daicho_tasks{project=\"PJ-02\",status=\"pending\"} 2"), "{text}");
    assert!(text.contains("daicho_paused 0"), "{text}");
    assert!(text.contains("# TYPE daicho_runs_total counter"), "{text}");
    assert!(text.contains("daicho_http_responses_total{class=\"4xx\"}"), "{text}");
    exposition_problems(&text).expect("a Prometheus parser accepts /metrics");
}

/// What a Prometheus (OpenMetrics) parser would refuse in an exposition: two families with one
/// base name (a counter `x_total` is family `x`, so a gauge `x` beside it clashes), a sample name
/// two families could own, or a sample outside the family declared before it.
fn exposition_problems(text: &str) -> Result<(), String> {
    use std::collections::HashMap;
    let mut bases: HashMap<String, String> = HashMap::new();
    let mut owners: HashMap<String, String> = HashMap::new();
    let mut current: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').ok_or(format!("a TYPE line without a type: {line}"))?;
            let base = match kind {
                "counter" => name.strip_suffix("_total").unwrap_or(name),
                _ => name,
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total", "_created"],
                "summary" => &["", "_sum", "_count", "_created"],
                "histogram" => &["_bucket", "_sum", "_count", "_created"],
                _ => &[""],
            };
            if let Some(other) = bases.insert(base.to_owned(), name.to_owned()) {
                return Err(format!("{name} and {other} are one family '{base}' to a parser"));
            }
            current = suffixes.iter().map(|s| format!("{base}{s}")).collect();
            for sample in &current {
                if let Some(other) = owners.insert(sample.clone(), name.to_owned()) {
                    return Err(format!("the sample name {sample} belongs to both {name} and {other}"));
                }
            }
            if owners.contains_key(base) && !current.contains(&base.to_owned()) {
                return Err(format!("the family base {base} of {name} is another family's sample"));
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            if !current.iter().any(|s| s == name) {
                return Err(format!("the sample {name} is outside its family ({current:?})"));
            }
        }
    }
    Ok(())
}

/// I3: the check above refuses what a Prometheus parser refuses (so its pass means something).
#[test]
fn i3_the_exposition_check_refuses_a_gauge_beside_a_counter_of_its_name() {
    let clash = "# TYPE daicho_sweep_truncated_total counter\ndaicho_sweep_truncated_total 1\n\
                 # TYPE daicho_sweep_truncated gauge\ndaicho_sweep_truncated 1\n";
    assert!(exposition_problems(clash).is_err());
    let stray = "# TYPE daicho_paused gauge\ndaicho_other 1\n";
    assert!(exposition_problems(stray).is_err());
    let fine = "# TYPE daicho_sweep_truncated_total counter\ndaicho_sweep_truncated_total 1\n\
                # TYPE daicho_sweep_last_truncated gauge\ndaicho_sweep_last_truncated 1\n";
    assert_eq!(exposition_problems(fine), Ok(()));
}

/// An engine over a fresh ledger in `dir`, for a server to be bound (or refused) with.
async fn engine_in(
    dir: &tempfile::TempDir,
) -> std::sync::Arc<daicho_engine::Engine<daicho_sqlite::SqliteStore>> {
    let store = std::sync::Arc::new(
        daicho_sqlite::SqliteStore::open(dir.path().join("l.db"), Default::default()).await.expect("open"),
    );
    let config = daicho_engine::Config::parse(crate::CONFIG, "test.toml").expect("config");
    std::sync::Arc::new(daicho_engine::Engine::new(store, config, None))
}

#[tokio::test]
async fn i2_a_non_loopback_bind_without_a_token_refuses_to_start() {
    let store_dir = tempfile::tempdir().expect("dir");
    let engine = engine_in(&store_dir).await;
    let options = ServerOptions { bind: "0.0.0.0:0".parse().expect("addr"), ..ServerOptions::default() };
    let refused =
        daicho_server::bind(std::sync::Arc::clone(&engine), options.clone(), Default::default()).await;
    assert!(matches!(refused, Err(ServerError::NeedsToken(_))), "{refused:?}");
    let weak = ServerOptions { token: Some("short".into()), ..options.clone() };
    assert!(matches!(
        daicho_server::bind(std::sync::Arc::clone(&engine), weak, Default::default()).await,
        Err(ServerError::WeakToken)
    ));
    let strong = ServerOptions { token: Some("a-long-enough-access-token".into()), ..options };
    assert!(daicho_server::bind(engine, strong, Default::default()).await.is_ok());
}

/// S13: a worker token acts for no person. A server refuses to start with one and no access
/// token, or one that is the access token or short. A remote worker carrying it claims,
/// heartbeats, pushes and completes over HTTP; its PATCH, approve, reject and pause are refused
/// (403) and change nothing; the access token does them.
#[tokio::test]
async fn s13_a_workers_token_claims_and_completes_but_acts_for_no_person() {
    let (token, worker) = ("0123456789abcdef-person", "0123456789abcdef-worker");
    for (person, workers) in [(None, worker), (Some(token), token), (Some(token), "short")] {
        let options = ServerOptions {
            token: person.map(str::to_owned),
            worker_token: Some(workers.to_owned()),
            bind: "127.0.0.1:0".parse().expect("addr"),
            ..ServerOptions::default()
        };
        let store_dir = tempfile::tempdir().expect("dir");
        let refused = daicho_server::bind(engine_in(&store_dir).await, options, Default::default()).await;
        assert!(
            matches!(refused, Err(ServerError::WorkerTokenAlone | ServerError::WeakWorkerToken)),
            "{person:?} {workers}: {refused:?}"
        );
    }
    let options = ServerOptions {
        token: Some(token.into()),
        worker_token: Some(worker.into()),
        ..ServerOptions::default()
    };
    let server = TestServer::start(options).await;
    let ids =
        server.push(vec![item("first", "PJ-01", "work", "ai"), item("second", "PJ-01", "work", "ai")]).await;
    let send = |method: reqwest::Method, path: &str, secret: &str, body: Value| {
        server.client.request(method, server.url(path)).bearer_auth(secret).json(&body).send()
    };
    let post = reqwest::Method::POST;
    let claimed =
        send(post.clone(), "/api/v1/claim", worker, json!({ "worker": "box:1" })).await.expect("claim");
    assert_eq!(claimed.status().as_u16(), 200);
    let claim: Value = claimed.json().await.expect("json");
    assert_eq!(claim["task"]["id"], ids[0].to_string(), "{claim}");
    let at = |what: &str| format!("/api/v1/tasks/{}/{what}", ids[0]);
    let beat = send(post.clone(), &at("heartbeat"), worker, json!({ "worker": "box:1", "attempt": 1 })).await;
    assert_eq!(beat.expect("heartbeat").status().as_u16(), 200);
    let pushed =
        send(post.clone(), "/api/v1/push", worker, json!([{ "title": "found" }])).await.expect("push");
    assert_eq!(pushed.status().as_u16(), 200, "{:?}", pushed.text().await);
    let before = server.store.get(ids[1]).await.expect("get").expect("row");
    let person_only = [
        (
            reqwest::Method::PATCH,
            format!("/api/v1/tasks/{}", ids[1]),
            json!({ "status": "done", "by": "boss" }),
        ),
        (post.clone(), format!("/api/v1/tasks/{}/approve", ids[1]), json!({ "by": "boss" })),
        (post.clone(), format!("/api/v1/tasks/{}/reject", ids[1]), json!({ "reason": "no", "by": "boss" })),
    ];
    for (method, path, body) in &person_only {
        let refused = send(method.clone(), path, worker, body.clone()).await.expect("send");
        assert_eq!(refused.status().as_u16(), 403, "{method} {path}");
        let said: Value = refused.json().await.expect("json");
        assert!(said["error"].as_str().expect("error").contains("acts for no person"), "{said}");
    }
    let paused = server.client.post(server.url("/pause")).bearer_auth(worker).form(&[("reason", "x")]).send();
    assert_eq!(paused.await.expect("pause").status().as_u16(), 403);
    assert_eq!(server.store.get(ids[1]).await.expect("get").expect("row"), before, "nothing changed");
    assert_eq!(server.store.paused().await.expect("paused"), None);
    let body = json!({ "worker": "box:1", "attempt": 1, "result": "done remotely" });
    let completed = send(post.clone(), &at("complete"), worker, body).await.expect("complete");
    assert_eq!(completed.status().as_u16(), 200);
    let (method, path, body) = &person_only[0];
    let edited = send(method.clone(), path, token, body.clone()).await.expect("patch");
    assert_eq!(edited.status().as_u16(), 200, "the access token acts for a person");
    assert_eq!(server.store.get(ids[1]).await.expect("get").expect("row").status, Status::Done);
}

#[tokio::test]
async fn i2_with_a_token_every_request_must_carry_it() {
    let token = "0123456789abcdef-token";
    let server =
        TestServer::start(ServerOptions { token: Some(token.into()), ..ServerOptions::default() }).await;
    let denied = server.client.get(server.url("/api/v1/tasks")).send().await.expect("get");
    assert_eq!(denied.status().as_u16(), 401);
    let denied = server.client.get(server.url("/")).send().await.expect("get");
    assert_eq!(denied.status().as_u16(), 401);
    let wrong = server
        .client
        .get(server.url("/api/v1/tasks"))
        .bearer_auth("0123456789abcdef-tokeX")
        .send()
        .await
        .expect("get");
    assert_eq!(wrong.status().as_u16(), 401);
    let ok = server.client.get(server.url("/api/v1/tasks")).bearer_auth(token).send().await.expect("get");
    assert_eq!(ok.status().as_u16(), 200);
    // A browser logs in once; the session cookie opens the pages after.
    let login = server.client.get(server.url(&format!("/login?token={token}"))).send().await.expect("login");
    assert_eq!(login.status().as_u16(), 303);
    let cookie = login.headers()["set-cookie"].to_str().expect("cookie").to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(!cookie.contains(token), "the cookie holds a digest of the token, not the token: {cookie}");
    let pair = cookie.split(';').next().expect("pair").to_owned();
    let page = server.client.get(server.url("/")).header("cookie", pair).send().await.expect("get");
    assert_eq!(page.status().as_u16(), 200);
    let bad_login = server.client.get(server.url("/login?token=nope")).send().await.expect("login");
    assert_eq!(bad_login.status().as_u16(), 401);
}

#[tokio::test]
async fn i2_requests_for_another_host_are_refused_without_a_token() {
    let server = TestServer::start(ServerOptions::default()).await;
    let rebound = server
        .client
        .get(server.url("/api/v1/tasks"))
        .header("host", "evil.example:7878")
        .send()
        .await
        .expect("get");
    assert_eq!(rebound.status().as_u16(), 403);
    let local = server
        .client
        .get(server.url("/api/v1/tasks"))
        .header("host", "localhost:7878")
        .send()
        .await
        .expect("get");
    assert_eq!(local.status().as_u16(), 200);
}

#[tokio::test]
async fn i2_forms_need_the_csrf_token_and_bodies_are_capped() {
    let server = TestServer::start(ServerOptions { body_limit: 64 * 1024, ..ServerOptions::default() }).await;
    let ids = server.push(vec![item("draft", "PJ-01", "work", "ai")]).await;
    let edit = server.url(&format!("/t/{}/edit", ids[0]));
    let refused = server
        .client
        .post(&edit)
        .form(&[("status", "done"), ("correction", "x")])
        .send()
        .await
        .expect("post");
    assert_eq!(refused.status().as_u16(), 403);
    let refused =
        server.client.post(&edit).form(&[("csrf", "guess"), ("status", "done")]).send().await.expect("post");
    assert_eq!(refused.status().as_u16(), 403);
    assert_eq!(server.store.get(ids[0]).await.expect("get").expect("row").status, Status::Pending);
    for path in [
        "/pause",
        "/resume",
        &format!("/t/{}/approve", ids[0]),
        &format!("/t/{}/reject", ids[0]),
        "/approvals/decide",
        &format!("/t/{}/fix", ids[0]),
    ] {
        let pick = format!("pick-{}", ids[0]);
        let fields = [("reason", "r"), (&pick, "on"), ("decision", "approve"), ("fix", "drop")];
        let refused = server.client.post(server.url(path)).form(&fields).send().await.expect("post");
        assert_eq!(refused.status().as_u16(), 403, "{path}");
    }
    assert!(!server.store.get(ids[0]).await.expect("get").expect("row").run, "nothing approved");
    assert_eq!(server.store.paused().await.expect("paused"), None);

    // With the token from the page, the same form is taken.
    let page =
        server.client.get(server.url("/p/PJ-01")).send().await.expect("get").text().await.expect("text");
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("csrf in the page");
    let ok = server
        .client
        .post(&edit)
        .form(&[("csrf", csrf), ("status", "done"), ("back", "/p/PJ-01")])
        .send()
        .await
        .expect("post");
    assert_eq!(ok.status().as_u16(), 303);
    assert_eq!(ok.headers()["location"], "/p/PJ-01");
    assert_eq!(server.store.get(ids[0]).await.expect("get").expect("row").status, Status::Done);

    let big = "x".repeat(100 * 1024);
    let too_big = server
        .client
        .post(server.url("/api/v1/push"))
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .expect("post");
    assert_eq!(too_big.status().as_u16(), 413);
    let message: Value = too_big.json().await.expect("413 as JSON");
    assert!(message["error"].is_string(), "{message}");
}

#[tokio::test]
async fn i2_every_text_is_escaped_and_labels_follow_the_locale() {
    let server = TestServer::start(ServerOptions { ja: true, ..ServerOptions::default() }).await;
    let mut hostile = item("<script>alert(1)</script>", "PJ-<b>", "work", "ai");
    hostile.evidence = "javascript:alert(2)".into();
    hostile.body = "\"><img src=x onerror=alert(3)>".into();
    let ids = server.push(vec![hostile]).await;
    for path in ["/".to_owned(), "/p/PJ-%3Cb%3E".to_owned(), format!("/t/{}", ids[0])] {
        let response = server.client.get(server.url(&path)).send().await.expect("get");
        assert_eq!(response.status().as_u16(), 200, "{path}");
        let page = response.text().await.expect("text");
        assert!(!page.contains("<script>alert(1)"), "{path}");
        assert!(!page.contains("<img src=x"), "{path}");
        assert!(!page.contains("<b>"), "{path}");
        assert!(!page.contains("href=\"javascript:"), "{path}");
        assert!(
            page.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
            "the title shows as text on {path}"
        );
        assert!(page.contains("未完了の作業") && page.contains("承認待ち"), "Japanese labels on {path}");
    }
    let ledger =
        server.client.get(server.url("/p/PJ-%3Cb%3E")).send().await.expect("get").text().await.expect("text");
    assert!(
        ledger.contains("タスクID") && ledger.contains("修正指示") && ledger.contains("未着手"),
        "Japanese headers and status names"
    );
}

/// I4: the MCP tools over Streamable HTTP at /mcp, behind the same access rules.
#[tokio::test]
async fn i4_mcp_over_http_answers_behind_the_access_guard() {
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } }
    });
    let token = "0123456789abcdef-token";
    let server =
        TestServer::start(ServerOptions { token: Some(token.into()), ..ServerOptions::default() }).await;
    let post = |auth: bool| {
        let request = server
            .client
            .post(server.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if auth { request.bearer_auth(token) } else { request }
    };
    let denied = post(false).send().await.expect("post");
    assert_eq!(denied.status().as_u16(), 401);
    let answer = post(true).send().await.expect("post");
    assert_eq!(answer.status().as_u16(), 200);
    let body = answer.text().await.expect("body");
    assert!(body.contains("\"serverInfo\"") && body.contains("\"tools\""), "{body}");
    assert!(body.contains("claim_next"), "the instructions name the loop: {body}");
}

/// I2: a web form writes only what the person changed: a row a worker claimed after the page was
/// drawn is not set back to pending by saving its correction, and the claim's end still records.
#[tokio::test]
async fn i2_a_stale_form_changes_only_what_the_person_changed() {
    let server = TestServer::start(ServerOptions::default()).await;
    let ids = server.push(vec![item("draft", "PJ-01", "work", "ai")]).await;
    let page =
        server.client.get(server.url("/p/PJ-01")).send().await.expect("get").text().await.expect("text");
    let field = |name: &str| {
        page.split(&format!("name=\"{name}\" value=\""))
            .nth(1)
            .and_then(|s| s.split('"').next())
            .map(str::to_owned)
    };
    let (csrf, status_was) = (field("csrf").expect("csrf"), field("status_was").expect("status_was"));
    assert_eq!(status_was, "pending");
    // A worker claims the row after the page was drawn.
    let (_, claim) = post(&server, "/api/v1/claim", json!({ "worker": "w" })).await;
    assert_eq!(claim["outcome"], "claimed", "{claim}");
    // The person writes a correction on the stale page and saves: the select still says pending.
    let edit = server.url(&format!("/t/{}/edit", ids[0]));
    let form = [
        ("csrf", csrf.as_str()),
        ("status", "pending"),
        ("status_was", "pending"),
        ("correction", "cite the source"),
        ("correction_was", ""),
        ("run_was", ""),
    ];
    let saved = server.client.post(&edit).form(&form).send().await.expect("post");
    assert_eq!(saved.status().as_u16(), 303);
    let row = server.store.get(ids[0]).await.expect("get").expect("row");
    assert_eq!((row.status, row.correction.as_str(), row.run), (Status::Running, "cite the source", false));
    let path = format!("/api/v1/tasks/{}/complete", ids[0]);
    let (status, end) = post(&server, &path, json!({ "worker": "w", "attempt": 1, "result": "done" })).await;
    assert_eq!(status, 200, "{end}");
    // A status the person did change is written.
    let form = [("csrf", csrf.as_str()), ("status", "done"), ("status_was", "review"), ("run_was", "")];
    server.client.post(&edit).form(&form).send().await.expect("post");
    assert_eq!(server.store.get(ids[0]).await.expect("get").expect("row").status, Status::Done);
}

/// I2 (issue 18, item 6): under `ja` the cross view's "… N more" line and the task page's journal
/// speak Japanese: field names as the ledger's columns, statuses by their Japanese names.
#[tokio::test]
async fn i2_the_web_ui_speaks_japanese_in_more_lines_and_the_journal() {
    let server = TestServer::start(ServerOptions { ja: true, ..ServerOptions::default() }).await;
    let ids = server.seed((0..12).map(|n| crate::item(&format!("row {n}"), "PJ-01", "", "")).collect()).await;
    let done = daicho_core::edit::TaskEdit { status: Some(Status::Done), ..Default::default() };
    server
        .store
        .edit(ids[0], done, daicho_core::Actor::Human("p".into()), jiff::Timestamp::now())
        .await
        .expect("edit");
    let page = |path: String| {
        let client = server.client.clone();
        let url = server.url(&path);
        async move { client.get(url).send().await.expect("get").text().await.expect("text") }
    };
    let index = page("/".into()).await;
    assert!(index.contains("… PJ-01 の台帳にあと 1 件"), "{index}");
    assert!(!index.contains("more in the"), "{index}");
    let task = page(format!("/t/{}", ids[0])).await;
    assert!(task.contains("状態: 未着手 → 完了"), "{task}");
    assert!(!task.contains("status:"), "{task}");
}

/// I2: `/events` says `change` when the ledger changes, and a server with a page listening still
/// stops at once (the endless response ends with the server).
#[tokio::test]
async fn i2_events_announce_changes_and_do_not_hold_up_a_stop() {
    let dir = tempfile::tempdir().expect("dir");
    let store = std::sync::Arc::new(
        daicho_sqlite::SqliteStore::open(dir.path().join("l.db"), Default::default()).await.expect("open"),
    );
    let config = daicho_engine::Config::parse(crate::CONFIG, "test.toml").expect("config");
    let engine = std::sync::Arc::new(daicho_engine::Engine::new(std::sync::Arc::clone(&store), config, None));
    let options = ServerOptions { bind: "127.0.0.1:0".parse().expect("addr"), ..ServerOptions::default() };
    let running =
        daicho_server::bind(engine, options, Default::default()).await.expect("bind").spawn().expect("spawn");
    let url = format!("http://{}/events", running.local_addr());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut events = reqwest::get(&url).await.expect("events");
    assert_eq!(events.headers()["content-type"], "text/event-stream");
    let batch = daicho_store::Batch {
        items: vec![crate::item("new", "PJ-01", "", "")].into(),
        actor: daicho_core::Actor::Human("p".into()),
        now: jiff::Timestamp::now(),
        file: "test".into(),
        unknown_deps: daicho_store::UnknownDeps::Refuse,
    };
    store.upsert(batch).await.expect("upsert");
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !seen.contains("event: change") {
        let chunk = tokio::time::timeout_at(deadline, events.chunk()).await.expect("an event within 10 s");
        seen.push_str(&String::from_utf8_lossy(&chunk.expect("chunk").expect("open")));
    }
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(5), running.stop()).await;
    assert!(matches!(stopped, Ok(Ok(()))), "the server stopped with /events open: {stopped:?}");
}

//! The guard in front of every route, over real HTTP (S13, I2, I3, I4): writes from another
//! origin are refused, API writes must be JSON, every response is hardened, `/api` errors are
//! JSON, `back` redirects stay on this site, and `/mcp` answers the same hosts as `/api`. Each
//! refusal is shown next to the legitimate request that still works.

use daicho_core::Status;
use daicho_server::{ServerError, ServerOptions};
use daicho_store::Store;
use serde_json::{Value, json};

use crate::{TestServer, item, ledger_snapshot, page_csrf};

/// The status, the content type and the body of a response.
async fn answer(response: reqwest::Response) -> (u16, String, String) {
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().expect("ascii").to_owned())
        .unwrap_or_default();
    (status, kind, response.text().await.expect("body"))
}

/// Asserts a JSON error answer with `status`; returns its message.
fn json_error(got: &(u16, String, String), status: u16) -> String {
    assert_eq!(got.0, status, "{got:?}");
    assert!(got.1.starts_with("application/json"), "JSON error expected: {got:?}");
    let body: Value = serde_json::from_str(&got.2).unwrap_or_else(|e| panic!("{e}: {got:?}"));
    body["error"].as_str().unwrap_or_else(|| panic!("an error message: {got:?}")).to_owned()
}

/// A ledger with an external task waiting in the approval queue (an approval would be visible)
/// and a plain one; returns their ids.
async fn seeded(server: &TestServer) -> (daicho_core::TaskId, daicho_core::TaskId) {
    let ids = server
        .push(vec![
            item("Publish the release", "PJ-01", "publish", "ai"),
            item("draft", "PJ-01", "work", "ai"),
        ])
        .await;
    server.store.queue_approvals(vec![ids[0]], "test".into(), jiff::Timestamp::now()).await.expect("queue");
    (ids[0], ids[1])
}

#[tokio::test]
async fn s13_forms_from_another_origin_are_refused_even_with_the_csrf_token() {
    let server = TestServer::start(ServerOptions::default()).await;
    let (external, draft) = seeded(&server).await;
    let csrf = page_csrf(&server).await;
    let before = ledger_snapshot(&server.store).await;
    let other = server.base.replace("127.0.0.1", "localhost");
    let pick = format!("pick-{external}");
    let forms: Vec<(String, Vec<(&str, &str)>)> = vec![
        (format!("/t/{draft}/edit"), vec![("status", "done"), ("run", "on"), ("correction", "x")]),
        (format!("/t/{external}/approve"), vec![]),
        (format!("/t/{external}/reject"), vec![("reason", "no")]),
        ("/approvals/decide".into(), vec![(&pick, "on"), ("decision", "approve")]),
        (format!("/t/{draft}/fix"), vec![("fix", "drop")]),
        ("/pause".into(), vec![("reason", "stop")]),
    ];
    // Each way a browser says "another page sent this", with the real CSRF token in the form.
    let hostile: [(&str, &str); 5] = [
        ("origin", "http://127.0.0.1:1"),
        ("origin", &other),
        ("origin", "null"),
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-site", "same-site"),
    ];
    for (path, fields) in &forms {
        let mut fields = fields.clone();
        fields.push(("csrf", &csrf));
        for (name, value) in hostile {
            let got = answer(
                server
                    .client
                    .post(server.url(path))
                    .header(name, value)
                    .form(&fields)
                    .send()
                    .await
                    .expect("post"),
            )
            .await;
            assert_eq!(got.0, 403, "{path} {name}: {value}: {got:?}");
            assert!(got.1.starts_with("text/plain") && got.2.contains("another origin"), "{got:?}");
        }
    }
    assert_eq!(ledger_snapshot(&server.store).await, before, "nothing was written");

    // The person's own page: same origin as the browser states it, with the token.
    let own = [("origin", server.base.as_str()), ("sec-fetch-site", "same-origin")];
    let mut request = server.client.post(server.url(&format!("/t/{draft}/edit")));
    for (name, value) in own {
        request = request.header(name, value);
    }
    let saved = request
        .form(&[("csrf", csrf.as_str()), ("status", "done"), ("back", "/p/PJ-01")])
        .send()
        .await
        .expect("post");
    assert_eq!(saved.status().as_u16(), 303);
    assert_eq!(saved.headers()["location"], "/p/PJ-01");
    assert_eq!(server.store.get(draft).await.expect("get").expect("row").status, Status::Done);
    // Typed into the address bar or a bookmark (`none`) is the person too.
    let approved = server
        .client
        .post(server.url(&format!("/t/{external}/approve")))
        .header("sec-fetch-site", "none")
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .expect("post");
    assert_eq!(approved.status().as_u16(), 303);
    assert!(server.store.get(external).await.expect("get").expect("row").run);
}

#[tokio::test]
async fn s13_api_and_mcp_writes_from_another_origin_are_refused() {
    let server = TestServer::start(ServerOptions::default()).await;
    let (external, _) = seeded(&server).await;
    let before = ledger_snapshot(&server.store).await;
    let approve = server.url(&format!("/api/v1/tasks/{external}/approve"));
    for (name, value) in
        [("origin", "http://evil.example"), ("origin", "null"), ("sec-fetch-site", "cross-site")]
    {
        let got = answer(
            server
                .client
                .post(&approve)
                .header(name, value)
                .json(&json!({ "by": "mallory" }))
                .send()
                .await
                .expect("post"),
        )
        .await;
        assert!(json_error(&got, 403).contains("another origin"), "{got:?}");
        let push = server
            .client
            .post(server.url("/api/v1/push"))
            .header(name, value)
            .json(&json!([{ "title": "planted" }]))
            .send()
            .await
            .expect("post");
        json_error(&answer(push).await, 403);
        let reject = server
            .client
            .post(server.url(&format!("/api/v1/tasks/{external}/reject")))
            .header(name, value)
            .json(&json!({ "reason": "planted", "by": "mallory" }))
            .send()
            .await
            .expect("post");
        assert!(json_error(&answer(reject).await, 403).contains("another origin"));
        let mcp = server
            .client
            .post(server.url("/mcp"))
            .header(name, value)
            .header("accept", "application/json, text/event-stream")
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }))
            .send()
            .await
            .expect("post");
        json_error(&answer(mcp).await, 403);
    }
    assert_eq!(ledger_snapshot(&server.store).await, before, "nothing was written");

    // Reads from anywhere still answer (a link from another site to a page).
    let read =
        server.client.get(server.url("/api/v1/tasks")).header("sec-fetch-site", "cross-site").send().await;
    assert_eq!(read.expect("get").status().as_u16(), 200);
    // A tool without Origin, sending JSON, approves.
    let got =
        answer(server.client.post(&approve).json(&json!({ "by": "hanako" })).send().await.expect("post"))
            .await;
    assert_eq!(got.0, 200, "{got:?}");
    assert_eq!(
        server.store.journal(external).await.expect("journal").last().expect("entry").actor,
        "human:hanako"
    );
}

#[tokio::test]
async fn s13_api_writes_must_be_json() {
    let server = TestServer::start(ServerOptions::default()).await;
    let (external, draft) = seeded(&server).await;
    let before = ledger_snapshot(&server.store).await;
    let items = r#"[{"title": "planted"}]"#;
    let plain = ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", ""];
    for kind in plain {
        let mut request = server.client.post(server.url("/api/v1/push")).body(items);
        if !kind.is_empty() {
            request = request.header("content-type", kind);
        }
        json_error(&answer(request.send().await.expect("post")).await, 415);
    }
    let multipart = server
        .client
        .post(server.url("/api/v1/push"))
        .header("content-type", "multipart/form-data; boundary=xyz")
        .body(format!(
            "--xyz\r\nContent-Disposition: form-data; name=\"tasks\"\r\n\r\n{items}\r\n--xyz--\r\n"
        ))
        .send()
        .await
        .expect("post");
    json_error(&answer(multipart).await, 415);
    let patch = server
        .client
        .patch(server.url(&format!("/api/v1/tasks/{draft}")))
        .header("content-type", "text/plain")
        .body(r#"{"status": "done"}"#)
        .send()
        .await
        .expect("patch");
    json_error(&answer(patch).await, 415);
    let approve = server
        .client
        .post(server.url(&format!("/api/v1/tasks/{external}/approve")))
        .form(&[("by", "mallory")])
        .send()
        .await
        .expect("post");
    json_error(&answer(approve).await, 415);
    let claim = server.client.post(server.url("/api/v1/claim")).body(r#"{"worker": "w"}"#).send().await;
    json_error(&answer(claim.expect("post")).await, 415);
    assert_eq!(ledger_snapshot(&server.store).await, before, "nothing was written");

    // JSON in any case of the media type, with parameters, is taken.
    for (n, kind) in ["application/json; charset=utf-8", "Application/JSON"].iter().enumerate() {
        let body = format!(r#"[{{"title": "found {n}"}}]"#);
        let got = answer(
            server
                .client
                .post(server.url("/api/v1/push"))
                .header("content-type", *kind)
                .body(body)
                .send()
                .await
                .expect("post"),
        )
        .await;
        assert_eq!(got.0, 200, "{kind}: {got:?}");
    }
}

#[tokio::test]
async fn s13_api_approve_needs_a_json_object() {
    let server = TestServer::start(ServerOptions::default()).await;
    let ids = server
        .push(vec![item("Publish A", "PJ-01", "publish", "ai"), item("Publish B", "PJ-01", "publish", "ai")])
        .await;
    server.store.queue_approvals(ids.clone(), "test".into(), jiff::Timestamp::now()).await.expect("queue");
    let before = ledger_snapshot(&server.store).await;
    let approve = |id: daicho_core::TaskId, body: &'static str| {
        server
            .client
            .post(server.url(&format!("/api/v1/tasks/{id}/approve")))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    json_error(&answer(approve(ids[0], "").await.expect("post")).await, 400);
    json_error(&answer(approve(ids[0], "{").await.expect("post")).await, 400);
    for not_an_object in ["[]", "[\"alice\"]", "\"alice\"", "null", "{\"by\": \"a\", \"run\": true}"] {
        json_error(&answer(approve(ids[0], not_an_object).await.expect("post")).await, 422);
    }
    let bare = server.client.post(server.url(&format!("/api/v1/tasks/{}/approve", ids[0]))).send().await;
    json_error(&answer(bare.expect("post")).await, 415);
    assert_eq!(ledger_snapshot(&server.store).await, before, "nothing was written");

    let got = answer(approve(ids[0], "{}").await.expect("post")).await;
    assert_eq!(got.0, 200, "{got:?}");
    let got = answer(approve(ids[1], r#"{"by": "alice"}"#).await.expect("post")).await;
    assert_eq!(got.0, 200, "{got:?}");
    let mut actors = Vec::new();
    for id in &ids {
        actors.push(server.store.journal(*id).await.expect("journal").last().expect("entry").actor.clone());
    }
    assert_eq!(actors, ["human:api", "human:alice"]);
}

#[tokio::test]
async fn i3_every_api_error_is_json() {
    let server = TestServer::start(ServerOptions { body_limit: 1024, ..ServerOptions::default() }).await;
    let (_, draft) = seeded(&server).await;
    let get = |path: &str| server.client.get(server.url(path)).send();
    let json_post = |path: &str, body: Vec<u8>| {
        server.client.post(server.url(path)).header("content-type", "application/json").body(body).send()
    };
    // 400: a bad query string (ill-typed, unknown key), bad JSON, bad UTF-8.
    json_error(&answer(get("/api/v1/tasks?limit=many").await.expect("get")).await, 400);
    json_error(&answer(get("/api/v1/ready?nonsense=1").await.expect("get")).await, 400);
    let bad_json = server
        .client
        .patch(server.url(&format!("/api/v1/tasks/{draft}")))
        .header("content-type", "application/json")
        .body("{\"run\": tru")
        .send()
        .await
        .expect("patch");
    json_error(&answer(bad_json).await, 400);
    json_error(
        &answer(json_post("/api/v1/push", b"[{\"title\": \"\xff\"}]".to_vec()).await.expect("post")).await,
        400,
    );
    // 404: unknown paths under /api; a page's 404 stays text.
    json_error(&answer(get("/api/v1/nothing-here").await.expect("get")).await, 404);
    json_error(&answer(get("/api").await.expect("get")).await, 404);
    let page = answer(get("/nothing-here").await.expect("get")).await;
    assert_eq!((page.0, page.1.starts_with("text/plain")), (404, true), "{page:?}");
    // 405: a wrong method, naming the allowed ones.
    let message = json_error(&answer(get("/api/v1/push").await.expect("get")).await, 405);
    assert!(message.contains("POST"), "{message}");
    let put = server
        .client
        .put(server.url(&format!("/api/v1/tasks/{draft}")))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("put");
    json_error(&answer(put).await, 405);
    // 413: a body over the limit, for a raw body and for a JSON extractor.
    let big = format!("[{{\"title\": \"{}\"}}]", "x".repeat(4096)).into_bytes();
    json_error(&answer(json_post("/api/v1/push", big.clone()).await.expect("post")).await, 413);
    json_error(&answer(json_post("/api/v1/claim", big).await.expect("post")).await, 413);
    // 415 and 422 as before.
    let plain = server.client.post(server.url("/api/v1/claim")).body("{}").send().await.expect("post");
    json_error(&answer(plain).await, 415);
    json_error(
        &answer(json_post("/api/v1/claim", b"{\"worker\": 5}".to_vec()).await.expect("post")).await,
        422,
    );
}

#[tokio::test]
async fn s13_every_response_carries_the_hardening_headers() {
    let token = "0123456789abcdef-token";
    let open = TestServer::start(ServerOptions::default()).await;
    let locked =
        TestServer::start(ServerOptions { token: Some(token.into()), ..ServerOptions::default() }).await;
    let (_, draft) = seeded(&open).await;
    let csrf = page_csrf(&open).await;
    let check = |response: reqwest::Response, what: &str| {
        let headers = response.headers();
        let header = |name: &str| headers.get(name).map(|v| v.to_str().expect("ascii").to_owned());
        assert_eq!(
            header("content-security-policy").as_deref(),
            Some("default-src 'self'; frame-ancestors 'none'"),
            "{what}"
        );
        assert_eq!(header("x-frame-options").as_deref(), Some("DENY"), "{what}");
        assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"), "{what}");
        assert_eq!(header("referrer-policy").as_deref(), Some("same-origin"), "{what}");
    };
    for path in [
        "/",
        "/p/PJ-01",
        "/approvals",
        &format!("/t/{draft}"),
        "/daicho.css",
        "/daicho.js",
        "/api/v1/tasks",
        "/metrics",
        "/nope",
        "/api/v1/nope",
    ] {
        check(open.client.get(open.url(path)).send().await.expect("get"), path);
    }
    let redirect =
        open.client.post(open.url("/resume")).form(&[("csrf", csrf.as_str())]).send().await.expect("post");
    assert_eq!(redirect.status().as_u16(), 303);
    check(redirect, "a redirect");
    let refused = open.client.post(open.url("/pause")).header("origin", "null").send().await.expect("post");
    check(refused, "a cross-origin refusal");
    check(
        open.client.post(open.url("/pause")).form(&[("csrf", "guess")]).send().await.expect("post"),
        "CSRF",
    );
    check(locked.client.get(locked.url("/")).send().await.expect("get"), "401");
    let mcp = locked
        .client
        .post(locked.url("/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } }))
        .send()
        .await
        .expect("post");
    assert_eq!(mcp.status().as_u16(), 200);
    check(mcp, "/mcp");
    // The pages need nothing the policy forbids: no inline style or script, one stylesheet, one
    // script file of the site's own.
    let page = open.client.get(open.url("/")).send().await.expect("get").text().await.expect("text");
    assert!(!page.contains("<style") && !page.contains("style="), "{page}");
    assert_eq!(page.matches("<script").count(), 1, "{page}");
    assert!(page.contains("<script src=\"/daicho.js\" defer></script>"), "{page}");
    assert!(page.contains("<link rel=\"stylesheet\" href=\"/daicho.css\">"));
    let js = open.client.get(open.url("/daicho.js")).send().await.expect("get");
    assert!(js.headers()["content-type"].to_str().expect("ascii").starts_with("text/javascript"));
    let css = open.client.get(open.url("/daicho.css")).send().await.expect("get");
    assert!(css.headers()["content-type"].to_str().expect("ascii").starts_with("text/css"));
}

#[tokio::test]
async fn s13_back_redirects_never_leave_the_site() {
    let server = TestServer::start(ServerOptions::default()).await;
    let (_, draft) = seeded(&server).await;
    let csrf = page_csrf(&server).await;
    let edit = server.url(&format!("/t/{draft}/edit"));
    let location = |response: &reqwest::Response| {
        assert_eq!(response.status().as_u16(), 303, "{response:?}");
        response.headers()["location"].to_str().expect("ascii").to_owned()
    };
    // Form values as the browser decodes them: tab, newline, the percent-encoded forms of those,
    // a scheme-relative URL, a backslash.
    for back in [
        "/\t/evil.example",
        "/\n/x",
        "/%09/evil.example",
        "/%0A/x",
        "//evil.example",
        "/\\evil.example",
        "/%5C%5Cevil.example",
        "https://evil.example/",
    ] {
        let answered = server
            .client
            .post(&edit)
            .form(&[("csrf", csrf.as_str()), ("correction", back), ("back", back)])
            .send()
            .await
            .expect("post");
        assert_eq!(location(&answered), format!("/t/{draft}"), "{back:?}");
        let paused = server
            .client
            .post(server.url("/resume"))
            .form(&[("csrf", csrf.as_str()), ("back", back)])
            .send()
            .await;
        assert_eq!(location(&paused.expect("post")), "/", "{back:?}");
    }
    // The raw body as an attacker writes it: `back=/%0A/x` is a newline after decoding.
    let raw = server
        .client
        .post(&edit)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&back=/%0A/x"))
        .send()
        .await
        .expect("post");
    assert_eq!(location(&raw), format!("/t/{draft}"));
    let good = server
        .client
        .post(&edit)
        .form(&[("csrf", csrf.as_str()), ("back", "/p/PJ-01?after=T-0001")])
        .send()
        .await
        .expect("post");
    assert_eq!(location(&good), "/p/PJ-01?after=T-0001");
}

#[tokio::test]
async fn i2_the_bearer_scheme_is_case_insensitive() {
    let token = "0123456789abcdef-token";
    let server =
        TestServer::start(ServerOptions { token: Some(token.into()), ..ServerOptions::default() }).await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let got = server
            .client
            .get(server.url("/api/v1/tasks"))
            .header("authorization", format!("{scheme} {token}"))
            .send()
            .await
            .expect("get");
        assert_eq!(got.status().as_u16(), 200, "{scheme}");
    }
    let basic =
        server.client.get(server.url("/api/v1/tasks")).header("authorization", format!("Basic {token}"));
    assert_eq!(basic.send().await.expect("get").status().as_u16(), 401);
    // A bearer request is no cross-site form: a tool may push with the type its shell gives.
    let pushed = server
        .client
        .post(server.url("/api/v1/push"))
        .header("authorization", format!("bearer {token}"))
        .header("content-type", "text/plain")
        .body(r#"[{"title": "from a script"}]"#)
        .send()
        .await
        .expect("post");
    assert_eq!(pushed.status().as_u16(), 200);
    // The cookie is what a browser carries: a cookie write must be JSON.
    let login = server.client.get(server.url(&format!("/login?token={token}"))).send().await.expect("login");
    let pair =
        login.headers()["set-cookie"].to_str().expect("cookie").split(';').next().expect("pair").to_owned();
    let by_cookie = server
        .client
        .post(server.url("/api/v1/push"))
        .header("cookie", pair)
        .header("content-type", "text/plain")
        .body(r#"[{"title": "planted"}]"#)
        .send()
        .await
        .expect("post");
    json_error(&answer(by_cookie).await, 415);
}

/// The MCP `initialize` call.
fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } }
    })
}

#[tokio::test]
async fn i4_mcp_answers_the_same_hosts_as_the_api() {
    let token = "0123456789abcdef-token";
    let server =
        TestServer::start(ServerOptions { token: Some(token.into()), ..ServerOptions::default() }).await;
    let port = server.base.rsplit(':').next().expect("port").to_owned();
    // With a token, any host name: the token is the guard.
    for host in [format!("myhost:{port}"), "daicho.internal".to_owned(), format!("127.0.0.1:{port}")] {
        let api = server.client.get(server.url("/api/v1/tasks")).bearer_auth(token).header("host", &host);
        assert_eq!(api.send().await.expect("get").status().as_u16(), 200, "/api for {host}");
        let mcp = server
            .client
            .post(server.url("/mcp"))
            .bearer_auth(token)
            .header("host", &host)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize())
            .send()
            .await
            .expect("post");
        assert_eq!(mcp.status().as_u16(), 200, "/mcp for {host}");
    }

    // Without a token: loopback names and the public URL's host, for both.
    let public = TestServer::start(ServerOptions {
        public_url: Some("https://daicho.example.com".into()),
        ..ServerOptions::default()
    })
    .await;
    for (host, status) in [("localhost", 200), ("daicho.example.com", 200), ("evil.example", 403)] {
        let api =
            public.client.get(public.url("/api/v1/tasks")).header("host", host).send().await.expect("get");
        assert_eq!(api.status().as_u16(), status, "/api for {host}");
        let mcp = public
            .client
            .post(public.url("/mcp"))
            .header("host", host)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize())
            .send()
            .await
            .expect("post");
        let got = answer(mcp).await;
        assert_eq!(got.0, status, "/mcp for {host}: {got:?}");
        if status == 403 {
            json_error(&got, 403);
        }
    }
    // The public URL's origin is the server's own: the person's page behind the proxy posts.
    let csrf = page_csrf(&public).await;
    let paused = public
        .client
        .post(public.url("/pause"))
        .header("host", "daicho.example.com")
        .header("origin", "https://daicho.example.com")
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .expect("post");
    assert_eq!(paused.status().as_u16(), 303);
    assert!(public.store.paused().await.expect("paused").is_some());
    let refused = public
        .client
        .post(public.url("/resume"))
        .header("origin", "http://daicho.example.com")
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .expect("post");
    assert_eq!(refused.status().as_u16(), 403, "http is not the public https origin");
}

#[tokio::test]
async fn i2_a_public_url_must_be_an_origin() {
    let dir = tempfile::tempdir().expect("dir");
    let store = std::sync::Arc::new(
        daicho_sqlite::SqliteStore::open(dir.path().join("l.db"), Default::default()).await.expect("open"),
    );
    let config = daicho_engine::Config::parse(crate::CONFIG, "test.toml").expect("config");
    let engine = std::sync::Arc::new(daicho_engine::Engine::new(store, config, None));
    for bad in ["daicho.example.com", "ftp://daicho.example.com", "https://daicho.example.com/prefix"] {
        let options = ServerOptions {
            bind: "127.0.0.1:0".parse().expect("addr"),
            public_url: Some(bad.into()),
            ..ServerOptions::default()
        };
        let refused = daicho_server::bind(std::sync::Arc::clone(&engine), options, Default::default()).await;
        assert!(matches!(refused, Err(ServerError::BadPublicUrl(_))), "{bad}: {refused:?}");
    }
}

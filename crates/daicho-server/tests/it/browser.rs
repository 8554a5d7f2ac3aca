//! The web UI in a real headless Chromium driven through chromedriver (I2). The test fails when
//! chromedriver or Chromium is missing, unless DAICHO_SKIP_BROWSER=1 says to skip it (CI never
//! sets it; `.ci/run` installs Debian's `chromium` and `chromium-driver`). Screenshots of the
//! three pages are saved under `target/screenshots/`.

use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use daicho_core::Status;
use daicho_server::ServerOptions;
use daicho_store::Store;
use fantoccini::{Client, ClientBuilder, Locator};

use crate::{TestServer, item};

/// chromedriver as a child process, killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    /// Kills chromedriver and the browsers it started (its process group), also when the test
    /// failed half-way.
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Starts chromedriver; `None` only when the opt-out variable is set and it is missing.
async fn driver() -> Option<Driver> {
    let program = std::env::var("DAICHO_CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into());
    let port = free_port();
    let child = Command::new(&program)
        .arg(format!("--port={port}"))
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let child = match child {
        Ok(child) => child,
        Err(e) if std::env::var_os("DAICHO_SKIP_BROWSER").is_some() => {
            eprintln!("skipping the browser test (DAICHO_SKIP_BROWSER set): cannot start {program}: {e}");
            return None;
        }
        Err(e) => panic!(
            "cannot start {program}: {e}. Install Debian's chromium and chromium-driver \
             (`apt-get install chromium chromium-driver`), or set DAICHO_SKIP_BROWSER=1 to skip"
        ),
    };
    let driver = Driver { child, url: format!("http://127.0.0.1:{port}") };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let probe = reqwest::Client::new();
    for _ in 0..100 {
        if probe.get(format!("{}/status", driver.url)).send().await.is_ok() {
            return Some(driver);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver did not answer on {}", driver.url);
}

async fn browser(driver: &Driver) -> Client {
    let binary = std::env::var("DAICHO_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let capabilities = serde_json::json!({
        "goog:chromeOptions": {
            "binary": binary,
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                     "--disable-dev-shm-usage", "--window-size=1500,1000", "--lang=ja"]
        }
    });
    let serde_json::Value::Object(capabilities) = capabilities else { unreachable!() };
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .expect("a Chromium session (is Debian's chromium installed?)")
}

fn screenshots_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("../screenshots");
    std::fs::create_dir_all(&dir).expect("screenshots dir");
    dir
}

async fn save_screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG image");
    std::fs::write(screenshots_dir().join(name), png).expect("write screenshot");
}

/// Clicks a submit button and waits until the page it leads to has loaded.
async fn submit(client: &Client, css: &str) {
    client.execute("document.documentElement.dataset.before = 'yes'", vec![]).await.expect("mark the page");
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .expect("click");
    for _ in 0..100 {
        let marked = client.execute("return document.documentElement.dataset.before || null", vec![]).await;
        if matches!(marked, Ok(serde_json::Value::Null)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no new page after clicking {css}");
}

async fn text(client: &Client, css: &str) -> String {
    client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}")).text().await.expect("text")
}

#[tokio::test]
async fn i2_a_person_works_the_ledger_and_the_approval_queue_in_a_real_browser() {
    let Some(driver) = driver().await else { return };
    let server = TestServer::start(ServerOptions { ja: true, ..ServerOptions::default() }).await;
    let mut late = item("下書きを書く", "PJ-01", "work", "ai");
    late.due = Some(jiff::civil::date(2026, 1, 15));
    late.evidence = "https://example.com/issue/12".into();
    let hostile = item("<script>alert(1)</script>", "PJ-01", "work", "ai");
    let external = item("Publish the release", "PJ-01", "publish", "ai");
    let mut reviewed = item("Check the figures", "PJ-02", "work", "ai");
    reviewed.status = Some(Status::Review);
    reviewed.result = "figures: 3 tables".into();
    let ids = server.seed(vec![late, hostile, external, reviewed]).await;
    server.store.queue_approvals(vec![ids[2]], jiff::Timestamp::now()).await.expect("queue");
    let client = browser(&driver).await;
    {
        // The ledger of PJ-01: the hostile title shows as text, and the page runs no script.
        client.goto(&server.url("/p/PJ-01")).await.expect("goto ledger");
        let title = text(&client, &format!("#row-{} td.long", ids[1])).await;
        assert_eq!(title, "<script>alert(1)</script>");
        let scripts = client.execute("return document.scripts.length", vec![]).await.expect("execute");
        assert_eq!(scripts, serde_json::json!(0));
        let overdue = client.find(Locator::Css(&format!("#row-{}", ids[0]))).await.expect("row");
        assert!(overdue.attr("class").await.expect("class").unwrap_or_default().contains("overdue"));
        save_screenshot(&client, "ledger.png").await;

        // A person writes a correction and ticks ▶ run on the first row, and saves.
        let correction =
            client.find(Locator::Css(&format!("textarea[form=edit-{}]", ids[0]))).await.expect("textarea");
        correction.send_keys("出典を明記すること").await.expect("type");
        client
            .find(Locator::Css(&format!("input[type=checkbox][form=edit-{}]", ids[0])))
            .await
            .expect("box")
            .click()
            .await
            .expect("tick");
        submit(&client, &format!("#edit-{} button", ids[0])).await;
        // Back on the ledger, which shows the stored values.
        let shown =
            client.find(Locator::Css(&format!("textarea[form=edit-{}]", ids[0]))).await.expect("textarea");
        assert_eq!(shown.prop("value").await.expect("value").as_deref(), Some("出典を明記すること"));
        let ticked = client
            .find(Locator::Css(&format!("input[type=checkbox][form=edit-{}]", ids[0])))
            .await
            .expect("box");
        assert!(ticked.is_selected().await.expect("checked"));
        let row = server.store.get(ids[0]).await.expect("get").expect("row");
        assert_eq!((row.correction.as_str(), row.run), ("出典を明記すること", true));
        assert_eq!(
            server.store.journal(ids[0]).await.expect("journal").last().expect("entry").actor,
            "human:web"
        );

        // A person accepts the reviewed result of PJ-02: status review → done.
        client.goto(&server.url("/p/PJ-02")).await.expect("goto ledger");
        let select =
            client.find(Locator::Css(&format!("select[form=edit-{}]", ids[3]))).await.expect("select");
        select.select_by_value("done").await.expect("select done");
        submit(&client, &format!("#edit-{} button", ids[3])).await;
        let select =
            client.find(Locator::Css(&format!("select[form=edit-{}]", ids[3]))).await.expect("select");
        assert_eq!(select.prop("value").await.expect("value").as_deref(), Some("done"));
        assert_eq!(server.store.get(ids[3]).await.expect("get").expect("row").status, Status::Done);

        // The approval queue: the external task waits; approving it ticks ▶ run.
        client.goto(&server.url("/approvals")).await.expect("goto approvals");
        assert!(text(&client, &format!("#approval-{}", ids[2])).await.contains("Publish the release"));
        save_screenshot(&client, "approvals.png").await;
        submit(&client, &format!("#approve-{}", ids[2])).await;
        assert!(text(&client, "#no-approvals").await.contains("承認待ちはありません"));
        assert!(server.store.get(ids[2]).await.expect("get").expect("row").run);

        // The cross view: open work of both projects, the overdue row marked.
        client.goto(&server.url("/")).await.expect("goto view");
        let marked = text(&client, "#open-work tr.overdue").await;
        assert!(marked.contains("期限切れ") && marked.contains("下書きを書く"), "{marked}");
        save_screenshot(&client, "view.png").await;

        // A form posted without its CSRF token is refused and changes nothing.
        client.goto(&server.url("/p/PJ-01")).await.expect("goto ledger");
        client
            .execute(&format!("document.querySelector('#edit-{} input[name=csrf]').remove()", ids[1]), vec![])
            .await
            .expect("remove the token");
        client
            .find(Locator::Css(&format!("select[form=edit-{}]", ids[1])))
            .await
            .expect("select")
            .select_by_value("dropped")
            .await
            .expect("select");
        submit(&client, &format!("#edit-{} button", ids[1])).await;
        let body = text(&client, "body").await;
        assert!(body.contains("CSRF"), "{body}");
        assert_eq!(server.store.get(ids[1]).await.expect("get").expect("row").status, Status::Pending);

        // The kill switch from the header, and back.
        client.goto(&server.url("/")).await.expect("goto view");
        submit(&client, "#pause").await;
        assert!(text(&client, "#paused-banner").await.contains("一時停止中"));
        assert!(server.store.paused().await.expect("paused").is_some());
        submit(&client, "#resume").await;
        assert!(client.find(Locator::Css("#paused-banner")).await.is_err());
        assert_eq!(server.store.paused().await.expect("paused"), None);
    }
    client.close().await.expect("close the browser");
}

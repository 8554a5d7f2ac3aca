//! Driving a real headless Chromium through chromedriver, for the browser tests of the web UI
//! (this crate's, and the `daicho` binary's, which includes this file by path). The tests fail
//! when chromedriver or Chromium is missing, unless DAICHO_SKIP_BROWSER=1 says to skip them (CI
//! never sets it; `.ci/run` installs Debian's `chromium` and `chromium-driver`). Screenshots go
//! under `target/screenshots/`.

use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};

/// chromedriver as a child process, killed when dropped.
pub struct Driver {
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

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Starts chromedriver; `None` only when the opt-out variable is set and it is missing.
pub async fn driver() -> Option<Driver> {
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

pub async fn browser(driver: &Driver) -> Client {
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

pub fn screenshots_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("../screenshots");
    std::fs::create_dir_all(&dir).expect("screenshots dir");
    dir
}

pub async fn save_screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG image");
    std::fs::write(screenshots_dir().join(name), png).expect("write screenshot");
}

/// Clicks a submit button and waits until the page it leads to has loaded.
pub async fn submit(client: &Client, css: &str) {
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

pub async fn text(client: &Client, css: &str) -> String {
    client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}")).text().await.expect("text")
}

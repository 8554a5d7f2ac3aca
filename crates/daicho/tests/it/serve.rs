//! `daicho serve` with the web UI and API (I2, I3): a real process on a real port.

use std::io::{Read as _, Write as _};
use std::time::Duration;

use crate::Ledger;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A plain HTTP/1.0 GET; `None` while nothing listens.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

/// I2: serve answers on its address with the ledger's tasks, and stops cleanly on SIGTERM.
#[test]
fn i2_i3_serve_answers_on_loopback_and_stops_on_sigterm() {
    let ledger = Ledger::new();
    ledger.run(&["add", "Write the report", "--project", "PJ-01"]).ok();
    let port = free_port();
    let mut serve = ledger
        .command(&["serve", "--bind", &format!("127.0.0.1:{port}")])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut answer = None;
    for _ in 0..100 {
        answer = http_get(port, "/api/v1/tasks?project=PJ-01");
        if answer.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let answer = answer.expect("serve answers");
    assert!(answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"title\":\"Write the report\""), "{answer}");
    let page = http_get(port, "/").expect("page");
    assert!(
        page.contains("Write the report") && page.contains("<form method=\"post\" action=\"/pause\">"),
        "{page}"
    );
    let status =
        std::process::Command::new("kill").args(["-TERM", &serve.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = serve.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let mut stderr = String::new();
    serve.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(stderr.contains(&format!("http://127.0.0.1:{port}/")), "{stderr}");
}

/// I2: a non-loopback address without an access token refuses to start, saying why.
#[test]
fn i2_serve_on_a_non_loopback_address_needs_a_token() {
    let ledger = Ledger::new();
    let run = ledger.run(&["serve", "--bind", "0.0.0.0:0"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("refusing to listen on 0.0.0.0:0 without an access token"), "{}", run.stderr);
    let run = ledger.run(&["serve", "--bind", "0.0.0.0:0", "--token", "short"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("at least 16 characters"), "{}", run.stderr);
}

//! Access control: the access token (on every request when one is set), the host check against
//! DNS rebinding (when none is set), the CSRF token of forms, and counting responses for
//! `/metrics`.

use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use daicho_store::Store;
use serde::Deserialize;

use crate::AppState;

/// The cookie a browser keeps the access token in.
const TOKEN_COOKIE: &str = "daicho_token";

/// 32 random bytes from the operating system, as hex.
pub(crate) fn random_token() -> String {
    use std::io::Read as _;

    let mut bytes = [0u8; 32];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        // No /dev/urandom: fall back on the std hasher's per-process random keys.
        use std::hash::{BuildHasher as _, Hasher as _};
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_usize(i);
            chunk.copy_from_slice(&hasher.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares two secrets in time independent of where they differ.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ").map(str::trim)
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Whether the request's `Host` names this machine's loopback (or carries no host at all).
fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else { return true };
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Wants JSON rather than a page: API paths and `/metrics`.
fn is_api(path: &str) -> bool {
    path.starts_with("/api/") || path == "/metrics"
}

fn refuse(status: StatusCode, path: &str, message: &str) -> Response {
    if is_api(path) {
        (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
    } else {
        (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], format!("{message}\n"))
            .into_response()
    }
}

/// The guard in front of every route: the access token when one is set (a bearer header or the
/// cookie `/login` sets), else a loopback `Host`. Counts every response for `/metrics`.
pub(crate) async fn guard<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    let response = match &state.options.token {
        Some(token) => {
            let headers = request.headers();
            let carried = bearer(headers).or_else(|| cookie(headers, TOKEN_COOKIE));
            if path == "/login" || carried.is_some_and(|t| same_secret(t, token)) {
                next.run(request).await
            } else {
                refuse(
                    StatusCode::UNAUTHORIZED,
                    &path,
                    "an access token is required: send `Authorization: Bearer <token>`, or open /login?token=<token> once in a browser",
                )
            }
        }
        None if !host_is_loopback(request.headers()) => {
            refuse(StatusCode::FORBIDDEN, &path, "this server answers only requests for localhost")
        }
        None => next.run(request).await,
    };
    state.metrics.count_response(response.status().as_u16());
    response
}

#[derive(Debug, Deserialize)]
pub(crate) struct LoginQuery {
    #[serde(default)]
    token: String,
}

/// `/login?token=…`: a browser presents the access token once and keeps it in an HTTP-only,
/// same-site cookie.
pub(crate) async fn login<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    Query(query): Query<LoginQuery>,
) -> Response {
    match &state.options.token {
        Some(token) if same_secret(&query.token, token) => {
            let cookie = format!("{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
            ([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response()
        }
        Some(_) => refuse(StatusCode::UNAUTHORIZED, "/login", "wrong access token"),
        None => Redirect::to("/").into_response(),
    }
}

/// Whether a form carries this process's CSRF token.
pub(crate) fn csrf_ok<S>(state: &AppState<S>, given: &str) -> bool {
    same_secret(given, &state.csrf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i2_loopback_hosts_are_recognised() {
        let check = |host: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, host.parse().expect("header"));
            host_is_loopback(&headers)
        };
        assert!(check("127.0.0.1:7878"));
        assert!(check("localhost"));
        assert!(check("[::1]:7878"));
        assert!(!check("evil.example:7878"));
        assert!(!check("192.168.1.4"));
        assert!(host_is_loopback(&HeaderMap::new()));
    }

    #[test]
    fn i2_secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }

    #[test]
    fn i2_cookies_are_found_by_name() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, "a=1; daicho_token=xyz; b=2".parse().expect("header"));
        assert_eq!(cookie(&headers, TOKEN_COOKIE), Some("xyz"));
        assert_eq!(cookie(&headers, "c"), None);
    }
}

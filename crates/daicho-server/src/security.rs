//! Access control, in one place: every request passes [`guard`] before any route sees it.
//!
//! - **Who may ask.** With an access token, every request carries it (a bearer header, any case
//!   of the scheme) or the session cookie `/login` sets (a digest of the token, never the token);
//!   without one, only requests naming a loopback host (or the host of the configured public
//!   URL) are answered, against DNS rebinding. The same rule covers the pages, the API,
//!   `/metrics` and `/mcp`.
//! - **A worker's token acts for no person (S13).** With a worker token besides the access
//!   token, a request carrying it as a bearer may read and do what a worker does (claim,
//!   heartbeat, complete, fail, push, `/mcp`), nothing a person does (edit, approve, reject,
//!   pause, the web forms): 403 ([`worker_may`]).
//! - **No page of another origin acts for the person (S13).** A state-changing request (any
//!   method but GET and HEAD) is refused when the browser says it comes from another site
//!   (`Sec-Fetch-Site: cross-site` or `same-site`) or names another origin (`Origin`, `null`
//!   included). API writes must also be JSON (`Content-Type: application/json`), which no form
//!   and no `no-cors` fetch can send, unless they carry the bearer token. Forms carry the
//!   per-process CSRF token besides ([`csrf_ok`]).
//! - **Every answer is hardened.** A content security policy without scripts or framing,
//!   `X-Frame-Options: DENY`, `nosniff` and a same-origin referrer policy on every response,
//!   refusals and errors included; errors under `/api` are JSON.
//! - **Redirects stay here.** [`safe_back`] accepts only a same-origin path for the `back`
//!   field of forms.
//!
//! Responses are counted for `/metrics` here too.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use daicho_store::Store;
use serde::Deserialize;

use crate::AppState;

/// The cookie a browser keeps its session in: [`session_of`] the access token, never the token.
const TOKEN_COOKIE: &str = "daicho_token";

/// The value of the session cookie for `token`: a digest of it, so that a cookie read off a
/// browser's disk or a proxy's log does not give the token away (scripts, agents and other
/// servers may share it); it is accepted as this server's cookie only, never as a bearer, and it
/// stops working when the token changes.
pub(crate) fn session_of(token: &str) -> String {
    use sha2::Digest as _;

    let digest =
        sha2::Sha256::new().chain_update(b"daicho web session\0").chain_update(token.as_bytes()).finalize();
    hex(&digest)
}

/// The content security policy of every response: resources from this origin only (the pages
/// have no script and one stylesheet), and no page of any origin may frame these.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; frame-ancestors 'none'";

/// The largest error body turned into JSON under `/api`; a longer one is cut.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

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
    hex(&bytes)
}

/// `bytes` as lower-case hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares two secrets in time independent of where they differ.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token of an `Authorization: Bearer <token>` header; the scheme's case does not matter
/// (RFC 9110 §11.1).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once([' ', '\t'])?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
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

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"))
}

/// An origin as browsers compare them: scheme, host (lower case, IPv6 in brackets) and port
/// (the scheme's default when not written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SiteOrigin {
    scheme: &'static str,
    host: String,
    port: u16,
}

impl SiteOrigin {
    /// Parses `host[:port]` (a `Host` header, or the authority of a URL) under `scheme`.
    fn from_authority(scheme: &'static str, authority: &str) -> Option<SiteOrigin> {
        let default_port = if scheme == "https" { 443 } else { 80 };
        let (host, port) = if authority.starts_with('[') {
            let end = authority.find(']')?;
            let (host, rest) = authority.split_at(end + 1);
            match rest {
                "" => (host, None),
                _ => (host, Some(rest.strip_prefix(':')?)),
            }
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        let port = match port {
            None => default_port,
            Some(p) => p.parse().ok()?,
        };
        let valid = |c: char| c.is_ascii_alphanumeric() || "-._~[]:%".contains(c);
        if host.is_empty() || !host.chars().all(valid) {
            return None;
        }
        Some(SiteOrigin { scheme, host: host.to_ascii_lowercase(), port })
    }

    /// Parses an origin (`Origin` header) or, with `path_allowed`, a URL whose path is empty or
    /// `/` (the public URL). Only `http` and `https`; no user info, query or fragment.
    fn parse(text: &str, path_allowed: bool) -> Option<SiteOrigin> {
        let (scheme, rest) = text.split_once("://")?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => "http",
            "https" => "https",
            _ => return None,
        };
        let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
        let path_ok = path.is_empty() || (path_allowed && path == "/");
        if !path_ok || authority.contains(['@', '?', '#']) {
            return None;
        }
        SiteOrigin::from_authority(scheme, authority)
    }

    /// The origin of a public URL such as `https://daicho.example.com` (`--public-url`).
    pub(crate) fn public_url(text: &str) -> Option<SiteOrigin> {
        SiteOrigin::parse(text.trim(), true)
    }
}

/// Whether a host name (without its port) is this machine's loopback.
fn is_loopback_name(host: &str) -> bool {
    let name = host.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether a server without an access token answers a request naming `host`: a loopback name
/// (or no host at all), or the host of the public URL; any port. This refuses DNS rebinding: a
/// page of a name the attacker controls cannot reach the server through it.
pub(crate) fn host_allowed(host: Option<&str>, public: Option<&SiteOrigin>) -> bool {
    let Some(host) = host else { return true };
    let Some(origin) = SiteOrigin::from_authority("http", host) else { return false };
    is_loopback_name(&origin.host) || public.is_some_and(|p| p.host == origin.host)
}

/// Whether a request's `Origin` (when it has one) is this server's own: the request's `Host`
/// under `http`, or the public URL. `Origin: null` (a sandboxed or opaque page) is another
/// origin; a request without `Origin` is not a browser's cross-origin write.
pub(crate) fn same_origin(origin: Option<&str>, host: Option<&str>, public: Option<&SiteOrigin>) -> bool {
    let Some(origin) = origin else { return true };
    let Some(origin) = SiteOrigin::parse(origin.trim(), false) else { return false };
    host.and_then(|h| SiteOrigin::from_authority("http", h)).is_some_and(|own| own == origin)
        || public.is_some_and(|p| *p == origin)
}

/// Whether `Sec-Fetch-Site` (when sent) says the request comes from this origin or from the
/// person (`none`: typed, bookmarked). `same-site` is refused too: another port of this host is
/// another origin, and so is a sibling subdomain.
pub(crate) fn fetch_site_ok(value: Option<&str>) -> bool {
    value
        .is_none_or(|v| v.trim().eq_ignore_ascii_case("same-origin") || v.trim().eq_ignore_ascii_case("none"))
}

/// Whether a `Content-Type` is JSON (`application/json`, any case, parameters allowed).
pub(crate) fn is_json(content_type: Option<&str>) -> bool {
    content_type
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// Whether a method may change state: anything but GET and HEAD.
fn is_write(method: &Method) -> bool {
    method != Method::GET && method != Method::HEAD
}

/// What a request carrying the worker token may do (S13): read anything, and do what a worker
/// does — claim, heartbeat, complete, fail and push tasks, and everything `/mcp` offers (its
/// tools are a worker's) — but none of what a person does.
fn worker_may(method: &Method, path: &str) -> bool {
    if !is_write(method) || path == "/mcp" || path.starts_with("/mcp/") {
        return true;
    }
    if method != Method::POST {
        return false;
    }
    let segments: Vec<&str> = path.split('/').collect();
    match segments.as_slice() {
        ["", "api", "v1", "claim" | "push"] => true,
        ["", "api", "v1", "tasks", id, "heartbeat" | "complete" | "fail"] => !id.is_empty(),
        _ => false,
    }
}

/// Under `/api`: errors are JSON.
fn under_api(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/")
}

/// Wants a JSON refusal rather than text: the API, `/metrics` and `/mcp`.
fn wants_json(path: &str) -> bool {
    under_api(path) || path == "/metrics" || path == "/mcp" || path.starts_with("/mcp/")
}

/// A refused request: its status and the reason for a person.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) message: &'static str,
}

/// What the guard knows of the server: the access token, the worker token and the public URL's
/// origin.
#[derive(Debug, Default)]
pub(crate) struct Rules {
    token: Option<String>,
    /// [`session_of`] the token: what the cookie must carry.
    session: Option<String>,
    /// The token of workers and agents, which acts for no person (S13).
    worker: Option<String>,
    public: Option<SiteOrigin>,
}

impl Rules {
    /// The rules of a server with this access token, worker token and public origin.
    pub(crate) fn new(token: Option<String>, worker: Option<String>, public: Option<SiteOrigin>) -> Rules {
        let session = token.as_deref().map(session_of);
        Rules { token, session, worker, public }
    }

    /// Decides whether a request may reach its route. Pure: the method, path and headers are
    /// all it looks at.
    pub(crate) fn admit(&self, method: &Method, path: &str, headers: &HeaderMap) -> Result<(), Refusal> {
        let carries = |secret: &Option<String>| {
            secret.as_deref().is_some_and(|secret| bearer(headers).is_some_and(|b| same_secret(b, secret)))
        };
        let (person, worker) = (carries(&self.token), carries(&self.worker));
        let bearer_ok = person || worker;
        match (&self.token, &self.session) {
            (Some(_), Some(session)) => {
                let by_cookie = || cookie(headers, TOKEN_COOKIE).is_some_and(|c| same_secret(c, session));
                if path != "/login" && !bearer_ok && !by_cookie() {
                    return Err(Refusal {
                        status: StatusCode::UNAUTHORIZED,
                        message: "an access token is required: send `Authorization: Bearer <token>`, or open /login?token=<token> once in a browser",
                    });
                }
            }
            _ => {
                if !host_allowed(header_text(headers, header::HOST), self.public.as_ref()) {
                    return Err(Refusal {
                        status: StatusCode::FORBIDDEN,
                        message: "this server answers only requests for localhost (or its public URL)",
                    });
                }
            }
        }
        if worker && !worker_may(method, path) {
            return Err(Refusal {
                status: StatusCode::FORBIDDEN,
                message: "refused: a worker's token acts for no person (S13); it reads, claims, heartbeats, completes, fails and pushes tasks, and serves /mcp; edits, approvals, rejections and the kill switch need the access token",
            });
        }
        if !is_write(method) {
            return Ok(());
        }
        let site = header_text(headers, header::HeaderName::from_static("sec-fetch-site"));
        let origin = header_text(headers, header::ORIGIN);
        if !fetch_site_ok(site)
            || !same_origin(origin, header_text(headers, header::HOST), self.public.as_ref())
        {
            return Err(Refusal {
                status: StatusCode::FORBIDDEN,
                message: "refused: this request comes from a page of another origin; only this server's own pages may change the ledger",
            });
        }
        if under_api(path) && !bearer_ok && !is_json(header_text(headers, header::CONTENT_TYPE)) {
            return Err(Refusal {
                status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
                message: "send the body as JSON with `Content-Type: application/json`",
            });
        }
        Ok(())
    }
}

fn refuse(status: StatusCode, path: &str, message: &str) -> Response {
    if wants_json(path) {
        (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
    } else {
        (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], format!("{message}\n"))
            .into_response()
    }
}

/// Sets the headers every response carries: no script, no framing, no sniffing, no referrer
/// to other origins.
fn harden(headers: &mut HeaderMap) {
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
}

/// Turns an error answer under `/api` that is not JSON (axum's extractors answer bad query
/// strings, bad UTF-8, too-large bodies and wrong methods in plain text or with no body) into
/// `{"error": "…"}` with the same status.
async fn json_error(response: Response, method: &Method) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error())
        || is_json(header_text(response.headers(), header::CONTENT_TYPE))
    {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, ERROR_BODY_LIMIT).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).trim().to_owned();
    let message = match (text.is_empty(), parts.headers.get(header::ALLOW)) {
        (true, Some(allow)) if status == StatusCode::METHOD_NOT_ALLOWED => {
            format!("method {method} is not allowed here (allowed: {})", allow.to_str().unwrap_or("?"))
        }
        (true, _) => status.canonical_reason().unwrap_or("error").to_owned(),
        (false, _) => text,
    };
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    parts.headers.remove(header::CONTENT_LENGTH);
    let body = serde_json::json!({ "error": message }).to_string();
    Response::from_parts(parts, Body::from(body))
}

/// The guard in front of every route ([`Rules::admit`]); then errors under `/api` as JSON, the
/// hardening headers on every response, and the count for `/metrics`.
pub(crate) async fn guard<S: Store + 'static>(
    State(state): State<Arc<AppState<S>>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    let mut response = match state.rules.admit(&method, &path, request.headers()) {
        Err(refusal) => refuse(refusal.status, &path, refusal.message),
        Ok(()) if under_api(&path) => json_error(next.run(request).await, &method).await,
        Ok(()) => next.run(request).await,
    };
    harden(response.headers_mut());
    state.metrics.count_response(response.status().as_u16());
    response
}

/// What answers a path no route has: JSON under `/api`, text elsewhere.
pub(crate) async fn not_found(uri: axum::http::Uri) -> Response {
    let path = uri.path();
    refuse(StatusCode::NOT_FOUND, path, &format!("nothing at {path}"))
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
            // Marked Secure when people reach the server over HTTPS (its public URL), so the
            // browser never sends it in the clear.
            let secure = match &state.options.public_url {
                Some(url) if url.to_ascii_lowercase().starts_with("https://") => "; Secure",
                _ => "",
            };
            let cookie =
                format!("{TOKEN_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/{secure}", session_of(token));
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

/// Percent-decodes `text` once (`%XY` with two hex digits; anything else is kept).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `back` field of a form as a redirect target, if it is a path on this site: visible
/// ASCII only as given (so it is a valid `Location`), and, after percent-decoding, starting
/// with a single `/` (not `//` or `/\`, which browsers read as another host), with no
/// backslash and no control character anywhere (browsers drop tabs and newlines from URLs, so
/// `/<tab>/evil.example` would become `//evil.example`). `None` means: go to the default.
pub(crate) fn safe_back(raw: &str) -> Option<String> {
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let decoded = percent_decode(raw);
    let local = decoded.starts_with('/')
        && !decoded.starts_with("//")
        && !decoded.contains('\\')
        && !decoded.chars().any(char::is_control);
    local.then(|| raw.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().expect("header"));
        }
        map
    }

    #[test]
    fn i2_loopback_hosts_are_recognised() {
        let check = |host: &str| host_allowed(Some(host), None);
        assert!(check("127.0.0.1:7878"));
        assert!(check("localhost"));
        assert!(check("LOCALHOST:80"));
        assert!(check("[::1]:7878"));
        assert!(!check("evil.example:7878"));
        assert!(!check("192.168.1.4"));
        assert!(!check("localhost.evil.example"));
        assert!(host_allowed(None, None));
        let public = SiteOrigin::public_url("https://daicho.example.com/");
        assert!(host_allowed(Some("daicho.example.com"), public.as_ref()));
        assert!(host_allowed(Some("Daicho.Example.com:8443"), public.as_ref()));
        assert!(!host_allowed(Some("evil.example"), public.as_ref()));
    }

    #[test]
    fn i2_public_urls_are_origins() {
        let origin = SiteOrigin::public_url("https://daicho.example.com").expect("origin");
        assert_eq!(origin, SiteOrigin { scheme: "https", host: "daicho.example.com".into(), port: 443 });
        assert_eq!(SiteOrigin::public_url("HTTP://Box:8080/").map(|o| o.port), Some(8080));
        assert!(SiteOrigin::public_url("http://[::1]:7878").is_some());
        for bad in [
            "daicho.example.com",
            "ftp://daicho.example.com",
            "https://daicho.example.com/prefix",
            "https://user@daicho.example.com",
            "https://daicho.example.com:notaport",
            "https://",
        ] {
            assert_eq!(SiteOrigin::public_url(bad), None, "{bad}");
        }
    }

    #[test]
    fn s13_same_origin_is_the_host_under_http_or_the_public_url() {
        let host = Some("127.0.0.1:7878");
        assert!(same_origin(None, host, None));
        assert!(same_origin(Some("http://127.0.0.1:7878"), host, None));
        assert!(!same_origin(Some("http://127.0.0.1:7879"), host, None), "another port");
        assert!(!same_origin(Some("https://127.0.0.1:7878"), host, None), "another scheme");
        assert!(!same_origin(Some("http://localhost:7878"), host, None), "another host name");
        assert!(!same_origin(Some("null"), host, None));
        assert!(!same_origin(Some("http://127.0.0.1:7878/path"), host, None));
        assert!(!same_origin(Some("http://127.0.0.1:7878"), None, None));
        assert!(same_origin(Some("http://example.com"), Some("example.com:80"), None), "default port");
        let public = SiteOrigin::public_url("https://daicho.example.com");
        assert!(same_origin(Some("https://daicho.example.com"), Some("127.0.0.1:7878"), public.as_ref()));
        assert!(same_origin(Some("https://daicho.example.com:443"), None, public.as_ref()));
        assert!(!same_origin(Some("http://daicho.example.com"), None, public.as_ref()));
    }

    #[test]
    fn s13_fetch_site_allows_only_this_origin_and_the_person() {
        assert!(fetch_site_ok(None));
        assert!(fetch_site_ok(Some("same-origin")));
        assert!(fetch_site_ok(Some("none")));
        assert!(!fetch_site_ok(Some("same-site")));
        assert!(!fetch_site_ok(Some("cross-site")));
        assert!(!fetch_site_ok(Some("something-new")));
    }

    #[test]
    fn i3_json_content_types() {
        assert!(is_json(Some("application/json")));
        assert!(is_json(Some("Application/JSON; charset=utf-8")));
        assert!(!is_json(Some("text/plain")));
        assert!(!is_json(Some("application/x-www-form-urlencoded")));
        assert!(!is_json(Some("multipart/form-data; boundary=x")));
        assert!(!is_json(Some("application/jsonp")));
        assert!(!is_json(None));
    }

    #[test]
    fn s13_the_guard_refuses_cross_site_writes_and_non_json_api_writes() {
        let rules = Rules::default();
        let own = [("host", "127.0.0.1:7878")];
        let admit = |method: Method, path: &str, extra: &[(&'static str, &str)]| {
            let all: Vec<_> = own.iter().chain(extra).copied().collect();
            rules.admit(&method, path, &headers(&all)).map_err(|r| r.status.as_u16())
        };
        assert_eq!(admit(Method::GET, "/", &[("sec-fetch-site", "cross-site")]), Ok(()), "reads pass");
        assert_eq!(admit(Method::POST, "/pause", &[]), Ok(()));
        assert_eq!(admit(Method::POST, "/pause", &[("origin", "http://127.0.0.1:7878")]), Ok(()));
        assert_eq!(admit(Method::POST, "/pause", &[("sec-fetch-site", "same-site")]), Err(403));
        assert_eq!(admit(Method::POST, "/pause", &[("origin", "http://127.0.0.1:9999")]), Err(403));
        assert_eq!(admit(Method::POST, "/pause", &[("origin", "null")]), Err(403));
        assert_eq!(admit(Method::DELETE, "/mcp", &[("sec-fetch-site", "cross-site")]), Err(403));
        let json = ("content-type", "application/json");
        assert_eq!(admit(Method::POST, "/api/v1/push", &[json]), Ok(()));
        assert_eq!(admit(Method::POST, "/api/v1/push", &[("content-type", "text/plain")]), Err(415));
        assert_eq!(admit(Method::PATCH, "/api/v1/tasks/T-1", &[]), Err(415));
        assert_eq!(admit(Method::POST, "/api/v1/push", &[json, ("origin", "http://evil.example")]), Err(403));
        let rebound = rules.admit(&Method::GET, "/", &headers(&[("host", "evil.example")]));
        assert_eq!(rebound.map_err(|r| r.status.as_u16()), Err(403));
    }

    #[test]
    fn i2_with_a_token_any_host_and_bearer_writes_of_any_type() {
        let token = "0123456789abcdef-token";
        let rules = Rules::new(Some(token.into()), None, None);
        let admit = |method: Method, pairs: &[(&'static str, &str)]| {
            rules.admit(&method, "/api/v1/push", &headers(pairs)).map_err(|r| r.status.as_u16())
        };
        assert_eq!(admit(Method::GET, &[("host", "myhost:7878")]), Err(401));
        for scheme in ["Bearer", "bearer", "BEARER"] {
            let auth = format!("{scheme} {token}");
            assert_eq!(admit(Method::GET, &[("host", "myhost:7878"), ("authorization", &auth)]), Ok(()));
            let plain = [("authorization", auth.as_str()), ("content-type", "text/plain")];
            assert_eq!(admit(Method::POST, &plain), Ok(()), "a bearer is no cross-site form");
        }
        let cookie = format!("{TOKEN_COOKIE}={}", session_of(token));
        assert_eq!(admit(Method::GET, &[("cookie", &cookie)]), Ok(()), "the session cookie opens pages");
        assert_eq!(admit(Method::POST, &[("cookie", &cookie), ("content-type", "text/plain")]), Err(415));
        // The cookie holds a digest of the token: the token itself is no cookie, and the
        // cookie's value is no bearer token.
        assert_eq!(admit(Method::GET, &[("cookie", &format!("{TOKEN_COOKIE}={token}"))]), Err(401));
        let as_bearer = format!("Bearer {}", session_of(token));
        assert_eq!(admit(Method::GET, &[("authorization", &as_bearer)]), Err(401));
        assert_ne!(session_of(token), session_of("0123456789abcdef-other"));
        assert_eq!(admit(Method::GET, &[("authorization", &format!("Basic {token}"))]), Err(401));
        let cross = [("authorization", format!("Bearer {token}")), ("origin", "http://evil.example".into())];
        let cross: Vec<_> = cross.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(admit(Method::POST, &cross), Err(403));
    }

    /// S13: with a worker token besides the access token, a request carrying it reads and does
    /// what a worker does, and nothing a person does (403); the access token still does all; a
    /// wrong token nothing (401). The worker token is no cookie and opens no session.
    #[test]
    fn s13_a_workers_token_acts_for_no_person() {
        let (token, worker) = ("0123456789abcdef-person", "0123456789abcdef-worker");
        let rules = Rules::new(Some(token.into()), Some(worker.into()), None);
        let admit = |method: Method, path: &str, secret: &str| {
            let auth = format!("Bearer {secret}");
            let pairs = [("authorization", auth.as_str()), ("content-type", "application/json")];
            rules.admit(&method, path, &headers(&pairs)).map_err(|r| r.status.as_u16())
        };
        let workers = [
            (Method::GET, "/api/v1/tasks/T-1"),
            (Method::GET, "/"),
            (Method::GET, "/metrics"),
            (Method::POST, "/api/v1/claim"),
            (Method::POST, "/api/v1/push"),
            (Method::POST, "/api/v1/tasks/T-1/heartbeat"),
            (Method::POST, "/api/v1/tasks/T-1/complete"),
            (Method::POST, "/api/v1/tasks/T-1/fail"),
            (Method::POST, "/mcp"),
            (Method::DELETE, "/mcp"),
        ];
        for (method, path) in workers {
            assert_eq!(admit(method.clone(), path, worker), Ok(()), "{method} {path}");
            assert_eq!(admit(method.clone(), path, token), Ok(()), "{method} {path}");
        }
        let persons = [
            (Method::PATCH, "/api/v1/tasks/T-1"),
            (Method::POST, "/api/v1/tasks/T-1/approve"),
            (Method::POST, "/api/v1/tasks/T-1/reject"),
            (Method::POST, "/t/T-1/edit"),
            (Method::POST, "/t/T-1/fix"),
            (Method::POST, "/t/T-1/approve"),
            (Method::POST, "/t/T-1/reject"),
            (Method::POST, "/approvals/decide"),
            (Method::POST, "/pause"),
            (Method::POST, "/resume"),
            (Method::POST, "/api/v1/tasks/T-1/heartbeat/x"),
            (Method::POST, "/api/v1/tasks//complete"),
            (Method::PUT, "/api/v1/claim"),
        ];
        for (method, path) in persons {
            assert_eq!(admit(method.clone(), path, worker), Err(403), "{method} {path}");
        }
        assert_eq!(admit(Method::PATCH, "/api/v1/tasks/T-1", token), Ok(()));
        assert_eq!(admit(Method::GET, "/", "0123456789abcdef-wrong!"), Err(401));
        let cookie = format!("{TOKEN_COOKIE}={}", session_of(worker));
        let by_cookie = rules.admit(&Method::GET, "/", &headers(&[("cookie", &cookie)]));
        assert_eq!(by_cookie.map_err(|r| r.status.as_u16()), Err(401), "no session from the worker token");
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
        let map = headers(&[("cookie", "a=1; daicho_token=xyz; b=2")]);
        assert_eq!(cookie(&map, TOKEN_COOKIE), Some("xyz"));
        assert_eq!(cookie(&map, "c"), None);
    }

    #[test]
    fn s13_back_accepts_only_paths_on_this_site() {
        for good in ["/", "/p/PJ-01", "/p/PJ-01?after=T-0200", "/p/%E6%A1%88%E4%BB%B6", "/approvals"] {
            assert_eq!(safe_back(good).as_deref(), Some(good), "{good}");
        }
        for bad in [
            "",
            "//evil.example/",
            "/\\evil.example",
            "https://evil.example/",
            "evil.example",
            "/%09/evil.example",
            "/\t/evil.example",
            "/%0A/x",
            "/\n/x",
            "/%0D%0ASet-Cookie:x=1",
            "/%2F/evil.example",
            "/%5Cevil.example",
            "/p/a b",
            "/p/案件",
            "/%00",
            "/%7F",
        ] {
            assert_eq!(safe_back(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn s13_percent_decoding_keeps_what_is_not_an_escape() {
        assert_eq!(percent_decode("/a%20b"), "/a b");
        assert_eq!(percent_decode("/100%"), "/100%");
        assert_eq!(percent_decode("/%zz%4"), "/%zz%4");
        assert_eq!(percent_decode("/%E6%A1%88"), "/案");
    }
}

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};

use super::*;

fn loopback() -> BrowserPolicy {
    BrowserPolicy {
        allowed_hosts: ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec(),
        allowed_origins: ["http://localhost:*", "https://app.example.com"].map(String::from).to_vec(),
        mcp_origins: vec![],
    }
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    pairs
        .iter()
        .map(|(k, v)| (header::HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap()))
        .collect()
}

fn refused(pairs: &[(&str, &str)]) -> Option<(StatusCode, &'static str)> {
    loopback().check(&headers(pairs), true).err().map(|r| (r.status, r.code))
}

#[test]
fn hosts_must_name_this_server() {
    assert_eq!(refused(&[("host", "127.0.0.1:7478")]), None);
    assert_eq!(refused(&[("host", "localhost")]), None);
    assert_eq!(refused(&[("host", "[::1]:7478")]), None);
    assert_eq!(refused(&[("host", "LOCALHOST:1")]), None);
    for rebound in ["evil.example:7478", "127.0.0.1.evil.example", "", "localhost.:7478"] {
        assert_eq!(refused(&[("host", rebound)]), Some((StatusCode::FORBIDDEN, "forbidden_host")), "{rebound}");
    }
    // A server with tokens does not check Host: a page never holds a token.
    assert!(loopback().check(&headers(&[("host", "evil.example")]), false).is_ok());
    assert!(host_allowed("db.internal:9000", &["db.internal:9000".into()]));
    assert!(!host_allowed("db.internal:9001", &["db.internal:9000".into()]));
}

#[test]
fn foreign_origins_are_refused() {
    let host = ("host", "127.0.0.1:7478");
    assert_eq!(refused(&[host, ("origin", "http://localhost:3000")]), None);
    assert_eq!(refused(&[host, ("origin", "https://app.example.com")]), None);
    assert_eq!(refused(&[host, ("origin", "https://app.example.com:443")]), None);
    for foreign in [
        "http://evil.example",
        "https://app.example.com:8443",
        "http://app.example.com",
        "null",
        "http://localhost.evil.example:3000",
        "garbage",
    ] {
        assert_eq!(
            refused(&[host, ("origin", foreign)]),
            Some((StatusCode::FORBIDDEN, "forbidden_origin")),
            "{foreign}"
        );
    }
    assert_eq!(refused(&[host, ("sec-fetch-site", "cross-site")]), Some((StatusCode::FORBIDDEN, "forbidden_origin")));
    assert_eq!(refused(&[host, ("sec-fetch-site", "same-origin")]), None);
}

#[test]
fn bodies_must_be_json() {
    let host = ("host", "127.0.0.1:7478");
    let unsupported = Some((StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"));
    assert_eq!(refused(&[host, ("content-type", "application/json"), ("content-length", "2")]), None);
    assert_eq!(refused(&[host, ("content-type", "application/json; charset=utf-8"), ("content-length", "2")]), None);
    assert_eq!(refused(&[host, ("content-type", "application/merge-patch+json"), ("content-length", "2")]), None);
    assert_eq!(refused(&[host, ("content-length", "0")]), None);
    assert_eq!(refused(&[host]), None);
    // What a page can send without a preflight: forms and plain text, with or without a body.
    for simple in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
        assert_eq!(refused(&[host, ("content-type", simple), ("content-length", "9")]), unsupported, "{simple}");
        assert_eq!(refused(&[host, ("content-type", simple), ("content-length", "0")]), unsupported, "{simple}");
    }
    // A body with no type at all (a Blob without one).
    assert_eq!(refused(&[host, ("content-length", "9")]), unsupported);
    assert_eq!(refused(&[host, ("transfer-encoding", "chunked")]), unsupported);
}

//! The cross-site attack, in a real browser: headless Chromium opens a page served from
//! another origin, which tries to write to and wipe a loopback `state-http` with `fetch` and
//! with plain form posts. Nothing is written; the server saw the attempts and refused them. A
//! page on an origin given with --allow-origin can write, so the test would see a write.
//!
//! Needs Chromium (Debian's `chromium`); skipped, saying so, without it, unless
//! STATE_REQUIRE_BROWSER is set (CI installs it and sets it).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::json;

use crate::{Place, expect};

pub(crate) fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser", "google-chrome"].iter().find_map(|name| {
        let out = Command::new("which").arg(name).output().ok()?;
        out.status.success().then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    });
    if found.is_none() {
        assert!(std::env::var_os("STATE_REQUIRE_BROWSER").is_none(), "chromium is not installed");
        eprintln!("SKIPPED: chromium is not installed (apt-get install chromium)");
    }
    found
}

/// Serves `html` for every request on a port of its own until the test ends: the attacker's
/// site.
fn serve_page(html: String) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}",
                html.len()
            );
            let _ = (&stream).write_all(response.as_bytes());
        }
    });
    port
}

/// Opens `url` in headless Chromium, lets its scripts run, and returns the page's DOM.
fn open_in_browser(browser: &Path, url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=10000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The attacker's page: every way a page can send a write without a CORS grant.
fn attack_page(target: &str) -> String {
    let txn = r#"{"success": [{"op": "put", "key": "precious", "value": "pwned"}]}"#;
    format!(
        r#"<!doctype html><html><body>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe><iframe name="sink3"></iframe>
<form id="f1" method="POST" action="{target}/v1/kv:txn" enctype="text/plain" target="sink1">
  <input name='{txn_field}' value='"}}'>
</form>
<form id="f2" method="POST" action="{target}/v1/admin:reset" target="sink2"><input name="confirm" value="true"></form>
<form id="f3" method="POST" action="{target}/v1/admin:reset" enctype="multipart/form-data" target="sink3"></form>
<pre id="log"></pre>
<script>
const log = (t) => document.getElementById('log').textContent += t + '\n';
(async () => {{
  const tries = [
    ['{target}/v1/kv:txn', {{method: 'POST', mode: 'no-cors', headers: {{'Content-Type': 'text/plain'}}, body: '{txn}'}}],
    ['{target}/v1/admin:reset', {{method: 'POST', mode: 'no-cors', body: new Blob(['{{}}'])}}],
    ['{target}/v1/admin:reset', {{method: 'POST', mode: 'no-cors'}}],
    ['{target}/v1/kv/precious', {{method: 'PUT', headers: {{'Content-Type': 'application/json'}}, body: '"pwned"'}}],
  ];
  for (const [url, init] of tries) {{
    try {{ const r = await fetch(url, init); log('fetch ' + url + ' -> ' + r.type + ' ' + r.status); }}
    catch (e) {{ log('fetch ' + url + ' failed: ' + e); }}
  }}
  for (const id of ['f1', 'f2', 'f3']) document.getElementById(id).submit();
  log('attack sent');
}})();
</script></body></html>"#,
        txn_field = txn.trim_end_matches('}').replace('\'', "&#39;"),
    )
}

/// A page on an allowed origin doing the same write with CORS: it works.
fn allowed_page(target: &str) -> String {
    format!(
        r#"<!doctype html><html><body><pre id="log"></pre><script>
(async () => {{
  const r = await fetch('{target}/v1/kv/allowed', {{method: 'PUT', headers: {{'Content-Type': 'application/json'}}, body: '"from the allowed page"'}});
  document.getElementById('log').textContent = 'allowed write -> ' + r.status;
}})();
</script></body></html>"#
    )
}

/// Requests the server refused (403 or 415), from its metrics.
fn refused(http: &state_e2e::HttpClient) -> u64 {
    let metrics = http.get("/metrics").unwrap().text();
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("state_http_requests_total")
                && (l.contains("outcome=\"forbidden\"") || l.contains("outcome=\"invalid\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn a_page_from_another_origin_can_neither_write_nor_wipe_the_store() {
    let Some(browser) = chromium() else { return };
    let place = Place::new();
    let server = place.in_process(&["--allow-origin", "http://localhost:*"]);
    let http = server.client();
    expect(&http.json("PUT", "/v1/kv/precious", &json!("keep me")).unwrap(), 200);
    let target = format!("http://127.0.0.1:{}", server.addr.port());

    // The attacker's page: on 127.0.0.1 with another port, an origin the server does not allow.
    let port = serve_page(attack_page(&target));
    let dom = open_in_browser(&browser, &format!("http://127.0.0.1:{port}/"));
    assert!(dom.contains("attack sent"), "the page ran its attack: {dom}");
    let stored = expect(&http.get("/v1/kv/precious").unwrap(), 200);
    assert_eq!((stored["value"].as_str(), stored["version"].as_u64()), (Some("keep me"), Some(1)), "{stored}");
    assert!(refused(&http) >= 4, "the browser's attempts reached the server and were refused");

    // The same write from an allowed origin (localhost, with CORS) goes through: the test
    // would have seen a write had the attack got one in.
    let port = serve_page(allowed_page(&target));
    let dom = open_in_browser(&browser, &format!("http://localhost:{port}/"));
    assert!(dom.contains("allowed write -&gt; 200") || dom.contains("allowed write -> 200"), "{dom}");
    expect(&http.get("/v1/kv/allowed").unwrap(), 200);
}

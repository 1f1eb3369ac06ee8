//! state-http as an OAuth resource server, against a real authorization server: oidc-provider
//! (tests/sdk/idp.mjs), run by the test on loopback. The official MCP Python SDK signs in
//! through it end to end; then every token an attacker could present is refused: expired, not
//! yet valid, for another resource, from another issuer, `alg: none`, HMAC keyed with the
//! issuer's public key, signed with a key the issuer never published, tampered with, and an
//! opaque token replayed after its revocation. Skipped, saying so, without the SDKs
//! (tests/sdk/setup.sh), unless STATE_REQUIRE_SDKS is set.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use state_e2e::sdk::{self, repository, run};
use state_e2e::{HttpClient, HttpServer};

use crate::{Place, binary, expect, problem};

/// The issuer, killed when dropped.
struct Issuer {
    child: Child,
    /// Kept open: the issuer must not find its standard output closed.
    _stdout: BufReader<std::process::ChildStdout>,
    url: String,
    dir: tempfile::TempDir,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Issuer {
    /// Starts the issuer: JWTs for `jwt_resource`, opaque tokens for `opaque_resource`.
    fn start(sdk: &Path, jwt_resource: &str, opaque_resource: &str) -> Issuer {
        let script = sdk.join("node/idp.mjs");
        std::fs::copy(repository().join("tests/sdk/idp.mjs"), &script).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new("node")
            .arg(&script)
            .args([jwt_resource, opaque_resource])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        let started: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("idp.mjs said {line:?}: {e}"));
        let url = started["issuer"].as_str().unwrap().to_owned();
        Issuer { child, _stdout: stdout, url, dir }
    }

    fn client(&self) -> HttpClient {
        HttpClient::new(self.url.trim_start_matches("http://").parse().unwrap())
    }

    fn pem(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.dir.path().join(name)).unwrap()
    }

    /// A token from the client-credentials grant, as a machine client gets one.
    fn robot_token(&self, resource: &str, scope: &str) -> String {
        let form = serde_urlencoded::to_string([
            ("grant_type", "client_credentials"),
            ("scope", scope),
            ("resource", resource),
        ])
        .unwrap();
        let answer = self
            .client()
            .request(
                "POST",
                "/token",
                &[
                    ("Content-Type", "application/x-www-form-urlencoded"),
                    ("Authorization", &basic("robot", ROBOT_SECRET)),
                ],
                Some(form.as_bytes()),
            )
            .unwrap();
        assert_eq!(answer.status, 200, "{}", answer.text());
        answer.json()["access_token"].as_str().unwrap().to_owned()
    }

    fn jwks_fetches(&self) -> u64 {
        self.client().get("/test/jwks-fetches").unwrap().text().trim().parse().unwrap()
    }
}

const ROBOT_SECRET: &str = "robot-secret-robot-secret";

fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
}

/// A free loopback port: the resource's URL names it before the server starts.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The OAuth file: `robot` writes under robots/; team-a's members with `state:write` write
/// under their own users/<sub>/ and team-a/.
fn oauth_file(place: &Place, issuer: &Issuer, resource: &str, introspect: bool) -> PathBuf {
    let introspection = if introspect {
        "[introspection]\nclient_id = \"state-http\"\nclient_secret = \"state-http-introspection-secret\"\n"
    } else {
        ""
    };
    let text = format!(
        r#"issuer = "{issuer}"
resource = "{resource}"
{introspection}
[[grant]]
subject = "robot"
prefixes = ["robots/"]
rights = ["write"]

[[grant]]
scope = "state:write"
group = "team-a"
prefixes = ["users/{{sub}}/", "team-a/"]
rights = ["write"]
"#,
        issuer = issuer.url
    );
    let path = place.tokens.with_file_name("oauth.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn serve(place: &Place, port: u16, oauth: &Path) -> HttpServer {
    let listen = format!("127.0.0.1:{port}");
    place.serve(&["--listen", &listen, "--oauth", oauth.to_str().unwrap()])
}

/// Which tokens the issuer gives for this server's resource.
#[derive(PartialEq)]
enum Tokens {
    Jwt,
    /// Opaque ones, which the server introspects.
    Opaque,
}

/// An issuer and a server taking its tokens, on a port chosen first (the resource names it).
struct Setup {
    place: Place,
    resource: String,
    issuer: Issuer,
    server: HttpServer,
}

impl Setup {
    fn start(sdk: &Path, tokens: Tokens) -> Setup {
        let place = Place::new();
        let port = free_port();
        let resource = format!("http://127.0.0.1:{port}");
        let (jwt, opaque) = match tokens {
            Tokens::Jwt => (resource.clone(), format!("{resource}/opaque")),
            Tokens::Opaque => (format!("{resource}/jwt"), resource.clone()),
        };
        let issuer = Issuer::start(sdk, &jwt, &opaque);
        let server = serve(&place, port, &oauth_file(&place, &issuer, &resource, tokens == Tokens::Opaque));
        Setup { place, resource, issuer, server }
    }
}

fn put(server: &HttpServer, token: &str, key: &str) -> state_e2e::HttpResponse {
    server.client().with_token(token).json("PUT", &format!("/v1/kv/{key}"), &json!({"by": "oauth"})).unwrap()
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

#[test]
fn the_official_mcp_client_signs_in_through_the_issuer_and_is_held_to_its_grant() {
    let Some(sdk) = sdk::dir() else { return };
    let Setup { place: _place, resource, issuer, server } = Setup::start(&sdk, Tokens::Jwt);

    // What sends a client to the issuer: the refusal names the resource's metadata.
    let refused = server.client().json("POST", "/mcp", &json!({})).unwrap();
    problem(&refused, 401, "unauthenticated");
    let challenge = refused.header("www-authenticate").unwrap();
    let metadata_url = format!("{resource}/.well-known/oauth-protected-resource");
    assert!(challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")), "{challenge}");
    let metadata = server.client().get("/.well-known/oauth-protected-resource").unwrap().json();
    assert_eq!(metadata["resource"], json!(resource));
    assert_eq!(metadata["authorization_servers"], json!([issuer.url]));
    assert_eq!(metadata["scopes_supported"], json!(["state:write"]));

    let mut command = Command::new(sdk.join("venv/bin/python"));
    command.arg(repository().join("tests/sdk/oauth_flow.py")).arg(format!("{resource}/mcp"));
    let out = run(&mut command);
    let answer: Value = serde_json::from_str(out.lines().last().unwrap_or_default()).unwrap();
    assert_eq!(answer["signed_in"], json!(true), "{answer}");
    assert_eq!(answer["registered"], json!(true), "dynamic client registration: {answer}");
    assert!(
        answer["browser_path"].as_array().unwrap().iter().any(|p| p.as_str().unwrap().starts_with("/interaction/")),
        "the flow went through the issuer's sign-in: {answer}"
    );
    assert_eq!(answer["set_error"], json!(false), "{answer}");
    assert_eq!(answer["get"]["value"], json!({"step": 1}), "{answer}");
    assert_eq!(answer["foreign_error"], json!(true), "alice's grant stops at users/alice/: {answer}");
    assert!(answer["foreign"].as_str().unwrap().contains("token `oauth:alice`"), "{answer}");
}

#[test]
fn tokens_an_attacker_would_present_are_refused() {
    let Some(sdk) = sdk::dir() else { return };
    let Setup { place: _place, resource, issuer, server } = Setup::start(&sdk, Tokens::Jwt);

    // The issuer's own token works, and only where its grant reaches.
    let genuine = issuer.robot_token(&resource, "state:write");
    assert_eq!(put(&server, &genuine, "robots/r1").status, 200);
    problem(&put(&server, &genuine, "team-a/r1"), 403, "forbidden");

    let key = EncodingKey::from_rsa_pem(&issuer.pem("key.pem")).unwrap();
    let claims = |change: &dyn Fn(&mut Value)| {
        let mut claims = json!({"iss": issuer.url, "aud": resource, "sub": "robot", "scope": "state:write",
                                "iat": now(), "exp": now() + 300});
        change(&mut claims);
        claims
    };
    let signed = |claims: &Value| {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some("key-1".into());
        jsonwebtoken::encode(&header, claims, &key).unwrap()
    };
    // The minting is sound: a token made here with the issuer's key is taken.
    assert_eq!(put(&server, &signed(&claims(&|_| {})), "robots/r2").status, 200);

    let invalid = |token: &str, why: &str| {
        let response = put(&server, token, "robots/r3");
        let body = problem(&response, 401, "unauthenticated");
        assert!(body["detail"].as_str().unwrap().contains(why), "{why}: {body}");
        let challenge = response.header("www-authenticate").unwrap();
        assert!(
            challenge.contains("error=\"invalid_token\"") && challenge.contains("resource_metadata="),
            "{challenge}"
        );
    };
    invalid(&signed(&claims(&|c| c["exp"] = json!(now() - 120))), "expired");
    invalid(&signed(&claims(&|c| c["nbf"] = json!(now() + 600))), "not valid yet");
    invalid(&signed(&claims(&|c| c["aud"] = json!("http://127.0.0.1:1"))), "not for this resource");
    invalid(&signed(&claims(&|c| c["aud"] = json!(format!("{resource}.evil.example")))), "not for this resource");
    invalid(&signed(&claims(&|c| c["iss"] = json!("http://127.0.0.1:2"))), "another issuer");
    invalid(&signed(&claims(&|c| drop(c.as_object_mut().unwrap().remove("exp")))), "no expiry");

    // `alg: none`: a token anyone can write.
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let none = format!("{}.{}.", b64(&json!({"alg": "none", "typ": "at+jwt"})), b64(&claims(&|_| {})));
    invalid(&none, "not a well-formed JWT");

    // Key confusion: HMAC keyed with the issuer's public key, which anyone can fetch.
    let mut hmac = Header::new(Algorithm::HS256);
    hmac.kid = Some("key-1".into());
    let confused = jsonwebtoken::encode(&hmac, &claims(&|_| {}), &EncodingKey::from_secret(&issuer.pem("key.pub.pem")));
    invalid(&confused.unwrap(), "HS256");

    // A key the issuer never published, under its key's id and under an id of its own.
    let stranger = EncodingKey::from_rsa_pem(&issuer.pem("second.pem")).unwrap();
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("key-1".into());
    invalid(&jsonwebtoken::encode(&header, &claims(&|_| {}), &stranger).unwrap(), "signature does not verify");
    header.kid = Some("key-2".into());
    invalid(&jsonwebtoken::encode(&header, &claims(&|_| {}), &stranger).unwrap(), "no signing key");

    // Tampering: the issuer's genuine token with its subject changed.
    let parts: Vec<&str> = genuine.split('.').collect();
    let mut payload: Value =
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    payload["sub"] = json!("admin");
    invalid(&format!("{}.{}.{}", parts[0], b64(&payload), parts[2]), "signature does not verify");

    // A token bound to its sender's key, which this server cannot check, is not taken as a
    // plain bearer token.
    invalid(
        &signed(&claims(&|c| c["cnf"] = json!({"jkt": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}))),
        "bound to a key",
    );
    // A token of 9 KB is refused before anything looks at it.
    invalid(&"x".repeat(9 * 1024), "longer than");
    // A subject that would reach into another's prefix (`users/alice/x/` lies inside alice's
    // `users/alice/`) gets no grant that names {sub}.
    let sneaky = claims(&|c| {
        c["sub"] = json!("alice/x");
        c["groups"] = json!(["team-a"]);
    });
    problem(&put(&server, &signed(&sneaky), "users/alice/x/plan"), 403, "forbidden");
    problem(&put(&server, &signed(&sneaky), "users/alice/plan"), 403, "forbidden");

    // A good token no grant covers: 403, naming the scope that would.
    let response = put(&server, &signed(&claims(&|c| c["sub"] = json!("mallory"))), "robots/r4");
    problem(&response, 403, "forbidden");
    let challenge = response.header("www-authenticate").unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"state:write\""),
        "{challenge}"
    );

    // Nothing refused was written.
    let admin_view = signed(&claims(&|_| {}));
    let listed = server.client().with_token(&admin_view).get("/v1/kv?prefix=robots/").unwrap().json();
    let keys: Vec<&str> = listed["entries"].as_array().unwrap().iter().map(|e| e["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["robots/r1", "robots/r2"], "{listed}");
    // The audit trail names the issuer's subject.
    let history = server.client().with_token(&admin_view).get("/v1/history?key=robots/r1").unwrap().json();
    assert_eq!(history["events"][0]["by"], json!("oauth:robot"), "named apart from any tokens-file entry: {history}");
}

#[test]
fn a_rotated_key_is_picked_up_and_made_up_key_ids_do_not_hammer_the_issuer() {
    let Some(sdk) = sdk::dir() else { return };
    let Setup { place: _place, resource, issuer, server } = Setup::start(&sdk, Tokens::Jwt);
    let fetched_at_start = issuer.jwks_fetches();
    let started = Instant::now();

    let claims = json!({"iss": issuer.url, "aud": resource, "sub": "robot", "exp": now() + 300});
    let second = EncodingKey::from_rsa_pem(&issuer.pem("second.pem")).unwrap();
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("key-2".into());
    let rotated_token = jsonwebtoken::encode(&header, &claims, &second).unwrap();
    problem(&put(&server, &rotated_token, "robots/before"), 401, "unauthenticated");

    // Fifty tokens naming key ids no one issued: at most one fetch of the key set.
    for n in 0..50 {
        header.kid = Some(format!("made-up-{n}"));
        let token = jsonwebtoken::encode(&header, &claims, &second).unwrap();
        problem(&put(&server, &token, "robots/x"), 401, "unauthenticated");
    }
    // One fetch per interval (5 s) at most, however fast tokens with new key ids arrive.
    let allowed = |started: Instant| 1 + started.elapsed().as_secs() / 5;
    let fetched = issuer.jwks_fetches() - fetched_at_start;
    assert!(fetched <= allowed(started), "{fetched} fetches of the key set for 51 unknown key ids");

    // The issuer rotates: the new key is taken once the set may be fetched again.
    let rotate = issuer.client().request("POST", "/test/rotate", &[], None).unwrap();
    assert_eq!(rotate.status, 200);
    let mut last = String::new();
    state_e2e::wait::within(Duration::from_secs(20), || {
        let response = put(&server, &rotated_token, "robots/after");
        last = response.text();
        (response.status == 200).then_some(())
    })
    .unwrap_or_else(|| panic!("the rotated key was never taken: {last}"));
    let fetched = issuer.jwks_fetches() - fetched_at_start;
    assert!(fetched <= allowed(started), "{fetched} fetches of the key set in {:?}", started.elapsed());
}

#[test]
fn an_opaque_token_is_introspected_and_refused_once_revoked() {
    let Some(sdk) = sdk::dir() else { return };
    let Setup { place: _place, resource, issuer, server } = Setup::start(&sdk, Tokens::Opaque);

    let token = issuer.robot_token(&resource, "state:write");
    assert_ne!(token.split('.').count(), 3, "the issuer gave a JWT: {token}");
    expect(&put(&server, &token, "robots/o1"), 200);

    let form = serde_urlencoded::to_string([("token", token.as_str())]).unwrap();
    let revoked = issuer
        .client()
        .request(
            "POST",
            "/token/revocation",
            &[("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", &basic("robot", ROBOT_SECRET))],
            Some(form.as_bytes()),
        )
        .unwrap();
    assert_eq!(revoked.status, 200, "{}", revoked.text());
    let body = problem(&put(&server, &token, "robots/o2"), 401, "unauthenticated");
    assert!(body["detail"].as_str().unwrap().contains("not active"), "{body}");
    problem(&put(&server, "not-a-token-the-issuer-made", "robots/o3"), 401, "unauthenticated");
}

#[test]
fn an_issuer_that_cannot_be_reached_stops_the_server_before_it_opens_the_store() {
    let place = Place::new();
    let oauth = place.tokens.with_file_name("oauth.toml");
    let port = free_port();
    let text = format!(
        "issuer = \"http://127.0.0.1:{port}\"\nresource = \"https://state.example\"\n[[grant]]\nscope = \"s\"\nprefixes = [\"\"]\nrights = [\"read\"]\n"
    );
    std::fs::write(&oauth, text).unwrap();
    let db = place.db.to_string_lossy().into_owned();
    let (status, stderr) = state_e2e::run_to_exit(
        binary(),
        &["--db", &db, "--listen", "127.0.0.1:0", "--oauth", oauth.to_str().unwrap()],
        &[],
    )
    .unwrap();
    assert!(!status.success());
    assert!(stderr.contains("cannot reach the issuer") && stderr.contains("cannot connect"), "{stderr}");
    assert!(!place.db.exists(), "the store was opened before the issuer was checked");
}

//! `cargo xtask image`: builds the container image of `state-http` from a release archive
//! (`cargo xtask dist` first) and checks that it serves: `/healthz`, a write and a read with a
//! token, an MCP `initialize`. Needs a Docker daemon, and the base image (`--base`, default
//! debian:bookworm-slim) where the daemon can get it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::{root, run};

const TOKEN: &str = "image-check-0123456789abcdef";

pub(crate) fn image(args: &[String]) -> Result<()> {
    let mut base: Option<String> = None;
    let mut tag = "state-http:latest".to_owned();
    let mut port = 17478u16;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--base" => base = Some(rest.next().context("--base needs an image")?.clone()),
            "--tag" => tag = rest.next().context("--tag needs a name")?.clone(),
            "--port" => port = rest.next().context("--port needs a number")?.parse().context("--port")?,
            other => bail!("unknown argument `{other}` (image takes --base IMAGE, --tag NAME, --port N)"),
        }
    }
    let docker_up = Command::new("docker").arg("info").output().is_ok_and(|o| o.status.success());
    if !docker_up {
        bail!("no Docker daemon answers (`docker info` fails): start one, then run this again");
    }
    let dist = root().join("dist");
    let archive = std::fs::read_dir(&dist)
        .with_context(|| format!("{} is missing: run `cargo xtask dist` first", dist.display()))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .find(|name| {
            name.starts_with("state-")
                && name.ends_with(&format!("-{}-unknown-linux-gnu.tar.gz", std::env::consts::ARCH))
        })
        .context("no archive for this machine in dist/: run `cargo xtask dist` first")?;

    let mut build = Command::new("docker");
    build.args(["build", "-f"]).arg(root().join("packaging/Dockerfile"));
    build.args(["--build-arg", &format!("ARCHIVE={archive}"), "-t", &tag]);
    if let Some(base) = &base {
        build.args(["--build-arg", &format!("BASE={base}")]);
    }
    build.arg(&dist);
    run(build)?;

    let scratch = std::env::temp_dir().join(format!("state-image-check-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let tokens = scratch.join("tokens.toml");
    let file = format!("[[token]]\nname = \"check\"\nsecret = \"{TOKEN}\"\nprefixes = [\"\"]\nrights = [\"admin\"]\n");
    std::fs::write(&tokens, file)?;
    let name = format!("state-image-check-{}", std::process::id());
    let mut start = Command::new("docker");
    start.args(["run", "-d", "--rm", "--name", &name, "--network", "host"]);
    start.args(["-e", &format!("STATE_HTTP_LISTEN=127.0.0.1:{port}")]);
    start.arg("-v").arg(format!("{}:/etc/state/tokens.toml:ro", tokens.display())).arg(&tag);
    run(start)?;
    let checked = check(port);
    let logs = Command::new("docker").args(["logs", &name]).output().ok();
    let _ = Command::new("docker").args(["stop", &name]).output();
    let _ = std::fs::remove_dir_all(&scratch);
    if let Err(error) = checked {
        let logs = logs.map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).unwrap_or_default();
        bail!("the image does not serve: {error:#}\n--- its log ---\n{logs}");
    }
    eprintln!("{tag} serves: /healthz, a write and a read with a token, and MCP initialize");
    Ok(())
}

fn check(port: u16) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !request(port, "GET", "/healthz", &[], "").is_ok_and(|(status, _)| status == 200) {
        if Instant::now() > deadline {
            bail!("/healthz did not answer 200 within 30 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let auth = format!("Bearer {TOKEN}");
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    let (status, body) = request(port, "PUT", "/v1/kv/image/check", &headers, "\"served\"")?;
    anyhow::ensure!(status == 200, "a write answered {status}: {body}");
    let (status, body) = request(port, "GET", "/v1/kv/image/check", &headers, "")?;
    anyhow::ensure!(status == 200 && body.contains("\"served\""), "a read answered {status}: {body}");
    let (status, _) = request(port, "GET", "/v1/kv/image/check", &[], "")?;
    anyhow::ensure!(status == 401, "a read without the token answered {status}, not 401");
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"xtask","version":"1"}}}"#;
    let mcp = [("Accept", "application/json, text/event-stream"), headers[0], headers[1]];
    let (status, body) = request(port, "POST", "/mcp", &mcp, init)?;
    anyhow::ensure!(status == 200 && body.contains("serverInfo"), "MCP initialize answered {status}: {body}");
    Ok(())
}

/// One HTTP/1.1 request on its own connection: the status and the body as text.
fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(head.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer.split(' ').nth(1).and_then(|s| s.parse().ok()).context("not an HTTP answer")?;
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Ok((status, body))
}

//! A full disk, for real: a small filesystem mounted for the test, filled up under a running
//! server. Needs root (to mount); skipped, saying so, elsewhere, unless STATE_REQUIRE_MOUNT is
//! set (CI sets it).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use state_e2e::HttpServer;

use crate::expect;

/// A tmpfs mounted on a temporary directory, unmounted when dropped.
struct SmallDisk {
    mount: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(megabytes: u32) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("disk");
        std::fs::create_dir(&mount).unwrap();
        let size = format!("size={megabytes}m");
        let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", &size, "tmpfs"]).arg(&mount).output();
        match mounted {
            Ok(out) if out.status.success() => Some(SmallDisk { mount, _dir: dir }),
            other => {
                let why = other.map_or_else(|e| e.to_string(), |o| String::from_utf8_lossy(&o.stderr).into_owned());
                assert!(std::env::var_os("STATE_REQUIRE_MOUNT").is_none(), "cannot mount a small filesystem: {why}");
                eprintln!("SKIPPED: cannot mount a small filesystem for the disk-full test (needs root): {why}");
                None
            }
        }
    }

    fn free(&self) -> u64 {
        let out = Command::new("df").args(["--output=avail", "-B1"]).arg(&self.mount).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().nth(1).unwrap().trim().parse().unwrap()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
    }
}

fn serve(db: &Path, runtime: &Path) -> HttpServer {
    let db = db.to_string_lossy().into_owned();
    let runtime = runtime.to_string_lossy().into_owned();
    HttpServer::start(crate::binary(), &["--db", &db], &[("STATE_RUNTIME_DIR", runtime.as_str())]).unwrap()
}

#[test]
fn a_full_disk_refuses_writes_clearly_keeps_reads_and_loses_nothing_acknowledged() {
    let Some(disk) = SmallDisk::mount(32) else { return };
    let runtime = tempfile::tempdir().unwrap();
    let runtime = runtime.path().join("run");
    let db = disk.mount.join("state.redb");
    let mut server = serve(&db, &runtime);
    let http = server.client();
    expect(&http.json("PUT", "/v1/kv/first", &json!("before")).unwrap(), 200);
    // Leave about 12 MB, then write half-megabyte values until the disk is full.
    let filler = disk.mount.join("filler");
    let keep = 12 * 1024 * 1024;
    let fill = disk.free().saturating_sub(keep);
    std::fs::write(&filler, vec![0u8; usize::try_from(fill).unwrap()]).unwrap();
    let value = json!("v".repeat(500_000));
    let mut acknowledged = Vec::new();
    let refusal = loop {
        assert!(acknowledged.len() < 100, "the disk never filled up");
        let key = format!("bulk/{}", acknowledged.len());
        let response = http.json("PUT", &format!("/v1/kv/{key}"), &value).unwrap();
        match response.status {
            200 => acknowledged.push(key),
            _ => break response,
        }
    };
    assert_eq!(refusal.status, 503, "{}", refusal.text());
    let detail = refusal.json()["detail"].as_str().unwrap().to_owned();
    assert!(detail.contains("is full") && detail.contains("reads go on"), "{detail}");
    assert!(!acknowledged.is_empty(), "some writes fit before the disk filled");

    // Reads go on while it is full.
    expect(&http.get("/v1/kv/first").unwrap(), 200);
    for key in &acknowledged {
        expect(&http.get(&format!("/v1/kv/{key}")).unwrap(), 200);
    }
    // Space returns: writes resume, in the same process.
    std::fs::remove_file(&filler).unwrap();
    expect(&http.json("PUT", "/v1/kv/after", &json!("space is back")).unwrap(), 200);

    // And every acknowledged write is on disk: killed and started again, the store has them.
    server.kill().unwrap();
    let server = serve(&db, &runtime);
    let http = server.client();
    for key in acknowledged.iter().chain([&"first".to_owned(), &"after".to_owned()]) {
        expect(&http.get(&format!("/v1/kv/{key}")).unwrap(), 200);
    }
}

/// The probe's disk (issue 30): 20 MiB, nothing else on it, values of one size written until
/// the store refuses. At every size the refusal must be the store's own (503, "is full") with
/// room still left on the disk, never a failed write that leaves the disk at 0 bytes; reads
/// go on; and the store opens again on the full disk, with everything acknowledged.
#[test]
fn at_every_value_size_the_store_refuses_before_the_disk_is_full_and_opens_on_it() {
    for value_bytes in [30_000, 300_000, 1_000_000] {
        let Some(disk) = SmallDisk::mount(20) else { return };
        let runtime = tempfile::tempdir().unwrap();
        let runtime = runtime.path().join("run");
        let db = disk.mount.join("state.redb");
        let mut server = serve(&db, &runtime);
        let http = server.client();
        let value = json!("v".repeat(value_bytes));
        let mut acknowledged = Vec::new();
        let refusal = loop {
            assert!(acknowledged.len() < 2000, "{value_bytes}: the disk never filled up");
            let key = format!("bulk/{}", acknowledged.len());
            let response = http.json("PUT", &format!("/v1/kv/{key}"), &value).unwrap();
            match response.status {
                200 => acknowledged.push(key),
                _ => break response,
            }
        };
        let body = refusal.json();
        assert_eq!(
            refusal.status,
            503,
            "{value_bytes}: {body} after {} writes\n{}",
            acknowledged.len(),
            server.stderr()
        );
        assert!(body["detail"].as_str().unwrap().contains("is full"), "{value_bytes}: {body}\n{}", server.stderr());
        assert!(disk.free() > 0, "{value_bytes}: the disk was let fill to 0 bytes");
        for key in acknowledged.iter().step_by(7) {
            expect(&http.get(&format!("/v1/kv/{key}")).unwrap(), 200);
        }
        // Writing on: a refusal may have let the store write out what it held back (its
        // estimate of what a write costs the disk then shrinks), so more writes may fit; then
        // it refuses again, the disk still not full, and reads go on.
        let mut refused_again = false;
        for more in 0..2000 {
            let key = format!("more/{more}");
            match http.json("PUT", &format!("/v1/kv/{key}"), &value).unwrap().status {
                200 => acknowledged.push(key),
                status => {
                    assert_eq!(status, 503, "{value_bytes}: another write on a full disk");
                    refused_again = true;
                    break;
                }
            }
        }
        assert!(refused_again, "{value_bytes}: the store never refused again");
        assert!(disk.free() > 0, "{value_bytes}: the disk was let fill to 0 bytes");
        expect(&http.get(&format!("/v1/kv/{}", acknowledged[0])).unwrap(), 200);
        // Killed, and started again on the full disk: it opens, and holds what it acknowledged.
        server.kill().unwrap();
        let server = serve(&db, &runtime);
        let http = server.client();
        for key in &acknowledged {
            let got = http.get(&format!("/v1/kv/{key}")).unwrap();
            assert_eq!(got.status, 200, "{value_bytes}: {key} after a restart on a full disk: {}", got.text());
        }
        drop(server);
    }
}

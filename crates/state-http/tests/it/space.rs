//! A store gives its file's free space back while it serves (issue 37): after most of its data
//! is deleted and its history compacted, the running owner compacts the file between two
//! write batches, while a client goes on writing, and nothing acknowledged is lost, not even
//! when the owner is SIGKILLed right after.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use state_e2e::wait;

use crate::{Place, expect};

/// Letters no compression could shrink, different for every `seed`.
fn noise(seed: u64, bytes: usize) -> Value {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let text: String = (0..bytes)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b'a' + (state % 26) as u8)
        })
        .collect();
    json!(text)
}

fn file_size(place: &Place) -> u64 {
    std::fs::metadata(&place.db).map(|m| m.len()).unwrap_or(0)
}

#[test]
fn a_mostly_deleted_store_shrinks_its_file_while_serving_and_keeps_every_acknowledged_write() {
    let place = Place::new();
    // History beyond the last few revisions is compacted at every sweep (once a second).
    let mut server = place.serve(&["--history-retention", "5"]);
    let http = server.client();
    // Live values between the ones deleted later: the free pages end up in holes the file
    // keeps, not at its end, which redb trims by itself.
    for n in 0..30 {
        expect(&http.json("PUT", &format!("/v1/kv/bulk/{n}"), &noise(n, 900 * 1024)).unwrap(), 200);
        expect(&http.json("PUT", &format!("/v1/kv/live/{n}"), &noise(1000 + n, 20 * 1024)).unwrap(), 200);
    }
    for n in 0..30 {
        expect(&http.request("DELETE", &format!("/v1/kv/bulk/{n}"), &[], None).unwrap(), 200);
    }
    let grown = file_size(&place);
    assert!(grown > 24 * 1024 * 1024, "the values took room: {grown} bytes");

    // A client writes on throughout; every write it was told succeeded must survive.
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (written, http) = (written.clone(), server.client());
        std::thread::spawn(move || {
            let mut acknowledged = Vec::new();
            for n in 0..1_000_000u64 {
                // Until the server is killed: then the request fails, unanswered.
                let Ok(response) = http.json("PUT", &format!("/v1/kv/during/{n}"), &json!({"n": n})) else { break };
                assert_eq!(response.status, 200, "a write while the file shrank failed: {}", response.text());
                acknowledged.push(n);
                written.fetch_add(1, Ordering::SeqCst);
            }
            acknowledged
        })
    };
    wait::until("the file to shrink to a quarter", Duration::from_secs(60), || file_size(&place) * 4 <= grown);
    let shrunk = file_size(&place);
    // Writes go on after the compaction; then the owner dies without a chance to close.
    let at_shrink = written.load(Ordering::SeqCst);
    wait::until("20 more writes after the file shrank", Duration::from_secs(10), || {
        written.load(Ordering::SeqCst) >= at_shrink + 20
    });
    server.kill().unwrap();
    let acknowledged = writer.join().unwrap();
    let log = server.stderr();
    let compactions: Vec<&str> = log.lines().filter(|l| l.contains("compacted the database file")).collect();

    let server = place.serve(&[]);
    let http = server.client();
    for n in 0..30 {
        let live = expect(&http.get(&format!("/v1/kv/live/{n}")).unwrap(), 200);
        assert_eq!(live["value"], noise(1000 + n, 20 * 1024), "live/{n} kept its value");
        assert_eq!(http.get(&format!("/v1/kv/bulk/{n}")).unwrap().status, 404, "bulk/{n} stays deleted");
    }
    for n in &acknowledged {
        let got = expect(&http.get(&format!("/v1/kv/during/{n}")).unwrap(), 200);
        assert_eq!(got["value"], json!({"n": n}), "acknowledged write during/{n} survived the kill");
    }
    eprintln!("file {grown} -> {shrunk} bytes while serving; {} writes acknowledged around it", acknowledged.len());
    eprintln!("{}", compactions.join("\n"));
}

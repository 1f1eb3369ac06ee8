//! Several `state-http` replicas on one PostgreSQL store: compare-and-set clients split across
//! them lose no update (and the check can fail: without the guards it does), claimers never
//! double-claim and crashed workers' runs are reclaimed once with their late writes fenced, a
//! watcher on one replica sees exactly the history written through another, and all of it
//! survives a replica being SIGKILLed and restarted.
//!
//! Needs `STATE_TEST_POSTGRES_URL` (`.ci/run` sets it); without it each test says SKIPPED.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use state_e2e::{HttpClient, HttpServer};

use crate::{binary, expect};

const URL_VAR: &str = "STATE_TEST_POSTGRES_URL";
/// Bound on every wait: a healthy replica answers in milliseconds.
const PATIENCE: Duration = Duration::from_secs(30);

/// A fresh schema in the test database, dropped afterwards; `None` (said on stderr) without a URL.
pub(crate) struct Store {
    pub(crate) url: String,
    pub(crate) schema: String,
}

impl Store {
    pub(crate) fn new(test: &str) -> Option<Store> {
        let Ok(url) = std::env::var(URL_VAR) else {
            assert!(
                std::env::var_os("STATE_REQUIRE_POSTGRES").is_none(),
                "STATE_REQUIRE_POSTGRES is set but {URL_VAR} is not"
            );
            eprintln!("SKIPPED: set {URL_VAR} (e.g. postgres://postgres@127.0.0.1/postgres) to run the replica tests");
            return None;
        };
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        Some(Store { url, schema: format!("test_{test}_{}_{nanos}", std::process::id()) })
    }

    /// Starts a replica: `state-http --postgres URL --postgres-schema S <extra>`.
    pub(crate) fn replica(&self, extra: &[&str]) -> HttpServer {
        HttpServer::start(binary(), &self.args(&self.url, extra), &[]).unwrap()
    }

    /// A replica's arguments, on `url` (this store's database, perhaps with other options).
    pub(crate) fn args<'a>(&'a self, url: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec!["--postgres", url, "--postgres-schema", self.schema.as_str()];
        args.extend_from_slice(extra);
        args
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let drop_schema = format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.schema);
        let _ = std::process::Command::new("psql").args(["-q", &self.url, "-c", &drop_schema]).output();
    }
}

/// A client that follows a replica across restarts (same address) and retries connection
/// failures for a while: a request that failed to connect was never received.
#[derive(Clone)]
struct Replica(Arc<Mutex<SocketAddr>>);

impl Replica {
    fn of(server: &HttpServer) -> Replica {
        Replica(Arc::new(Mutex::new(server.addr)))
    }

    fn client(&self) -> HttpClient {
        HttpClient::new(*self.0.lock().unwrap())
    }
}

/// What one compare-and-set client saw.
#[derive(Debug, Default)]
struct Tally {
    /// (key, version written, value written) of every acknowledged write.
    acknowledged: Vec<(String, u64, u64)>,
    conflicts: u64,
    /// Requests whose answer never came (the replica died under them): done or not.
    unknown: u64,
}

/// `clients` threads, alternating between `replicas`, each making `attempts` read-then-CAS
/// increments of a counter under one of `keys`.
fn cas_workload(replicas: &[Replica], keys: &[String], clients: usize, attempts: usize) -> Tally {
    let tally = Arc::new(Mutex::new(Tally::default()));
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let replica = replicas[i % replicas.len()].clone();
            let keys = keys.to_vec();
            let tally = tally.clone();
            thread::spawn(move || {
                let mut mine = Tally::default();
                let deadline = Instant::now() + PATIENCE * 4;
                for attempt in 0..attempts {
                    assert!(Instant::now() < deadline, "the workload did not finish in time");
                    let key = &keys[(i + attempt) % keys.len()];
                    let read = replica.client().get(&format!("/v1/kv/{key}")).ok().filter(|r| r.status == 200);
                    let Some(read) = read else {
                        // The replica is down or lost the database a moment (the faults these
                        // tests make): a client pauses before it tries again.
                        thread::sleep(Duration::from_millis(20));
                        continue;
                    };
                    let read = read.json();
                    let (version, n) = (read["version"].as_u64().unwrap(), read["value"]["n"].as_u64().unwrap());
                    let body = json!({"n": n + 1}).to_string();
                    let etag = format!("\"{version}\"");
                    match replica.client().request(
                        "PUT",
                        &format!("/v1/kv/{key}"),
                        &[("If-Match", &etag)],
                        Some(body.as_bytes()),
                    ) {
                        Ok(written) if written.status == 200 => {
                            let written = written.json();
                            assert_eq!(written["version"].as_u64(), Some(version + 1), "{written}");
                            mine.acknowledged.push((key.clone(), version + 1, n + 1));
                        }
                        Ok(refused) if refused.status == 412 => mine.conflicts += 1,
                        // The store was unreachable, or the commit's fate was lost with it.
                        Ok(other) if other.status == 503 || other.status == 500 => mine.unknown += 1,
                        Ok(other) => panic!("unexpected answer {}: {}", other.status, other.text()),
                        Err(_) => mine.unknown += 1,
                    }
                }
                let mut all = tally.lock().unwrap();
                all.acknowledged.extend(mine.acknowledged);
                all.conflicts += mine.conflicts;
                all.unknown += mine.unknown;
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    Arc::try_unwrap(tally).unwrap().into_inner().unwrap()
}

/// Every event under `prefix`, read page by page.
fn history(http: &HttpClient, prefix: &str) -> Vec<Value> {
    let mut events = Vec::new();
    let mut since = 0;
    loop {
        let page =
            expect(&http.get(&format!("/v1/history?prefix={prefix}&since_revision={since}&n=1000")).unwrap(), 200);
        let got = page["events"].as_array().unwrap();
        events.extend(got.iter().cloned());
        match got.last() {
            Some(last) if page["more"] == json!(true) => since = last["revision"].as_u64().unwrap(),
            _ => return events,
        }
    }
}

fn create_counters(http: &HttpClient, keys: &[String]) {
    for key in keys {
        let created = http.request("PUT", &format!("/v1/kv/{key}"), &[("If-None-Match", "*")], Some(b"{\"n\": 0}"));
        expect(&created.unwrap(), 200);
    }
}

/// The lost-update invariants: each key's history counts up by one per write with no value
/// twice (a lost update writes the same successor twice), every acknowledged write is in it,
/// and revisions are gapless across all keys.
fn assert_no_lost_update(http: &HttpClient, keys: &[String], tally: &Tally, prefix: &str) {
    let events = history(http, prefix);
    let mut per_key: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    let mut revisions = BTreeSet::new();
    for event in &events {
        let key = event["key"].as_str().unwrap();
        assert_eq!(event["op"], "put", "{event}");
        per_key
            .entry(key)
            .or_default()
            .push((event["version"].as_u64().unwrap(), event["value"]["n"].as_u64().unwrap()));
        revisions.insert(event["revision"].as_u64().unwrap());
    }
    let (first, last) = (*revisions.first().unwrap(), *revisions.last().unwrap());
    assert_eq!(revisions.len() as u64, last - first + 1, "revisions have a gap");
    assert_eq!(revisions.len(), events.len(), "each write is its own revision");
    for key in keys {
        let writes = &per_key[key.as_str()];
        for (i, (version, n)) in writes.iter().enumerate() {
            assert_eq!(
                (*version, *n),
                (i as u64 + 1, i as u64),
                "{key}: write {i} is not the successor of the one before"
            );
        }
        let current = expect(&http.get(&format!("/v1/kv/{key}")).unwrap(), 200);
        assert_eq!(current["value"]["n"].as_u64(), Some(writes.len() as u64 - 1), "{key}: {current}");
    }
    for (key, version, n) in &tally.acknowledged {
        assert!(
            per_key[key.as_str()].contains(&(*version, *n)),
            "acknowledged write {key} v{version} is not in history"
        );
    }
    if tally.unknown == 0 {
        let successes = tally.acknowledged.len() as u64;
        let written: u64 = per_key.values().map(|w| w.len() as u64 - 1).sum();
        assert_eq!(written, successes, "every increment in the store is one a client was told succeeded");
    }
}

/// Creates the counters through `a`, then runs [`cas_workload`] in the background.
fn counting_in_background(
    a: &HttpServer,
    replicas: [&Replica; 2],
    keys: &[String],
    attempts: usize,
) -> thread::JoinHandle<Tally> {
    create_counters(&a.client(), keys);
    let (ra, rb, keys) = (replicas[0].clone(), replicas[1].clone(), keys.to_vec());
    thread::spawn(move || cas_workload(&[ra, rb], &keys, 16, attempts))
}

/// Waits for a background workload and says what it saw (`cargo nextest --no-capture`).
fn finished(workload: thread::JoinHandle<Tally>, fault: &str) -> Tally {
    let tally = workload.join().unwrap();
    let (acknowledged, conflicts, unknown) = (tally.acknowledged.len(), tally.conflicts, tally.unknown);
    eprintln!("{acknowledged} acknowledged, {conflicts} conflicts, {unknown} answers unknown {fault}");
    tally
}

/// Waits, at most [`PATIENCE`], until `done` says so.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    state_e2e::wait::until(what, PATIENCE, done);
}

/// Waits until the store behind `server` has committed `writes` more revisions: whatever
/// writes in the background is under way.
fn under_way(server: &HttpServer, writes: u64) {
    let revision = || expect(&server.client().get("/v1/health").unwrap(), 200)["revision"].as_u64().unwrap_or(0);
    let from = revision();
    wait_until("the workload's writes", || revision() >= from + writes);
}

/// SIGKILLs a replica and starts it again on the same address, as a supervisor would.
fn kill_and_restart(store: &Store, replica: &mut HttpServer) -> HttpServer {
    replica.kill().unwrap();
    let address = replica.addr.to_string();
    let args = store.args(&store.url, &["--listen", address.as_str()]);
    state_e2e::wait::until_some("the replica to listen on its address again", PATIENCE, || {
        HttpServer::start(binary(), &args, &[]).ok()
    })
}

fn counter_keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("cas/{i}")).collect()
}

#[test]
fn compare_and_set_across_two_replicas_loses_no_update() {
    let Some(store) = Store::new("cas") else { return };
    let (a, b) = (store.replica(&[]), store.replica(&[]));
    let keys = counter_keys(4);
    create_counters(&a.client(), &keys);
    let tally = cas_workload(&[Replica::of(&a), Replica::of(&b)], &keys, 16, 60);
    assert!(tally.conflicts > 0, "no conflict happened, so this run proved nothing: {tally:?}");
    assert_eq!(tally.unknown, 0, "{tally:?}");
    assert_no_lost_update(&b.client(), &keys, &tally, "cas/");
}

/// The same workload and the same check with the guards dropped (a test-only switch): the
/// check fails, so the lost-update test can fail.
#[test]
fn without_the_guards_the_lost_update_check_fails() {
    let Some(store) = Store::new("unguarded") else { return };
    let (a, b) = (store.replica(&["--test-only-unguarded"]), store.replica(&["--test-only-unguarded"]));
    for round in 1..=5 {
        let keys: Vec<String> = (0..2).map(|i| format!("cas/{round}/{i}")).collect();
        create_counters(&a.client(), &keys);
        let tally = cas_workload(&[Replica::of(&a), Replica::of(&b)], &keys, 16, 40);
        let http = a.client();
        let check = std::panic::catch_unwind(|| assert_no_lost_update(&http, &keys, &tally, &format!("cas/{round}/")));
        if check.is_err() {
            eprintln!("round {round}: the lost-update check failed without the guards, as it must");
            return;
        }
    }
    panic!("five rounds without the guards passed the lost-update check: it has no teeth");
}

/// A worker's claim: the run, the fencing token, which attempt, who.
#[derive(Debug, Clone)]
struct Claim {
    run_id: String,
    token: u64,
    attempt: u64,
}

fn claim(http: &HttpClient, worker: &str, ttl_seconds: f64) -> Option<Claim> {
    let args = json!({"agent_id": worker, "name": "job", "lease_ttl_seconds": ttl_seconds});
    let answer = http.json("POST", "/v1/workflows:claim", &args).ok()?;
    match answer.status {
        200 => {
            let body = answer.json();
            assert_eq!(body["status"], "claimed", "{body}");
            Some(Claim {
                run_id: body["run_id"].as_str().unwrap().to_owned(),
                token: body["token"].as_u64().unwrap(),
                attempt: body["attempt"].as_u64().unwrap(),
            })
        }
        404 => None,
        other => panic!("claim answered {other}: {}", answer.text()),
    }
}

fn complete(http: &HttpClient, worker: &str, claim: &Claim) -> state_e2e::HttpResponse {
    let args = json!({"agent_id": worker, "token": claim.token, "result": {"by": worker}});
    http.json("POST", &format!("/v1/workflows/{}/complete", claim.run_id), &args).unwrap()
}

#[test]
fn sixteen_claimers_on_two_replicas_never_double_claim_and_crashed_runs_are_reclaimed_once() {
    let Some(store) = Store::new("claims") else { return };
    let (a, b) = (store.replica(&[]), store.replica(&[]));
    const RUNS: usize = 48;
    let mut created = BTreeSet::new();
    for i in 0..RUNS {
        let run = expect(&a.client().json("POST", "/v1/workflows", &json!({"name": "job", "input": i})).unwrap(), 200);
        created.insert(run["run_id"].as_str().unwrap().to_owned());
    }
    // Three workers claim through B with a one-second claim and crash.
    let crashed: Vec<(String, Claim)> = (0..3)
        .map(|i| {
            let worker = format!("crashed-{i}");
            let claimed = claim(&b.client(), &worker, 1.0).expect("a run to claim");
            (worker, claimed)
        })
        .collect();

    let claims = Arc::new(Mutex::new(Vec::<(String, Claim)>::new()));
    let completed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let replicas = [Replica::of(&a), Replica::of(&b)];
    let workers: Vec<_> = (0..16)
        .map(|i| {
            let (replica, claims, completed) = (replicas[i % 2].clone(), claims.clone(), completed.clone());
            thread::spawn(move || {
                let worker = format!("worker-{i}");
                let deadline = Instant::now() + PATIENCE;
                while completed.load(std::sync::atomic::Ordering::SeqCst) < RUNS {
                    assert!(Instant::now() < deadline, "the runs were not all completed in time");
                    match claim(&replica.client(), &worker, 30.0) {
                        Some(claimed) => {
                            let done = complete(&replica.client(), &worker, &claimed);
                            assert_eq!(done.status, 200, "{worker} completing its own claim: {}", done.text());
                            completed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            claims.lock().unwrap().push((worker.clone(), claimed));
                        }
                        // The crashed workers' claims have not run out yet.
                        None => thread::sleep(Duration::from_millis(50)),
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let claims = claims.lock().unwrap().clone();
    let mut by_run: BTreeMap<&str, Vec<&Claim>> = BTreeMap::new();
    for (_, claimed) in &claims {
        by_run.entry(claimed.run_id.as_str()).or_default().push(claimed);
    }
    assert_eq!(by_run.len(), RUNS, "every run was claimed by a live worker");
    assert!(by_run.values().all(|c| c.len() == 1), "a run was claimed twice by live workers: {by_run:?}");
    assert_eq!(by_run.keys().map(|r| (*r).to_owned()).collect::<BTreeSet<_>>(), created);
    for (worker, dead) in &crashed {
        let again = by_run[dead.run_id.as_str()][0];
        assert_eq!(again.attempt, dead.attempt + 1, "{}: reclaimed once, as the next attempt", dead.run_id);
        assert!(again.token > dead.token, "the reclaim's token is newer");
        // The crashed worker wakes up and reports: fenced, through either replica.
        for replica in [&a, &b] {
            let late = complete(&replica.client(), worker, dead);
            assert_eq!(late.status, 409, "{}", late.text());
            assert_eq!(late.json()["code"], "fenced", "{}", late.text());
        }
    }
    let done = expect(&b.client().get("/v1/workflows?status=completed&limit=100").unwrap(), 200);
    assert_eq!(done["runs"].as_array().unwrap().len(), RUNS, "{done}");
}

/// Reads `stream` until it has delivered revision `last`: (revision, key, op, version) of
/// every event.
fn watched_until(stream: &mut state_e2e::SseStream, last: u64) -> Vec<(u64, String, String, u64)> {
    let mut seen = Vec::new();
    let mut at = 0;
    while at < last {
        let event = crate::watch::next_event(stream);
        if event.event.is_some() {
            continue; // the opening position
        }
        let batch = event.json();
        at = batch["revision"].as_u64().unwrap();
        for e in batch["events"].as_array().unwrap() {
            seen.push((
                at,
                e["key"].as_str().unwrap().to_owned(),
                e["op"].as_str().unwrap().to_owned(),
                e["version"].as_u64().unwrap(),
            ));
        }
    }
    seen
}

fn history_rows(http: &HttpClient, prefix: &str) -> Vec<(u64, String, String, u64)> {
    history(http, prefix)
        .iter()
        .map(|e| {
            let revision = e["revision"].as_u64().unwrap();
            (
                revision,
                e["key"].as_str().unwrap().to_owned(),
                e["op"].as_str().unwrap().to_owned(),
                e["version"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_watcher_on_one_replica_sees_exactly_the_history_written_through_another() {
    let Some(store) = Store::new("watch") else { return };
    let writer = store.replica(&[]);
    let listening = store.replica(&[]);
    let polling = store.replica(&["--postgres-poll", "100ms"]);
    let mut streams: Vec<_> = [&listening, &polling]
        .iter()
        .map(|r| r.client().stream("/v1/watch?prefix=w/&from_revision=0", &[]).unwrap())
        .collect();
    let http = writer.client();
    let mut last = 0;
    for i in 0..120 {
        let key = format!("w/{}", i % 7);
        let answer = if i % 5 == 4 {
            http.request("DELETE", &format!("/v1/kv/{key}"), &[], None).unwrap()
        } else {
            http.request("PUT", &format!("/v1/kv/{key}"), &[], Some(format!("{i}").as_bytes())).unwrap()
        };
        if answer.status == 200 {
            last = answer.json()["revision"].as_u64().unwrap();
        }
    }
    let truth = history_rows(&http, "w/");
    assert_eq!(truth.last().map(|t| t.0), Some(last));
    for stream in &mut streams {
        assert_eq!(watched_until(stream, last), truth, "the watch delivered exactly the history, in order");
    }
}

#[test]
fn a_replica_killed_mid_workload_and_restarted_loses_nothing_acknowledged() {
    let Some(store) = Store::new("kill") else { return };
    let a = store.replica(&[]);
    let mut b = store.replica(&[]);
    let keys = counter_keys(4);
    let (ra, rb) = (Replica::of(&a), Replica::of(&b));
    let workload = counting_in_background(&a, [&ra, &rb], &keys, 80);
    under_way(&a, 20);
    let b = kill_and_restart(&store, &mut b);
    let tally = finished(workload, "with the killed replica");
    assert!(tally.conflicts > 0, "{tally:?}");
    assert_no_lost_update(&a.client(), &keys, &tally, "cas/");
    // The restarted replica serves the same store, and its watch starts from the beginning.
    let truth = history_rows(&a.client(), "cas/");
    let mut stream = b.client().stream("/v1/watch?prefix=cas/&from_revision=0", &[]).unwrap();
    assert_eq!(watched_until(&mut stream, truth.last().unwrap().0), truth);
}

/// A PostgreSQL cluster of this test's own, in a temporary directory on a free port, so it can
/// be restarted without disturbing other tests. `None` (said on stderr) where PostgreSQL's
/// server programs are not installed.
struct Cluster {
    bin: std::path::PathBuf,
    data: std::path::PathBuf,
    url: String,
    _dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Option<Cluster> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|b| b.join("initdb").exists())
            .max()?;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let as_postgres = |program: &str, args: &[&str]| {
            // initdb refuses to run as root; the server's files then belong to postgres.
            let status = if is_root() {
                std::process::Command::new("runuser")
                    .args(["-u", "postgres", "--"])
                    .arg(bin.join(program))
                    .args(args)
                    .stdout(std::process::Stdio::null())
                    .status()
            } else {
                std::process::Command::new(bin.join(program)).args(args).stdout(std::process::Stdio::null()).status()
            };
            assert!(status.unwrap().success(), "{program} {args:?} failed");
        };
        if is_root() {
            assert!(std::process::Command::new("chown").arg("postgres").arg(dir.path()).status().unwrap().success());
        }
        let data_arg = data.to_string_lossy().into_owned();
        let socket_dir = dir.path().to_string_lossy().into_owned();
        as_postgres("initdb", &["-D", &data_arg, "-A", "trust", "-U", "postgres"]);
        let options = format!("-c listen_addresses=127.0.0.1 -p {port} -k {socket_dir}");
        let log = dir.path().join("log").to_string_lossy().into_owned();
        as_postgres("pg_ctl", &["-D", &data_arg, "-w", "-l", &log, "-o", &options, "start"]);
        let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
        Some(Cluster { bin, data, url, _dir: dir })
    }

    /// `pg_ctl restart -m fast`: every connection is dropped, the server comes back.
    fn restart(&self) {
        let data = self.data.to_string_lossy().into_owned();
        let mut command = if is_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(self.bin.join("pg_ctl"));
            c
        } else {
            std::process::Command::new(self.bin.join("pg_ctl"))
        };
        let status =
            command.args(["-D", &data, "-w", "-m", "fast", "restart"]).stdout(std::process::Stdio::null()).status();
        assert!(status.unwrap().success(), "pg_ctl restart failed");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data.to_string_lossy().into_owned();
        let _ = std::process::Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args(["-D", &data, "-m", "immediate", "stop"])
            .stdout(std::process::Stdio::null())
            .status();
    }
}

/// A cluster of the test's own and a store in it; `None` (said on stderr) where the tests
/// cannot run.
fn own_cluster(schema: &str) -> Option<(Cluster, Store)> {
    Store::new(schema)?;
    let Some(cluster) = Cluster::start() else {
        eprintln!("SKIPPED: PostgreSQL's server programs (initdb, pg_ctl) are not installed");
        return None;
    };
    let store = Store { url: cluster.url.clone(), schema: schema.into() };
    Some((cluster, store))
}

fn is_root() -> bool {
    std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// Like [`watched_until`], but a stream that ends (its replica lost the database for a while)
/// is opened again after the last revision it delivered, as a client would.
fn watched_with_resume(replica: &Replica, prefix: &str, last: u64) -> Vec<(u64, String, String, u64)> {
    let mut seen = Vec::new();
    let mut at = 0;
    let deadline = Instant::now() + PATIENCE;
    while at < last {
        assert!(Instant::now() < deadline, "the watch did not reach revision {last}");
        let path = format!("/v1/watch?prefix={prefix}&from_revision={at}");
        let mut stream = state_e2e::wait::until_some("the watch to open again", PATIENCE, || {
            replica.client().stream(&path, &[]).ok()
        });
        loop {
            stream.set_timeout(PATIENCE).unwrap();
            let Ok(Some(event)) = stream.next_event() else { break };
            match (event.comment.is_some(), event.event.as_deref()) {
                (true, _) | (false, Some("position")) => continue,
                (false, Some(_)) => break, // the watch ended with an error: resume
                (false, None) => {}
            }
            let batch = event.json();
            at = batch["revision"].as_u64().unwrap();
            for e in batch["events"].as_array().unwrap() {
                let (key, op) = (e["key"].as_str().unwrap().to_owned(), e["op"].as_str().unwrap().to_owned());
                seen.push((at, key, op, e["version"].as_u64().unwrap()));
            }
            if at >= last {
                break;
            }
        }
    }
    seen
}

#[test]
fn replicas_ride_out_a_postgresql_restart() {
    let Some((cluster, store)) = own_cluster("restart") else { return };
    let (a, b) = (store.replica(&[]), store.replica(&[]));
    let keys = counter_keys(4);
    let (ra, rb) = (Replica::of(&a), Replica::of(&b));
    let workload = counting_in_background(&a, [&ra, &rb], &keys, 100);
    under_way(&a, 20);
    cluster.restart();
    let tally = finished(workload, "across the restart");
    // Both replicas serve again once the database is back.
    for replica in [&ra, &rb] {
        wait_until("a replica to recover after the restart", || {
            replica.client().get("/v1/kv/cas/0").is_ok_and(|r| r.status == 200)
        });
    }
    let more = cas_workload(&[ra.clone(), rb.clone()], &keys, 4, 10);
    assert!(!more.acknowledged.is_empty(), "writes succeed after the restart: {more:?}");
    let all = Tally {
        acknowledged: tally.acknowledged.into_iter().chain(more.acknowledged).collect(),
        conflicts: tally.conflicts + more.conflicts,
        unknown: tally.unknown + more.unknown,
    };
    assert_no_lost_update(&a.client(), &keys, &all, "cas/");
    // A watcher on B, resuming where its stream broke off, sees exactly the history.
    let truth = history_rows(&a.client(), "cas/");
    assert_eq!(watched_with_resume(&rb, "cas/", truth.last().unwrap().0), truth);
}

#[test]
fn leases_across_replicas_grant_one_holder_at_a_time_and_fence_stale_tokens() {
    let Some(store) = Store::new("leases") else { return };
    let (a, b) = (store.replica(&[]), store.replica(&[]));
    let replicas = [Replica::of(&a), Replica::of(&b)];
    let grants = Arc::new(Mutex::new(Vec::<u64>::new()));
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let (replica, grants) = (replicas[i % 2].clone(), grants.clone());
            thread::spawn(move || {
                let holder = format!("holder-{i}");
                for _ in 0..12 {
                    let http = replica.client();
                    let ask = json!({"resource_id": "db/migrate", "holder_id": holder, "ttl_seconds": 30});
                    let answer = http.json("POST", "/v1/leases:acquire", &ask).unwrap();
                    if answer.status == 409 {
                        // Held by another: a contender pauses before it asks again.
                        thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                    let token = expect(&answer, 200)["token"].as_u64().unwrap();
                    grants.lock().unwrap().push(token);
                    let write = |token: u64| {
                        http.request("PUT", &format!("/v1/kv/guarded?lease=db/migrate&token={token}"), &[], Some(b"1"))
                            .unwrap()
                    };
                    expect(&write(token), 200);
                    let release = json!({"resource_id": "db/migrate", "holder_id": holder, "token": token});
                    expect(&http.json("POST", "/v1/leases:release", &release).unwrap(), 200);
                    // A late write with the released token is fenced, whoever holds it now.
                    let late = write(token);
                    assert_eq!((late.status, late.json()["code"].clone()), (409, json!("fenced")), "{}", late.text());
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let grants = grants.lock().unwrap().clone();
    let distinct: BTreeSet<u64> = grants.iter().copied().collect();
    assert!(grants.len() >= 8, "too few grants to show anything: {grants:?}");
    assert_eq!(distinct.len(), grants.len(), "two holders were given the same token: {grants:?}");
}

#[test]
fn expiry_is_decided_once_for_all_replicas() {
    let Some(store) = Store::new("ttl") else { return };
    let (a, b) = (store.replica(&[]), store.replica(&[]));
    expect(&a.client().request("PUT", "/v1/kv/tmp/x?ttl_seconds=0.3", &[], Some(b"1")).unwrap(), 200);
    // B stops returning it once its TTL has run out (bounded wait: the TTL is 300 ms).
    wait_until("the key to expire on B", || b.client().get("/v1/kv/tmp/x").unwrap().status == 404);
    // Create-only through B treats the expired key as absent.
    let created = b.client().request("PUT", "/v1/kv/tmp/x", &[("If-None-Match", "*")], Some(b"2")).unwrap();
    assert_eq!(expect(&created, 200)["version"], 1);
    // Both replicas sweep; history records the expiry exactly once.
    thread::sleep(Duration::from_millis(1500));
    let ops: Vec<String> = history(&a.client(), "tmp/").iter().map(|e| e["op"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ops, ["put", "expired", "put"], "{ops:?}");
}

#[test]
fn a_retry_through_another_replica_returns_the_first_result_and_writes_once() {
    let Some(store) = Store::new("retry") else { return };
    let (a, b) = (store.replica(&[]), store.replica(&[]));
    let put = |server: &HttpServer| {
        let http = server.client().with_header("Idempotency-Key", "deploy-42");
        expect(&http.request("PUT", "/v1/kv/deploys", &[("If-None-Match", "*")], Some(b"42")).unwrap(), 200)
    };
    // The client lost A's answer and retried through B: the first result, not a 412.
    assert_eq!(put(&a), put(&b));
    assert_eq!(history(&b.client(), "deploys").len(), 1, "written once");
}

/// Sends a mutating call until it gets a definitive answer, under one idempotency key, as a
/// careful client does when a replica or the database goes away under it: a retry of a call
/// that did commit gets its first result. Returns the answer and how many tries failed.
fn until_answered(replica: &Replica, key: &str, path: &str, args: &Value) -> (state_e2e::HttpResponse, u32) {
    let mut failed = 0;
    let answer = state_e2e::wait::until_some(&format!("{path} to get an answer"), PATIENCE * 2, || {
        match replica.client().with_header("Idempotency-Key", key).json("POST", path, args) {
            Ok(answer) if answer.status != 503 && answer.status != 500 => Some(answer),
            _ => {
                failed += 1;
                None
            }
        }
    });
    (answer, failed)
}

#[test]
fn claimers_ride_out_a_replica_kill_and_a_postgresql_restart() {
    let Some((cluster, store)) = own_cluster("claims") else { return };
    let a = store.replica(&[]);
    let mut b = store.replica(&[]);
    const RUNS: usize = 160;
    for i in 0..RUNS {
        expect(&a.client().json("POST", "/v1/workflows", &json!({"name": "job", "input": i})).unwrap(), 200);
    }
    let (ra, rb) = (Replica::of(&a), Replica::of(&b));
    let log = Arc::new(Mutex::new(Vec::<(String, Claim)>::new()));
    let failed_tries = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let workers: Vec<_> = (0..16)
        .map(|i| {
            let replica = if i % 2 == 0 { ra.clone() } else { rb.clone() };
            let (log, failed_tries) = (log.clone(), failed_tries.clone());
            thread::spawn(move || {
                let worker = format!("worker-{i}");
                for n in 0.. {
                    let ask = json!({"agent_id": worker, "name": "job", "lease_ttl_seconds": 60});
                    let (answer, failed) =
                        until_answered(&replica, &format!("{worker}/claim/{n}"), "/v1/workflows:claim", &ask);
                    failed_tries.fetch_add(failed, std::sync::atomic::Ordering::Relaxed);
                    if answer.status == 404 {
                        return; // nothing left to claim
                    }
                    let body = expect(&answer, 200);
                    let claimed = Claim {
                        run_id: body["run_id"].as_str().unwrap().to_owned(),
                        token: body["token"].as_u64().unwrap(),
                        attempt: body["attempt"].as_u64().unwrap(),
                    };
                    thread::sleep(Duration::from_millis(100)); // the work
                    let done = json!({"agent_id": worker, "token": claimed.token, "result": {"by": worker}});
                    let path = format!("/v1/workflows/{}/complete", claimed.run_id);
                    let (answer, failed) = until_answered(&replica, &format!("{worker}/complete/{n}"), &path, &done);
                    failed_tries.fetch_add(failed, std::sync::atomic::Ordering::Relaxed);
                    expect(&answer, 200);
                    log.lock().unwrap().push((worker.clone(), claimed));
                }
            })
        })
        .collect();
    let completed = || log.lock().unwrap().len();
    wait_until("the first completions", || completed() >= 8);
    let _b = kill_and_restart(&store, &mut b);
    let before = completed();
    wait_until("completions after the kill", || completed() >= before + 8);
    cluster.restart();
    for worker in workers {
        worker.join().unwrap();
    }
    let log = log.lock().unwrap().clone();
    eprintln!(
        "{} runs completed; {} tries failed across the replica kill and the database restart",
        log.len(),
        failed_tries.load(std::sync::atomic::Ordering::Relaxed)
    );
    let mut by_run: BTreeMap<&str, Vec<&Claim>> = BTreeMap::new();
    for (_, claimed) in &log {
        by_run.entry(claimed.run_id.as_str()).or_default().push(claimed);
    }
    assert_eq!(by_run.len(), RUNS, "every run was claimed and completed");
    assert!(by_run.values().all(|c| c.len() == 1 && c[0].attempt == 1), "a run was claimed twice: {by_run:?}");
    let done = expect(&a.client().get("/v1/workflows?status=completed&limit=1000").unwrap(), 200);
    assert_eq!(done["runs"].as_array().unwrap().len(), RUNS);
}

#[test]
fn replicas_starting_together_create_the_store_once() {
    let Some(store) = Store::new("migrate") else { return };
    let store = Arc::new(store);
    let starting: Vec<_> = (0..3)
        .map(|_| {
            let store = store.clone();
            thread::spawn(move || store.replica(&[]))
        })
        .collect();
    let replicas: Vec<HttpServer> = starting.into_iter().map(|t| t.join().unwrap()).collect();
    for (i, replica) in replicas.iter().enumerate() {
        let key = format!("/v1/kv/started/{i}");
        expect(&replica.client().request("PUT", &key, &[], Some(b"true")).unwrap(), 200);
    }
    let counted = expect(&replicas[0].client().get("/v1/kv?prefix=started/").unwrap(), 200);
    assert_eq!(counted["entries"].as_array().unwrap().len(), 3, "{counted}");
    let applied = std::process::Command::new("psql")
        .args([
            "-qtA",
            &store.url,
            "-c",
            &format!(
                "SELECT count(*) - count(DISTINCT version), max(version) - count(*) FROM \"{}\".migrations",
                store.schema
            ),
        ])
        .output()
        .unwrap();
    // No version twice, and none missing below the newest.
    assert_eq!(String::from_utf8_lossy(&applied.stdout).trim(), "0|0", "each migration applied once");
}

/// What the console's overview shows of a PostgreSQL store: how many replicas serve it (each
/// counted once, whatever its pool holds; a killed one drops out) and each one's own watchers.
#[test]
fn health_counts_the_replicas_on_the_store_and_each_ones_watchers() {
    let Some(store) = Store::new("count") else { return };
    let first = store.replica(&[]);
    let mut second = store.replica(&[]);
    let health = |replica: &HttpServer| expect(&replica.client().get("/v1/health").unwrap(), 200);
    let until = |replica: &HttpServer, what: &str, field: &str, wanted: u64| {
        let mut seen = None;
        state_e2e::wait::within(PATIENCE, || {
            seen = health(replica)[field].as_u64();
            (seen == Some(wanted)).then_some(())
        })
        .unwrap_or_else(|| panic!("{what}: {field} stayed {seen:?}, not {wanted}"));
    };
    // Each has written (its pool is open) before it is counted.
    for (i, replica) in [&first, &second].iter().enumerate() {
        expect(&replica.client().request("PUT", &format!("/v1/kv/r{i}"), &[], Some(b"1")).unwrap(), 200);
    }
    until(&first, "two replicas", "replicas", 2);
    until(&second, "two replicas, seen by the other", "replicas", 2);

    let _watching = first.client().stream("/v1/watch?prefix=w/", &[]).unwrap();
    until(&first, "a watch on the first", "watchers", 1);
    assert_eq!(health(&second)["watchers"], 0, "the second counts only its own");

    second.kill().unwrap();
    until(&first, "the second killed", "replicas", 1);
}

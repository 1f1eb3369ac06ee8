//! Linearizability, checked on real histories: eight stdio `state-mcp` processes joined to one
//! owner and four REST clients of a joined `state-http` run random reads, writes, compare-and-
//! sets, deletes and multi-key transactions on a few keys while the owner is SIGKILLed twice.
//! Every call and answer is recorded with its time, and a Wing–Gong–Lowe checker (todc-utils)
//! decides whether some order of the operations, each taking effect between its call and its
//! answer, explains every answer. A write whose outcome the client could not learn may take
//! effect at any point after its call, or never.
//!
//! CI checks a few seeds; `cargo xtask stress --seeds N` checks many.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Instant;

use serde_json::{Value, json};
use state_e2e::{HttpClient, McpClient, ProtocolEra};
use todc_utils::Specification;
use todc_utils::linearizability::WGLChecker;
use todc_utils::linearizability::history::{Action, History};

use crate::Place;

const KEYS: [&str; 3] = ["lin/a", "lin/b", "lin/c"];

/// A key's value and version, or nothing.
type Slot = Option<(i64, u64)>;

/// One operation with what it answered; `None` answers are unknown outcomes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Op {
    Get {
        key: usize,
        saw: Slot,
    },
    Set {
        key: usize,
        value: i64,
        version: Option<u64>,
    },
    /// `Ok(new version)` or `Err(current version)`.
    Cas {
        key: usize,
        value: i64,
        expected: u64,
        answer: Option<Result<u64, u64>>,
    },
    /// `Some(true)`: deleted; `Some(false)`: there was nothing.
    Delete {
        key: usize,
        answer: Option<bool>,
    },
    /// If `key`'s version is `expected`, put `value` in `then`, else in `otherwise`.
    Txn {
        key: usize,
        expected: u64,
        then: usize,
        otherwise: usize,
        value: i64,
        succeeded: Option<bool>,
    },
}

impl Op {
    fn keys(&self) -> Vec<usize> {
        match self {
            Op::Get { key, .. } | Op::Set { key, .. } | Op::Cas { key, .. } | Op::Delete { key, .. } => vec![*key],
            Op::Txn { key, then, otherwise, .. } => vec![*key, *then, *otherwise],
        }
    }
}

/// The store as a sequential object: three keys.
struct Store;

fn put(state: &mut [Slot; 3], key: usize, value: i64) -> u64 {
    let version = state[key].map_or(0, |(_, v)| v) + 1;
    state[key] = Some((value, version));
    version
}

impl Specification for Store {
    type State = [Slot; 3];
    type Operation = Op;

    fn init() -> Self::State {
        [None; 3]
    }

    fn apply(op: &Op, state: &[Slot; 3]) -> (bool, [Slot; 3]) {
        let mut next = *state;
        let valid = match op {
            Op::Get { key, saw } => state[*key] == *saw,
            Op::Set { key, value, version } => {
                let got = put(&mut next, *key, *value);
                version.is_none_or(|v| v == got)
            }
            Op::Cas { key, value, expected, answer } => {
                let current = state[*key].map_or(0, |(_, v)| v);
                let outcome = if current == *expected { Ok(put(&mut next, *key, *value)) } else { Err(current) };
                answer.is_none_or(|a| a == outcome)
            }
            Op::Delete { key, answer } => {
                let existed = state[*key].is_some();
                next[*key] = None;
                answer.is_none_or(|a| a == existed)
            }
            Op::Txn { key, expected, then, otherwise, value, succeeded } => {
                let holds = state[*key].map_or(0, |(_, v)| v) == *expected;
                put(&mut next, if holds { *then } else { *otherwise }, *value);
                succeeded.is_none_or(|s| s == holds)
            }
        };
        (valid, next)
    }
}

/// One recorded operation: who, when called, when answered (`None`: never learned).
#[derive(Debug, Clone)]
struct Record {
    client: usize,
    called: Instant,
    answered: Option<Instant>,
    op: Op,
}

/// Whether a history is linearizable. Operations whose outcome is unknown are answered after
/// everything else, from a process of their own.
fn linearizable(records: &[Record]) -> bool {
    let mut events: Vec<(Instant, bool, usize)> = Vec::new();
    for (i, record) in records.iter().enumerate() {
        events.push((record.called, true, i));
        if let Some(answered) = record.answered {
            events.push((answered, false, i));
        }
    }
    events.sort_by_key(|(at, is_call, _)| (*at, !*is_call));
    // Each unknown operation gets a process of its own: nothing of its client follows it.
    let process = |i: usize| -> usize {
        match records[i].answered {
            Some(_) => records[i].client,
            None => 1000 + i,
        }
    };
    let mut actions: Vec<(usize, Action<Op>)> = Vec::new();
    for (_, is_call, i) in &events {
        let op = records[*i].op.clone();
        actions.push((process(*i), if *is_call { Action::Call(op) } else { Action::Response(op) }));
    }
    for (i, record) in records.iter().enumerate() {
        if record.answered.is_none() {
            actions.push((process(i), Action::Response(record.op.clone())));
        }
    }
    if actions.is_empty() {
        return true;
    }
    WGLChecker::<Store>::is_linearizable(History::from_actions(actions))
}

/// A small, seeded generator (xorshift): the same seed, the same workload.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the client sends, before the answer fills it in.
fn next_op(rng: &mut Rng, value: i64, txns: bool) -> Op {
    let key = rng.below(3) as usize;
    match rng.below(if txns { 6 } else { 5 }) {
        0 | 1 => Op::Get { key, saw: None },
        2 => Op::Set { key, value, version: None },
        3 => Op::Cas { key, value, expected: rng.below(4), answer: None },
        4 => Op::Delete { key, answer: None },
        _ => Op::Txn {
            key,
            expected: rng.below(3),
            then: rng.below(3) as usize,
            otherwise: rng.below(3) as usize,
            value,
            succeeded: None,
        },
    }
}

/// How a call came out.
enum Outcome {
    Answered(Op),
    /// Not applied, or a read that failed: it leaves no trace.
    NotApplied,
    /// A write that may or may not have been applied.
    Unknown,
}

/// What an error message says about whether the write happened.
fn failed(message: &str) -> Outcome {
    if message.contains("was not applied") || message.contains("could not be run") || message.contains("was not run") {
        Outcome::NotApplied
    } else {
        Outcome::Unknown
    }
}

fn slot(result: &Value) -> Slot {
    match result["status"].as_str() {
        Some("ok") => Some((result["value"].as_i64().unwrap(), result["version"].as_u64().unwrap())),
        _ => None,
    }
}

/// Runs `op` through MCP tools and reads its answer.
fn by_mcp(client: &mut McpClient, op: &Op) -> Outcome {
    let (tool, args) = match op {
        Op::Get { key, .. } => ("state_get", json!({"key": KEYS[*key]})),
        Op::Set { key, value, .. } => ("state_set", json!({"key": KEYS[*key], "value": value})),
        Op::Cas { key, value, expected, .. } => {
            ("state_set", json!({"key": KEYS[*key], "value": value, "expected_version": expected}))
        }
        Op::Delete { key, .. } => ("state_delete", json!({"key": KEYS[*key]})),
        Op::Txn { .. } => ("state_txn", txn_body(op)),
    };
    let result = match client.call(tool, args) {
        Ok(result) => result,
        Err(_) => return if matches!(op, Op::Get { .. }) { Outcome::NotApplied } else { Outcome::Unknown },
    };
    if result.is_error {
        return if matches!(op, Op::Get { .. }) { Outcome::NotApplied } else { failed(&result.text) };
    }
    Outcome::Answered(answered(op, &result.json()))
}

/// Runs `op` through the REST API and reads its answer.
fn by_rest(http: &HttpClient, op: &Op) -> Outcome {
    let path = |key: &usize| format!("/v1/kv/{}", KEYS[*key]);
    let response = match op {
        Op::Get { key, .. } => http.get(&path(key)),
        Op::Set { key, value, .. } => http.json("PUT", &path(key), &json!(value)),
        Op::Cas { key, value, expected, .. } if *expected == 0 => {
            http.request("PUT", &path(key), &[("If-None-Match", "*")], Some(value.to_string().as_bytes()))
        }
        Op::Cas { key, value, expected, .. } => {
            let tag = format!("\"{expected}\"");
            http.request("PUT", &path(key), &[("If-Match", tag.as_str())], Some(value.to_string().as_bytes()))
        }
        Op::Delete { key, .. } => http.request("DELETE", &path(key), &[], None),
        Op::Txn { .. } => http.json("POST", "/v1/kv:txn", &txn_body(op)),
    };
    let Ok(response) = response else {
        return if matches!(op, Op::Get { .. }) { Outcome::NotApplied } else { Outcome::Unknown };
    };
    let body = response.json();
    match response.status {
        200 => Outcome::Answered(answered(op, &body)),
        // A failed precondition or a missing key: the answer is in the problem's `result`.
        404 | 412 => Outcome::Answered(answered(op, &body["result"])),
        _ if matches!(op, Op::Get { .. }) => Outcome::NotApplied,
        _ => failed(body["detail"].as_str().unwrap_or("")),
    }
}

fn txn_body(op: &Op) -> Value {
    let Op::Txn { key, expected, then, otherwise, value, .. } = op else { unreachable!() };
    json!({
        "compare": [{"key": KEYS[*key], "version": expected}],
        "success": [{"op": "put", "key": KEYS[*then], "value": value}],
        "failure": [{"op": "put", "key": KEYS[*otherwise], "value": value}],
    })
}

/// `op` with what `result` answered.
fn answered(op: &Op, result: &Value) -> Op {
    let mut op = op.clone();
    match &mut op {
        Op::Get { saw, .. } => *saw = slot(result),
        Op::Set { version, .. } => *version = result["version"].as_u64(),
        Op::Cas { answer, .. } => {
            let version = result["version"].as_u64().unwrap();
            *answer = Some(if result["status"] == "ok" { Ok(version) } else { Err(version) });
        }
        Op::Delete { answer, .. } => *answer = Some(result["status"] == "ok"),
        Op::Txn { succeeded, .. } => *succeeded = result["succeeded"].as_bool(),
    }
    op
}

/// A client: an MCP server process, or a REST client.
enum Client {
    Mcp(McpClient),
    Rest(HttpClient),
}

/// Runs one seed: records a history with the owner killed twice, then checks it.
fn run_seed(seed: u64, ops_per_client: usize, txns: bool) -> (usize, usize) {
    let place = Place::new();
    let mcp_args = ["--owner-idle", "30s", "--owner-hang-timeout", "5s"];
    let mut clients: Vec<Client> = Vec::new();
    // Half the stdio servers name the database through a symbolic link (made before the
    // database is): every name must reach one owner and one log, through every kill.
    let alias = place.db.with_file_name("alias.redb");
    std::os::unix::fs::symlink(&place.db, &alias).unwrap();
    for n in 0..8 {
        let db = if n % 2 == 0 { &place.db } else { &alias }.to_string_lossy().into_owned();
        let runtime = place.runtime.to_string_lossy().into_owned();
        let mut args = vec!["--db", db.as_str()];
        args.extend(mcp_args);
        let mut client =
            McpClient::spawn_with_env(&crate::state_mcp(), &args, &[("STATE_RUNTIME_DIR", runtime.as_str())]).unwrap();
        client.handshake(ProtocolEra::Legacy).unwrap();
        clients.push(Client::Mcp(client));
    }
    let server = place.serve(&["--owner-hang-timeout", "5s"]);
    for _ in 0..4 {
        clients.push(Client::Rest(server.client()));
    }
    let owner_pid = || -> u32 {
        let health = server.client().get("/v1/health").unwrap().json();
        health["owner"]["pid"].as_u64().unwrap() as u32
    };
    let first_owner = owner_pid();
    assert_ne!(first_owner, server.pid(), "state-http joined the owner the stdio servers started");

    let records = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicUsize::new(0));
    let total = ops_per_client * clients.len();
    let workers: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(id, mut client)| {
            let (records, done) = (records.clone(), done.clone());
            thread::spawn(move || {
                let mut rng =
                    Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (id as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
                for n in 0..ops_per_client {
                    let op = next_op(&mut rng, (id * 100_000 + n) as i64, txns);
                    let called = Instant::now();
                    let outcome = match &mut client {
                        Client::Mcp(mcp) => by_mcp(mcp, &op),
                        Client::Rest(http) => by_rest(http, &op),
                    };
                    let answered = Instant::now();
                    let record = match outcome {
                        Outcome::Answered(op) => Some(Record { client: id, called, answered: Some(answered), op }),
                        Outcome::NotApplied => None,
                        Outcome::Unknown => Some(Record { client: id, called, answered: None, op }),
                    };
                    if let Some(record) = record {
                        records.lock().unwrap().push(record);
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                }
                client
            })
        })
        .collect();
    // The owner is killed twice while the clients run, a third and two thirds of the way.
    let mut killed = Vec::new();
    for fraction in [3, 3 * 2] {
        let target = total * fraction / 9;
        let what = format!("{target} operations done");
        state_e2e::wait::until(&what, std::time::Duration::from_secs(120), || done.load(Ordering::SeqCst) >= target);
        let pid = owner_pid();
        let status = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
        assert!(status.success());
        killed.push(pid);
    }
    let clients: Vec<Client> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    assert!(!killed.contains(&owner_pid()), "a new owner took over after each kill");
    drop(clients);
    let records = records.lock().unwrap().clone();
    let unknown = records.iter().filter(|r| r.answered.is_none()).count();
    assert!(linearizable_in_parts(&records, txns), "seed {seed}: the history is not linearizable");
    (records.len(), unknown)
}

/// Without transactions, each key is checked alone (P-compositionality: a history is
/// linearizable when every key's is); with them, the whole history at once.
fn linearizable_in_parts(records: &[Record], txns: bool) -> bool {
    if txns {
        return linearizable(records);
    }
    (0..KEYS.len()).all(|key| {
        let part: Vec<Record> = records.iter().filter(|r| r.op.keys() == [key]).cloned().collect();
        linearizable(&part)
    })
}

/// Seeds to check and operations per client: a few in CI, more under `cargo xtask stress`
/// (`STATE_STRESS_SEEDS`, `STATE_STRESS_OPS`).
fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

#[test]
fn histories_of_twelve_clients_with_the_owner_killed_twice_are_linearizable() {
    let started = Instant::now();
    let mut checked = Vec::new();
    let ops = setting("STATE_STRESS_OPS", 40) as usize;
    for seed in 1..=setting("STATE_STRESS_SEEDS", 2) {
        // Odd seeds mix in transactions (the history is checked whole); even ones do not
        // (each key is checked alone, so they can be longer).
        let txns = seed % 2 == 1;
        let (operations, unknown) = run_seed(seed, if txns { ops } else { ops * 3 / 2 }, txns);
        checked.push((seed, operations, unknown));
    }
    let operations: usize = checked.iter().map(|c| c.1).sum();
    let unknown: usize = checked.iter().map(|c| c.2).sum();
    eprintln!(
        "linearizability: {} histories, {operations} operations ({unknown} of unknown outcome), checked in {:.1?}",
        checked.len(),
        started.elapsed()
    );
}

#[test]
fn the_checker_finds_a_lost_update_and_a_stale_read() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
    let record = |client, called, answered, op| Record { client, called: at(called), answered: Some(at(answered)), op };
    // Two compare-and-sets from version 0 that both succeed: one update is lost.
    let lost = [
        record(0, 0, 10, Op::Cas { key: 0, value: 1, expected: 0, answer: Some(Ok(1)) }),
        record(1, 0, 10, Op::Cas { key: 0, value: 2, expected: 0, answer: Some(Ok(1)) }),
    ];
    assert!(!linearizable(&lost));
    // A read after a write has returned must see it.
    let stale = [
        record(0, 0, 5, Op::Set { key: 1, value: 7, version: Some(1) }),
        record(1, 6, 8, Op::Get { key: 1, saw: None }),
    ];
    assert!(!linearizable(&stale));
    // The same read, overlapping the write, may see either.
    let overlapping = [
        record(0, 0, 5, Op::Set { key: 1, value: 7, version: Some(1) }),
        record(1, 2, 8, Op::Get { key: 1, saw: None }),
    ];
    assert!(linearizable(&overlapping));
    // A write of unknown outcome may explain a later read, or never take effect.
    let unknown = Record { client: 0, called: at(0), answered: None, op: Op::Set { key: 2, value: 3, version: None } };
    assert!(linearizable(&[unknown.clone(), record(1, 20, 21, Op::Get { key: 2, saw: Some((3, 1)) })]));
    assert!(linearizable(&[unknown, record(1, 20, 21, Op::Get { key: 2, saw: None })]));
}

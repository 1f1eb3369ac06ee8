//! The engine against a model: a map of what every key must hold. The input is a script of
//! writes (plain, compare-and-set, delete, transaction, with TTLs), reads, clock advances,
//! restarts (the store closed and reopened from its file, by its name or through a symbolic
//! link to it) and a disk that refuses writes. After
//! every step the store must agree with the model: every acknowledged write there, nothing
//! refused applied, expiry at the instant the clock passes it, revisions only ever rising.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use state_api::catalog::Operation;
use state_api::{Api, Local, Outcome, Reply};
use state_core::UnixMillis;
use state_store::backend::redb::faults::Faults;
use state_store::{Engine, EngineConfig, ManualClock, RedbBackend};

const KEYS: [&str; 4] = ["k0", "k1", "k2", "k3"];

/// What a key holds, as the model says.
#[derive(Debug, Clone, PartialEq)]
struct Held {
    value: i64,
    version: u64,
    expires_at: Option<u64>,
}

struct Model {
    keys: BTreeMap<&'static str, Held>,
    now: u64,
}

impl Model {
    fn live(&self, key: &str) -> Option<&Held> {
        self.keys.get(key).filter(|held| held.expires_at.is_none_or(|at| at > self.now))
    }

    fn version(&self, key: &str) -> u64 {
        self.live(key).map_or(0, |held| held.version)
    }

    fn put(&mut self, key: &'static str, value: i64, ttl_millis: Option<u64>) {
        let version = self.version(key) + 1;
        self.keys.insert(key, Held { value, version, expires_at: ttl_millis.map(|ttl| self.now + ttl) });
    }
}

struct Store {
    api: Api,
    engine: Engine,
}

fn open(path: &Path, clock: &ManualClock, faults: &Arc<Faults>) -> Store {
    let backend = match RedbBackend::open_with_faults(path, faults.clone()) {
        Ok(backend) => backend,
        // Opening a store writes to it: on a full disk the restart waits for space.
        Err(error) if faults.disk_full.load(Ordering::SeqCst) => {
            assert!(error.to_string().contains("No space left"), "{error}");
            faults.disk_full.store(false, Ordering::SeqCst);
            RedbBackend::open_with_faults(path, faults.clone()).unwrap()
        }
        Err(error) => panic!("a healthy store does not open again: {error}"),
    };
    let engine = Engine::new(Arc::new(backend), Arc::new(clock.clone()), EngineConfig::default()).unwrap();
    Store { api: Api::local(Local::without_maintenance(engine.clone())), engine }
}

/// Reads the bytes as a script, a few bytes a step.
struct Script<'a>(&'a [u8]);

impl Script<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*first)
    }
}

pub(crate) fn run(data: &[u8]) {
    // On tmpfs when there is one: a commit's fsync is then cheap, and the fuzzer fast.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let path = dir.path().join("model.redb");
    let alias = dir.path().join("alias.redb");
    // Made before the database: the link names a file the first open creates.
    std::os::unix::fs::symlink(&path, &alias).unwrap();
    let clock = ManualClock::new(UnixMillis(1_700_000_000_000));
    let faults = Arc::new(Faults::default());
    let mut store = open(&path, &clock, &faults);
    let mut model = Model { keys: BTreeMap::new(), now: 1_700_000_000_000 };
    let mut revision = 0;
    let mut script = Script(data);
    let runtime = crate::harness::runtime();
    while let Some(step) = script.byte() {
        let key = KEYS[usize::from(script.byte().unwrap_or(0) % 4)];
        let arg = script.byte().unwrap_or(0);
        let full = faults.disk_full.load(Ordering::SeqCst);
        match step % 9 {
            0 | 1 => {
                let ttl = (arg % 4 == 3).then_some(u64::from(arg % 7 + 1) * 250);
                let expected = match arg % 3 {
                    0 => None,
                    1 => Some(model.version(key)),
                    _ => Some(u64::from(arg % 3)),
                };
                let mut args = json!({"key": key, "value": i64::from(arg)});
                if let Some(expected) = expected {
                    args["expected_version"] = json!(expected);
                }
                if let Some(ttl) = ttl {
                    args["ttl_seconds"] = json!(ttl as f64 / 1000.0);
                }
                let applies = expected.is_none_or(|e| e == model.version(key));
                let reply = runtime.block_on(store.api.call(Operation::StateSet, args));
                if let Some(result) = settled(&reply, full, applies) {
                    if applies {
                        model.put(key, i64::from(arg), ttl);
                        assert_eq!(result["version"].as_u64(), Some(model.version(key)), "{result}");
                        revision = rising(revision, &result);
                    } else {
                        assert_eq!(
                            result["version"].as_u64(),
                            Some(model.version(key)),
                            "a conflict says the current version: {result}"
                        );
                    }
                }
            }
            2 => {
                let reply = runtime.block_on(store.api.call(Operation::StateDelete, json!({"key": key})));
                let applies = model.live(key).is_some();
                if settled(&reply, full, applies).is_some() && applies {
                    model.keys.remove(key);
                }
            }
            3 => {
                // Compare one key's version; then write another, or a third.
                let other = KEYS[usize::from(arg % 4)];
                let third = KEYS[usize::from(arg / 4 % 4)];
                let version = if arg % 2 == 0 { model.version(key) } else { u64::from(arg % 3) };
                let txn = json!({
                    "compare": [{"key": key, "version": version}],
                    "success": [{"op": "put", "key": other, "value": i64::from(arg)}],
                    "failure": [{"op": "put", "key": third, "value": -i64::from(arg)}],
                });
                let succeeds = version == model.version(key);
                let reply = runtime.block_on(store.api.call(Operation::StateTxn, txn));
                if let Some(result) = settled(&reply, full, true) {
                    assert_eq!(result["succeeded"].as_bool(), Some(succeeds), "{result}");
                    match succeeds {
                        true => model.put(other, i64::from(arg), None),
                        false => model.put(third, -i64::from(arg), None),
                    }
                    revision = rising(revision, &result);
                }
            }
            4 | 5 => {
                let reply = runtime.block_on(store.api.call(Operation::StateGet, json!({"key": key})));
                // While the disk refuses writes, reads may be refused too; never wrong.
                if let Ok(result) = reply.body {
                    let held = model.live(key);
                    assert_eq!(result["value"].as_i64(), held.map(|h| h.value), "{key}: {result}");
                    assert_eq!(result["version"].as_u64(), Some(held.map_or(0, |h| h.version)), "{key}: {result}");
                } else {
                    assert!(full, "a read failed on a healthy store: {:?}", reply.body);
                }
            }
            6 => {
                let step = u64::from(arg) * 20;
                clock.advance_millis(step);
                model.now += step;
            }
            7 => {
                // A restart: the process goes, the file stays; a new one opens it, by either name.
                runtime.block_on(store.engine.close());
                drop(store);
                store = open(if arg % 2 == 0 { &path } else { &alias }, &clock, &faults);
                compare_all(&store, &model, faults.disk_full.load(Ordering::SeqCst));
            }
            _ => {
                faults.disk_full.store(!full, Ordering::SeqCst);
            }
        }
    }
    faults.disk_full.store(false, Ordering::SeqCst);
    compare_all(&store, &model, false);
    runtime.block_on(store.engine.close());
}

/// The result of a write that went through, checking it may have: a write the model says
/// applies must be acknowledged on a healthy disk, and none is acknowledged on a full one.
fn settled(reply: &Reply, full: bool, applies: bool) -> Option<Value> {
    match &reply.body {
        Ok(result) => {
            let wrote = reply.outcome == Outcome::Ok && result["status"] != "conflict";
            assert!(!(full && wrote && applies), "a write was acknowledged while the disk refused writes: {result}");
            Some(result.clone())
        }
        Err(error) => {
            assert!(full, "a write failed on a healthy store: {error:?}");
            None
        }
    }
}

fn rising(before: u64, result: &Value) -> u64 {
    let now = result["revision"].as_u64().unwrap();
    assert!(now > before, "revision {now} after {before}");
    now
}

fn compare_all(store: &Store, model: &Model, full: bool) {
    let reply = crate::harness::runtime()
        .block_on(store.api.call(Operation::StateList, json!({"include_values": true, "limit": 1000})));
    let Ok(page) = reply.body else {
        assert!(full, "listing failed on a healthy store: {:?}", reply.body);
        return;
    };
    let stored: BTreeMap<String, (i64, u64)> = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (e["key"].as_str().unwrap().to_owned(), (e["value"].as_i64().unwrap(), e["version"].as_u64().unwrap()))
        })
        .collect();
    let expected: BTreeMap<String, (i64, u64)> = KEYS
        .iter()
        .filter_map(|key| model.live(key).map(|held| ((*key).to_owned(), (held.value, held.version))))
        .collect();
    assert_eq!(stored, expected);
}

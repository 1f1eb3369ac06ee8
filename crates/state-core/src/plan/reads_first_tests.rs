//! Each `ReadsFirst` names the keys its plan reads before anything else: a hint that drifted
//! from its plan would cost PostgreSQL a round trip under the writers' lock per request again,
//! silently. Every plan here runs on an empty store and on one that holds what it reads.

use std::cell::RefCell;
use std::convert::Infallible;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{ReadsFirst, WriteContext};
use crate::entry::Entry;
use crate::lease::{self, Holder};
use crate::ops::kv::{DeleteRequest, SetRequest};
use crate::ops::lease::{AcquireRequest, ReleaseRequest, RenewRequest};
use crate::ops::reservation::{ReservationReleaseRequest, ReservationRenewRequest};
use crate::ops::semaphore::{SemaphoreReleaseRequest, SemaphoreRenewRequest};
use crate::ops::session::SessionSaveRequest;
use crate::testing::T0;
use crate::view::{MemoryView, StateView};
use crate::{kv, reservation, semaphore, session};

/// A store that notes the keys read one by one, in order.
#[derive(Default)]
struct Noting {
    store: MemoryView,
    read: RefCell<Vec<String>>,
}

impl StateView for Noting {
    type Error = Infallible;

    fn get(&self, key: &str) -> Result<Option<Entry>, Infallible> {
        self.read.borrow_mut().push(key.to_owned());
        self.store.get(key)
    }

    fn scan(&self, prefix: &str, after: Option<&str>, visit: &mut dyn FnMut(Entry) -> bool) -> Result<(), Infallible> {
        self.store.scan(prefix, after, visit)
    }
}

fn request<R: DeserializeOwned>(args: Value) -> R {
    serde_json::from_value(args).expect("a valid request")
}

/// Runs `plan` on an empty store, and on one holding an entry under every key the request
/// names, and checks that the first keys it reads are those, in any order.
fn reads_what_it_names(what: &str, request: &impl ReadsFirst, plan: impl Fn(&Noting)) {
    let named = request.reads_first();
    assert!(!named.is_empty(), "{what} names nothing");
    let mut held = MemoryView::default();
    for key in &named {
        let entry = Entry {
            key: key.clone(),
            value: json!({}),
            version: 1,
            create_revision: 1,
            mod_revision: 1,
            updated_at: T0,
            expires_at: None,
            agent_id: None,
        };
        held.entries.insert(key.clone(), entry);
    }
    for store in [MemoryView::default(), held] {
        let view = Noting { store, ..Noting::default() };
        plan(&view);
        let read = view.read.borrow();
        let mut first: Vec<&String> = read.iter().take(named.len()).collect();
        let mut expected: Vec<&String> = named.iter().collect();
        first.sort();
        expected.sort();
        assert_eq!(first, expected, "{what}: read {read:?}, named {named:?}");
    }
}

const CTX: WriteContext = WriteContext { now: T0, revision: 7 };

#[test]
fn every_hint_names_what_its_plan_reads_first() {
    let set: SetRequest = request(json!({"key": "k", "value": 1}));
    reads_what_it_names("set", &set, |v| drop(kv::plan_set(v, &set, &CTX)));
    let delete: DeleteRequest = request(json!({"key": "k"}));
    reads_what_it_names("delete", &delete, |v| drop(kv::plan_delete(v, &delete, &CTX)));

    let acquire: AcquireRequest = request(json!({"resource_id": "r", "holder_id": "h", "ttl_seconds": 5}));
    reads_what_it_names("lease acquire", &acquire, |v| drop(lease::plan_acquire(v, "r", "h", Some(5000), &CTX)));
    let renew: RenewRequest = request(json!({"resource_id": "r", "holder_id": "h", "token": 3, "ttl_seconds": 5}));
    let holder = Holder { holder_id: "h", token: Some(3) };
    reads_what_it_names("lease renew", &renew, |v| drop(lease::plan_renew(v, "r", holder, Some(5000), &CTX)));
    let release: ReleaseRequest = request(json!({"resource_id": "r", "holder_id": "h", "token": 3}));
    reads_what_it_names("lease release", &release, |v| drop(lease::plan_release(v, "r", holder, &CTX)));

    let renew: SemaphoreRenewRequest = request(json!({"name": "s", "holder_id": "h", "token": 3, "ttl_seconds": 5}));
    reads_what_it_names("semaphore renew", &renew, |v| drop(semaphore::plan_renew(v, "s", "h", 3, 5000, &CTX)));
    let release: SemaphoreReleaseRequest = request(json!({"name": "s", "holder_id": "h", "token": 3}));
    reads_what_it_names("semaphore release", &release, |v| drop(semaphore::plan_release(v, "s", "h", 3, &CTX)));

    let renew: ReservationRenewRequest =
        request(json!({"scope": "repo", "holder_id": "h", "reservation_id": 4, "ttl_seconds": 5}));
    let plan = |v: &Noting| drop(reservation::plan_renew(v, "repo", "h", 4, 5000, &CTX));
    reads_what_it_names("paths renew", &renew, plan);
    let release: ReservationReleaseRequest = request(json!({"scope": "repo", "holder_id": "h", "reservation_id": 4}));
    let plan = |v: &Noting| drop(reservation::plan_release(v, "repo", "h", Some(4), &CTX));
    reads_what_it_names("paths release", &release, plan);

    let save: SessionSaveRequest = request(json!({"session_id": "s1", "context": {"step": 1}}));
    reads_what_it_names("session save", &save, |v| drop(session::plan_save(v, "s1", &json!({"step": 1}), None, &CTX)));
}

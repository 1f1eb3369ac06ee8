//! Integration tests of the engine: the backend conformance story, a model-based property
//! test, concurrency through group commit, and redb file behaviour.

// A panic is how a test reports failure.
#![allow(clippy::unwrap_used)]

mod carried;
mod checkpoints;
mod concurrency;
mod killed;
mod knowledge;
mod log_identity;
mod model;
mod postgres_guards;
mod power_cut;
mod redb_file;
mod retry;
mod support;
mod watch;
mod workflow_drain;

/// The backend conformance suite, once per backend this crate ships.
mod conformance {
    mod redb_memory {
        state_store::conformance_suite!(crate::support::redb_memory);
    }
    mod redb_file {
        state_store::conformance_suite!(crate::support::redb_file);
    }
    mod postgres {
        state_store::conformance_suite!(crate::support::postgres, if = crate::support::postgres_available);
    }
}

//! Integration tests of the engine: the backend conformance story, a model-based property
//! test, concurrency through group commit, and redb file behaviour.

// A panic is how a test reports failure.
#![allow(clippy::unwrap_used)]

mod concurrency;
mod conformance;
mod model;
mod redb_file;
mod support;
mod workflow_drain;

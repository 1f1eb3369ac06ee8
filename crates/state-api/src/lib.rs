//! `state-api`: the operation seam every frontend holds.
//!
//! One entry point, [`Api::call`]`(operation, arguments) -> `[`Reply`]: a typed outcome class
//! beside a JSON body. Two implementations sit behind it: [`Local`], the engine in this
//! process, and a client of the database's owner (see [`Api::join`]): the one process that
//! holds the database file and serves every other process on it over a private Unix socket
//! ([`owner`]).
//!
//! Argument parsing, compatibility profiles and result encoding live here, once, so the MCP
//! tools, the REST routes and the CLI cannot disagree.

mod api;

pub mod auth;
pub mod catalog;
mod classify;
mod http;
mod local;
mod logfile;
pub mod memory_file;
mod options;
pub mod owner;
mod pages;
mod paths;
mod recover;
mod remote;
mod reply;
mod resume;
mod settle;
mod watch;
mod wire;
pub mod workspace;

pub use api::Api;
pub use classify::Classify;
pub use http::{HttpConfig, HttpError};
pub use local::{Local, StandaloneError};
pub use logfile::{CappedLog, DEFAULT_LOG_CAP, owner_log_path};
pub use options::{CORE, Options};
pub use pages::Pages;
pub use paths::{
    DatabaseState, Inspection, LogState, PathError, RUNTIME_DIR_ENV, Rendezvous, current_uid, database_holder,
    free_space, holder_note_path, inspect_database, runtime_dir, writable_dir, write_ahead_log_path,
};
pub use recover::{Recovery, recover_database};
pub use remote::{DEFAULT_HANG_TIMEOUT, JoinConfig, JoinError, Joined, OwnerLauncher};
pub use reply::{ApiError, ErrorCode, Outcome, Reply};
pub use settle::longest_own_wait;
pub use state_store::backend::postgres::{FollowMode, PostgresOptions};
pub use state_store::{Clock, ManualClock, SystemClock};
pub use watch::Watcher;
pub use wire::{Settings, WIRE_VERSION, Welcome};

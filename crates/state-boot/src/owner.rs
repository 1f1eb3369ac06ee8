//! `<binary> owner`: every binary can hold a database and serve every process on it, since a
//! client starts an owner by running its own executable in this mode (see
//! [`crate::StoreArgs::owner_launcher`]). The owner itself lives in `state_api::owner`.

use std::process::ExitCode;

use state_api::owner::{self, OwnerConfig};

use crate::flags::OwnerArgs;
use crate::logging::{self, Sink};

/// Runs the owner `args` describe until it is idle or stopped; `program` names it in errors.
pub fn main(program: &str, args: &OwnerArgs) -> ExitCode {
    let db = match args.database.database() {
        Ok(db) => db,
        Err(error) => return crate::exit(&format!("{program} owner"), Err(error)),
    };
    let config = OwnerConfig {
        db,
        runtime_dir: args.database.runtime_dir.clone(),
        idle: args.idle,
        settings: args.engine.settings(),
        log_file: None,
        clock: std::sync::Arc::new(state_api::SystemClock),
    };
    let served = owner::main(config, args.notify_ready, |log| logging::init(&args.log, "info", Sink::Owner(log)));
    crate::exit(&format!("{program} owner"), served.map(drop))
}

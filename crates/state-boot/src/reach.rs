//! Reaching the store, the same way from every binary: a `state-http` (`--server`), the
//! database held in this process alone (`--standalone`), or, by default, the database's owner,
//! started when none answers.

use std::path::Path;
use std::time::Duration;

use state_api::{Api, HttpConfig, HttpError, JoinError, Local, Options, StandaloneError};

use crate::flags::{NoDataDir, ServerArgs, StoreArgs};

/// How long a call keeps trying to reach an owner or a server (rejoining, starting a new
/// owner) before it answers unavailable, for a server an agent calls: below the 60 s at which
/// MCP clients cut tool calls.
pub const SETTLE_FOR_SERVERS: Duration = Duration::from_secs(20);

/// The same for a person at a prompt: long enough for an owner to be started, short enough to
/// hear that nothing answers. Never shorter than replacing a hung owner takes (see [`join`]).
pub const SETTLE_AT_A_PROMPT: Duration = Duration::from_secs(5);

/// What replacing a hung owner takes beyond noticing it: asking it to stop (it has 5 s to
/// commit what it queued) and starting another.
const TAKEOVER: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReachError {
    #[error(transparent)]
    NoDataDir(#[from] NoDataDir),
    #[error("--standalone holds a local database; it cannot go with --server")]
    StandaloneWithServer,
    #[error(transparent)]
    Standalone(#[from] StandaloneError),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error(transparent)]
    Join(#[from] JoinError),
    #[error("cannot find this program to start an owner with: {0}")]
    Launcher(std::io::Error),
}

/// The store the flags name, for `program` (e.g. `statectl`, shown to the owner), whose calls
/// settle within `settle`.
pub async fn reach(store: &StoreArgs, server: &ServerArgs, program: &str, settle: Duration) -> Result<Api, ReachError> {
    if let Some(url) = &server.server {
        if store.standalone {
            return Err(ReachError::StandaloneWithServer);
        }
        let config = HttpConfig { url: url.clone(), token: server.token.clone(), settle_timeout: settle };
        let api = Api::connect_http(config).await?;
        tracing::info!("serving the state-http server at {url}");
        return Ok(api);
    }
    let db = store.database.database()?;
    if store.standalone { standalone(store, &db) } else { join(store, &db, program, settle).await }
}

/// What the flags name, for people: the server's URL or the database's path.
pub fn target(store: &StoreArgs, server: &ServerArgs) -> String {
    match (&server.server, store.database.database()) {
        (Some(url), _) => url.clone(),
        (None, Ok(db)) => db.display().to_string(),
        (None, Err(_)) => "(no database)".to_owned(),
    }
}

/// The database at `db`, held in this process alone.
pub fn standalone(store: &StoreArgs, db: &Path) -> Result<Api, ReachError> {
    let local = Local::open_standalone(db, store.engine.settings())?;
    tracing::info!(db = %db.display(), "holding the database in this process only (--standalone)");
    Ok(Api::local(local))
}

/// The database at `db` through its owner, starting one with the flags' settings if none
/// answers, and saying in the log whose it is.
pub async fn join(store: &StoreArgs, db: &Path, program: &str, settle: Duration) -> Result<Api, ReachError> {
    let client = format!("{program} {}", env!("CARGO_PKG_VERSION"));
    // A call that gave up before a hung owner could be noticed and replaced would fail although
    // the owner is replaced moments later.
    let settle = settle.max(store.owner_hang_timeout.saturating_add(TAKEOVER));
    // The owner serves every operation: which tools or commands a client offers is its own
    // business.
    let config = store.join_config(db, Options::everything(), client, settle).map_err(ReachError::Launcher)?;
    let (api, joined) = Api::join(config).await?;
    joined.report(db, store.engine.settings());
    Ok(api)
}

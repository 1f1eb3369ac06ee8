//! Running the server: reach the store (a replica of one in PostgreSQL, the database's owner,
//! or a client of the process that owns it), listen, serve until SIGTERM or SIGINT, then let
//! the store go.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use state_api::auth::{Tokens, TokensError};
use state_api::owner::{self, Owner, OwnerConfig, OwnerError, OwnerExit};
use state_api::{Api, Local, StandaloneError};
use state_boot::reach::{self, ReachError, SETTLE_FOR_SERVERS};
use state_boot::{StoreArgs, ToolArgs};
use state_core::rate::Rate;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::flags::{PostgresArgs, ServeArgs};
use crate::oauth::{OAuthConfig, OAuthError, ResourceServer};

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    #[error(
        "refusing to serve {0} without --auth or --oauth: anyone who can reach it could read and change everything. \
         Give --auth FILE or --oauth FILE (see docs/http.md), listen on 127.0.0.1, or pass --insecure if this network is trusted"
    )]
    Exposed(SocketAddr),
    #[error(transparent)]
    Tokens(#[from] TokensError),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    #[error(transparent)]
    Reach(#[from] ReachError),
    #[error(transparent)]
    Owner(#[from] OwnerError),
    #[error(transparent)]
    Postgres(#[from] StandaloneError),
    #[error("opening the PostgreSQL store panicked")]
    Panicked,
    #[error(transparent)]
    MemoryFile(#[from] state_api::memory_file::MemoryFileError),
    #[error("{0}")]
    Quota(String),
    #[error(transparent)]
    OAuth(#[from] OAuthError),
}

/// The tokens `--auth` names; refuses a non-loopback address without them or `--oauth`
/// (unless `--insecure`).
pub fn tokens(args: &ServeArgs) -> Result<Option<Arc<Tokens>>, RunError> {
    if !args.listen.ip().is_loopback() && args.auth.is_none() && args.oauth.is_none() && !args.insecure {
        return Err(RunError::Exposed(args.listen));
    }
    if args.writes_per_second_per_token.is_some() && args.auth.is_none() && args.oauth.is_none() {
        return Err(RunError::Quota(
            "--writes-per-second-per-token needs --auth or --oauth: quotas are per token".into(),
        ));
    }
    let Some(path) = &args.auth else { return Ok(None) };
    use std::os::unix::fs::PermissionsExt;
    let mut tokens = Tokens::load(path)?;
    if let Some(rate) = default_write_rate(args)? {
        tokens = tokens.with_default_write_rate(rate).map_err(RunError::Quota)?;
    }
    if std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
        tracing::warn!(file = %path.display(), "the tokens file is readable by other users; `chmod 600` it");
    }
    Ok(Some(Arc::new(tokens)))
}

fn default_write_rate(args: &ServeArgs) -> Result<Option<Rate>, RunError> {
    let Some(per_second) = args.writes_per_second_per_token else { return Ok(None) };
    let rate = Rate::per_second(per_second);
    rate.check().map_err(|why| RunError::Quota(format!("--writes-per-second-per-token: {why}")))?;
    Ok(Some(rate))
}

/// The OAuth issuer `--oauth` names, its metadata and keys read.
pub async fn oauth(args: &ServeArgs) -> Result<Option<Arc<ResourceServer>>, RunError> {
    let Some(path) = &args.oauth else { return Ok(None) };
    let config = OAuthConfig::load(path, default_write_rate(args)?).map_err(OAuthError::from)?;
    Ok(Some(Arc::new(ResourceServer::start(config).await?)))
}

/// Serves until SIGTERM or SIGINT, then finishes the requests in flight and lets the store go.
pub async fn run(
    args: &ServeArgs,
    store: &StoreArgs,
    postgres: &PostgresArgs,
    tools: &ToolArgs,
    tokens: Option<Arc<Tokens>>,
) -> Result<(), RunError> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| RunError::Listen { addr: args.listen, source })?;
    // Before the store: a wrong OAuth file or an unreachable issuer is said before anything
    // is opened.
    let oauth = oauth(args).await?;
    let served = Served::reach(store, postgres).await?;
    if tools.options().permits(state_api::catalog::Operation::MemoryImport) {
        state_api::memory_file::import_from_env(&served.api).await?;
    }
    let auth = match (&tokens, &oauth) {
        (None, None) => "none (loopback only)".to_owned(),
        (Some(t), None) => format!("{} token(s)", t.len()),
        (None, Some(o)) => format!("OAuth ({o:?})"),
        (Some(t), Some(o)) => format!("{} token(s) and OAuth ({o:?})", t.len()),
    };
    let stopping = CancellationToken::new();
    let app = crate::router(served.api.clone(), &args.config(tools, tokens, oauth), stopping.child_token());
    let console = if args.no_console { "" } else { "console /, " };
    tracing::info!(
        "state-http {} listening on http://{} ({console}REST /v1, MCP /mcp, /openapi.json, /metrics); {}; auth: {auth}",
        env!("CARGO_PKG_VERSION"),
        listener.local_addr().unwrap_or(args.listen),
        served.what,
    );
    let api = served.api.clone();
    let shutdown = async move {
        owner::stop_signal().await;
        tracing::info!("stopping: finishing requests in flight");
        // An owner stopping at the same moment is not replaced for requests this process is
        // only finishing: a new one would outlive them with no client.
        api.stop_starting_owners();
        stopping.cancel();
    };
    crate::serve(listener, app, &args.limits(), shutdown).await;
    served.release().await;
    tracing::info!("stopped");
    Ok(())
}

/// The store a server serves, and how it holds it.
pub struct Served {
    pub api: Api,
    /// The owner this process hosts, if it became the database's owner: a way to stop it and
    /// its task.
    hosted: Option<(oneshot::Sender<()>, JoinHandle<OwnerExit>)>,
    /// What it is, for the log.
    what: String,
}

/// The hosted owner never idles out: it lives as long as the HTTP server.
const FOREVER: Duration = Duration::MAX;

impl Served {
    /// A replica of the store in PostgreSQL; or, with --standalone, the database alone;
    /// otherwise the database's owner (serving the processes that join it), or a client of
    /// the owner that holds it already.
    pub async fn reach(store: &StoreArgs, postgres: &PostgresArgs) -> Result<Served, RunError> {
        if let Some(options) = postgres.options() {
            let what = format!("PostgreSQL schema {}", options.schema);
            let settings = store.engine.settings();
            let local = tokio::task::spawn_blocking(move || Local::open_postgres(options, settings))
                .await
                .map_err(|_| RunError::Panicked)??;
            tracing::info!("serving the store in PostgreSQL as one of its replicas");
            return Ok(Served { api: Api::local(local), hosted: None, what });
        }
        let db = store.database.database().map_err(ReachError::from)?;
        let what = format!("database {}", db.display());
        if store.standalone {
            return Ok(Served { api: reach::standalone(store, &db)?, hosted: None, what });
        }
        let config = OwnerConfig {
            db: db.clone(),
            runtime_dir: store.database.runtime_dir.clone(),
            idle: FOREVER,
            settings: store.engine.settings(),
            log_file: None,
            clock: std::sync::Arc::new(state_api::SystemClock),
        };
        match Owner::start(config).await {
            Ok(owner) => {
                tracing::info!(db = %db.display(), "this process owns the database; state-mcp processes on it join here");
                let api = owner.api();
                let (stop, stopped) = oneshot::channel::<()>();
                let owning = tokio::spawn(owner.serve(async move { drop(stopped.await) }));
                Ok(Served { api, hosted: Some((stop, owning)), what })
            }
            Err(error) if error.holder_role().is_some() => {
                let api = reach::join(store, &db, "state-http", SETTLE_FOR_SERVERS).await?;
                Ok(Served { api, hosted: None, what })
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Requests are done; now the engine: a hosted owner lets queued writes commit and
    /// releases the database (clients joined to it rejoin a new owner); a joined one leaves
    /// its owner.
    pub async fn release(self) {
        match self.hosted {
            Some((stop, owning)) => {
                let _ = stop.send(());
                let _ = owning.await;
            }
            None => self.api.close().await,
        }
    }
}

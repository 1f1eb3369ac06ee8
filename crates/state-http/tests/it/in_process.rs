//! The application served from the test process itself: the binary's own flags, router and
//! listener (`state_http::flags`, `router`, `serve`) over an engine held in this process, on a
//! loopback port, without spawning `state-http`. Tests of what a route answers use it; tests
//! of the process (signals, owners, crashes, memory) spawn the binary (`Place::serve`).

use std::net::SocketAddr;

use clap::Parser;
use state_boot::{StoreArgs, ToolArgs};
use state_e2e::HttpClient;
use state_http::flags::{PostgresArgs, ServeArgs};
use state_http::run::Served;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::Place;

/// The flags `state-http` takes, less its subcommands.
#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    serve: ServeArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    tools: ToolArgs,
    #[command(flatten)]
    postgres: PostgresArgs,
}

/// A server running in this process until dropped.
pub(crate) struct InProcess {
    pub(crate) addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    serving: Option<tokio::task::JoinHandle<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl InProcess {
    pub(crate) fn client(&self) -> HttpClient {
        HttpClient::new(self.addr)
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(runtime) = self.runtime.take() {
            // Let the owner release the database, as the binary does on SIGTERM.
            if let Some(serving) = self.serving.take() {
                let _ =
                    runtime.block_on(async { tokio::time::timeout(std::time::Duration::from_secs(10), serving).await });
            }
            runtime.shutdown_timeout(std::time::Duration::from_secs(5));
        }
    }
}

impl Place {
    /// The application as `state-http --db <db> <extra>` serves it, in this process.
    pub(crate) fn in_process(&self, extra: &[&str]) -> InProcess {
        let db = self.db.to_string_lossy().into_owned();
        let mut args = vec!["state-http", "--db", db.as_str(), "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let flags = Flags::try_parse_from(args).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let tokens = state_http::run::tokens(&flags.serve).unwrap();
        // The store as the binary reaches it: this process becomes the database's owner.
        let runtime_dir = self.runtime.clone();
        let store = StoreArgs {
            database: state_boot::flags::DatabaseArgs {
                runtime_dir: Some(runtime_dir),
                ..flags.store.database.clone()
            },
            ..flags.store.clone()
        };
        let served = runtime.block_on(Served::reach(&store, &flags.postgres)).unwrap();
        let config = flags.serve.config(&flags.tools, tokens, None);
        let limits = flags.serve.limits();
        let listener = runtime.block_on(tokio::net::TcpListener::bind(flags.serve.listen)).unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = runtime.spawn(async move {
            let stopping = CancellationToken::new();
            let app = state_http::router(served.api.clone(), &config, stopping.child_token());
            let shutdown = async move {
                let _ = stopped.await;
                stopping.cancel();
            };
            state_http::serve(listener, app, &limits, shutdown).await;
            served.release().await;
        });
        InProcess { addr, stop: Some(stop), serving: Some(serving), runtime: Some(runtime) }
    }

    /// [`Place::in_process`] requiring the test tokens.
    pub(crate) fn in_process_with_auth(&self) -> InProcess {
        let tokens = self.tokens.to_string_lossy().into_owned();
        self.in_process(&["--auth", tokens.as_str()])
    }
}

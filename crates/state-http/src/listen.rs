//! Accepting connections: a cap on how many are open at once, a deadline for a slow client's
//! request headers, and a graceful stop that lets requests in flight finish.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Limits on connections.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections open at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Time a client has to send its request headers.
    pub header_timeout: Duration,
    /// Time in-flight requests get to finish once stopping, before they are cut off.
    pub drain_timeout: Duration,
}

/// Serves `router` on `listener` until `shutdown` completes, then stops accepting and waits
/// (up to the drain timeout) for requests in flight.
pub async fn serve(listener: TcpListener, router: Router, limits: &Limits, shutdown: impl Future<Output = ()>) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    let builder = builder.http1_only();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service).into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.drain_timeout, graceful.shutdown()).await.is_err() {
        tracing::warn!("requests still running after {:?}; cutting them off", limits.drain_timeout);
    }
}

//! Accepting connections, so that no client can lock the others out: a cap on how many are
//! open at once, a deadline for a connection's first request and for the time it may sit idle
//! between requests, and, at the cap, the connection idle longest makes room for a new one. A
//! connection is never cut while it has a request in flight (a watch stream included); when
//! every one of them is busy, a new one is answered 503 at once instead of hanging. A graceful
//! stop lets requests in flight finish. Connections speak HTTP/1.1 alone: a client sending
//! HTTP/2's preface is not served (one connection carrying thousands of streams would slip past
//! every per-connection bound here).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Limits on connections.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections open at once. At the cap, the one idle longest is closed for a new one;
    /// if all are busy, the new one is answered 503.
    pub max_connections: usize,
    /// Time a new connection has to send its request headers, from the moment it opens.
    pub header_timeout: Duration,
    /// Time a connection may sit idle between requests before it is closed.
    pub idle_timeout: Duration,
    /// Time a connection with a request in flight may go without a byte moving either way
    /// (a client that stopped reading its answer) before it is closed. Longer than any wait a
    /// request makes on purpose (a long poll waits at most 55 s).
    pub stall_timeout: Duration,
    /// Time in-flight requests get to finish once stopping, before they are cut off.
    pub drain_timeout: Duration,
}

/// Serves `router` on `listener` until `shutdown` completes, then stops accepting and waits
/// (up to the drain timeout) for requests in flight.
pub async fn serve(listener: TcpListener, router: Router, limits: &Limits, shutdown: impl Future<Output = ()>) {
    let table = Arc::new(Table::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    let mut shed_warned: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    // Out of file descriptors, typically: let connections close first.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(slot) = table.admit() else {
            if shed_warned.is_none_or(|at| at.elapsed() > Duration::from_secs(10)) {
                tracing::warn!(
                    %peer,
                    max_connections = limits.max_connections,
                    "every connection is busy with a request; answering new ones 503"
                );
                shed_warned = Some(Instant::now());
            }
            tokio::spawn(shed(stream));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(Tracked { inner: stream, slot: slot.clone() });
        let service = TowerToHyperService::new(Busy { inner: router.clone(), slot: slot.clone(), peer: peer.ip() });
        let connection = builder.serve_connection(io, service);
        let connection = graceful.watch(connection);
        let (table, limits) = (table.clone(), limits.clone());
        tokio::spawn(async move {
            tokio::pin!(connection);
            tokio::select! {
                _ = &mut connection => {}
                () = slot.closing.cancelled() => tracing::debug!(%peer, "closed an idle connection to make room"),
                () = watch_idle(&slot, &limits) => tracing::debug!(%peer, "closed a connection that stayed idle or stalled"),
            }
            table.release(&slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.drain_timeout, graceful.shutdown()).await.is_err() {
        tracing::warn!("requests still running after {:?}; cutting them off", limits.drain_timeout);
    }
}

/// Completes when the connection has been idle too long: no request yet within the header
/// timeout of opening, none for the idle timeout since the last one ended, or, with a request
/// in flight, no byte moving either way for the stall timeout (its client stopped reading).
async fn watch_idle(slot: &Slot, limits: &Limits) {
    loop {
        let allowed = match (slot.busy.load(Ordering::Relaxed), slot.served.load(Ordering::Relaxed)) {
            (0, 0) => limits.header_timeout,
            (0, _) => limits.idle_timeout,
            _ => limits.stall_timeout,
        };
        let since = Duration::from_millis(slot.clock.millis().saturating_sub(slot.last_active.load(Ordering::Relaxed)));
        if since >= allowed {
            return;
        }
        tokio::time::sleep((allowed - since).max(Duration::from_millis(10))).await;
    }
}

/// The answer to a connection over the cap when none can make room.
async fn shed(mut stream: TcpStream) {
    const BODY: &str = r#"{"type":"urn:state:problem:overloaded","title":"Service Unavailable","status":503,"detail":"every connection is busy; retry shortly","code":"overloaded"}"#;
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nContent-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    // A client that does not read its answer does not hold this task.
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
}

/// Milliseconds since the server started: cheap to store in an atomic.
#[derive(Clone, Copy)]
struct Clock(Instant);

impl Clock {
    fn millis(self) -> u64 {
        u64::try_from(self.0.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// One open connection, as the table sees it.
struct Slot {
    id: u64,
    clock: Clock,
    /// Requests in flight, each until its response body has been sent or dropped.
    busy: AtomicUsize,
    /// Requests answered so far.
    served: AtomicU64,
    /// When bytes last moved, or a request last ended.
    last_active: AtomicU64,
    /// Cancelled to close the connection for a newcomer.
    closing: CancellationToken,
}

impl Slot {
    fn touch(&self) {
        self.last_active.store(self.clock.millis(), Ordering::Relaxed);
    }
}

/// The open connections.
struct Table {
    max: usize,
    clock: Clock,
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Slot>>>,
}

impl Table {
    fn new(max: usize) -> Table {
        Table { max, clock: Clock(Instant::now()), next_id: AtomicU64::new(1), open: Mutex::new(HashMap::new()) }
    }

    /// A slot for a new connection: free, or freed by closing the connection idle longest.
    /// `None` when every open connection has a request in flight.
    fn admit(&self) -> Option<Arc<Slot>> {
        let Ok(mut open) = self.open.lock() else { return None };
        let live = open.values().filter(|slot| !slot.closing.is_cancelled()).count();
        if live >= self.max {
            let idle = open
                .values()
                .filter(|slot| !slot.closing.is_cancelled() && slot.busy.load(Ordering::Relaxed) == 0)
                .min_by_key(|slot| slot.last_active.load(Ordering::Relaxed))?;
            idle.closing.cancel();
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot {
            id,
            clock: self.clock,
            busy: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            last_active: AtomicU64::new(self.clock.millis()),
            closing: CancellationToken::new(),
        });
        open.insert(id, slot.clone());
        Some(slot)
    }

    fn release(&self, slot: &Slot) {
        if let Ok(mut open) = self.open.lock() {
            open.remove(&slot.id);
        }
    }
}

/// The socket, noting when bytes move.
struct Tracked {
    inner: TcpStream,
    slot: Arc<Slot>,
}

impl AsyncRead for Tracked {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.slot.touch();
        }
        polled
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.slot.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.slot.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The router, counting a connection's requests in flight until their bodies are done.
#[derive(Clone)]
struct Busy {
    inner: Router,
    slot: Arc<Slot>,
    /// Who the connection is from: what a caller without a token counts as.
    peer: std::net::IpAddr,
}

/// Held while a request is in flight: from its arrival until its response body is finished
/// (or the request is abandoned).
struct InFlight(Arc<Slot>);

impl InFlight {
    fn begin(slot: &Arc<Slot>) -> InFlight {
        slot.busy.fetch_add(1, Ordering::Relaxed);
        slot.touch();
        InFlight(slot.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.served.fetch_add(1, Ordering::Relaxed);
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

impl tower::Service<Request<hyper::body::Incoming>> for Busy {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, std::convert::Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<hyper::body::Incoming>) -> Self::Future {
        let in_flight = InFlight::begin(&self.slot);
        let mut router = self.inner.clone();
        let mut request = request.map(Body::new);
        request.extensions_mut().insert(crate::quotas::Peer(self.peer));
        Box::pin(async move {
            let response = match tower::Service::call(&mut router, request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            Ok(response.map(|body| crate::holding::holding(body, in_flight)))
        })
    }
}

#[cfg(test)]
mod tests;

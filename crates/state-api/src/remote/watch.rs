//! A watch through the owner. Its batches arrive on the joiner's connection as frames under
//! the watch's call id. When the connection is lost (the owner died or stopped), the watch
//! starts again on the next connection after the last revision it delivered, so a joined
//! process sees every change exactly once, as an in-process one does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use state_core::catalog::Operation;
use state_core::ops::watch::{WatchBatch, WatchRequest};
use state_store::EngineError;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::time::Instant;

use super::{Connection, Pending, Remote, connection, forget};
use crate::local::engine_error;
use crate::reply::{ApiError, ErrorCode};
use crate::wire::{self, Call, ReplyFrame};

/// Batches a joiner holds for a watch whose consumer has not taken them. Past this the watch
/// ends lagged, as an in-process one does when the engine's buffer overflows: one slow
/// consumer never stalls the connection that other calls share.
const WATCH_BUFFER: usize = 1024;

/// A watch's slot on a connection.
pub(super) struct Stream {
    frames: mpsc::Sender<ReplyFrame>,
    /// Set when the consumer fell behind and the slot was dropped for it.
    overflowed: Arc<AtomicBool>,
}

/// Hands a frame to the watch it belongs to. Returns the id of a watch the owner should stop
/// sending (its consumer fell behind, or is gone).
pub(super) fn deliver(pending: &mut Pending, frame: ReplyFrame) -> Option<u64> {
    let id = frame.id;
    let stream = pending.streams.get(&id)?;
    let end = frame.end;
    let unwanted = match stream.frames.try_send(frame) {
        Ok(()) if !end => return None,
        Ok(()) => None,
        Err(TrySendError::Full(_)) => {
            stream.overflowed.store(true, Ordering::SeqCst);
            Some(id)
        }
        Err(TrySendError::Closed(_)) => Some(id),
    };
    pending.streams.remove(&id);
    unwanted
}

/// Tells the owner to stop sending a watch.
pub(super) async fn stop(connection: Arc<Connection>, id: u64) {
    if let Ok(frame) = wire::encode(&Call { id, stop: true, ..Call::default() }) {
        // A failed write means the connection is gone, and the watch with it.
        let _ = connection.write(&frame).await;
    }
}

/// A watch served by the owner; see the module docs.
pub(crate) struct RemoteWatch {
    remote: Remote,
    request: WatchRequest,
    /// The last revision delivered (or the one the watch started after).
    position: u64,
    open: Option<Open>,
    ended: bool,
}

/// The watch as open on one connection.
struct Open {
    connection: Arc<Connection>,
    id: u64,
    frames: mpsc::Receiver<ReplyFrame>,
    overflowed: Arc<AtomicBool>,
}

impl Remote {
    pub(crate) async fn watch(&self, request: WatchRequest) -> Result<RemoteWatch, ApiError> {
        let (open, position) = self.open_watch(&request).await?;
        Ok(RemoteWatch { remote: self.clone(), request, position, open: Some(open), ended: false })
    }

    /// Opens `request` on the live connection, rejoining (and waiting out an owner that is
    /// stopping) until the settle timeout.
    async fn open_watch(&self, request: &WatchRequest) -> Result<(Open, u64), ApiError> {
        let inner = &self.inner;
        let deadline = Instant::now() + inner.config.settle_timeout;
        let call = |id| Call { id, watch: Some(request.clone()), ..Call::default() };
        loop {
            let connection = connection(inner, deadline)
                .await
                .map_err(|e| ApiError::new(ErrorCode::Unavailable, format!("cannot watch: {e}")))?;
            let id = inner.next_call.fetch_add(1, Ordering::Relaxed);
            let frame = wire::encode(&call(id))
                .map_err(|e| ApiError::new(ErrorCode::Internal, format!("cannot encode a watch: {e}")))?;
            let (sender, frames) = mpsc::channel(WATCH_BUFFER);
            let overflowed = Arc::new(AtomicBool::new(false));
            let registered = connection.pending.lock().is_ok_and(|mut pending| {
                !pending.closed
                    && pending.streams.insert(id, Stream { frames: sender, overflowed: overflowed.clone() }).is_none()
            });
            let ack = match registered {
                true => connection.send(id, &frame).await,
                false => Err(super::Lost { sent: false }),
            };
            let ack = match ack {
                Ok(ack) => ack,
                Err(_) => {
                    forget(inner, &connection).await;
                    continue;
                }
            };
            match ack.error {
                // The owner is closing its store: the next one will serve the watch.
                Some(error) if error.code == ErrorCode::Unavailable && Instant::now() < deadline => {
                    connection.drop_stream(id);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Some(error) => {
                    connection.drop_stream(id);
                    return Err(error);
                }
                None => {
                    let position = ack.result.as_ref().and_then(|r| r.get("position")?.as_u64()).ok_or_else(|| {
                        ApiError::new(ErrorCode::Internal, "the owner opened a watch without saying where it starts")
                    })?;
                    return Ok((Open { connection, id, frames, overflowed }, position));
                }
            }
        }
    }
}

impl Connection {
    fn drop_stream(&self, id: u64) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.streams.remove(&id);
        }
    }
}

impl RemoteWatch {
    pub(crate) fn position(&self) -> u64 {
        self.position
    }

    pub(crate) async fn next(&mut self) -> Option<Result<WatchBatch, ApiError>> {
        while !self.ended {
            let open = match &mut self.open {
                Some(open) => open,
                None => {
                    let request = WatchRequest { after_revision: Some(self.position), ..self.request.clone() };
                    match self.remote.open_watch(&request).await {
                        Ok((open, _)) => self.open.insert(open),
                        Err(error) => return self.end(Some(error)),
                    }
                }
            };
            match open.frames.recv().await {
                Some(ReplyFrame { batch: Some(batch), .. }) => {
                    self.position = batch.revision;
                    return Some(Ok(batch));
                }
                Some(ReplyFrame { end: true, error, .. }) => {
                    self.open = None;
                    match error {
                        // The owner is stopping: resume on the one that follows it.
                        Some(error) if error.code == ErrorCode::Unavailable => {}
                        error => return self.end(error),
                    }
                }
                Some(_) => {}
                None if open.overflowed.load(Ordering::SeqCst) => {
                    let lagged = EngineError::WatchLagged { resume_after: self.position };
                    return self.end(Some(engine_error(Operation::StateWatch, lagged)));
                }
                None => {
                    // The connection ended. Unless this client is closing, resume on the next.
                    self.open = None;
                    if self.remote.inner.closing.load(Ordering::SeqCst) {
                        return self.end(None);
                    }
                }
            }
        }
        None
    }

    fn end(&mut self, error: Option<ApiError>) -> Option<Result<WatchBatch, ApiError>> {
        self.ended = true;
        self.open = None;
        error.map(Err)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.connection.drop_stream(self.id);
        if !self.connection.is_closed()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(stop(self.connection.clone(), self.id));
        }
    }
}

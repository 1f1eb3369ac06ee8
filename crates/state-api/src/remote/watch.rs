//! A watch through the owner. Its batches arrive on the joiner's connection as frames under
//! the watch's call id. When the connection is lost (the owner died or stopped), the watch
//! starts again on the next connection after the last revision it delivered, so a joined
//! process sees every change exactly once, as an in-process one does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::catalog::Operation;
use state_core::ops::watch::WatchRequest;
use state_store::EngineError;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{Connection, Pending, Remote, connection, forget};
use crate::local::engine_error;
use crate::reply::{ApiError, ErrorCode};
use crate::resume::{Happening, Resuming, WatchSource};
use crate::wire::{self, Call, ReplyFrame};

/// Bytes of frames a joiner holds for one watch, at most (a frame larger than this alone is
/// still taken, so a watch always moves). The owner sends no more than this window ahead of
/// what the consumer took (flow control), so a slow consumer slows only its own watch; an
/// owner without flow control that overruns it ends the watch lagged, with the revision to
/// resume after. Either way one slow consumer never stalls the connection that other calls
/// share, nor fills this process's memory.
pub(crate) const WATCH_BUFFER_BYTES: usize = 16 * 1024 * 1024;

/// A watch's slot on a connection.
pub(super) struct Stream {
    frames: mpsc::UnboundedSender<(ReplyFrame, usize)>,
    /// Bytes of the frames waiting in `frames`.
    queued: Arc<AtomicUsize>,
    budget: usize,
    /// Set when the consumer fell behind and the slot was dropped for it.
    overflowed: Arc<AtomicBool>,
}

/// Hands a frame (`bytes` long on the wire) to the watch it belongs to. Returns the id of a
/// watch the owner should stop sending (its consumer fell behind, or is gone).
pub(super) fn deliver(pending: &mut Pending, frame: ReplyFrame, bytes: usize) -> Option<u64> {
    let id = frame.id;
    let stream = pending.streams.get(&id)?;
    let end = frame.end;
    let queued = stream.queued.load(Ordering::SeqCst);
    let unwanted = if queued > 0 && queued.saturating_add(bytes) > stream.budget && !end {
        stream.overflowed.store(true, Ordering::SeqCst);
        Some(id)
    } else {
        // Counted before it is sent: the consumer may take it (and subtract it) at once.
        stream.queued.fetch_add(bytes, Ordering::SeqCst);
        match stream.frames.send((frame, bytes)) {
            Ok(()) if !end => return None,
            Ok(()) => None,
            // The consumer is gone.
            Err(_) => Some(id),
        }
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

/// The watch as open on one connection.
pub(crate) struct Open {
    connection: Arc<Connection>,
    id: u64,
    frames: mpsc::UnboundedReceiver<(ReplyFrame, usize)>,
    queued: Arc<AtomicUsize>,
    overflowed: Arc<AtomicBool>,
    /// The window granted to the owner, and what has been taken of it since credit was last
    /// given back.
    budget: usize,
    taken: usize,
}

impl Open {
    /// Counts a frame of `bytes` as taken by the consumer.
    fn took(&mut self, bytes: usize) {
        self.queued.fetch_sub(bytes, Ordering::SeqCst);
        self.taken += bytes;
    }

    /// Gives the owner back the bytes taken once they are a quarter of the window, or once
    /// nothing is left to take (else a frame larger than what remains of the window would
    /// wait for credit that never comes), so it sends on while never having more than the
    /// window outstanding. Run before waiting for the next frame, not after taking one, so a
    /// caller that stops waiting for `next` never loses a frame it was handed.
    async fn give_credit(&mut self) {
        let left = self.queued.load(Ordering::SeqCst);
        if self.taken == 0 || (self.taken < self.budget / 4 && left > 0) {
            return;
        }
        let call = Call { id: self.id, credit: Some(self.taken as u64), ..Call::default() };
        if let Ok(frame) = wire::encode(&call) {
            // A failed write means the connection is gone; the watch resumes on the next.
            let _ = self.connection.write(&frame).await;
        }
        self.taken = 0;
    }
}

impl Remote {
    pub(crate) async fn watch(&self, request: WatchRequest) -> Result<Resuming<Remote>, ApiError> {
        Resuming::start(self.clone(), request).await
    }

    /// Opens `request` on the live connection, rejoining (and waiting out an owner that is
    /// stopping) until the settle timeout.
    async fn open_watch(&self, request: &WatchRequest) -> Result<(Open, u64), ApiError> {
        let inner = &self.inner;
        let deadline = Instant::now() + inner.config.settle_timeout;
        let budget = inner.config.settings.watch_buffer_bytes.map_or(WATCH_BUFFER_BYTES, |b| b.min(WATCH_BUFFER_BYTES));
        let call = |id| Call { id, watch: Some(request.clone()), window: Some(budget as u64), ..Call::default() };
        loop {
            let connection = connection(inner, deadline)
                .await
                .map_err(|e| ApiError::new(ErrorCode::Unavailable, format!("cannot watch: {e}")))?;
            let id = inner.next_call.fetch_add(1, Ordering::Relaxed);
            let frame = wire::encode(&call(id))
                .map_err(|e| ApiError::new(ErrorCode::Internal, format!("cannot encode a watch: {e}")))?;
            let (sender, frames) = mpsc::unbounded_channel();
            let overflowed = Arc::new(AtomicBool::new(false));
            let queued = Arc::new(AtomicUsize::new(0));
            let stream = Stream { frames: sender, queued: queued.clone(), budget, overflowed: overflowed.clone() };
            let registered = connection
                .pending
                .lock()
                .is_ok_and(|mut pending| !pending.closed && pending.streams.insert(id, stream).is_none());
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
                    let open = Open { connection, id, frames, queued, overflowed, budget, taken: 0 };
                    return Ok((open, position));
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

impl WatchSource for Remote {
    type Stream = Open;

    async fn open(&self, request: &WatchRequest, resume_after: Option<u64>) -> Result<(Open, u64), ApiError> {
        match resume_after {
            Some(after) => self.open_watch(&WatchRequest { after_revision: Some(after), ..request.clone() }).await,
            None => self.open_watch(request).await,
        }
    }

    async fn next(&self, open: &mut Open, position: u64) -> Happening {
        open.give_credit().await;
        let Some((frame, bytes)) = open.frames.recv().await else {
            if open.overflowed.load(Ordering::SeqCst) {
                let lagged = EngineError::WatchLagged { resume_after: position };
                return Happening::Ended(Some(engine_error(Operation::StateWatch, lagged)));
            }
            return Happening::Broke;
        };
        open.took(bytes);
        match frame {
            ReplyFrame { batch: Some(batch), .. } => Happening::Batch(batch),
            ReplyFrame { end: true, error, .. } => Happening::Ended(error),
            _ => Happening::Nothing,
        }
    }

    fn closing(&self) -> bool {
        self.inner.closing.load(Ordering::SeqCst)
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

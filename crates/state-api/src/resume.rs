//! The one resuming watcher behind every remote watch. A watch through an owner or a server
//! rides a stream that can break (the owner is replaced, the server restarts, a proxy times
//! out); [`Resuming`] keeps the last revision it delivered and opens the stream again after
//! it, so across any number of breaks every change arrives once, in order, as it does in
//! process. What a stream is and how it is opened is its [`WatchSource`]'s business.

use std::future::Future;

use state_core::ops::watch::{WatchBatch, WatchRequest};

use crate::reply::{ApiError, ErrorCode};

/// Where a resuming watch gets its changes: the owner's socket or a server's event stream.
pub(crate) trait WatchSource: Send {
    type Stream: Send;
    /// Opens `request`, after `resume_after` when resuming, trying until the settle timeout;
    /// with the revision the stream starts after.
    fn open(
        &self,
        request: &WatchRequest,
        resume_after: Option<u64>,
    ) -> impl Future<Output = Result<(Self::Stream, u64), ApiError>> + Send;
    /// What the stream brings next; `position` is the last revision delivered.
    fn next(&self, stream: &mut Self::Stream, position: u64) -> impl Future<Output = Happening> + Send;
    /// This client is closing: a stream that breaks now is not opened again.
    fn closing(&self) -> bool {
        false
    }
}

/// What a stream brought.
pub(crate) enum Happening {
    Batch(WatchBatch),
    /// Every revision up to this one was delivered or had nothing for this watch.
    Position(u64),
    /// The stream broke off: open it again after the last revision delivered.
    Broke,
    /// The stream ended: for good (`None`), or with an error, which ends the watch unless it
    /// is `unavailable` (the owner or server is stopping: the next one serves the watch).
    Ended(Option<ApiError>),
    /// Something this client does not know (an event type added later).
    Nothing,
}

/// A watch that survives its stream breaking; see the module docs.
pub(crate) struct Resuming<S: WatchSource> {
    source: S,
    request: WatchRequest,
    /// The last revision delivered, or the one the watch started after.
    position: u64,
    stream: Option<S::Stream>,
    ended: bool,
}

impl<S: WatchSource> Resuming<S> {
    /// Opens the watch; fails at once if the first stream cannot be had.
    pub(crate) async fn start(source: S, request: WatchRequest) -> Result<Resuming<S>, ApiError> {
        let (stream, position) = source.open(&request, None).await?;
        Ok(Resuming { source, request, position, stream: Some(stream), ended: false })
    }

    pub(crate) fn position(&self) -> u64 {
        self.position
    }

    pub(crate) async fn next(&mut self) -> Option<Result<WatchBatch, ApiError>> {
        while !self.ended {
            let stream = match &mut self.stream {
                Some(stream) => stream,
                None => match self.source.open(&self.request, Some(self.position)).await {
                    Ok((stream, _)) => self.stream.insert(stream),
                    Err(error) => return self.end(Some(error)),
                },
            };
            match self.source.next(stream, self.position).await {
                Happening::Batch(batch) => {
                    self.position = batch.revision;
                    return Some(Ok(batch));
                }
                Happening::Position(position) => self.position = position,
                Happening::Broke => {
                    self.stream = None;
                    if self.source.closing() {
                        return self.end(None);
                    }
                }
                Happening::Ended(Some(error)) if error.code == ErrorCode::Unavailable => self.stream = None,
                Happening::Ended(error) => return self.end(error),
                Happening::Nothing => {}
            }
        }
        None
    }

    fn end(&mut self, error: Option<ApiError>) -> Option<Result<WatchBatch, ApiError>> {
        self.ended = true;
        self.stream = None;
        error.map(Err)
    }
}

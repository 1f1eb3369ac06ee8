//! [`Watcher`]: a change feed through the seam, the same whichever side of it the engine is.
//! Remote watches resume across broken streams ([`crate::resume`]); a followed one
//! ([`crate::Api::follow`]) also watches again after a lag.

use std::future::Future;
use std::pin::Pin;

use state_core::ops::watch::{WatchBatch, WatchRequest};

use crate::catalog::Operation;
use crate::http::HttpRemote;
use crate::local::engine_error;
use crate::remote::Remote;
use crate::reply::{ApiError, ErrorCode};
use crate::resume::Resuming;

/// Every change a watch covers after the revision it started from, one revision at a time, in
/// order, then live ones as they commit. From [`crate::Api::watch`] or [`crate::Api::follow`].
pub struct Watcher {
    inner: Inner,
    /// Set for a followed watch: how to watch again after a lag.
    again: Option<Again>,
}

enum Inner {
    Local(state_store::Watch),
    Owner(Resuming<Remote>),
    Http(Box<Resuming<HttpRemote>>),
}

/// How a followed watch starts over: the same watch, after the revision given (the seam's
/// `watch` for the same caller and request, which `Api::follow` supplies).
pub(crate) type WatchAgain =
    Box<dyn Fn(WatchRequest) -> Pin<Box<dyn Future<Output = Result<Watcher, ApiError>> + Send>> + Send + Sync>;

/// What a followed watch needs to start over after the revision it reached.
struct Again {
    watch: WatchAgain,
    request: WatchRequest,
    /// The revision to start again after, once the watch lagged.
    pending: Option<u64>,
}

impl Watcher {
    pub(crate) fn local(watch: state_store::Watch) -> Watcher {
        Watcher { inner: Inner::Local(watch), again: None }
    }

    pub(crate) fn owner(watch: Resuming<Remote>) -> Watcher {
        Watcher { inner: Inner::Owner(watch), again: None }
    }

    pub(crate) fn http(watch: Resuming<HttpRemote>) -> Watcher {
        Watcher { inner: Inner::Http(Box::new(watch)), again: None }
    }

    /// Makes this watch start again after the last revision it delivered whenever it lags.
    pub(crate) fn followed(mut self, watch: WatchAgain, request: WatchRequest) -> Watcher {
        self.again = Some(Again { watch, request, pending: None });
        self
    }

    /// The next revision's changes, waiting for one. `None` when the store closed for good;
    /// an error ends the watch. A `watch_lagged` error (never from a followed watch) names the
    /// revision to watch again after (`resume_after`): nothing after it was lost.
    ///
    /// Cancel-safe: a call dropped while a followed watch starts again leaves the restart
    /// pending, and the next call finishes it.
    pub async fn next(&mut self) -> Option<Result<WatchBatch, ApiError>> {
        loop {
            if let Some(again) = &mut self.again
                && let Some(resume_after) = again.pending
            {
                // A burst of writes outran this watch: watch again from where it stopped, so
                // no change is missed. History compacted past that point ends it (`compacted`).
                let request = WatchRequest { after_revision: Some(resume_after), ..again.request.clone() };
                let resumed = (again.watch)(request).await;
                again.pending = None;
                match resumed {
                    Ok(resumed) => self.inner = resumed.inner,
                    Err(error) => return Some(Err(error)),
                }
            }
            let next = match &mut self.inner {
                Inner::Local(watch) => {
                    watch.next().await.map(|b| b.map_err(|e| engine_error(Operation::StateWatch, e)))
                }
                Inner::Owner(watch) => watch.next().await,
                Inner::Http(watch) => watch.next().await,
            };
            match (&next, &mut self.again) {
                (Some(Err(error)), Some(again))
                    if error.code == ErrorCode::WatchLagged && error.resume_after.is_some() =>
                {
                    again.pending = error.resume_after;
                }
                _ => return next,
            }
        }
    }

    /// Every revision up to this one has been delivered (or had nothing for this watch):
    /// watch again after it to go on where this watch stopped.
    pub fn position(&self) -> u64 {
        match &self.inner {
            Inner::Local(watch) => watch.position(),
            Inner::Owner(watch) => watch.position(),
            Inner::Http(watch) => watch.position(),
        }
    }
}

//! [`Watcher`]: a change feed through the seam, the same whichever side of it the engine is.

use crate::catalog::Operation;
use state_core::ops::watch::WatchBatch;

use crate::http::HttpWatch;
use crate::local::engine_error;
use crate::remote::RemoteWatch;
use crate::reply::ApiError;

/// Every change a watch covers after the revision it started from, one revision at a time, in
/// order, then live ones as they commit. From [`crate::Api::watch`].
pub struct Watcher {
    inner: Inner,
}

enum Inner {
    Local(state_store::Watch),
    Remote(RemoteWatch),
    Http(Box<HttpWatch>),
}

impl Watcher {
    pub(crate) fn local(watch: state_store::Watch) -> Watcher {
        Watcher { inner: Inner::Local(watch) }
    }

    pub(crate) fn remote(watch: RemoteWatch) -> Watcher {
        Watcher { inner: Inner::Remote(watch) }
    }

    pub(crate) fn http(watch: HttpWatch) -> Watcher {
        Watcher { inner: Inner::Http(Box::new(watch)) }
    }

    /// The next revision's changes, waiting for one. `None` when the store closed for good;
    /// an error ends the watch. A `watch_lagged` error names the revision to watch again after
    /// (`resume_after`): nothing after it was lost.
    pub async fn next(&mut self) -> Option<Result<WatchBatch, ApiError>> {
        match &mut self.inner {
            Inner::Local(watch) => watch.next().await.map(|b| b.map_err(|e| engine_error(Operation::StateWatch, e))),
            Inner::Remote(watch) => watch.next().await,
            Inner::Http(watch) => watch.next().await,
        }
    }

    /// Every revision up to this one has been delivered (or had nothing for this watch):
    /// watch again after it to go on where this watch stopped.
    pub fn position(&self) -> u64 {
        match &self.inner {
            Inner::Local(watch) => watch.position(),
            Inner::Remote(watch) => watch.position(),
            Inner::Http(watch) => watch.position(),
        }
    }
}

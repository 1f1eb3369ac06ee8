//! A response body that keeps something until the body is done, a stream's last byte included:
//! its connection's count of requests in flight, its caller's share of a quota.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;

/// `body`, holding `held` until it is finished or dropped.
pub(crate) struct Holding<G> {
    body: Body,
    _held: G,
}

/// Wraps `body` so that `held` lives as long as it.
pub(crate) fn holding<G: Send + Unpin + 'static>(body: Body, held: G) -> Body {
    Body::new(Holding { body, _held: held })
}

impl<G: Unpin> hyper::body::Body for Holding<G> {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

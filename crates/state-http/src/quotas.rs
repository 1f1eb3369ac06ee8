//! What one caller may hold at once, so that no caller locks the others out: requests in flight
//! (every open connection busy with a request of its, a trickled body or a stream included),
//! and `/v1/watch` streams. A caller is a token; without tokens, the peer's address. Past its
//! share a caller is answered 429 at once, and nobody else notices.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use state_api::auth::Principal;

use crate::Service;
use crate::problem::http_problem;

/// How much one caller may hold at once.
#[derive(Debug, Clone, Copy)]
pub struct QuotaLimits {
    /// Requests in flight, streams included.
    pub requests: usize,
    /// `GET /v1/watch` streams open.
    pub watches: usize,
}

/// The peer a connection came from, put in each request's extensions by the listener.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub(crate) IpAddr);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Request,
    Watch,
}

/// Counts per caller.
pub(crate) struct Quotas {
    limits: QuotaLimits,
    held: Mutex<HashMap<(Kind, String), usize>>,
}

/// One unit of a caller's share, given back when dropped.
pub(crate) struct Held {
    quotas: Arc<Quotas>,
    key: (Kind, String),
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut held = self.quotas.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

impl Quotas {
    pub(crate) fn new(limits: QuotaLimits) -> Quotas {
        Quotas { limits, held: Mutex::new(HashMap::new()) }
    }

    fn take(self: &Arc<Self>, kind: Kind, caller: String) -> Option<Held> {
        let limit = match kind {
            Kind::Request => self.limits.requests,
            Kind::Watch => self.limits.watches,
        };
        let mut held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (kind, caller);
        let count = held.entry(key.clone()).or_default();
        if *count >= limit {
            return None;
        }
        *count += 1;
        Some(Held { quotas: self.clone(), key })
    }

    /// A watch stream for the caller of `request`, or why it is refused (for [`too_many`]).
    pub(crate) fn watch(self: &Arc<Self>, principal: Option<&Principal>, peer: Option<Peer>) -> Result<Held, String> {
        let caller = caller(principal, peer);
        self.take(Kind::Watch, caller.clone()).ok_or_else(|| {
            format!(
                "{caller} already has {} watch streams open, the most one caller may: close one first",
                self.limits.watches
            )
        })
    }
}

/// Who a request counts against: its token's name, or the peer's address without tokens.
fn caller(principal: Option<&Principal>, peer: Option<Peer>) -> String {
    match (principal, peer) {
        (Some(principal), _) => format!("token `{}`", principal.name),
        (None, Some(Peer(address))) => format!("peer {address}"),
        (None, None) => "this caller".to_owned(),
    }
}

/// The answer to a caller past its share: 429, retry in a second.
pub(crate) fn too_many(detail: String) -> Response {
    let mut response = http_problem(StatusCode::TOO_MANY_REQUESTS, "too_many_requests", &detail);
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// The middleware, inside authentication: counts the request against its caller until its
/// response is finished, a stream's last byte included.
pub(crate) async fn admit(State(service): State<Service>, request: Request, next: Next) -> Response {
    let caller = caller(request.extensions().get::<Principal>(), request.extensions().get::<Peer>().copied());
    let Some(held) = service.quotas.take(Kind::Request, caller.clone()) else {
        return too_many(format!(
            "{caller} already has {} requests in flight, the most one caller may: wait for some to finish",
            service.quotas.limits.requests
        ));
    };
    next.run(request).await.map(|body| crate::holding::holding(body, held))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_at_its_share_is_refused_and_others_are_not() {
        let quotas = Arc::new(Quotas::new(QuotaLimits { requests: 2, watches: 1 }));
        let peer = Some(Peer(IpAddr::from([127, 0, 0, 1])));
        let first = quotas.watch(None, peer).ok().unwrap();
        assert!(quotas.watch(None, peer).is_err(), "one watch each");
        assert!(quotas.watch(None, Some(Peer(IpAddr::from([10, 0, 0, 2])))).is_ok(), "another peer has its own");
        drop(first);
        assert!(quotas.watch(None, peer).is_ok(), "a closed watch gives its place back");
        let a = quotas.take(Kind::Request, "a".into());
        let b = quotas.take(Kind::Request, "a".into());
        assert!(a.is_some() && b.is_some() && quotas.take(Kind::Request, "a".into()).is_none());
        assert!(quotas.take(Kind::Request, "b".into()).is_some());
    }
}

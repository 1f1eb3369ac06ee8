//! The REST API v1, read off the catalog: each operation's declaration names its route and
//! where its arguments come from. The router and the OpenAPI document are both built from
//! these routes, so they cannot disagree.
//!
//! Reads are `GET` with the id last in the path (ids may contain `/`, so they take the rest of
//! it); actions on a collection are `POST /v1/<collection>:<verb>` with the arguments in a JSON
//! body, which keeps them apart from any id.

use axum::http::Method;
use state_api::catalog::{Operation, RestBody, RestMethod, RestShape};

use crate::problem::OnConflict;

/// Where the rest of an operation's arguments come from, beyond path parameters.
pub(crate) type Body = RestBody;

/// HTTP conventions a route follows beyond the plain mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    Plain(OnConflict),
    /// `ETag` is the version; `If-None-Match` answers 304.
    KvRead,
    /// `If-Match` is `expected_version`, `If-None-Match: *` is create-only; 412 on conflict.
    KvWrite,
}

#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub(crate) method: Method,
    /// axum syntax: `{name}` is one segment, `{*name}` the rest of the path.
    pub(crate) path: &'static str,
    pub(crate) op: Operation,
    pub(crate) body: Body,
    pub(crate) flavor: Flavor,
}

/// Every operation's route, as its declaration in the catalog gives it.
pub(crate) fn routes() -> Vec<Route> {
    Operation::all()
        .filter_map(|op| {
            let route = op.spec().rest?;
            let method = match route.method {
                RestMethod::Get => Method::GET,
                RestMethod::Put => Method::PUT,
                RestMethod::Post => Method::POST,
                RestMethod::Delete => Method::DELETE,
            };
            let flavor = match route.shape {
                RestShape::Plain => Flavor::Plain(OnConflict::Conflict),
                RestShape::ConflictIsAnAnswer => Flavor::Plain(OnConflict::Ok),
                RestShape::KvRead => Flavor::KvRead,
                RestShape::KvWrite => Flavor::KvWrite,
            };
            Some(Route { method, path: route.path, op, body: route.body, flavor })
        })
        .collect()
}

impl Route {
    /// Names of the path parameters, in order.
    pub(crate) fn path_params(&self) -> Vec<&'static str> {
        self.path
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| name.trim_start_matches('*'))
            .collect()
    }

    /// The path as OpenAPI writes it (`{*key}` becomes `{key}`).
    pub(crate) fn openapi_path(&self) -> String {
        self.path.replace("{*", "{")
    }
}

#[cfg(test)]
mod tests;

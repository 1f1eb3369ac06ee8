//! `/metrics` in the Prometheus text format, and `/healthz` for probes.
//!
//! Requests are counted by route template, method and seam outcome, with a latency histogram
//! per route. Engine figures (commits, batches, commit time, joined clients) come from
//! `state_health`, so they are the owner's whether this server is the owner or joined it.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use state_api::Outcome;
use state_api::auth::{QuotaFigures, StorageQuota};
use state_api::catalog::Operation;

use crate::Service;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 14] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[derive(Default)]
pub(crate) struct Metrics {
    /// By route template. Looked up by `&str`, so counting a request allocates nothing once
    /// its route has been seen.
    routes: Mutex<HashMap<String, RouteStats>>,
}

#[derive(Default)]
struct RouteStats {
    /// (method, outcome) -> requests; a handful per route, so a list.
    requests: Vec<(Method, &'static str, u64)>,
    latency: Histogram,
}

#[derive(Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Metrics {
    fn record(&self, route: &str, method: &Method, outcome: &'static str, elapsed: Duration) {
        let Ok(mut routes) = self.routes.lock() else { return };
        let stats = match routes.get_mut(route) {
            Some(stats) => stats,
            None => routes.entry(route.to_owned()).or_default(),
        };
        match stats.requests.iter_mut().find(|(m, o, _)| m == method && *o == outcome) {
            Some((_, _, n)) => *n += 1,
            None => stats.requests.push((method.clone(), outcome, 1)),
        }
        let histogram = &mut stats.latency;
        let seconds = elapsed.as_secs_f64();
        for (bound, count) in BUCKETS.iter().zip(histogram.counts.iter_mut()) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        histogram.count += 1;
        histogram.sum += seconds;
    }

    fn render(&self, health: Option<&Value>) -> String {
        let mut out = String::new();
        let routes = self.routes.lock().map(|r| {
            let mut sorted: Vec<(String, RouteStats)> = r
                .iter()
                .map(|(k, v)| (k.clone(), RouteStats { requests: v.requests.clone(), latency: v.latency.clone() }))
                .collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            sorted
        });
        let routes = routes.unwrap_or_default();
        out.push_str("# HELP state_http_requests_total HTTP requests by route, method and outcome.\n");
        out.push_str("# TYPE state_http_requests_total counter\n");
        for (route, stats) in &routes {
            let mut requests = stats.requests.clone();
            requests.sort_by(|a, b| (a.0.as_str(), a.1).cmp(&(b.0.as_str(), b.1)));
            for (method, outcome, n) in requests {
                let _ = writeln!(
                    out,
                    "state_http_requests_total{{route=\"{}\",method=\"{}\",outcome=\"{outcome}\"}} {n}",
                    escape(route),
                    escape(method.as_str())
                );
            }
        }
        out.push_str("# HELP state_http_request_duration_seconds Time to answer a request, by route.\n");
        out.push_str("# TYPE state_http_request_duration_seconds histogram\n");
        for (route, stats) in &routes {
            let (route, histogram) = (escape(route), &stats.latency);
            for (bound, count) in BUCKETS.iter().zip(histogram.counts) {
                let _ = writeln!(
                    out,
                    "state_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{bound}\"}} {count}"
                );
            }
            let _ = writeln!(
                out,
                "state_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                histogram.count
            );
            let _ = writeln!(out, "state_http_request_duration_seconds_sum{{route=\"{route}\"}} {}", histogram.sum);
            let _ = writeln!(out, "state_http_request_duration_seconds_count{{route=\"{route}\"}} {}", histogram.count);
        }
        let up = health.is_some();
        gauge(&mut out, "state_up", "Whether the store answered state_health.", if up { 1.0 } else { 0.0 });
        if let Some(health) = health {
            let number = |path: &[&str]| path.iter().try_fold(health, |v, k| v.get(k)).and_then(Value::as_f64);
            let figures: [(&str, &str, &str, &[&str]); 12] = [
                ("state_revision", "gauge", "The store's current revision.", &["revision"]),
                ("state_keys", "gauge", "User keys stored.", &["keys"]),
                ("state_database_bytes", "gauge", "Size of the database file.", &["database_bytes"]),
                ("state_owner_clients", "gauge", "Processes joined to the database's owner.", &["owner", "clients"]),
                ("state_watchers", "gauge", "Change streams open on this server's engine.", &["watchers"]),
                ("state_replicas", "gauge", "Servers running on this PostgreSQL store.", &["replicas"]),
                (
                    "state_write_batches_total",
                    "counter",
                    "Write transactions run (group commit).",
                    &["writes", "batches"],
                ),
                ("state_write_requests_total", "counter", "Write requests carried by them.", &["writes", "requests"]),
                ("state_commits_total", "counter", "Transactions committed (one fsync each).", &["writes", "commits"]),
                (
                    "state_commit_seconds_total",
                    "counter",
                    "Time spent committing (fsync).",
                    &["writes", "commit_seconds"],
                ),
                (
                    "state_write_batch_largest",
                    "gauge",
                    "Most write requests one transaction carried.",
                    &["writes", "largest_batch"],
                ),
                (
                    "state_write_retries_total",
                    "counter",
                    "Batches retried after a transient storage failure.",
                    &["writes", "retries"],
                ),
            ];
            for (name, kind, help, path) in figures {
                if let Some(value) = number(path) {
                    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
                }
            }
        }
        out
    }
}

/// A metric family: its name, kind, help, and how its value is read off `T`.
type Family<T> = (&'static str, &'static str, &'static str, fn(&T) -> f64);

/// Each token's write quota and the writes it had refused, by token name.
fn quotas(out: &mut String, tokens: &state_api::auth::Tokens) {
    let figures: Vec<_> = tokens.write_quotas().map(|(name, quota)| (escape(name), quota.figures())).collect();
    if figures.is_empty() {
        return;
    }
    let families: [Family<QuotaFigures>; 2] = [
        ("state_token_write_quota_per_second", "gauge", "Writes per second each token may make.", |f| {
            f.writes_per_second
        }),
        ("state_token_writes_refused_total", "counter", "Writes refused because the token was past its quota.", |f| {
            f.writes_refused as f64
        }),
    ];
    for (name, kind, help, value) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (token, quota) in &figures {
            let _ = writeln!(out, "{name}{{token=\"{token}\"}} {}", value(quota));
        }
    }
}

/// Each token's storage limits, what it last measured to hold, and the writes refused for
/// them, by token name.
fn storage_quotas(out: &mut String, tokens: &state_api::auth::Tokens) {
    let figures: Vec<_> = tokens.storage_quotas().map(|(name, quota)| (escape(name), quota)).collect();
    if figures.is_empty() {
        return;
    }
    let families: [Family<StorageQuota>; 5] = [
        (
            "state_token_storage_max_keys",
            "gauge",
            "Most live keys and named records under each token's prefixes.",
            |q| q.limits().max_keys.map_or(f64::NAN, |max| max as f64),
        ),
        ("state_token_storage_max_bytes", "gauge", "Most bytes under each token's prefixes.", |q| {
            q.limits().max_bytes.map_or(f64::NAN, |max| max as f64)
        }),
        (
            "state_token_storage_keys",
            "gauge",
            "Live keys and named records under each token's prefixes, as last measured.",
            |q| q.last_usage().map_or(f64::NAN, |usage| usage.keys as f64),
        ),
        ("state_token_storage_bytes", "gauge", "Bytes under each token's prefixes, as last measured.", |q| {
            q.last_usage().map_or(f64::NAN, |usage| usage.bytes as f64)
        }),
        (
            "state_token_storage_refused_total",
            "counter",
            "Writes refused because the token held its storage quota.",
            |q| q.refused() as f64,
        ),
    ];
    for (name, kind, help, value) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (token, quota) in &figures {
            let value = value(quota);
            if !value.is_nan() {
                let _ = writeln!(out, "{name}{{token=\"{token}\"}} {value}");
            }
        }
    }
}

fn gauge(out: &mut String, name: &str, help: &str, value: f64) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
}

/// Label values escape backslash, quote and newline.
fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Counts every request by its route template and outcome.
pub(crate) async fn record(State(service): State<Service>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().cloned();
    let method = request.method().clone();
    let started = Instant::now();
    let response = next.run(request).await;
    let outcome = response.extensions().get::<Outcome>().map_or_else(|| by_status(response.status()), |o| o.name());
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    service.metrics.record(route, &method, outcome, started.elapsed());
    response
}

fn by_status(status: StatusCode) -> &'static str {
    match status.as_u16() {
        200..=399 => "ok",
        401 => "unauthenticated",
        403 => "forbidden",
        404 => "not_found",
        413 => "too_large",
        429 => "limited",
        400..=499 => "invalid",
        _ => "unavailable",
    }
}

async fn health(service: &Service) -> Option<Value> {
    service.api.call(Operation::StateHealth, json!({})).await.body.ok()
}

pub(crate) async fn metrics(
    State(service): State<Service>,
    principal: Option<axum::Extension<state_api::auth::Principal>>,
) -> Response {
    // Store-wide figures: for a token that may read the whole store.
    if let Some(axum::Extension(principal)) = &principal
        && !principal.reads_whole_store()
    {
        let detail = format!("token `{}` does not cover the whole store, which /metrics describes", principal.name);
        return crate::problem::http_problem(StatusCode::FORBIDDEN, "forbidden", &detail);
    }
    let health = health(&service).await;
    let mut text = service.metrics.render(health.as_ref());
    if let Some(tokens) = &service.tokens {
        quotas(&mut text, tokens);
        storage_quotas(&mut text, tokens);
    }
    let mut response = text.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    response
}

pub(crate) async fn healthz(State(service): State<Service>) -> Response {
    match health(&service).await {
        // Anyone may probe; with tokens, anyone learns only that the store answers.
        Some(_) if service.authenticates() => (StatusCode::OK, axum::Json(json!({"status": "ok"}))).into_response(),
        Some(health) => {
            let body = json!({"status": "ok", "revision": health["revision"], "owner_pid": health["owner"]["pid"]});
            (StatusCode::OK, axum::Json(body)).into_response()
        }
        None => (StatusCode::SERVICE_UNAVAILABLE, axum::Json(json!({"status": "unavailable"}))).into_response(),
    }
}

#[cfg(test)]
mod tests;

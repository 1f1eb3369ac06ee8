use std::time::Duration;

use serde_json::json;

use super::*;

#[test]
fn requests_and_latency_render_as_prometheus_text() {
    let metrics = Metrics::default();
    metrics.record("/v1/kv/{*key}", &Method::GET, "ok", Duration::from_micros(700));
    metrics.record("/v1/kv/{*key}", &Method::GET, "ok", Duration::from_millis(30));
    metrics.record("/v1/kv/{*key}", &Method::PUT, "conflict", Duration::from_millis(2));
    let text = metrics.render(Some(&json!({"revision": 7, "owner": {"clients": 2}, "writes": {"commits": 5}})));
    assert!(
        text.contains("state_http_requests_total{route=\"/v1/kv/{*key}\",method=\"GET\",outcome=\"ok\"} 2"),
        "{text}"
    );
    assert!(text.contains("state_http_requests_total{route=\"/v1/kv/{*key}\",method=\"PUT\",outcome=\"conflict\"} 1"));
    // Buckets are cumulative.
    assert!(text.contains("state_http_request_duration_seconds_bucket{route=\"/v1/kv/{*key}\",le=\"0.001\"} 1"));
    assert!(text.contains("state_http_request_duration_seconds_bucket{route=\"/v1/kv/{*key}\",le=\"0.05\"} 3"));
    assert!(text.contains("state_http_request_duration_seconds_count{route=\"/v1/kv/{*key}\"} 3"));
    for line in ["state_up 1", "state_revision 7", "state_owner_clients 2", "state_commits_total 5"] {
        assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
    }
    assert!(metrics.render(None).lines().any(|l| l == "state_up 0"));
}

#[test]
fn label_values_are_escaped() {
    assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

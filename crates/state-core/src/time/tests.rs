use super::*;

#[test]
fn formats_known_instants() {
    let cases = [
        (0, "1970-01-01T00:00:00.000Z", "1970-01-01 00:00:00"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z", "2000-02-29 00:00:00"),
        (1_795_270_500_123, "2026-11-21T14:15:00.123Z", "2026-11-21 14:15:00"),
    ];
    for (millis, rfc, sql) in cases {
        assert_eq!(UnixMillis(millis).to_rfc3339(), rfc);
        assert_eq!(UnixMillis(millis).to_sql_datetime(), sql);
    }
}

#[test]
fn ttl_rounds_up_and_rejects_nonsense() {
    assert_eq!(ttl_millis("ttl_seconds", 1.0), Ok(1000));
    assert_eq!(ttl_millis("ttl_seconds", 0.0001), Ok(1));
    assert_eq!(ttl_millis("ttl_seconds", 0.25), Ok(250));
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, MAX_TTL_SECONDS * 2.0] {
        let err = ttl_millis("ttl_seconds", bad).unwrap_err();
        assert!(err.to_string().contains("ttl_seconds"), "{err}");
    }
}

use super::*;

#[test]
fn formats_known_instants() {
    let cases = [
        (0, "1970-01-01T00:00:00.000Z", "1970-01-01 00:00:00"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z", "2000-02-29 00:00:00"),
        (1_795_270_500_123, "2026-11-21T14:15:00.123Z", "2026-11-21 14:15:00"),
        (253_402_300_799_999, "9999-12-31T23:59:59.999Z", "9999-12-31 23:59:59"),
        (253_402_300_800_000, "10000-01-01T00:00:00.000Z", "10000-01-01 00:00:00"),
    ];
    for (millis, rfc, sql) in cases {
        assert_eq!(UnixMillis(millis).to_rfc3339(), rfc);
        assert_eq!(UnixMillis(millis).to_sql_datetime(), sql);
    }
}

#[test]
fn rfc3339_digits_match_the_calendar_across_the_range() {
    // Every field at its edges: steps of a prime number of milliseconds over four centuries.
    let mut millis = 0u64;
    while millis < 253_402_300_800_000 {
        let text = UnixMillis(millis).to_rfc3339();
        let date = UnixMillis(millis).date();
        let (secs, ms) = (millis / 1000 % 86_400, millis % 1000);
        let expected = format!("{date}T{:02}:{:02}:{:02}.{ms:03}Z", secs / 3600, secs / 60 % 60, secs % 60);
        assert_eq!(text, expected);
        assert_eq!(parse_rfc3339(&text), Some(UnixMillis(millis)));
        millis += 12_345_678_917;
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

#[test]
fn rfc3339_parses_what_it_formats_and_offsets_and_dates() {
    for millis in [0, 951_782_400_000, 1_795_270_500_123, 4_102_444_799_999] {
        assert_eq!(parse_rfc3339(&UnixMillis(millis).to_rfc3339()), Some(UnixMillis(millis)));
    }
    assert_eq!(parse_rfc3339("2026-11-21T15:15:00+01:00"), Some(UnixMillis(1_795_270_500_000)));
    assert_eq!(parse_rfc3339("2026-11-21"), Some(UnixMillis(1_795_219_200_000)));
    for bad in ["", "yesterday", "2026-13-01", "2026-11-21T25:00:00Z", "2026-11-21T10:00:00", "2026-11-21T10:00:00.Z"] {
        assert_eq!(parse_rfc3339(bad), None, "{bad}");
    }
}

#[test]
fn spans_and_since() {
    assert_eq!(parse_span("24h"), Some(86_400_000));
    assert_eq!(parse_span("1week"), Some(604_800_000));
    assert_eq!(parse_span("2 weeks"), Some(1_209_600_000));
    assert_eq!(parse_span("30m"), Some(1_800_000));
    assert_eq!(parse_span("0d"), None);
    assert_eq!(parse_span("7 fortnights"), None);
    let now = UnixMillis(1_000_000_000_000);
    assert_eq!(parse_since("since", "7d", now), Ok(UnixMillis(1_000_000_000_000 - 604_800_000)));
    let error = parse_since("since", "last tuesday", now).unwrap_err();
    assert_eq!(error.argument(), "since");
}

#[test]
fn id_stamps_sort_like_time() {
    assert_eq!(UnixMillis(1_795_270_500_123).to_id_stamp(), "2026-11-21T14-15-00");
    assert_eq!(UnixMillis(1_795_270_500_123).date(), "2026-11-21");
}

//! Wall-clock instants as plain data. The core never reads a clock: callers pass `now`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;

/// Milliseconds since the Unix epoch, UTC.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct UnixMillis(pub u64);

/// The longest TTL we accept: ten years. Anything longer is almost surely a unit mistake
/// (milliseconds passed as seconds), and it keeps `now + ttl` far from overflow.
pub const MAX_TTL_SECONDS: f64 = 10.0 * 365.0 * 24.0 * 3600.0;

impl UnixMillis {
    pub fn plus_millis(self, millis: u64) -> UnixMillis {
        UnixMillis(self.0.saturating_add(millis))
    }

    /// RFC 3339 in UTC with millisecond precision, e.g. `2026-11-21T14:15:00.123Z`.
    ///
    /// Written digit by digit: every entry a read returns carries two of these, and `format!`
    /// made them a tenth of what the owner spends answering a point read.
    pub fn to_rfc3339(self) -> String {
        let secs = self.0 / 1000;
        let (y, mo, d) = civil_from_days((secs / 86_400) as i64);
        let Ok(year @ 0..=9999) = u64::try_from(y) else {
            let (date, secs_of_day, millis) = self.split();
            let (h, m, s) = (secs_of_day / 3600, secs_of_day / 60 % 60, secs_of_day % 60);
            return format!("{date}T{h:02}:{m:02}:{s:02}.{millis:03}Z");
        };
        let secs_of_day = secs % 86_400;
        let mut out = String::with_capacity(24);
        let fields = [
            (year, 4, '-'),
            (u64::from(mo), 2, '-'),
            (u64::from(d), 2, 'T'),
            (secs_of_day / 3600, 2, ':'),
            (secs_of_day / 60 % 60, 2, ':'),
            (secs_of_day % 60, 2, '.'),
            (self.0 % 1000, 3, 'Z'),
        ];
        for (value, width, then) in fields {
            for place in (0..width).rev() {
                out.push(char::from(b'0' + (value / 10u64.pow(place) % 10) as u8));
            }
            out.push(then);
        }
        out
    }

    /// `YYYY-MM-DD HH:MM:SS` in UTC: the shape SQLite's `datetime('now')` produces, which
    /// compatibility profiles of SQLite-backed servers must reproduce.
    pub fn to_sql_datetime(self) -> String {
        let (date, secs_of_day, _) = self.split();
        let (h, m, s) = (secs_of_day / 3600, secs_of_day / 60 % 60, secs_of_day % 60);
        format!("{date} {h:02}:{m:02}:{s:02}")
    }

    fn split(self) -> (String, u64, u64) {
        let secs = self.0 / 1000;
        let days = secs / 86_400;
        let (y, mo, d) = civil_from_days(days as i64);
        (format!("{y:04}-{mo:02}-{d:02}"), secs % 86_400, self.0 % 1000)
    }
}

impl UnixMillis {
    /// The UTC calendar date, `YYYY-MM-DD`.
    pub fn date(self) -> String {
        self.split().0
    }

    /// `YYYY-MM-DDTHH-MM-SS` in UTC: sorts as time does and is safe in a file name or an id.
    pub fn to_id_stamp(self) -> String {
        let (date, secs_of_day, _) = self.split();
        let (h, m, s) = (secs_of_day / 3600, secs_of_day / 60 % 60, secs_of_day % 60);
        format!("{date}T{h:02}-{m:02}-{s:02}")
    }

    pub fn minus_millis(self, millis: u64) -> UnixMillis {
        UnixMillis(self.0.saturating_sub(millis))
    }
}

/// Proleptic Gregorian date to days since 1970-01-01 (inverse of `civil_from_days`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses RFC 3339 (`2026-11-23T10:00:00Z`, fractions and `+01:00` offsets too) or a bare
/// UTC date (`2026-11-23`).
pub fn parse_rfc3339(text: &str) -> Option<UnixMillis> {
    let text = text.trim();
    let num = |s: &str| -> Option<u32> { if s.bytes().all(|b| b.is_ascii_digit()) { s.parse().ok() } else { None } };
    let date = text.get(..10)?;
    let (y, mo, d) = (num(date.get(..4)?)?, num(date.get(5..7)?)?, num(date.get(8..10)?)?);
    if date.as_bytes()[4] != b'-' || date.as_bytes()[7] != b'-' || !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    let days = days_from_civil(i64::from(y), mo, d);
    let rest = &text[10..];
    let (secs_of_day, millis, offset_secs) = if rest.is_empty() {
        (0, 0, 0)
    } else {
        let rest = rest.strip_prefix(['T', 't', ' '])?;
        let (h, mi, s) = (num(rest.get(..2)?)?, num(rest.get(3..5)?)?, num(rest.get(6..8)?)?);
        if rest.as_bytes().get(2) != Some(&b':') || rest.as_bytes().get(5) != Some(&b':') || h > 23 || mi > 59 || s > 60
        {
            return None;
        }
        let mut tail = &rest[8..];
        let mut millis = 0;
        if let Some(fraction) = tail.strip_prefix('.') {
            let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            let first3: String = fraction[..digits].chars().chain("000".chars()).take(3).collect();
            millis = num(&first3)?;
            tail = &fraction[digits..];
        }
        let offset = match tail {
            "Z" | "z" => 0,
            _ => {
                let sign = match tail.as_bytes().first()? {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return None,
                };
                let (oh, om) = (num(tail.get(1..3)?)?, num(tail.get(4..6)?)?);
                if tail.len() != 6 || tail.as_bytes()[3] != b':' {
                    return None;
                }
                sign * i64::from(oh * 3600 + om * 60)
            }
        };
        (i64::from(h * 3600 + mi * 60 + s.min(59)), i64::from(millis), offset)
    };
    let millis = (days * 86_400 + secs_of_day - offset_secs) * 1000 + millis;
    u64::try_from(millis).ok().map(UnixMillis)
}

/// Parses a span like `90m`, `24h`, `7d`, `1week`, `2 weeks`, `30 days` into milliseconds.
pub fn parse_span(text: &str) -> Option<u64> {
    let text = text.trim().to_ascii_lowercase();
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let n: u64 = text.get(..digits)?.parse().ok()?;
    let unit_ms: u64 = match text[digits..].trim() {
        "s" | "sec" | "secs" | "second" | "seconds" => 1000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        "w" | "week" | "weeks" => 7 * 86_400_000,
        _ => return None,
    };
    n.checked_mul(unit_ms).filter(|ms| *ms > 0)
}

/// The instant `since` names: a span back from `now` (`24h`, `7d`, `1week`) or an RFC 3339
/// time or date.
pub fn parse_since(argument: &'static str, since: &str, now: UnixMillis) -> Result<UnixMillis, InvalidInput> {
    if let Some(span) = parse_span(since) {
        return Ok(now.minus_millis(span));
    }
    parse_rfc3339(since).ok_or_else(|| InvalidInput::OutOfRange {
        argument,
        message: format!(
            "`{since}` is neither a span (30m, 24h, 7d, 1week) nor an RFC 3339 time (2026-11-23T10:00:00Z)"
        ),
    })
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A delay or wait given in (possibly fractional) seconds, `default` when absent, checked to be
/// between 0 and `max`, in whole milliseconds.
pub fn seconds_within(
    argument: &'static str,
    seconds: Option<f64>,
    default: f64,
    max: f64,
) -> Result<u64, InvalidInput> {
    let value = seconds.unwrap_or(default);
    if !(0.0..=max).contains(&value) || value.is_nan() {
        return Err(InvalidInput::OutOfRange { argument, message: format!("must be between 0 and {max} seconds") });
    }
    Ok((value * 1000.0) as u64)
}

/// Converts a TTL given in (possibly fractional) seconds to whole milliseconds, rounding up so
/// that a key never expires earlier than asked.
pub fn ttl_millis(argument: &'static str, ttl_seconds: f64) -> Result<u64, InvalidInput> {
    if !ttl_seconds.is_finite() || ttl_seconds <= 0.0 || ttl_seconds > MAX_TTL_SECONDS {
        return Err(InvalidInput::OutOfRange {
            argument,
            message: format!(
                "must be a number of seconds greater than 0 and at most {MAX_TTL_SECONDS} (ten years); got {ttl_seconds}"
            ),
        });
    }
    Ok((ttl_seconds * 1000.0).ceil() as u64)
}

#[cfg(test)]
mod tests;

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
    pub fn to_rfc3339(self) -> String {
        let (date, secs_of_day, millis) = self.split();
        let (h, m, s) = (secs_of_day / 3600, secs_of_day / 60 % 60, secs_of_day % 60);
        format!("{date}T{h:02}:{m:02}:{s:02}.{millis:03}Z")
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

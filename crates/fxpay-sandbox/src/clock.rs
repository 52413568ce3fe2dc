//! The sandbox clock: real time plus an offset that tests move forward with `advance`.
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use time::OffsetDateTime;

/// The latest time the sandbox clock shows: 9999-12-31T23:59:59Z, the last second RFC 3339
/// can write. `advance` stops there, so the clock is always a finite number.
pub const MAX_UNIX: f64 = 253_402_300_799.0;

/// Unix seconds, as `f64`, on the sandbox clock.
#[derive(Debug, Default)]
pub struct Clock {
    /// Bits of an `f64`: the seconds added by `advance`.
    offset: AtomicU64,
}

impl Clock {
    pub fn new() -> Self {
        Self {
            offset: AtomicU64::new(0f64.to_bits()),
        }
    }

    /// Current sandbox time in unix seconds.
    pub fn now(&self) -> f64 {
        let real = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        (real + f64::from_bits(self.offset.load(Ordering::Relaxed))).min(MAX_UNIX)
    }

    /// Moves the clock forward. Negative, zero and non-finite values are ignored:
    /// the sandbox clock never goes backwards. It stops at [`MAX_UNIX`].
    pub fn advance(&self, seconds: f64) {
        if !seconds.is_finite() || seconds <= 0.0 {
            return;
        }
        let _ = self
            .offset
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + seconds).min(MAX_UNIX).to_bits())
            });
    }

    /// The current time as an RFC 3339 timestamp (UTC, millisecond precision).
    pub fn now_rfc3339(&self) -> String {
        rfc3339(self.now())
    }
}

/// Formats unix seconds as RFC 3339 in UTC with exactly three fraction digits
/// (`2023-11-14T22:13:20.250Z`): always milliseconds, trailing zeros kept, so every
/// timestamp has the same shape.
pub fn rfc3339(unix: f64) -> String {
    let millis = (unix * 1000.0).round();
    let nanos = if millis.is_finite() {
        (millis as i128) * 1_000_000
    } else {
        0
    };
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .map(|t| {
            format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                t.year(),
                u8::from(t.month()),
                t.day(),
                t.hour(),
                t.minute(),
                t.second(),
                t.millisecond()
            )
        })
        .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 23.7: after a huge advance the clock was `inf`, answered as `now: null`.
    #[test]
    fn the_clock_stops_at_the_last_rfc3339_second() {
        let c = Clock::new();
        c.advance(1e308);
        c.advance(1e308);
        assert_eq!(c.now(), MAX_UNIX);
        assert_eq!(c.now_rfc3339(), "9999-12-31T23:59:59.000Z");
        c.advance(1.0);
        assert!(c.now().is_finite());
    }

    #[test]
    fn advance_moves_forward_only() {
        let c = Clock::new();
        let a = c.now();
        c.advance(86400.0);
        let b = c.now();
        assert!(b - a >= 86400.0 && b - a < 86410.0);
        c.advance(-100.0);
        c.advance(f64::NAN);
        assert!(c.now() >= b);
    }

    #[test]
    fn formats_rfc3339() {
        assert_eq!(rfc3339(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_700_000_000.25), "2023-11-14T22:13:20.250Z");
        assert_eq!(rfc3339(1_700_000_000.57), "2023-11-14T22:13:20.570Z");
        assert_eq!(rfc3339(1_700_000_000.5), "2023-11-14T22:13:20.500Z");
        assert_eq!(rfc3339(1_700_000_000.123), "2023-11-14T22:13:20.123Z");
        assert_eq!(rfc3339(1_700_000_000.0), "2023-11-14T22:13:20.000Z");
    }
}

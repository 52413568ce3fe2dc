//! The opt-in rate limit (`SandboxConfig::rate_limit`, `--rate-limit N`).
//!
//! The spec does not show the service's limits; the sandbox does what a careful provider
//! does. What is counted: every request under `/v1/` a client's code sends (payments,
//! account information and the token endpoint), whatever its answer. Not counted: the
//! browser pages of login and consent (`/v1/oauth/authorize`, `login`, `consent`, a person's
//! browser), `/openapi.json`, and never the admin API under `/_sandbox/`.
//!
//! How: one token bucket for the whole sandbox, holding at most `N` (rounded up, at least 1)
//! and refilled at `N` per second. A request that finds it empty is answered 429 with
//! `Retry-After` (whole seconds until a token is back, rounded up, at least 1) and the usual
//! `errors` body (`rate:limit:4290`), without being processed. A bucket, not a window per
//! clock second: a client that keeps to `N` per second is never refused because its calls
//! straddle the edge of a second, and no client gets `2N` across one.
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The error code of a 429 the rate limit answered.
pub const CODE: &str = crate::http::errors::code::RATE_LIMITED;

/// How many whole seconds of request counts `stats()["per_second"]` keeps.
pub const KEPT_SECONDS: usize = 600;

/// Whether a request counts against the rate limit.
pub fn counted(path: &str) -> bool {
    path.starts_with("/v1/")
        && !matches!(
            path,
            "/v1/oauth/authorize" | "/v1/oauth/login" | "/v1/oauth/consent"
        )
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The token bucket.
#[derive(Debug)]
pub struct RateLimit {
    per_second: f64,
    capacity: f64,
    bucket: Mutex<Bucket>,
}

impl RateLimit {
    /// `per_second` must be finite and above 0 (the caller checks).
    pub fn new(per_second: f64) -> Self {
        let capacity = per_second.ceil().max(1.0);
        RateLimit {
            per_second,
            capacity,
            bucket: Mutex::new(Bucket {
                tokens: capacity,
                at: Instant::now(),
            }),
        }
    }

    pub fn per_second(&self) -> f64 {
        self.per_second
    }

    /// Takes a token: `None` when there was one, else the `Retry-After` seconds to answer.
    pub fn take(&self) -> Option<u64> {
        self.take_at(Instant::now())
    }

    fn take_at(&self, now: Instant) -> Option<u64> {
        let mut b = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * self.per_second).min(self.capacity);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return None;
        }
        let wait = (1.0 - b.tokens) / self.per_second;
        Some((wait.ceil() as u64).max(1))
    }

    /// A full bucket again (`reset`).
    pub fn refill(&self) {
        let mut b = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        b.tokens = self.capacity;
        b.at = Instant::now();
    }
}

/// The counted requests of each whole second (real time, unix seconds): how many arrived,
/// and how many of them the rate limit refused. Kept for the last [`KEPT_SECONDS`].
#[derive(Debug, Default)]
pub struct Timeline {
    seconds: Mutex<std::collections::VecDeque<(u64, u64, u64)>>,
}

impl Timeline {
    /// Notes one request now; `refused` when the rate limit answered it.
    pub fn note(&self, refused: bool) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs();
        let mut s = self.seconds.lock().unwrap_or_else(|e| e.into_inner());
        match s.back_mut() {
            Some(last) if last.0 == now => {
                last.1 += 1;
                last.2 += u64::from(refused);
            }
            _ => {
                s.push_back((now, 1, u64::from(refused)));
                while s.len() > KEPT_SECONDS {
                    s.pop_front();
                }
            }
        }
    }

    /// `[{"second", "requests", "rate_limited"}, ...]`, oldest first (seconds with no
    /// counted request are left out).
    pub fn to_json(&self) -> serde_json::Value {
        let s = self.seconds.lock().unwrap_or_else(|e| e.into_inner());
        serde_json::Value::Array(
            s.iter()
                .map(|(second, n, refused)| {
                    serde_json::json!({"second": second, "requests": n, "rate_limited": refused})
                })
                .collect(),
        )
    }

    pub fn clear(&self) {
        self.seconds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_then_one_per_refill() {
        let rl = RateLimit::new(50.0);
        let t0 = Instant::now();
        for _ in 0..50 {
            assert_eq!(rl.take_at(t0), None);
        }
        assert_eq!(rl.take_at(t0), Some(1));
        // 20 ms later one token is back, and only one.
        let t1 = t0 + Duration::from_millis(20);
        assert_eq!(rl.take_at(t1), None);
        assert_eq!(rl.take_at(t1), Some(1));
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        let rl = RateLimit::new(0.25);
        let t0 = Instant::now();
        assert_eq!(rl.take_at(t0), None);
        assert_eq!(rl.take_at(t0), Some(4));
        assert_eq!(rl.take_at(t0 + Duration::from_millis(3500)), Some(1));
        assert_eq!(rl.take_at(t0 + Duration::from_secs(4)), None);
    }

    #[test]
    fn what_is_counted() {
        assert!(counted("/v1/oauth/token"));
        assert!(counted("/v1/payments/quotes/x"));
        assert!(counted("/v1/nope"));
        assert!(!counted("/v1/oauth/authorize"));
        assert!(!counted("/v1/oauth/consent"));
        assert!(!counted("/openapi.json"));
        assert!(!counted("/_sandbox/stats"));
    }

    #[test]
    fn the_timeline_counts_by_second() {
        let t = Timeline::default();
        t.note(false);
        t.note(true);
        let j = t.to_json();
        let total: u64 = j
            .as_array()
            .map(|a| a.iter().filter_map(|e| e["requests"].as_u64()).sum())
            .unwrap_or(0);
        let refused: u64 = j
            .as_array()
            .map(|a| a.iter().filter_map(|e| e["rate_limited"].as_u64()).sum())
            .unwrap_or(0);
        assert_eq!((total, refused), (2, 1));
        t.clear();
        assert_eq!(t.to_json(), serde_json::json!([]));
    }
}

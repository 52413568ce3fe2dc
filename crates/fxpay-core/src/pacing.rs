//! `Pacing`: the pace a client keeps once the service answered 429, shared by every request
//! that consults it (a payout's rows), so that a 429 slows the whole payout, not the row.
//!
//! Adaptive, as TCP's congestion control and the AWS SDKs' adaptive retry mode are: additive
//! increase, multiplicative decrease (AIMD).
//! - Until the first 429 nothing is paced (a turn costs two atomic loads).
//! - The first 429 sets the pace to [`BETA`] times the answers that were not 429 in the last
//!   second (what the service did accept), at least [`MIN_RATE`].
//! - A later 429 lowers it by [`BETA`] again, once per congestion: only a 429 to a request
//!   sent after the last lowering counts (the others answer requests sent at the old pace).
//! - Every other answer raises it by `step / pace`, so `step` requests per second more each
//!   second at full pace, where `step` is a tenth of the pace before the last lowering (at
//!   least [`INCREASE`]); one answer never raises it by more than an eighth, so a slow pace
//!   (a service that allows one request every few seconds) creeps up instead of leaping.
//!   Past [`MAX_RATE`] the pacing is off again.
//! - A `Retry-After` holds every request until it has passed, stretched by a random 0 to 50 %
//!   (jitter), so that the requests it held do not all wake at once; past the hold, requests
//!   go one pace apart.
//!
//! One `Pacing` per client (its clones and `with_config` children share it), or the one of the
//! client's `RateLimit` (every client given it shares it). Atomics, not a lock: a fork can never
//! leave it held.
use crate::monotonic::{nanos, origin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The factor a 429 lowers the pace by (CUBIC's).
pub(crate) const BETA: f64 = 0.7;
/// Requests per second the pace grows by, at least, each second of answers that are not 429.
pub(crate) const INCREASE: f64 = 1.0;
/// The lowest pace, in requests per second.
pub(crate) const MIN_RATE: f64 = 0.05;
/// Past this pace (requests per second), pacing is off until the next 429.
pub(crate) const MAX_RATE: f64 = 100_000.0;
/// The longest hold one `Retry-After` asks for.
pub(crate) const HOLD_MAX: Duration = Duration::from_secs(60);
/// A 429 without `Retry-After` holds this long.
pub(crate) const HOLD_DEFAULT: Duration = Duration::from_secs(1);

const SECOND: u64 = 1_000_000_000;

#[derive(Debug, Default)]
pub struct Pacing {
    /// Requests per second allowed now, as `f64` bits; 0: no pacing.
    rate: AtomicU64,
    /// When the last paced request went (nanoseconds from `origin`).
    last: AtomicU64,
    /// No request goes before this (a `Retry-After`, with jitter).
    hold: AtomicU64,
    /// When the pace was last lowered, and what it was before (`f64` bits).
    lowered: AtomicU64,
    before_lowered: AtomicU64,
    /// Answers that were not 429 since `window` began, and the rate of the window before.
    window: AtomicU64,
    accepted: AtomicU64,
    accepted_before: AtomicU64,
    /// 429s seen, and times the pace was lowered (for `stats`).
    throttled: AtomicU64,
    lowerings: AtomicU64,
}

/// A random factor in `[1, 1.5)`.
fn jitter() -> f64 {
    let mut buf = [0u8; 8];
    let r = match getrandom::fill(&mut buf) {
        Ok(()) => u64::from_le_bytes(buf) as f64 / u64::MAX as f64,
        Err(_) => 0.5,
    };
    1.0 + r / 2.0
}

fn at(ns: u64) -> Instant {
    origin() + Duration::from_nanos(ns)
}

impl Pacing {
    pub fn new() -> Self {
        let _ = origin();
        Self::default()
    }

    /// The pace now, in requests per second (`None`: not paced); read by the tests.
    #[cfg(test)]
    pub(crate) fn rate(&self) -> Option<f64> {
        let r = f64::from_bits(self.rate.load(Ordering::Acquire));
        (r > 0.0).then_some(r)
    }

    /// `(429s seen, times the pace was lowered)`; read by the tests.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.throttled.load(Ordering::Relaxed),
            self.lowerings.load(Ordering::Relaxed),
        )
    }

    /// Waits for this request's turn: one pace after the last request that went (and after
    /// the hold). No slot is reserved ahead: a waiter takes the turn only once it is due, so
    /// a new pace applies at once to every request waiting, and the requests a slow pace held
    /// back never come as a burst. `false` (at once, nothing taken) when the turn would come
    /// after `end`.
    pub(crate) async fn turn(&self, end: Option<Instant>) -> bool {
        loop {
            let now = nanos(Instant::now());
            let hold = self.hold.load(Ordering::Acquire);
            let rate = f64::from_bits(self.rate.load(Ordering::Acquire));
            if rate <= 0.0 && hold <= now {
                return true;
            }
            let step = if rate > 0.0 {
                (SECOND as f64 / rate) as u64
            } else {
                0
            };
            let last = self.last.load(Ordering::Acquire);
            let due = last.saturating_add(step).max(hold);
            if due <= now {
                if self
                    .last
                    .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return true;
                }
                continue; // another waiter took this turn
            }
            if end.is_some_and(|end| at(due) > end) {
                return false;
            }
            tokio::time::sleep_until(at(due).into()).await;
        }
    }

    /// Holds every request for `retry_after` (1 s without one, at most 60 s), stretched by a
    /// random 0 to 50 %.
    pub(crate) fn hold_for(&self, retry_after: Option<Duration>) {
        let wait = retry_after.unwrap_or(HOLD_DEFAULT).min(HOLD_MAX);
        let until = nanos(Instant::now() + wait.mul_f64(jitter()));
        self.hold.fetch_max(until, Ordering::AcqRel);
    }

    /// An answer to a request sent at `sent`: a 429 lowers the pace (once per congestion),
    /// any other raises it.
    pub(crate) fn answered(&self, status: u16, sent: Instant) {
        let now = nanos(Instant::now());
        if status != 429 {
            self.accept(now);
            let r = f64::from_bits(self.rate.load(Ordering::Acquire));
            if r > 0.0 {
                let step = (f64::from_bits(self.before_lowered.load(Ordering::Acquire)) / 10.0)
                    .max(INCREASE);
                let raised = r + (step / r).min(r / 8.0);
                let raised = if raised > MAX_RATE { 0.0 } else { raised };
                // A lost race only loses one step of increase.
                let _ = self.rate.compare_exchange(
                    r.to_bits(),
                    raised.to_bits(),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
            }
            return;
        }
        self.throttled.fetch_add(1, Ordering::Relaxed);
        let lowered = self.lowered.load(Ordering::Acquire);
        if nanos(sent) < lowered {
            return; // sent at the old pace: the same congestion
        }
        if self
            .lowered
            .compare_exchange(lowered, now.max(1), Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return; // another 429 lowered it just now
        }
        let r = f64::from_bits(self.rate.load(Ordering::Acquire));
        let base = if r > 0.0 { r } else { self.accepted_rate(now) };
        let lower = (base * BETA).max(MIN_RATE);
        self.before_lowered.store(base.to_bits(), Ordering::Release);
        self.rate.store(lower.to_bits(), Ordering::Release);
        self.lowerings.fetch_add(1, Ordering::Relaxed);
    }

    fn accept(&self, now: u64) {
        let start = self.window.load(Ordering::Acquire);
        if now.saturating_sub(start) >= SECOND
            && self
                .window
                .compare_exchange(start, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            let n = self.accepted.swap(0, Ordering::AcqRel);
            let secs = (now.saturating_sub(start) as f64 / SECOND as f64).max(1.0);
            let per_second = if start == 0 { 0.0 } else { n as f64 / secs };
            self.accepted_before
                .store(per_second.to_bits(), Ordering::Release);
        }
        self.accepted.fetch_add(1, Ordering::AcqRel);
    }

    /// The answers that were not 429 per second, over the last second or so.
    fn accepted_rate(&self, now: u64) -> f64 {
        let start = self.window.load(Ordering::Acquire);
        let n = self.accepted.load(Ordering::Acquire) as f64;
        let secs = (now.saturating_sub(start) as f64 / SECOND as f64).max(1.0);
        let before = f64::from_bits(self.accepted_before.load(Ordering::Acquire));
        (n / secs).max(before)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unpaced_until_the_first_429() {
        let p = Pacing::new();
        assert_eq!(p.rate(), None);
        let t = Instant::now();
        for _ in 0..100 {
            assert!(p.turn(None).await);
        }
        assert!(t.elapsed() < Duration::from_millis(50));
    }

    #[tokio::test]
    async fn a_429_lowers_the_pace_once_per_congestion_and_answers_raise_it() {
        let p = Pacing::new();
        let sent = Instant::now();
        for _ in 0..10 {
            p.answered(200, sent);
        }
        p.answered(429, sent);
        let first = p.rate().expect("paced");
        assert!((first - 10.0 * BETA).abs() < 1e-9, "{first}");
        // Another 429 to a request sent before the lowering: the same congestion.
        p.answered(429, sent);
        assert_eq!(p.rate(), Some(first));
        assert_eq!(p.counts(), (2, 1));
        tokio::time::sleep(Duration::from_millis(2)).await;
        p.answered(429, Instant::now());
        let second = p.rate().expect("paced");
        assert!((second - first * BETA).abs() < 1e-9, "{second}");
        p.answered(200, Instant::now());
        assert!(p.rate().expect("paced") > second);
    }

    #[tokio::test]
    async fn turns_are_spaced_by_the_pace_and_held_by_retry_after() {
        let p = Pacing::new();
        p.answered(429, Instant::now()); // nothing accepted yet: the lowest pace
        assert_eq!(p.rate(), Some(MIN_RATE));
        p.rate.store(20.0f64.to_bits(), Ordering::Release);
        let t = Instant::now();
        for _ in 0..5 {
            assert!(p.turn(None).await);
        }
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(190), "{took:?}");
        p.hold_for(Some(Duration::from_millis(200)));
        let t = Instant::now();
        assert!(p.turn(None).await);
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(200), "{took:?}");
        assert!(took < Duration::from_millis(700), "{took:?}");
        // A turn past the deadline is refused at once.
        p.hold_for(Some(Duration::from_secs(5)));
        let t = Instant::now();
        assert!(
            !p.turn(Some(Instant::now() + Duration::from_millis(100)))
                .await
        );
        assert!(t.elapsed() < Duration::from_millis(50));
    }
}

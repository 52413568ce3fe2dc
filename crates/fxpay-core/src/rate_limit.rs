//! `RateLimit`: a cap on the requests a client sends, `per_second` of them at most.
//!
//! Every request a client sends takes a turn first: each attempt of a call (retries
//! included) and each token request, since a provider's limit counts them all. A replayed
//! exchange (a cassette) sends nothing and takes no turn.
//!
//! The bucket holds one token and refills one every `1 / per_second` seconds: requests are
//! spaced at least that far apart, so no window of one second ever holds more than
//! `per_second` of them, and there is no burst to spend at the start of a second. Turns are
//! handed out in order (each caller reserves the next free slot, then sleeps until it).
//!
//! Shared: a [`SharedBucket`] (the binding's, a script in Redis) hands out the slots of every
//! process that uses it. When it fails (Redis down), the call takes its turn from this
//! process's own bucket instead, and the shared bucket is not asked again for
//! [`SHARED_RETRY`]; the binding logs the outage once.
//!
//! A client without a rate limit pays nothing for this: the transport branches on an
//! `Option` and goes on.
use crate::error::{Error, Result};
use crate::monotonic::{nanos, origin};
use futures_util::future::BoxFuture;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A bucket shared with other processes.
pub trait SharedBucket: Send + Sync {
    /// Reserves the next free slot for one request spaced `interval` after the one before
    /// it, and returns how long from now to wait before sending it.
    fn reserve(&self, interval: Duration) -> BoxFuture<'static, Result<Duration>>;
}

/// After the shared bucket fails, how long calls use the local bucket before asking it again.
pub(crate) const SHARED_RETRY: Duration = Duration::from_secs(1);

/// The most requests per second a rate limit may allow (more is no limit at all).
pub(crate) const MAX_PER_SECOND: f64 = 1e9;
/// The fewest requests per second a rate limit may allow (one every 1,000 s).
pub(crate) const MIN_PER_SECOND: f64 = 0.001;

/// Whether `per_second` is a rate: finite, at least [`MIN_PER_SECOND`] and at most
/// [`MAX_PER_SECOND`]. A `ConfigurationError` naming `name` otherwise.
pub fn check_per_second(name: &str, per_second: f64) -> Result<f64> {
    if per_second.is_finite() && (MIN_PER_SECOND..=MAX_PER_SECOND).contains(&per_second) {
        return Ok(per_second);
    }
    Err(Error::config(format!(
        "{name} must be a number per second of at least 0.001 and at most 1e9, got {}",
        crate::seconds::seconds_text(per_second)
    )))
}

pub struct RateLimit {
    per_second: f64,
    interval: Duration,
    /// When the local bucket's next slot is free (nanoseconds from `origin`). An atomic, not
    /// a lock: a fork can never leave it held.
    next: AtomicU64,
    shared: Option<Arc<dyn SharedBucket>>,
    /// Until when (nanoseconds from `origin`) the shared bucket is left alone after a failure.
    shared_down_until: AtomicU64,
    /// The pace after 429s of every client given this rate limit (`crate::pacing`).
    pub(crate) pacing: crate::pacing::Pacing,
}

impl std::fmt::Debug for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("per_second", &self.per_second)
            .field("shared", &self.shared.is_some())
            .finish()
    }
}

impl RateLimit {
    /// `per_second` must be finite and above 0 (at most [`MAX_PER_SECOND`]).
    pub fn new(per_second: f64) -> Result<Self> {
        Self::build(per_second, None)
    }

    /// A rate limit whose slots come from `bucket`, shared with other processes.
    pub fn shared(per_second: f64, bucket: Arc<dyn SharedBucket>) -> Result<Self> {
        Self::build(per_second, Some(bucket))
    }

    fn build(per_second: f64, shared: Option<Arc<dyn SharedBucket>>) -> Result<Self> {
        let per_second = check_per_second("per_second", per_second)?;
        let _ = origin();
        Ok(RateLimit {
            per_second,
            interval: Duration::from_secs_f64(1.0 / per_second),
            next: AtomicU64::new(0),
            shared,
            shared_down_until: AtomicU64::new(0),
            pacing: crate::pacing::Pacing::new(),
        })
    }

    pub fn per_second(&self) -> f64 {
        self.per_second
    }

    /// Takes the local bucket's next free slot: when the request may go. `None` when that is
    /// past `end`; the slot is then left to others.
    fn reserve_local(&self, now: Instant, end: Option<Instant>) -> Option<Instant> {
        let step = u64::try_from(self.interval.as_nanos()).unwrap_or(u64::MAX);
        let now_ns = nanos(now);
        let mut next = self.next.load(Ordering::Acquire);
        loop {
            let slot = next.max(now_ns);
            let at = now + Duration::from_nanos(slot - now_ns);
            if end.is_some_and(|end| at > end) {
                return None;
            }
            match self.next.compare_exchange_weak(
                next,
                slot.saturating_add(step),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(at),
                Err(seen) => next = seen,
            }
        }
    }

    /// When this request may go: the shared bucket's slot, or the local one's.
    async fn slot(&self, end: Option<Instant>) -> Option<Instant> {
        if let Some(shared) = &self.shared {
            let now = Instant::now();
            if nanos(now) >= self.shared_down_until.load(Ordering::Acquire) {
                match shared.reserve(self.interval).await {
                    Ok(wait) => return Some(Instant::now() + wait),
                    Err(_) => {
                        let until = nanos(Instant::now() + SHARED_RETRY);
                        self.shared_down_until.store(until, Ordering::Release);
                    }
                }
            }
        }
        self.reserve_local(Instant::now(), end)
    }

    /// Waits for this request's turn. A turn that would come after `end` (the call's
    /// deadline) is an error at once, as any wait past a deadline is.
    pub(crate) async fn acquire(
        &self,
        end: Option<Instant>,
        method: &str,
        path: &str,
    ) -> Result<()> {
        match self.slot(end).await {
            Some(at) if end.is_none_or(|end| at <= end) => {
                if at > Instant::now() {
                    tokio::time::sleep_until(at.into()).await;
                }
                Ok(())
            }
            _ => Err(crate::deadline::passed_while(
                &format!(
                    "before {method} {path} could be sent: the client's rate limit had no turn \
                     free in time"
                ),
                true,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn values_that_are_no_rate_are_refused() {
        for bad in [
            0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            1e10,
            1e-20,
            5e-324,
            1e-300,
            0.000_999,
        ] {
            assert!(RateLimit::new(bad).is_err(), "{bad}");
        }
        assert!(RateLimit::new(0.5).is_ok());
        assert!(RateLimit::new(0.001).is_ok());
    }

    #[test]
    fn slots_are_spaced_by_the_interval() {
        let rl = RateLimit::new(40.0).expect("a rate");
        let now = Instant::now();
        let slots: Vec<Instant> = (0..5).filter_map(|_| rl.reserve_local(now, None)).collect();
        assert_eq!(slots.len(), 5);
        assert_eq!(slots[0], now);
        for pair in slots.windows(2) {
            assert_eq!(pair[1] - pair[0], Duration::from_millis(25));
        }
        // A slot past the deadline is refused and left free.
        let end = Some(now + Duration::from_millis(100));
        assert_eq!(rl.reserve_local(now, end), None);
        let end = Some(now + Duration::from_millis(125));
        assert_eq!(
            rl.reserve_local(now, end),
            Some(now + Duration::from_millis(125))
        );
    }

    #[tokio::test]
    async fn requests_wait_their_turn() {
        let rl = RateLimit::new(20.0).expect("a rate");
        let started = Instant::now();
        for _ in 0..5 {
            rl.acquire(None, "GET", "/x").await.expect("a turn");
        }
        // Four intervals of 50 ms after the first, which goes at once.
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(200), "{took:?}");
        assert!(took < Duration::from_millis(400), "{took:?}");
    }

    #[tokio::test]
    async fn a_turn_past_the_deadline_is_an_error() {
        let rl = RateLimit::new(1.0).expect("a rate");
        rl.acquire(None, "GET", "/x")
            .await
            .expect("the first goes at once");
        let end = Some(Instant::now() + Duration::from_millis(100));
        let err = rl.acquire(end, "GET", "/x").await.err();
        assert!(
            matches!(
                err,
                Some(Error::Transport {
                    timeout: true,
                    unsent: true,
                    ..
                })
            ),
            "{err:?}"
        );
    }

    struct Failing(AtomicUsize);

    impl SharedBucket for Failing {
        fn reserve(&self, _interval: Duration) -> BoxFuture<'static, Result<Duration>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Err(Error::Internal("down".into())) })
        }
    }

    #[tokio::test]
    async fn a_failing_shared_bucket_falls_back_to_the_local_one() {
        let failing = Arc::new(Failing(AtomicUsize::new(0)));
        let rl = RateLimit::shared(20.0, failing.clone()).expect("a rate");
        let started = Instant::now();
        for _ in 0..3 {
            rl.acquire(None, "GET", "/x").await.expect("a turn");
        }
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(100), "{took:?}");
        // Asked once, then left alone for SHARED_RETRY.
        assert_eq!(failing.0.load(Ordering::SeqCst), 1);
    }
}

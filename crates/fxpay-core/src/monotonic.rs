//! Instants as nanoseconds from one process-wide origin, so that rate limits and the pace can
//! keep them in atomics (a fork never leaves a lock held).
use std::sync::OnceLock;
use std::time::Instant;

/// Nanoseconds are counted from this instant, the first one any rate limit of the process
/// read. `Instant` is the monotonic clock of the system, so a forked child counts on.
pub(crate) fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

pub(crate) fn nanos(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(origin()).as_nanos()).unwrap_or(u64::MAX)
}

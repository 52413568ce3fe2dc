//! `Paced`: the observer a payout row's calls go through, which tells the client's `Pacing`
//! of every answer (a 429 and its `Retry-After` above all) and passes everything on to the
//! observer it wraps.
use crate::pacing::Pacing;
use crate::transport::{AttemptLog, AttemptStart, ExtraHeaders, Observer};
use std::time::Instant;

/// An observer that tells a `Pacing` of every answer (and passes everything on to the
/// observer it wraps, if any).
pub(crate) struct Paced<'a> {
    pub(crate) pacing: &'a Pacing,
    pub(crate) inner: Option<&'a dyn Observer>,
}

impl Observer for Paced<'_> {
    fn start(&self, start: &AttemptStart<'_>) -> ExtraHeaders {
        self.inner.map(|o| o.start(start)).unwrap_or_default()
    }

    fn attempt(&self, log: &AttemptLog<'_>) {
        if let Some(status) = log.status {
            let sent = Instant::now()
                .checked_sub(log.duration)
                .unwrap_or_else(Instant::now);
            self.pacing.answered(status, sent);
            if status == 429 {
                if let Some(wait) = log.retry_in {
                    self.pacing.hold_for(Some(wait));
                }
            }
        }
        if let Some(o) = self.inner {
            o.attempt(log);
        }
    }
}

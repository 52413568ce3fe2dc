//! One deadline over a whole call (`Client(deadline=)`): every attempt, backoff,
//! `Retry-After` wait and token request inside it. The binding runs each call in
//! [`scope`]; the transport reads [`ends_at`] to shorten an attempt's timeout to what is
//! left and to give up a wait that would end past it, and a call waiting on a token request
//! another call started gives up its wait at [`ends_at`] too.
use std::future::Future;
use std::time::{Duration, Instant};

use crate::error::Error;

/// A call's deadline: when it ends, and the limit it was given.
#[derive(Clone, Copy)]
struct Deadline {
    end: Instant,
    limit: Duration,
}

tokio::task_local! {
    static DEADLINE: Deadline;
}

/// A little past the deadline, the whole call is given up even if something inside it waits
/// on its own (a journal store that does not answer): the transport's and the token cache's
/// own checks, at the deadline itself, come first. Small enough that no call outlives its
/// deadline by 50 ms.
const GRACE: Duration = Duration::from_millis(30);

/// Runs `fut` with a deadline `limit` from now (no deadline with `None`).
pub async fn scope<F, T>(limit: Option<Duration>, fut: F) -> Result<T, Error>
where
    F: Future<Output = Result<T, Error>>,
{
    let Some(limit) = limit else {
        return fut.await;
    };
    let end = Instant::now() + limit;
    match tokio::time::timeout(limit + GRACE, DEADLINE.scope(Deadline { end, limit }, fut)).await {
        Ok(out) => out,
        Err(_) => Err(Error::Transport {
            message: format!(
                "the call's deadline of {:.3} s passed while it waited on something that does \
                 not end by itself in time (its journal or token store)",
                limit.as_secs_f64()
            ),
            timeout: true,
            unsent: false,
        }),
    }
}

/// When the current call must be over, if it has a deadline.
pub(crate) fn ends_at() -> Option<Instant> {
    DEADLINE.try_with(|d| d.end).ok()
}

/// The current call's deadline as it was given, if it has one.
pub(crate) fn limit() -> Option<Duration> {
    DEADLINE.try_with(|d| d.limit).ok()
}

/// The error of a call whose deadline passed while it was `doing` something (for example
/// "before GET /v1/payments/quotes/{id} was sent").
pub(crate) fn passed_while(doing: &str, unsent: bool) -> Error {
    let limit = match limit() {
        Some(l) => format!(" of {:.3} s", l.as_secs_f64()),
        None => String::new(),
    };
    Error::Transport {
        message: format!("the call's deadline{limit} passed {doing}"),
        timeout: true,
        unsent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_that_ignores_the_deadline_is_cut_just_after_it() {
        let started = Instant::now();
        let out: Result<(), Error> = scope(Some(Duration::from_millis(100)), async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(())
        })
        .await;
        let took = started.elapsed();
        assert!(matches!(out, Err(Error::Transport { timeout: true, .. })));
        assert!(took < Duration::from_millis(150), "{took:?}");
    }

    #[tokio::test]
    async fn the_limit_is_known_inside_the_scope() {
        let seen = scope(Some(Duration::from_millis(1500)), async { Ok(limit()) }).await;
        assert_eq!(seen.ok().flatten(), Some(Duration::from_millis(1500)));
        assert_eq!(limit(), None);
    }
}

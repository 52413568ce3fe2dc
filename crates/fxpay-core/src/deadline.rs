//! One deadline over a whole call (`Client(deadline=)`): every attempt, backoff,
//! `Retry-After` wait and token request inside it. The binding runs each call in
//! [`scope`]; the transport reads [`ends_at`] to shorten an attempt's timeout to what is
//! left and to give up a wait that would end past it.
use std::future::Future;
use std::time::{Duration, Instant};

use crate::error::Error;

tokio::task_local! {
    static DEADLINE: Instant;
}

/// A little past the deadline, the whole call is given up even if something inside it waits
/// on its own (a token request another call started): the transport's own checks come first.
const GRACE: Duration = Duration::from_millis(250);

/// Runs `fut` with a deadline `limit` from now (no deadline with `None`).
pub async fn scope<F, T>(limit: Option<Duration>, fut: F) -> Result<T, Error>
where
    F: Future<Output = Result<T, Error>>,
{
    let Some(limit) = limit else {
        return fut.await;
    };
    let end = Instant::now() + limit;
    match tokio::time::timeout(limit + GRACE, DEADLINE.scope(end, fut)).await {
        Ok(out) => out,
        Err(_) => Err(passed(limit, false)),
    }
}

/// When the current call must be over, if it has a deadline.
pub fn ends_at() -> Option<Instant> {
    DEADLINE.try_with(|d| *d).ok()
}

/// The error of a call whose deadline passed (`unsent`: before any byte of its request).
pub fn passed(limit: Duration, unsent: bool) -> Error {
    Error::Transport {
        message: format!("the call's deadline of {:.3} s passed", limit.as_secs_f64()),
        timeout: true,
        unsent,
    }
}

/// The error of a call whose deadline passed, when only its end is known.
pub fn passed_at(unsent: bool) -> Error {
    Error::Transport {
        message: "the call's deadline passed".into(),
        timeout: true,
        unsent,
    }
}

//! A call's future as the bridge carries it, with a panic turned into the call's error.
use crate::errors::panic_message;
use crate::models::out::Out;
use futures_util::FutureExt;
use fxpay_core::Error;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;

/// A call's future, boxed once: it is large, and is only moved as a pointer from then on.
pub type CallFuture = Pin<Box<dyn Future<Output = Result<Out, Error>> + Send>>;

/// `fut` with a panic turned into an error.
pub async fn guarded<F>(fut: F) -> Result<Out, Error>
where
    F: Future<Output = Result<Out, Error>>,
{
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(r) => r,
        Err(payload) => Err(panic_message(payload)),
    }
}

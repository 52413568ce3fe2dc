//! What `with_raw_response` reports about a call: its last answer's status and headers, and
//! how many attempts that request took. The binding runs a raw call in [`scope`]; the
//! transport calls [`record`] with each complete answer. A call outside a scope pays one
//! task-local lookup per request.
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

/// The last answer of a call.
#[derive(Debug, Clone, Default)]
pub struct RawInfo {
    pub status: u16,
    /// (lower-case name, value); a value that is not text is left out.
    pub headers: Vec<(String, String)>,
    /// Attempts of the request that got this answer (1 without a retry).
    pub attempts: u32,
}

/// Where a raw call's answer is kept.
#[derive(Debug, Default)]
pub struct RawSlot(Mutex<Option<RawInfo>>);

impl RawSlot {
    /// The last answer recorded, if any.
    pub fn get(&self) -> Option<RawInfo> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

tokio::task_local! {
    static SLOT: Arc<RawSlot>;
}

/// Runs `fut`, recording its answers in `slot` (nothing recorded with `None`).
pub async fn scope<F: Future>(slot: Option<Arc<RawSlot>>, fut: F) -> F::Output {
    match slot {
        Some(slot) => SLOT.scope(slot, fut).await,
        None => fut.await,
    }
}

/// Records an answer, when the current call is a raw one.
pub(crate) fn record(status: u16, headers: &http::header::HeaderMap, attempts: u32) {
    let _ = SLOT.try_with(|slot| {
        *slot.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(RawInfo {
            status,
            headers: crate::headers::header_pairs(headers),
            attempts,
        });
    });
}

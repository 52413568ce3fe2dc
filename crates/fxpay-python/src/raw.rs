//! `with_raw_response`: `fxpay._raw` arms a capture on this thread (`_raw_arm`) just before
//! it calls a network method; the method's call takes it ([`take_armed`]) and runs in
//! `fxpay_core::raw_scope`, which keeps the last answer's status, headers and attempts.
use fxpay_core::RawSlot;
use pyo3::prelude::*;
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    static ARMED: RefCell<Option<Arc<RawSlot>>> = const { RefCell::new(None) };
}

/// The capture armed on this thread for the call being made, if any (taken: one call).
pub fn take_armed() -> Option<Arc<RawSlot>> {
    ARMED.try_with(|a| a.borrow_mut().take()).ok().flatten()
}

/// What a raw call recorded about its last answer.
#[pyclass(module = "fxpay._fxpay", frozen)]
pub struct RawCapture {
    slot: Arc<RawSlot>,
}

#[pymethods]
impl RawCapture {
    /// The last answer's status; None before any answer.
    #[getter]
    fn status(&self) -> Option<u16> {
        self.slot.get().map(|i| i.status)
    }

    /// The last answer's headers as (lower-case name, value) pairs.
    #[getter]
    fn headers(&self) -> Vec<(String, String)> {
        self.slot.get().map(|i| i.headers).unwrap_or_default()
    }

    /// Attempts of the request that got the last answer.
    #[getter]
    fn attempts(&self) -> u32 {
        self.slot.get().map_or(0, |i| i.attempts)
    }
}

/// Arms a capture for the next network call made on this thread.
#[pyfunction]
pub fn _raw_arm() -> RawCapture {
    let slot = Arc::new(RawSlot::default());
    let _ = ARMED.try_with(|a| *a.borrow_mut() = Some(slot.clone()));
    RawCapture { slot }
}

/// Drops a capture no call took (the call failed before it started).
#[pyfunction]
pub fn _raw_disarm() {
    let _ = ARMED.try_with(|a| a.borrow_mut().take());
}

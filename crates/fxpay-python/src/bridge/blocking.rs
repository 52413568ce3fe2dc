//! Whether this thread is inside a blocking call's wait: the binding's one owner of that
//! question (`fxpay_core::blocking_here`) and of the mark that makes its answer yes.
//!
//! A blocking call's thread polls the call's future itself with the GIL released
//! ([`super::block`]); a hook of the call that runs there (the end of an attempt's span, a
//! DEBUG line of a call made from inside another, an `on_token` callback) keeps its Python
//! work for the wait's end, or runs it inline, instead of handing it to another thread.
use fxpay_core::Blocking;

/// Marks this thread as waiting for a blocking call until the mark is dropped.
pub(super) fn enter() -> Blocking {
    Blocking::enter()
}

/// True while this thread waits for a blocking call (inside [`enter`]'s mark).
pub fn here() -> bool {
    fxpay_core::blocking_here()
}

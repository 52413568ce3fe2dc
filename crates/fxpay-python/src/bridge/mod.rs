//! The bridge: how a call's Rust future becomes a Python result, blocking or awaited.
//!
//! There is one tokio runtime per process (`fxpay_core::runtime()`, made anew after a fork),
//! and every call runs on it. A method's two forms (`twin`) share one future and differ only
//! in how they wait for it:
//!
//! - **Blocking** ([`block`]): the caller's thread polls the future itself inside the runtime
//!   (`Runtime::block_on`) with the GIL released, while the runtime's workers drive the
//!   sockets and timers. The answer is parsed on the caller's thread, which waits anyway.
//!   Every 100 ms it looks for a pending signal, so Ctrl-C ends the wait.
//! - **Awaited** ([`call`]): a coroutine that, on its first step inside the awaiting task,
//!   starts the future as a task of the runtime's workers and yields an asyncio future of the
//!   running loop. The finished task queues its result on the loop's port and rings the
//!   loop's bell once per batch (`port`: a byte on a socket pair the loop watches, or
//!   `call_soon_threadsafe` for a loop that cannot watch one). On the loop's thread, the
//!   port resolves every queued future, and each task takes its result.
//!
//! The one decision is the bell, taken once per loop. No runtime thread ever waits for the
//! GIL, and a panic in a call becomes its error (`guarded`). Whether a thread is inside a
//! blocking wait is asked of [`blocking`] only. Each time a thread holds the GIL again after
//! waiting (a blocking wait waking, a loop's drain), it hands `crate::observe::flush` what the
//! calls left for it (spans to end, DEBUG lines to write): the bridge's one door into
//! `observe`.
mod block;
pub mod blocking;
mod coroutine;
mod guarded;
mod port;
mod waiter;

pub use super::errors::guard;
pub use block::block;
pub use coroutine::{call, ready};

pub use guarded::CallFuture;

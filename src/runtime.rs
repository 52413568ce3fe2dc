//! The one process-wide tokio runtime that serves every client, session and sandbox.
use std::sync::OnceLock;
use tokio::runtime::Runtime;

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The shared multi-threaded runtime, started on first use.
pub fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        let workers = std::thread::available_parallelism()
            .map(|n| n.get().clamp(2, 8))
            .unwrap_or(2);
        match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("fxpay-rt")
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            // Without a runtime nothing can work; there is no caller to hand an error to.
            Err(e) => panic!("fxpay could not start its tokio runtime: {e}"),
        }
    })
}

//! The one process-wide tokio runtime that serves every client, session and sandbox.
use std::sync::OnceLock;
use tokio::runtime::Runtime;

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The shared multi-threaded runtime, started on first use.
pub fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        claim();
        let workers = std::thread::available_parallelism()
            .map(|n| n.get().clamp(2, 8))
            .unwrap_or(2);
        match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("fxpay-rt")
            // Blocking-pool threads (DNS lookups, token-store calls) go away soon after a burst.
            .thread_keep_alive(std::time::Duration::from_secs(2))
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            // Without a runtime nothing can work; there is no caller to hand an error to.
            Err(e) => panic!("fxpay could not start its tokio runtime: {e}"),
        }
    })
}

static OWNER_PID: OnceLock<u32> = OnceLock::new();

/// Records the process that owns the runtime; call when the runtime is first used.
pub fn claim() {
    let _ = OWNER_PID.get_or_init(std::process::id);
}

/// The runtime's worker threads do not survive `fork`: a forked child must not use it.
pub fn check_not_forked() -> crate::error::Result<()> {
    match OWNER_PID.get() {
        Some(pid) if *pid != std::process::id() => Err(crate::error::Error::config(
            "fxpay was started in a parent process and cannot run in a forked child; \
             use the 'spawn' or 'forkserver' start method, or import fxpay only in the children",
        )),
        _ => Ok(()),
    }
}

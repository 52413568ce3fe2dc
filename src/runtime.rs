//! The one process-wide tokio runtime that serves every client, session and sandbox.
use std::sync::OnceLock;
use tokio::runtime::Runtime;

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The shared multi-threaded runtime, started on first use.
pub fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        claim();
        let workers = worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()));
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

/// Runtime workers for a machine with `cores` cores: half of them, 1 to 8. The runtime only
/// moves bytes and parses answers; the other half is left to the Python threads that make
/// the calls (and convert their results), which need a core as much. Each extra worker that
/// has nothing to do still gets woken to look for work, which on a small machine costs more
/// than it brings: on 2 cores one worker halves the context switches of a blocking call.
pub fn worker_threads(cores: usize) -> usize {
    (cores / 2).clamp(1, 8)
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

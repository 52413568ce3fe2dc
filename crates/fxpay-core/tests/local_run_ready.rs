//! `runtime::local::run_ready`, the runs an event loop makes of its thread's runtime when the
//! runtime's epoll descriptor is readable (`fxpay-python`'s `on_loop`).
//!
//! A test binary of its own: `watch_fd` finds the descriptor by comparing this process's
//! descriptors before and after the runtime is built, and gives None when another thread
//! builds a runtime meanwhile, as the unit tests of `fxpay-core` do all the time. Here the
//! tests run one at a time, and nothing else in the process builds one.
#![cfg(target_os = "linux")]

use fxpay_core::runtime::epoll_fd;
use fxpay_core::runtime::local::{run_ready, watch_fd, Start};
use std::future::Future;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Held by each test for its whole run.
fn alone() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Each round, a byte written to a socket is read by a task on this thread's runtime before
/// `run_ready` returns: it runs until the driver has nothing for it, never leaving a woken
/// task behind (which would then wait for some later event).
#[test]
fn run_ready_leaves_no_woken_task_behind() {
    let _alone = alone();
    std::thread::spawn(|| {
        let fd = watch_fd().expect("the runtime's epoll descriptor");
        let (mut ours, theirs) = std::os::unix::net::UnixStream::pair().expect("pair");
        theirs.set_nonblocking(true).expect("nonblocking");
        let seen = Arc::new(AtomicUsize::new(0));
        let count = seen.clone();
        let reader: Start = Box::pin(async move {
            use tokio::io::AsyncReadExt;
            let mut theirs = tokio::net::UnixStream::from_std(theirs).expect("registered");
            let mut byte = [0u8; 1];
            while theirs.read_exact(&mut byte).await.is_ok() {
                count.fetch_add(1, Ordering::SeqCst);
            }
        });
        assert!(run_ready(vec![reader]).is_ok());
        for round in 1..=200 {
            ours.write_all(&[round as u8]).expect("write");
            assert!(
                epoll_fd::ready(fd),
                "round {round}: the descriptor shows the byte"
            );
            assert!(run_ready(Vec::new()).is_ok());
            assert_eq!(seen.load(Ordering::SeqCst), round, "round {round}");
            assert!(!epoll_fd::ready(fd), "round {round}: nothing left waiting");
        }
        // Nothing to do: it returns at once.
        assert!(run_ready(Vec::new()).is_ok());
    })
    .join()
    .expect("the thread");
}

/// A task that registers a timer `after` from now and notes whether the runtime's descriptor
/// was readable right after: tokio's wake-up of its own driver (an eventfd write) is the
/// one thing that can make it so here.
fn timer_task(fd: i32, after: Duration, woke: &Arc<AtomicUsize>) -> Start {
    let woke = woke.clone();
    Box::pin(async move {
        let sleep = tokio::time::sleep(after);
        tokio::pin!(sleep);
        let waker = std::task::Waker::noop();
        let _ = sleep
            .as_mut()
            .poll(&mut std::task::Context::from_waker(waker));
        if epoll_fd::ready(fd) {
            woke.fetch_add(1, Ordering::SeqCst);
        }
    })
}

#[test]
fn a_calls_timeout_started_by_a_run_does_not_wake_the_driver() {
    let _alone = alone();
    std::thread::spawn(|| {
        let fd = watch_fd().expect("the runtime's epoll descriptor");
        let woke = Arc::new(AtomicUsize::new(0));
        // A long-lived timer, as the connection pool's idle timer: kept by a task that
        // never ends.
        let idle: Start = Box::pin(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
        });
        assert!(run_ready(vec![idle]).is_ok());
        for round in 1..=20 {
            // Each run's calls register their timeouts (30 s) and end within the run,
            // so every run parks with only the idle timer left, as a batch of calls
            // that all got their answers does.
            let starts = (0..8)
                .map(|_| timer_task(fd, Duration::from_secs(30), &woke))
                .collect();
            assert!(run_ready(starts).is_ok());
            assert_eq!(woke.load(Ordering::SeqCst), 0, "round {round}");
        }
        // A timer due before the guard still wakes the driver, as it must (the runtime
        // could be parked until the guard is due).
        let soon = Duration::from_millis(100);
        assert!(run_ready(vec![timer_task(fd, soon, &woke)]).is_ok());
        assert_eq!(
            woke.load(Ordering::SeqCst),
            1,
            "a timer due before the guard"
        );
    })
    .join()
    .expect("the thread");
}

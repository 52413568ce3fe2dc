//! A current-thread tokio runtime per calling thread, on which blocking calls do their own
//! I/O while that thread waits for them anyway.
//!
//! A blocking call run as a task on the shared runtime costs two thread hand-offs (the
//! caller wakes a worker, the worker wakes the caller) on top of the network round trip.
//! Driving the call on the caller's own thread removes both, as a sequential Rust loop on a
//! `current_thread` runtime does.
//!
//! Such a runtime only runs while its thread is inside a call, so the connections it owns
//! are not watched in between: a server may close one while the thread runs Python code.
//! Two rules keep that harmless:
//! - A request that is about to take a pooled connection first lets the runtime's I/O
//!   driver run once and the connection tasks act on what it found ([`settle`]), so a
//!   connection the server closed while idle is dropped from the pool before the request can
//!   pick it. That costs four system calls, so it is skipped when the same pool answered
//!   this thread less than [`FRESH`] ago: the connection it would pick is the one that
//!   answered (the pool hands out its most recently used connection first), and no server
//!   closes a keep-alive connection for idleness that fast.
//! - Requests that create something never use these connections (`crate::transport` sends
//!   them through the shared runtime, whose connections are watched all the time), so a
//!   POST never goes out on a connection that may have been closed under it.
use crate::runtime::fork::ProcessBound;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

thread_local! {
    /// This thread's runtime. In a forked child the forking thread's copy belongs to the
    /// parent (its I/O driver is the parent's epoll instance): it is replaced on first use
    /// and forgotten, also when the thread-local is destroyed at exit.
    static LOCAL: RefCell<Option<ProcessBound<Runtime>>> = const { RefCell::new(None) };
    static DRIVING: Cell<bool> = const { Cell::new(false) };
    /// The pool that last answered a request on this thread, and when.
    static LAST_ANSWER: Cell<Option<(usize, Instant)>> = const { Cell::new(None) };
}

/// How recently a pool must have answered for [`settle`] to skip its check. Servers close
/// idle keep-alive connections after seconds (uvicorn 5 s, gunicorn 2 s, nginx 75 s, load
/// balancers 60 s); 20 ms leaves room for a slow network between the server's clock and
/// this one.
pub(crate) const FRESH: Duration = Duration::from_millis(20);

/// Lets this thread's runtime poll its I/O driver and run the connection tasks it woke
/// (for a peer's FIN, say), before a request looks for a pooled connection of `pool` (an
/// identity of the pool: its address). Skipped when `pool` answered this thread within
/// [`FRESH`] (see [`answered`]).
pub async fn settle(pool: usize) {
    if is_fresh(
        LAST_ANSWER.try_with(Cell::get).ok().flatten(),
        pool,
        Instant::now(),
    ) {
        return;
    }
    // `yield_now` on a current-thread runtime resumes only after the runtime has run its
    // other ready tasks and polled the I/O driver; twice, so that the connection tasks the
    // driver woke run before the request looks for a pooled connection.
    tokio::task::yield_now().await;
    tokio::task::yield_now().await;
}

/// Records that `pool` just answered a request on this thread (its connection is back in
/// the pool, alive).
pub fn answered(pool: usize) {
    let _ = LAST_ANSWER.try_with(|last| last.set(Some((pool, Instant::now()))));
}

fn is_fresh(last: Option<(usize, Instant)>, pool: usize, now: Instant) -> bool {
    last.is_some_and(|(p, at)| p == pool && now.saturating_duration_since(at) < FRESH)
}

/// True while this thread is inside [`block_on_for`]: code running there is on the local
/// runtime (and must use the connections that belong to it).
pub fn driving() -> bool {
    DRIVING.try_with(Cell::get).unwrap_or(false)
}

/// Whether this thread can drive a call itself: it is not already doing so (a nested call,
/// e.g. from a callback run inside a call, goes to the shared runtime instead) and its
/// runtime exists or can be started.
pub fn available() -> bool {
    !driving() && with_local(|_| ()).is_some()
}

/// Runs `f` with this thread's runtime of this process, started on first use; None if
/// there is none (the thread is exiting, the runtime cannot start, or it is in use).
fn with_local<R>(f: impl FnOnce(&Runtime) -> R) -> Option<R> {
    LOCAL
        .try_with(|cell| {
            {
                let mut slot = cell.try_borrow_mut().ok()?;
                if !slot.as_ref().is_some_and(ProcessBound::is_current) {
                    // A stale runtime (inherited through a fork) is forgotten as it drops.
                    *slot = Some(ProcessBound::new(build()?));
                }
            }
            let slot = cell.try_borrow().ok()?;
            slot.as_deref().map(f)
        })
        .ok()
        .flatten()
}

fn build() -> Option<Runtime> {
    let (rt, fd) = super::epoll_fd::build_and_find(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(before_park)
            .build()
            .ok()
    })?;
    let _ = WATCH.try_with(|w| w.set(fd));
    Some(rt)
}

thread_local! {
    /// The epoll descriptor of this thread's runtime, when it was found (`epoll_fd`).
    static WATCH: Cell<Option<i32>> = const { Cell::new(None) };
    /// Set while [`run_ready`] runs: the park hook then ends it once nothing is ready.
    static RUNNING_READY: Cell<bool> = const { Cell::new(false) };
    /// Set by the park hook when [`run_ready`] may end.
    static QUIET: Cell<bool> = const { Cell::new(false) };
    static READY_WAKER: RefCell<Option<std::task::Waker>> = const { RefCell::new(None) };
    /// A timer of this thread's runtime that every [`run_ready`] moves to [`GUARD_AHEAD`]
    /// from now (see [`hold_timers_back`]). A forked child's is the parent's: replaced.
    static GUARD: RefCell<Option<ProcessBound<Pin<Box<tokio::time::Sleep>>>>> =
        const { RefCell::new(None) };
}

/// How far ahead [`hold_timers_back`] keeps its timer: less than any call's timeout in
/// practice (the client's default is 30 s), more than one run of the runtime ever takes.
const GUARD_AHEAD: Duration = Duration::from_secs(1);

/// Moves this thread's guard timer to [`GUARD_AHEAD`] from now (making it on first use).
/// Called inside the runtime at the start of every [`run_ready`].
///
/// tokio wakes its I/O driver (a write(2) to its eventfd) whenever a timer is registered
/// that is due before the earliest one the time driver saw when it last parked, since the
/// driver could be asleep until then. Here the driver is never asleep (this thread is
/// running it), but tokio cannot tell. A run whose calls all ended parks with only the
/// connection pool's idle timer left (about a minute away), and then each call the next run
/// starts registers its timeout (30 s away) before that one: one write per call. With the
/// guard due within a second, the runtime always parks with a timer earlier than any call's
/// timeout, and moving the guard later each run is tokio's lock-free path that wakes nothing.
fn hold_timers_back() {
    let at = tokio::time::Instant::now() + GUARD_AHEAD;
    let _ = GUARD.try_with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return;
        };
        match slot.as_mut().filter(|guard| guard.is_current()) {
            Some(guard) => guard.as_mut().reset(at),
            None => {
                let mut guard = Box::pin(tokio::time::sleep_until(at));
                // Registers it now: a `Sleep` that is never polled has no timer yet.
                guard.as_mut().reset(at);
                *slot = Some(ProcessBound::new(guard));
            }
        }
    });
}

/// The descriptor an event loop can watch for this thread's runtime (readable when it has
/// work: I/O, or a task woken from another thread), started on first use; None where it
/// cannot be known (see `epoll_fd`).
pub fn watch_fd() -> Option<i32> {
    with_local(|_| ())?;
    WATCH.try_with(Cell::get).ok().flatten()
}

/// tokio calls this when this thread's runtime has run every ready task and is about to
/// wait for the driver. Inside [`run_ready`], with no event waiting on the driver either,
/// there is nothing left to run: `run_ready`'s future is woken to end it (the runtime then
/// polls the driver once more without waiting, and finds nothing).
fn before_park() {
    if !RUNNING_READY.try_with(Cell::get).unwrap_or(false) {
        return;
    }
    let quiet = WATCH
        .try_with(Cell::get)
        .ok()
        .flatten()
        .is_some_and(|fd| !super::epoll_fd::ready(fd));
    if quiet {
        let _ = QUIET.try_with(|q| q.set(true));
        if let Ok(Some(waker)) = READY_WAKER.try_with(|w| w.borrow_mut().take()) {
            waker.wake();
        }
    }
}

/// A task to start on this thread's runtime.
pub type Start = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// Ends once the park hook finds nothing ready; starts `starts` on its first poll, inside
/// the runtime (no wake-up of the driver per task).
struct UntilQuiet {
    starts: Option<Vec<Start>>,
}

impl Future for UntilQuiet {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if let Some(starts) = self.starts.take() {
            QUIET.set(false);
            hold_timers_back();
            for start in starts {
                drop(tokio::spawn(start));
            }
        } else if QUIET.get() {
            return std::task::Poll::Ready(());
        }
        READY_WAKER.with(|w| *w.borrow_mut() = Some(cx.waker().clone()));
        std::task::Poll::Pending
    }
}

/// Clears [`RUNNING_READY`] however `run_ready` ends.
struct RunningReady;

impl Drop for RunningReady {
    fn drop(&mut self) {
        let _ = RUNNING_READY.try_with(|r| r.set(false));
        let _ = READY_WAKER.try_with(|w| w.borrow_mut().take());
    }
}

/// Starts `starts` on this thread's runtime and runs it, without waiting, until nothing is
/// ready: every task that can make progress has, and the driver has no event waiting. For an
/// event loop that watches [`watch_fd`]. Tasks woken by a timer that expires in the
/// runtime's very last look at the driver run the next time. `Err(starts)`, nothing started,
/// when this thread cannot drive its runtime now (it is inside a blocking call).
pub fn run_ready(starts: Vec<Start>) -> Result<(), Vec<Start>> {
    if driving() {
        return Err(starts);
    }
    let mut starts = Some(starts);
    with_local(|rt| {
        let _driving = Driving::enter();
        RUNNING_READY.set(true);
        let _running = RunningReady;
        rt.block_on(UntilQuiet {
            starts: starts.take(),
        });
    });
    match starts {
        None => Ok(()),
        Some(starts) => Err(starts),
    }
}

/// Clears [`DRIVING`] however `block_on` ends, a panic included.
struct Driving;

impl Driving {
    fn enter() -> Self {
        DRIVING.set(true);
        Driving
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        let _ = DRIVING.try_with(|d| d.set(false));
    }
}

/// Drives `fut` on this thread's runtime for at most `limit`: `Some(output)` if it finished,
/// `None` if the time ran out (poll it again with another call) or this thread has no
/// runtime (check [`available`] first). Only ever poll a given future through this function
/// on one thread: its I/O belongs to that thread's runtime.
pub fn block_on_for<F>(fut: &mut F, limit: Duration) -> Option<F::Output>
where
    F: Future + Unpin,
{
    if driving() {
        return None;
    }
    // On a worker of a multi-threaded runtime (a Python callback run by an awaitable call,
    // which makes a blocking call), the worker first hands its other work to another thread
    // and leaves that runtime, so this thread may wait here without stalling it.
    let on_worker = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if on_worker {
        tokio::task::block_in_place(|| drive(fut, limit))
    } else {
        drive(fut, limit)
    }
}

fn drive<F>(fut: &mut F, limit: Duration) -> Option<F::Output>
where
    F: Future + Unpin,
{
    with_local(|rt| {
        let _driving = Driving::enter();
        // The timer is made inside the runtime, which owns it.
        rt.block_on(async { tokio::time::timeout(limit, fut).await.ok() })
    })
    .flatten()
}

/// Drops `value` (say, an abandoned call) inside this thread's runtime, so that the I/O
/// resources it holds are released where they were registered.
pub fn drop_inside<T>(value: T) {
    let mut value = Some(value);
    let _ = LOCAL.try_with(|cell| {
        if let Ok(slot) = cell.try_borrow() {
            if let Some(rt) = slot.as_ref().filter(|rt| rt.is_current()) {
                let _enter = rt.enter();
                drop(value.take());
            }
        }
    });
    drop(value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// An HTTP/1.1 server on loopback that answers each request with keep-alive and then
    /// closes the connection after `linger` of idleness, counting connections.
    fn closing_server(linger: Duration) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { return };
                count.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let _ = s.set_read_timeout(Some(linger));
                    let mut seen = Vec::new();
                    loop {
                        match s.read(&mut buf) {
                            Ok(0) | Err(_) => return, // peer closed, or idle too long: close
                            Ok(n) => seen.extend_from_slice(&buf[..n]),
                        }
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            seen.drain(..end + 4);
                            let body = b"{\"ok\":true}";
                            let head = format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                                body.len()
                            );
                            if s.write_all(head.as_bytes()).is_err() || s.write_all(body).is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (format!("http://{addr}/"), accepted)
    }

    fn get(url: &str) -> Result<String, reqwest::Error> {
        let client = CLIENT.with(|c| {
            c.get_or_init(|| {
                assert!(available());
                reqwest::Client::builder().build().expect("client")
            })
            .clone()
        });
        let url = url.to_string();
        let pool = 1; // one pool per thread here
        let mut fut = Box::pin(async move {
            settle(pool).await;
            let text = client.get(url).send().await?.text().await;
            if text.is_ok() {
                answered(pool);
            }
            text
        });
        block_on_for(&mut fut, Duration::from_secs(10)).expect("finished in time")
    }

    thread_local! {
        static CLIENT: std::cell::OnceCell<reqwest::Client> = const { std::cell::OnceCell::new() };
    }

    #[test]
    fn a_connection_closed_while_idle_is_not_reused() {
        let (url, accepted) = closing_server(Duration::from_millis(50));
        std::thread::spawn(move || {
            assert!(available());
            assert_eq!(get(&url).expect("first").as_str(), "{\"ok\":true}");
            assert_eq!(
                get(&url).expect("second, same connection").as_str(),
                "{\"ok\":true}"
            );
            assert_eq!(accepted.load(Ordering::SeqCst), 1, "kept alive");
            // The server closes the idle connection while this thread is not in a call.
            std::thread::sleep(Duration::from_millis(300));
            for round in 0..5 {
                assert_eq!(
                    get(&url).unwrap_or_else(|e| panic!("after idling ({round}): {e}")),
                    "{\"ok\":true}"
                );
                std::thread::sleep(Duration::from_millis(300));
            }
            assert_eq!(
                accepted.load(Ordering::SeqCst),
                6,
                "a new connection each time"
            );
        })
        .join()
        .expect("the thread");
    }

    #[test]
    fn only_the_pool_that_just_answered_is_fresh() {
        let now = Instant::now();
        let just = now.checked_sub(FRESH / 2).expect("an instant");
        let stale = now.checked_sub(FRESH).expect("an instant");
        assert!(is_fresh(Some((7, just)), 7, now));
        assert!(is_fresh(Some((7, now)), 7, now));
        assert!(!is_fresh(Some((7, just)), 8, now), "another pool");
        assert!(!is_fresh(Some((7, stale)), 7, now), "FRESH ago is stale");
        assert!(!is_fresh(None, 7, now), "never answered");
    }

    /// Polls `settle(pool)` once: true if it finished without yielding to the runtime.
    fn settles_at_once(pool: usize) -> bool {
        let mut fut = std::pin::pin!(settle(pool));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        fut.as_mut().poll(&mut cx).is_ready()
    }

    #[test]
    fn settle_checks_unless_the_same_pool_answered_just_now() {
        std::thread::spawn(|| {
            assert!(!settles_at_once(3), "nothing answered on this thread yet");
            answered(3);
            assert!(settles_at_once(3), "the pool answered just now");
            assert!(!settles_at_once(4), "another pool");
            std::thread::sleep(FRESH * 2);
            assert!(!settles_at_once(3), "answered too long ago");
        })
        .join()
        .expect("the thread");
    }

    #[test]
    fn nested_calls_are_refused_and_the_flag_resets() {
        std::thread::spawn(|| {
            let mut outer = Box::pin(async {
                assert!(driving());
                assert!(!available());
                let mut inner = Box::pin(async { 1 });
                block_on_for(&mut inner, Duration::from_millis(10))
            });
            assert_eq!(block_on_for(&mut outer, Duration::from_secs(1)), Some(None));
            assert!(!driving());
            let mut slow = Box::pin(async { tokio::time::sleep(Duration::from_secs(5)).await });
            assert_eq!(block_on_for(&mut slow, Duration::from_millis(20)), None);
            assert!(!driving());
            drop_inside(slow);
        })
        .join()
        .expect("the thread");
    }
}

//! One async core behind both call styles: blocking calls run the future on the shared
//! runtime with the GIL released; awaitable calls hand it to asyncio. Panics become errors.
//!
//! Awaitable calls run on the event loop's own thread where the loop can watch that
//! thread's runtime (`crate::on_loop`). Elsewhere they run on the shared runtime, and are
//! resolved on the event loop's own thread. A finished task queues its
//! result and, if no wake-up is already on its way, writes one byte to a socket pair that
//! the loop watches (`loop.add_reader`); the loop then turns every queued result into Python
//! objects in one go. No runtime thread ever waits for the GIL, so a runtime worker is never
//! stalled by Python code and many concurrent calls share a few wake-ups. A loop that cannot
//! watch a descriptor (Windows' proactor loop) is woken the same way, in batches, with
//! `loop.call_soon_threadsafe`: one waker thread per process takes the GIL for that, once per
//! batch, through `exit_gate` (never while the interpreter is shutting down); the runtime
//! workers still never wait for the GIL.
use super::errors::{panic_message, to_pyerr};
use super::models::Out;
use futures_util::FutureExt;
use fxpay_core::error::Error;
use pyo3::prelude::*;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;

/// A call's future, boxed once: it is large, and is only moved as a pointer from then on.
pub type CallFuture = Pin<Box<dyn Future<Output = Result<Out, Error>> + Send>>;

/// `fut` with a panic turned into an error.
async fn guarded(fut: CallFuture) -> Result<Out, Error> {
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(r) => r,
        Err(payload) => Err(panic_message(payload)),
    }
}

/// Runs `fut` to its end with the GIL released and returns its result.
pub fn block<F>(py: Python<'_>, fut: F) -> PyResult<Py<PyAny>>
where
    F: Future<Output = Result<Out, Error>> + Send + 'static,
{
    let fut = guarded(Box::pin(fut));
    let result = if fxpay_core::runtime::local::available() {
        wait_here(py, fut)?
    } else {
        wait_on_shared(py, fut)?
    };
    Ok(result.map_err(to_pyerr)?.into_pyobject(py)?.unbind())
}

/// Aborts a started call's task: what cancelling its asyncio future must also do.
pub enum Abort {
    /// A task of the shared runtime.
    Shared(fxpay_core::runtime::fork::ProcessBound<tokio::task::AbortHandle>),
    /// A call run on the loop's own thread (`on_loop`), started or not yet.
    OnLoop(futures_util::future::AbortHandle),
}

impl Abort {
    /// Aborts the task, unless it belongs to the parent of this (forked) process: there is
    /// nothing to abort then, the parent's runtime never runs here.
    pub fn abort(&self) {
        match self {
            Abort::Shared(handle) if handle.is_current() => handle.abort(),
            Abort::Shared(_) => {}
            Abort::OnLoop(handle) => handle.abort(),
        }
    }
}

/// Starts `fut` on the shared runtime and returns the asyncio future of the running loop
/// that it resolves, and how to abort it (the coroutine that awaits the future does, when it
/// is cancelled or closed).
pub fn awaitable(py: Python<'_>, fut: CallFuture) -> PyResult<(Py<PyAny>, Abort)> {
    awaitable::spawn(py, guarded(fut))
}

/// How often a blocking call looks for a pending signal (Ctrl-C).
const SIGNAL_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// Drives the call on this thread's own runtime (`fxpay_core::runtime::local`) with the GIL
/// released, looking up every SIGNAL_CHECK for a pending signal, so Ctrl-C
/// (KeyboardInterrupt, e.g. Jupyter's interrupt) ends the wait and abandons the call.
fn wait_here<F>(py: Python<'_>, fut: F) -> PyResult<Result<Out, Error>>
where
    F: Future<Output = Result<Out, Error>> + Send,
{
    let mut fut = Box::pin(fut);
    loop {
        let waited = py.detach(|| {
            std::panic::catch_unwind(AssertUnwindSafe(|| {
                fxpay_core::runtime::local::block_on_for(&mut fut, SIGNAL_CHECK)
            }))
        });
        // The spans of the attempts that ended meanwhile (their ends wait for the GIL).
        super::observe::spans::flush_ended(py);
        match waited {
            Ok(Some(result)) => return Ok(result),
            Ok(None) => {
                if let Err(interrupted) = py.check_signals() {
                    fxpay_core::runtime::local::drop_inside(fut);
                    return Err(interrupted);
                }
            }
            Err(payload) => {
                fxpay_core::runtime::local::drop_inside(fut);
                return Ok(Err(panic_message(payload)));
            }
        }
    }
}

/// Runs the call as a task on the shared runtime and waits for it with the GIL released,
/// watching for signals as `wait_here` does: for threads that cannot drive a call
/// themselves (a call made from inside another call's callback).
fn wait_on_shared<F>(py: Python<'_>, fut: F) -> PyResult<Result<Out, Error>>
where
    F: Future<Output = Result<Out, Error>> + Send + 'static,
{
    wait_shared(py, fut, None)
}

/// Runs `fut` on the shared runtime with the GIL released, as a call that can be asked to
/// stop: the first Ctrl-C sets `stop` and waits for `fut` to end (it starts nothing new and
/// lets what runs finish), then raises the KeyboardInterrupt; a second Ctrl-C abandons it.
pub fn block_until_stopped<F>(
    py: Python<'_>,
    fut: F,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> PyResult<Py<PyAny>>
where
    F: Future<Output = Result<Out, Error>> + Send + 'static,
{
    let result = wait_shared(py, guarded(Box::pin(fut)), Some(stop))?;
    Ok(result.map_err(to_pyerr)?.into_pyobject(py)?.unbind())
}

/// Waits for `fut` as a task of the shared runtime. A signal abandons it (its task aborted),
/// unless `stop` is given: then the first signal sets `stop`, the wait goes on until `fut`
/// ends, and the signal's exception is raised; a second signal abandons it.
fn wait_shared<F>(
    py: Python<'_>,
    fut: F,
    stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
) -> PyResult<Result<Out, Error>>
where
    F: Future<Output = Result<Out, Error>> + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let task = fxpay_core::runtime::runtime().spawn(async move {
        let _ = tx.send(fut.await);
    });
    let mut rx = rx;
    let mut interrupted: Option<PyErr> = None;
    loop {
        // The receiver goes into the GIL-free closure and comes back out of it.
        let (waited, back) = py.detach(move || (rx.recv_timeout(SIGNAL_CHECK), rx));
        rx = back;
        // The spans of the attempts that ended meanwhile (their ends wait for the GIL).
        super::observe::spans::flush_ended(py);
        match waited {
            Ok(result) => {
                super::observe::logging::flush_deferred(py);
                return match interrupted {
                    Some(e) => Err(e),
                    None => Ok(result),
                };
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    match &stop {
                        Some(flag) if interrupted.is_none() => {
                            flag.store(true, std::sync::atomic::Ordering::Release);
                            interrupted = Some(e);
                        }
                        _ => {
                            task.abort();
                            super::observe::logging::flush_deferred(py);
                            return Err(e);
                        }
                    }
                }
            }
            // The future is panic-guarded, so the task cannot have ended without sending.
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Ok(Err(Error::Internal("the call did not finish".into())))
            }
        }
    }
}

pub use super::errors::guard;

mod awaitable {
    use super::*;
    use crate::deliver::deliver;
    use crate::exit_gate;
    use fxpay_core::runtime::fork::ProcessBound;
    use fxpay_core::wakeup;
    use pyo3::intern;
    use std::cell::RefCell;
    #[cfg(unix)]
    use std::io::{ErrorKind, Read, Write};
    #[cfg(unix)]
    use std::os::fd::AsRawFd;
    #[cfg(unix)]
    use std::os::unix::net::UnixStream;
    use std::sync::Arc;

    /// A finished call: the asyncio future to resolve and what to resolve it with.
    type Done = (Py<PyAny>, Result<Out, Error>);

    /// How a runtime thread tells the loop that results are waiting.
    enum Wake {
        /// One byte on a socket pair the loop watches (`loop.add_reader`): no Python.
        /// Bound to its process: a forked child never closes the parent's socket pair.
        #[cfg(unix)]
        Socket(ProcessBound<UnixStream>),
        /// For loops that cannot watch a descriptor (Windows' proactor loop): the loop's
        /// `call_soon_threadsafe`, called through the exit gate (never once the interpreter
        /// is shutting down).
        Threadsafe(Py<PyAny>),
    }

    /// One event loop's inbox, shared with the runtime threads: the queue and its
    /// "wake-up on its way" flag (`fxpay_core::wakeup`, model-checked with loom), and how
    /// to wake the loop.
    pub(super) struct Inbox {
        pending: wakeup::Inbox<Done>,
        wake: Wake,
    }

    impl Inbox {
        /// Called on a runtime thread. Queues the result and, unless a wake-up is on its
        /// way already, sends one: many results that finish close together share one.
        fn push(self: &Arc<Self>, done: Done) {
            if !self.pending.push(done) {
                return;
            }
            match &self.wake {
                #[cfg(unix)]
                Wake::Socket(writer) => {
                    // The socket is non-blocking and holds at most a few bytes: a failed
                    // write can only mean the loop is gone, and then nobody waits.
                    let _ = (&**writer).write(&[1]);
                }
                Wake::Threadsafe(_) => waker::wake(self.clone()),
            }
        }

        /// On the waker thread: schedules the drain with the loop's `call_soon_threadsafe`.
        fn wake_now(self: Arc<Self>) {
            let Wake::Threadsafe(call_soon_threadsafe) = &self.wake else {
                return;
            };
            // None: the interpreter is shutting down, nobody waits for the result. An
            // error: the loop is closed, the same.
            let _ = exit_gate::attach_kept(|py| {
                let drain = LoopDrain {
                    inbox: self.clone(),
                    #[cfg(unix)]
                    reader: None,
                };
                Py::new(py, drain).and_then(|d| call_soon_threadsafe.call1(py, (d,)))
            });
        }
    }

    /// One thread per process that takes the GIL to wake loops without `add_reader`, so that
    /// no runtime worker ever waits for the GIL (the loop's thread holds it while it runs):
    /// the worker hands the inbox over and goes on with other calls, whose results then join
    /// the same batch.
    mod waker {
        use super::Inbox;
        use fxpay_core::runtime::fork::PerProcess;
        use std::sync::mpsc::Sender;
        use std::sync::Arc;

        /// The waker's queue, made anew (with its thread) in a forked child. Lock-free: a
        /// lock held by a thread of the parent at `fork()` would stay locked in the child
        /// forever (a `Mutex` here made 4 of 40 forked children hang on their first wake).
        static QUEUE: PerProcess<Sender<Arc<Inbox>>> = PerProcess::empty();

        pub(super) fn wake(inbox: Arc<Inbox>) {
            let queue = QUEUE.get_or_try_make(|| {
                let (tx, rx) = std::sync::mpsc::channel::<Arc<Inbox>>();
                std::thread::Builder::new()
                    .name("fxpay-loop-waker".into())
                    .spawn(move || {
                        while let Ok(inbox) = rx.recv() {
                            inbox.wake_now();
                        }
                    })
                    .map(|_| tx)
            });
            match queue {
                Ok(tx) => {
                    if let Err(back) = tx.send(inbox) {
                        back.0.wake_now();
                    }
                }
                // No thread could be started: wake from here.
                Err(_) => inbox.wake_now(),
            }
        }
    }

    /// Resolves every queued future, on the loop's thread: the reader callback registered
    /// with the loop, or the callback a `call_soon_threadsafe` wake-up schedules.
    #[pyclass(frozen, module = "fxpay._fxpay")]
    struct LoopDrain {
        inbox: Arc<Inbox>,
        #[cfg(unix)]
        reader: Option<ProcessBound<UnixStream>>,
    }

    #[pymethods]
    impl LoopDrain {
        fn __call__(&self, py: Python<'_>) {
            #[cfg(unix)]
            if let Some(reader) = &self.reader {
                let mut buf = [0u8; 64];
                loop {
                    match (&**reader).read(&mut buf) {
                        Ok(n) if n == buf.len() => continue,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        _ => break,
                    }
                }
            }
            // Clears the flag before taking the queue: a result queued after the take then
            // sends a new wake-up, so none is ever left waiting.
            let items = self.inbox.pending.take();
            // The spans of the attempts that ended, before their calls' results are seen.
            super::super::observe::spans::flush_loop_ended(py);
            for (fut, result) in items {
                deliver(py, fut.bind(py), result);
            }
        }
    }

    /// The running loop of this thread and how its futures are resolved.
    struct LoopEntry {
        event_loop: Py<PyAny>,
        create_future: Py<PyAny>,
        inbox: Arc<Inbox>,
    }

    thread_local! {
        // An event loop runs on one thread: remember the last one seen here. In a forked
        // child the entry (and its socket pair) is the parent's: it is replaced on first use
        // and forgotten, never closed.
        static CURRENT: RefCell<Option<ProcessBound<LoopEntry>>> = const { RefCell::new(None) };
    }

    /// An inbox woken by a socket pair the loop watches; None when the loop cannot watch a
    /// descriptor (`add_reader` raises NotImplementedError).
    #[cfg(unix)]
    fn socket_inbox(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Option<Arc<Inbox>>> {
        let (reader, writer) = UnixStream::pair()
            .and_then(|(r, w)| {
                r.set_nonblocking(true)?;
                w.set_nonblocking(true)?;
                Ok((r, w))
            })
            .map_err(|e| to_pyerr(Error::Internal(format!("cannot make a socket pair: {e}"))))?;
        let fd = reader.as_raw_fd();
        let inbox = Arc::new(Inbox {
            pending: wakeup::Inbox::new(),
            wake: Wake::Socket(ProcessBound::new(writer)),
        });
        let drain = Py::new(
            py,
            LoopDrain {
                inbox: inbox.clone(),
                reader: Some(ProcessBound::new(reader)),
            },
        )?;
        // The loop keeps the drain (and so the reader) for as long as it is registered.
        match event_loop.call_method1(intern!(py, "add_reader"), (fd, drain)) {
            Ok(_) => Ok(Some(inbox)),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyNotImplementedError>(py) => Ok(None),
            Err(e) => Err(e),
        }
    }

    #[cfg(not(unix))]
    fn socket_inbox(
        _py: Python<'_>,
        _event_loop: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Arc<Inbox>>> {
        Ok(None)
    }

    fn entry_for(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<LoopEntry> {
        let create_future = event_loop.getattr(intern!(py, "create_future"))?.unbind();
        let inbox = match socket_inbox(py, event_loop)? {
            Some(inbox) => inbox,
            None => Arc::new(Inbox {
                pending: wakeup::Inbox::new(),
                wake: Wake::Threadsafe(
                    event_loop
                        .getattr(intern!(py, "call_soon_threadsafe"))?
                        .unbind(),
                ),
            }),
        };
        Ok(LoopEntry {
            event_loop: event_loop.clone().unbind(),
            create_future,
            inbox,
        })
    }

    /// `event_loop`'s `create_future` and inbox, set up on first use.
    fn current<'py>(
        py: Python<'py>,
        event_loop: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyAny>, Arc<Inbox>)> {
        CURRENT.with(|cell| {
            let mut slot = cell.borrow_mut();
            match &*slot {
                Some(e) if e.is_current() && e.event_loop.bind(py).is(event_loop) => {}
                _ => *slot = Some(ProcessBound::new(entry_for(py, event_loop)?)),
            }
            match &*slot {
                Some(e) => Ok((e.create_future.bind(py).clone(), e.inbox.clone())),
                None => Err(to_pyerr(Error::Internal("no event loop entry".into()))),
            }
        })
    }

    pub fn spawn<F>(py: Python<'_>, fut: F) -> PyResult<(Py<PyAny>, Abort)>
    where
        F: Future<Output = Result<Out, Error>> + Send + 'static,
    {
        let event_loop = crate::running_loop::running_loop(py)?;
        if let Some(run) = crate::on_loop::runner_for(py, &event_loop)? {
            let (py_fut, abort) = crate::on_loop::start(py, &event_loop, run, fut)?;
            return Ok((py_fut, Abort::OnLoop(abort)));
        }
        let (create_future, inbox) = current(py, &event_loop)?;
        let py_fut = create_future.call0()?;
        let target = py_fut.clone().unbind();
        let task = fxpay_core::runtime::runtime().spawn(async move {
            // Spans of its attempts are ended by the drain below, on the loop's thread.
            let result = super::super::observe::spans::ended_on_loop(fut).await;
            inbox.push((target, result));
        });
        // No done-callback on the future: the coroutine awaiting it (`call::Call`) aborts
        // the task when it is cancelled, which spares the loop a callback per call.
        Ok((
            py_fut.unbind(),
            Abort::Shared(ProcessBound::new(task.abort_handle())),
        ))
    }
}

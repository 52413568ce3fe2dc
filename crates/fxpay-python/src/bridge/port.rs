//! One event loop's port: where the runtime's workers leave finished awaitable calls, and
//! the bell that tells the loop to collect them.
//!
//! A finished call's task queues its result; only the push that finds no wake-up on its way
//! rings the bell (`fxpay_core::WakeupInbox`, model-checked with loom), so calls that end close
//! together share one. The bell is one byte on a socket pair the loop watches
//! (`loop.add_reader`): no runtime thread ever waits for the GIL. A loop that cannot watch a
//! descriptor (Windows' proactor loop) is rung with `loop.call_soon_threadsafe` instead, from
//! one waker thread per process (through `exit_gate`), so the workers still never wait for
//! the GIL. Either way, the loop's thread then resolves every queued future in one go.
use super::waiter::Waiter;
use crate::errors::to_pyerr;
use crate::exit_gate;
use crate::models::out::Out;
use fxpay_core::{Error, ProcessBound, WakeupInbox};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use std::cell::RefCell;
use std::future::Future;
#[cfg(unix)]
use std::io::{ErrorKind, Read, Write};
#[cfg(unix)]
use std::os::fd::AsRawFd;
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::sync::Arc;

/// A finished call: the waiter of the task that awaits it, and the call's result.
type Done = (Py<Waiter>, Result<Out, Error>);

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

/// One event loop's inbox, shared with the runtime threads, and how to wake the loop.
struct Inbox {
    pending: WakeupInbox<Done>,
    wake: Wake,
}

impl Inbox {
    /// On a runtime thread: queues the result and, unless a wake-up is on its way, sends one.
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
        let _ = exit_gate::attach(|py| {
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
    use fxpay_core::PerProcess;
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

/// Resolves every queued waiter, on the loop's thread: the reader callback registered with
/// the loop, or the callback a `call_soon_threadsafe` wake-up schedules. An exception that
/// a task's wake-up let out (`KeyboardInterrupt`) leaves it, after every waiter is resolved.
#[pyclass(frozen, module = "fxpay._fxpay")]
struct LoopDrain {
    inbox: Arc<Inbox>,
    #[cfg(unix)]
    reader: Option<ProcessBound<UnixStream>>,
}

#[pymethods]
impl LoopDrain {
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
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
        crate::observe::flush(py);
        let mut first = Ok(());
        for (waiter, result) in items {
            let outcome = result
                .map_err(to_pyerr)
                .and_then(|out| Ok(out.into_pyobject(py)?.unbind()));
            if let Err(e) = Waiter::resolve(waiter.bind(py), outcome) {
                match first {
                    Ok(()) => first = Err(e),
                    Err(_) => e.write_unraisable(py, None),
                }
            }
        }
        first
    }
}

/// The running loop of this thread and how its futures are resolved.
struct LoopEntry {
    event_loop: Py<PyAny>,
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
        pending: WakeupInbox::new(),
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
fn socket_inbox(_py: Python<'_>, _event_loop: &Bound<'_, PyAny>) -> PyResult<Option<Arc<Inbox>>> {
    Ok(None)
}

fn entry_for(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<LoopEntry> {
    let inbox = match socket_inbox(py, event_loop)? {
        Some(inbox) => inbox,
        None => Arc::new(Inbox {
            pending: WakeupInbox::new(),
            wake: Wake::Threadsafe(
                event_loop
                    .getattr(intern!(py, "call_soon_threadsafe"))?
                    .unbind(),
            ),
        }),
    };
    Ok(LoopEntry {
        event_loop: event_loop.clone().unbind(),
        inbox,
    })
}

/// `event_loop`'s inbox, set up on first use.
fn current(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Arc<Inbox>> {
    CURRENT.with(|cell| {
        let mut slot = cell.borrow_mut();
        match &*slot {
            Some(e) if e.is_current() && e.event_loop.bind(py).is(event_loop) => {}
            _ => *slot = Some(ProcessBound::new(entry_for(py, event_loop)?)),
        }
        match &*slot {
            Some(e) => Ok(e.inbox.clone()),
            None => Err(to_pyerr(Error::Internal("no event loop entry".into()))),
        }
    })
}

/// This thread's running loop, as `asyncio.get_running_loop()` says (`RuntimeError` when
/// none runs).
fn running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    GET_RUNNING_LOOP
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("asyncio")?.getattr("get_running_loop")?.unbind())
        })?
        .bind(py)
        .call0()
}

/// Starts `fut` as a task of the shared runtime and returns the waiter, of the running
/// loop, that its result resolves.
pub fn spawn<F>(py: Python<'_>, fut: F) -> PyResult<Py<Waiter>>
where
    F: Future<Output = Result<Out, Error>> + Send + 'static,
{
    let event_loop = running_loop(py)?;
    let inbox = current(py, &event_loop)?;
    let waiter = Waiter::new(py, event_loop.unbind())?;
    let target = waiter.clone_ref(py);
    let task = fxpay_core::runtime().spawn(async move {
        // Spans of its attempts are ended by the drain, on the loop's thread (its observer
        // knows it is awaited: `crate::observe::Waited`).
        let result = fut.await;
        inbox.push((target, result));
    });
    waiter
        .get()
        .set_abort(ProcessBound::new(task.abort_handle()));
    Ok(waiter)
}

//! Awaitable calls carried out on the event loop's own thread.
//!
//! Where the loop can watch a descriptor and the thread's runtime's epoll descriptor is known
//! (`fxpay_core::runtime::epoll_fd`), an awaitable call runs on that thread's current-thread
//! runtime (the one its blocking calls drive, `fxpay_core::runtime::local`) instead of the
//! shared runtime's worker. The loop watches the runtime's descriptor (`loop.add_reader`)
//! and, when it is readable, runs the runtime until nothing is ready (`run_ready`), then
//! resolves the futures of the calls that ended. Calls started in one pass of the loop are
//! started together by one such run (`loop.call_soon`), and while calls are pending a run
//! also comes every [`TICK`] (`loop.call_later`), for the runtime's timers (timeouts,
//! deadlines, retry waits), which no descriptor announces.
//!
//! So a call's request, its answer and its result never cross a thread: on a machine whose
//! cores are busy, the call costs no switch between the loop's thread and a runtime worker.
//! The runtime runs with the GIL released; Python code a call needs (a token store, a
//! journal) runs on blocking-pool threads as before, never on the loop's thread.
use super::deliver::deliver;
use super::models::Out;
use fxpay_core::error::Error;
use fxpay_core::runtime::fork::ProcessBound;
use fxpay_core::runtime::local::{self, Start};
use pyo3::intern;
use pyo3::prelude::*;
use std::cell::RefCell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// How often a loop with calls pending runs the runtime even when its descriptor is quiet.
const TICK: f64 = 0.005;

/// A finished call: the asyncio future to resolve and what to resolve it with.
type Done = (Py<PyAny>, Result<Out, Error>);

/// One loop's calls: those that ended, and how many are still running.
#[derive(Default)]
struct Calls {
    ended: Mutex<Vec<Done>>,
    pending: AtomicUsize,
}

/// Counts a call as pending until its task ends, however it ends (aborted included), and
/// holds its asyncio future until its result is in `ended`.
struct Pending {
    calls: Arc<Calls>,
    target: Option<Py<PyAny>>,
}

impl Pending {
    fn new(calls: &Arc<Calls>, target: Py<PyAny>) -> Self {
        calls.pending.fetch_add(1, Ordering::AcqRel);
        Pending {
            calls: calls.clone(),
            target: Some(target),
        }
    }

    fn done(mut self, result: Result<Out, Error>) {
        if let Some(target) = self.target.take() {
            self.calls.push(target, result);
        }
    }
}

impl Drop for Pending {
    /// A task dropped before its result: aborted (its future is cancelled already, and takes
    /// nothing), or gone with its runtime when the thread that ran the loop ended. Its
    /// future still gets an answer, so no task awaits it for ever.
    fn drop(&mut self) {
        if let Some(target) = self.target.take() {
            self.calls.push(
                target,
                Err(Error::Transport {
                    message: "the thread whose runtime carried this call ended before its \
                              answer arrived (its request may have been sent)"
                        .to_string(),
                    timeout: false,
                    unsent: false,
                }),
            );
        }
        self.calls.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Calls {
    fn push(&self, target: Py<PyAny>, result: Result<Out, Error>) {
        self.ended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((target, result));
    }
}

/// A loop, and its runner on this thread (None: it cannot have one).
type Seen = (Py<PyAny>, Option<Py<RunReady>>);

thread_local! {
    /// Calls started on this thread and not yet handed to its runtime.
    static STARTS: RefCell<Vec<Start>> = const { RefCell::new(Vec::new()) };
    /// The loop last seen on this thread and its runner (None: that loop cannot watch the
    /// runtime's descriptor). A forked child's entry is the parent's: replaced on first use.
    static CURRENT: RefCell<Option<ProcessBound<Seen>>> = const { RefCell::new(None) };
}

/// Runs this thread's runtime for one loop: the callback of its reader, of `call_soon` after
/// calls start, and of `call_later` while calls are pending.
#[pyclass(frozen, module = "fxpay._fxpay")]
pub struct RunReady {
    calls: Arc<Calls>,
    call_soon: Py<PyAny>,
    call_later: Py<PyAny>,
    /// A run is scheduled with `call_soon`.
    soon: AtomicBool,
    /// A run is scheduled with `call_later`.
    timer: AtomicBool,
    /// The loop watches the descriptor (cleared when a run came on another thread, which
    /// stops the watching; [`runner`] starts it again when the loop is back on this thread).
    watched: AtomicBool,
    /// The thread whose runtime this runs, and the descriptor the loop watches for it.
    thread: std::thread::ThreadId,
    fd: i32,
}

#[pymethods]
impl RunReady {
    #[pyo3(signature = (timer = false))]
    fn __call__(slf: &Bound<'_, Self>, py: Python<'_>, timer: bool) -> PyResult<()> {
        let me = slf.get();
        if std::thread::current().id() != me.thread {
            // The loop runs on another thread now (or this one's runtime is gone): its
            // descriptor is not this thread's to run, and left watched it would keep
            // calling. The calls of that thread's runtime stay with it, and the run that
            // brought us here is spent (`runner` schedules one when the loop is back on that
            // thread); only the tick below may come here again, to deliver.
            if timer {
                me.timer.store(false, Ordering::Release);
            }
            me.soon.store(false, Ordering::Release);
            if me.watched.swap(false, Ordering::AcqRel) {
                me.event_loop(py)?
                    .call_method1(intern!(py, "remove_reader"), (me.fd,))?;
            }
            // Results that are in are delivered here, on the loop's thread now: those of
            // calls that ended before the loop moved (or in a blocking call of that thread
            // since), and the errors of calls that went with the runtime of a thread that
            // ended. While calls of that runtime are out, a tick here keeps looking: a thread
            // that ends drops its runtime (and so pushes those errors) after `join()` has
            // returned. `pending` is read before the results are taken: a call counted out
            // has put its result in before it is counted out.
            let out = me.calls.pending.load(Ordering::Acquire) > 0;
            me.deliver_ended(py);
            if out && !me.timer.swap(true, Ordering::AcqRel) {
                me.call_later.call1(py, (TICK, slf, true))?;
            }
            return Ok(());
        }
        if timer {
            me.timer.store(false, Ordering::Release);
        }
        me.soon.store(false, Ordering::Release);
        let starts = STARTS.with(|s| std::mem::take(&mut *s.borrow_mut()));
        let left = py.detach(|| local::run_ready(starts));
        if let Err(starts) = left {
            // This thread is inside a blocking call (a callback of it runs the loop): try
            // again on the next tick.
            STARTS.with(|s| s.borrow_mut().extend(starts));
        }
        me.deliver_ended(py);
        let waiting =
            me.calls.pending.load(Ordering::Acquire) > 0 || STARTS.with(|s| !s.borrow().is_empty());
        if waiting && !me.timer.swap(true, Ordering::AcqRel) {
            me.call_later.call1(py, (TICK, slf, true))?;
        }
        Ok(())
    }
}

impl RunReady {
    /// Resolves the futures of the calls that ended.
    fn deliver_ended(&self, py: Python<'_>) {
        let ended = std::mem::take(
            &mut *self
                .calls
                .ended
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        // The spans of the attempts that ended, before their calls' results are seen (ended
        // while this thread drove its runtime, they wait where a blocking call's do).
        super::observe::spans::flush_ended(py);
        super::observe::spans::flush_loop_ended(py);
        for (fut, result) in ended {
            deliver(py, fut.bind(py), result);
        }
    }

    fn event_loop<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.call_soon.bind(py).getattr(intern!(py, "__self__"))
    }

    /// Has the loop watch the descriptor again after it ran on another thread (which
    /// stopped the watching), and runs the runtime once soon: for the calls that were
    /// waiting here meanwhile.
    fn rewatch(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let me = slf.get();
        if me.watched.load(Ordering::Acquire) {
            return Ok(());
        }
        me.event_loop(py)?
            .call_method1(intern!(py, "add_reader"), (me.fd, slf))?;
        me.watched.store(true, Ordering::Release);
        if !me.soon.swap(true, Ordering::AcqRel) {
            me.call_soon.call1(py, (slf,))?;
        }
        Ok(())
    }
}

/// This thread's runner for `event_loop`, set up on first use: None when the loop cannot
/// watch the runtime's descriptor, or the descriptor is unknown.
fn runner(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Option<Py<RunReady>>> {
    CURRENT.with(|cell| {
        let seen = cell
            .borrow()
            .as_ref()
            .filter(|entry| entry.is_current() && entry.0.bind(py).is(event_loop))
            .map(|entry| entry.1.as_ref().map(|r| r.clone_ref(py)));
        // Out of the borrow: the loop's methods run Python code.
        if let Some(run) = seen {
            if let Some(run) = &run {
                RunReady::rewatch(run.bind(py))?;
            }
            return Ok(run);
        }
        let run = make_runner(py, event_loop)?;
        let keep = run.as_ref().map(|r| r.clone_ref(py));
        *cell.borrow_mut() = Some(ProcessBound::new((event_loop.clone().unbind(), keep)));
        Ok(run)
    })
}

fn make_runner(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Option<Py<RunReady>>> {
    if !enabled() {
        return Ok(None);
    }
    let Some(fd) = local::watch_fd() else {
        return Ok(None);
    };
    let run = Py::new(
        py,
        RunReady {
            calls: Arc::new(Calls::default()),
            call_soon: event_loop.getattr(intern!(py, "call_soon"))?.unbind(),
            call_later: event_loop.getattr(intern!(py, "call_later"))?.unbind(),
            soon: AtomicBool::new(false),
            timer: AtomicBool::new(false),
            watched: AtomicBool::new(true),
            thread: std::thread::current().id(),
            fd,
        },
    )?;
    // A key the loop holds for this number is stale: the descriptor of a runtime of a thread
    // that ran this loop and ended (closed, and so out of the loop's epoll set), whose number
    // this runtime got again. `add_reader` alone would then only swap the key's callback
    // (the events are the same), and never add this descriptor to the epoll set: removed
    // first, it is added for real.
    let watched = event_loop
        .call_method1(intern!(py, "remove_reader"), (fd,))
        .and_then(|_| event_loop.call_method1(intern!(py, "add_reader"), (fd, run.clone_ref(py))));
    match watched {
        Ok(_) => Ok(Some(run)),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyNotImplementedError>(py) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `FXPAY_AWAIT_ON_LOOP=0` keeps awaitable calls on the shared runtime (read for each new
/// loop).
fn enabled() -> bool {
    std::env::var_os("FXPAY_AWAIT_ON_LOOP").is_none_or(|v| v != "0")
}

/// The runner that can carry out a call started now for `event_loop` on this thread, if
/// any (None: take the shared runtime).
pub fn runner_for(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Option<Py<RunReady>>> {
    if !local::available() {
        return Ok(None);
    }
    runner(py, event_loop)
}

/// Starts `fut` with `run` (see [`runner_for`]): its asyncio future and how to abort it
/// (started or not yet).
pub fn start<F>(
    py: Python<'_>,
    event_loop: &Bound<'_, PyAny>,
    run: Py<RunReady>,
    fut: F,
) -> PyResult<(Py<PyAny>, futures_util::future::AbortHandle)>
where
    F: Future<Output = Result<Out, Error>> + Send + 'static,
{
    let py_fut = event_loop.call_method0(intern!(py, "create_future"))?;
    let me = run.get();
    let pending = Pending::new(&me.calls, py_fut.clone().unbind());
    let (abort, registration) = futures_util::future::AbortHandle::new_pair();
    let task = futures_util::future::Abortable::new(
        async move {
            let pending = pending;
            // Spans of its attempts are ended by the run that delivers the result.
            pending.done(super::observe::spans::ended_on_loop(fut).await);
        },
        registration,
    );
    STARTS.with(|s| {
        s.borrow_mut().push(Box::pin(async move {
            let _ = task.await;
        }))
    });
    if !me.soon.swap(true, Ordering::AcqRel) {
        me.call_soon.call1(py, (run.clone_ref(py),))?;
    }
    Ok((py_fut.unbind(), abort))
}

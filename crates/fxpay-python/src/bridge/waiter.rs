//! What the task that awaits a call waits on while the call runs.
//!
//! An asyncio task accepts from the coroutine it steps any object of the future protocol
//! that `asyncio.isfuture` recognises (`_asyncio_future_blocking`, `get_loop`,
//! `add_done_callback`, `result`, `cancel`): it adds its wake-up as a done callback, and
//! cancels the object when the task is cancelled. A `Waiter` is such an object, resolved by
//! the loop's port (`super::port`) on the loop's thread, which runs the task's wake-up there
//! and then, in the task's context. An `asyncio.Future` would schedule that wake-up with
//! `loop.call_soon` (a handle and one more pass of the loop for every call) and take three
//! method calls to resolve.
use fxpay_core::ProcessBound;
use pyo3::exceptions::asyncio::{CancelledError, InvalidStateError};
use pyo3::intern;
use pyo3::prelude::*;
use std::sync::{Mutex, MutexGuard, PoisonError};

#[pyclass(module = "fxpay._fxpay", frozen)]
pub struct Waiter {
    event_loop: Py<PyAny>,
    state: Mutex<State>,
}

/// A done callback and the context it runs in.
type Callback = (Py<PyAny>, Option<Py<PyAny>>);

#[derive(Default)]
struct State {
    /// `_asyncio_future_blocking`: set when the coroutine yields it, cleared by the task.
    blocking: bool,
    outcome: Outcome,
    callbacks: Vec<Callback>,
    /// Aborts the call's task (bound to this process: a forked child has none to abort).
    abort: Option<ProcessBound<tokio::task::AbortHandle>>,
}

#[derive(Default)]
enum Outcome {
    #[default]
    Pending,
    Value(Py<PyAny>),
    Error(PyErr),
    /// Cancelled, with the message `cancel` was given.
    Cancelled(Option<Py<PyAny>>),
}

impl Waiter {
    /// A pending waiter of `event_loop`, yielded to the task (`blocking` set).
    pub fn new(py: Python<'_>, event_loop: Py<PyAny>) -> PyResult<Py<Waiter>> {
        let state = State {
            blocking: true,
            ..State::default()
        };
        Py::new(
            py,
            Waiter {
                event_loop,
                state: Mutex::new(state),
            },
        )
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps how to abort the call's task, for `cancel` and [`Waiter::abandon`].
    pub fn set_abort(&self, abort: ProcessBound<tokio::task::AbortHandle>) {
        self.state().abort = Some(abort);
    }

    /// Sets the call's outcome and runs the done callbacks (the task's wake-up) at once, on
    /// the loop's thread. A cancelled waiter takes nothing. Returns the first exception a
    /// callback raised (a task's step lets only `KeyboardInterrupt` and `SystemExit` out),
    /// after every callback ran.
    pub fn resolve(slf: &Bound<'_, Self>, outcome: PyResult<Py<PyAny>>) -> PyResult<()> {
        let callbacks = {
            let mut state = slf.get().state();
            if !matches!(state.outcome, Outcome::Pending) {
                return Ok(());
            }
            state.outcome = match outcome {
                Ok(value) => Outcome::Value(value),
                Err(e) => Outcome::Error(e),
            };
            state.abort = None;
            std::mem::take(&mut state.callbacks)
        };
        let py = slf.py();
        let mut first = None;
        for (callback, context) in callbacks {
            let ran = match context {
                Some(context) => context
                    .bind(py)
                    .call_method1(intern!(py, "run"), (callback, slf)),
                None => callback.bind(py).call1((slf,)),
            };
            if let Err(e) = ran {
                match first {
                    None => first = Some(e),
                    Some(_) => e.write_unraisable(py, Some(slf.as_any())),
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The call's result for the coroutine's last step: its value, or the error it raises.
    pub fn outcome(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match &self.state().outcome {
            Outcome::Pending => Err(InvalidStateError::new_err("Result is not set.")),
            Outcome::Value(v) => Ok(v.clone_ref(py)),
            Outcome::Error(e) => Err(e.clone_ref(py)),
            Outcome::Cancelled(msg) => Err(cancelled(py, msg)),
        }
    }

    /// Abandons the call (its coroutine was closed): its task is aborted, and nothing is
    /// told to the callbacks, whose task has let go of the coroutine.
    pub fn abandon(&self) {
        let mut state = self.state();
        if let Some(abort) = state.abort.take() {
            if abort.is_current() {
                abort.abort();
            }
        }
        if matches!(state.outcome, Outcome::Pending) {
            state.outcome = Outcome::Cancelled(None);
        }
        state.callbacks.clear();
    }

    /// Schedules `callback(self)` on the loop, as an asyncio future does for a callback
    /// added to it once it is done (or for every callback when it is cancelled).
    fn schedule(slf: &Bound<'_, Self>, (callback, context): Callback) -> PyResult<()> {
        let py = slf.py();
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item(intern!(py, "context"), context)?;
        slf.get().event_loop.bind(py).call_method(
            intern!(py, "call_soon"),
            (callback, slf),
            Some(&kwargs),
        )?;
        Ok(())
    }
}

fn cancelled(py: Python<'_>, msg: &Option<Py<PyAny>>) -> PyErr {
    match msg {
        Some(msg) => CancelledError::new_err((msg.clone_ref(py),)),
        None => CancelledError::new_err(()),
    }
}

#[pymethods]
impl Waiter {
    #[getter(_asyncio_future_blocking)]
    fn blocking(&self) -> bool {
        self.state().blocking
    }

    #[setter(_asyncio_future_blocking)]
    fn set_blocking(&self, value: bool) {
        self.state().blocking = value;
    }

    fn get_loop(&self, py: Python<'_>) -> Py<PyAny> {
        self.event_loop.clone_ref(py)
    }

    #[pyo3(signature = (callback, *, context = None))]
    fn add_done_callback(
        slf: &Bound<'_, Self>,
        callback: Py<PyAny>,
        context: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        {
            let mut state = slf.get().state();
            if matches!(state.outcome, Outcome::Pending) {
                state.callbacks.push((callback, context));
                return Ok(());
            }
        }
        Self::schedule(slf, (callback, context))
    }

    fn done(&self) -> bool {
        !matches!(self.state().outcome, Outcome::Pending)
    }

    fn cancelled(&self) -> bool {
        matches!(self.state().outcome, Outcome::Cancelled(_))
    }

    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.outcome(py)
    }

    fn exception(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match &self.state().outcome {
            Outcome::Pending => Err(InvalidStateError::new_err("Exception is not set.")),
            Outcome::Value(_) => Ok(None),
            Outcome::Error(e) => Ok(Some(e.value(py).clone().into_any().unbind())),
            Outcome::Cancelled(msg) => Err(cancelled(py, msg)),
        }
    }

    /// Cancels the call (the task awaiting it was cancelled): its task is aborted, and the
    /// done callbacks are scheduled, to find it cancelled. False once it is done.
    #[pyo3(signature = (msg = None))]
    fn cancel(slf: &Bound<'_, Self>, msg: Option<Py<PyAny>>) -> PyResult<bool> {
        let callbacks = {
            let mut state = slf.get().state();
            if !matches!(state.outcome, Outcome::Pending) {
                return Ok(false);
            }
            state.outcome = Outcome::Cancelled(msg);
            if let Some(abort) = state.abort.take() {
                if abort.is_current() {
                    abort.abort();
                }
            }
            std::mem::take(&mut state.callbacks)
        };
        for callback in callbacks {
            Self::schedule(slf, callback)?;
        }
        Ok(true)
    }

    fn __repr__(&self) -> String {
        format!("<fxpay waiter done={}>", self.done())
    }
}

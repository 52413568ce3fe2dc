//! The coroutine an `*_async` method returns: `asyncio.run`, `create_task`, `gather` and
//! `await` take it like the coroutine of an `async def`.
//!
//! Nothing starts when the method is called (after its arguments are converted): on its
//! first step, inside the awaiting task, the call is made (with the GIL: its tracing
//! observer, made there, takes that task's span as its parent), starts as a task of the
//! shared runtime and yields a waiter
//! (`super::waiter`) that its loop's port resolves (`super::port`), as `await future` does.
use super::guarded::{guarded, CallFuture};
use super::port::spawn;
use super::waiter::Waiter;
use pyo3::exceptions::{PyRuntimeError, PyStopIteration, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyType;
use std::sync::{Mutex, PoisonError};

/// Makes the call's future, on the coroutine's first step (with the GIL, in the awaiting
/// task).
pub type Start = Box<dyn FnOnce(Python<'_>) -> CallFuture + Send>;

enum Step {
    /// Not stepped yet.
    Start(Start),
    /// Nothing to run: returns this value on its first step.
    Ready(Py<PyAny>),
    /// Started: the waiter that the port resolves.
    Waiting(Py<Waiter>),
    /// Returned, raised or closed.
    Finished,
}

#[pyclass(module = "fxpay._fxpay", frozen)]
pub struct Call {
    name: &'static str,
    step: Mutex<Step>,
}

/// A coroutine that runs the call `start` makes; `name` is the method's, for its `repr`.
pub fn call(
    py: Python<'_>,
    name: &'static str,
    start: impl FnOnce(Python<'_>) -> CallFuture + Send + 'static,
) -> PyResult<Py<PyAny>> {
    let c = Call {
        name,
        step: Mutex::new(Step::Start(Box::new(start))),
    };
    Ok(Py::new(py, c)?.into_any())
}

/// A coroutine that returns `value` at once (what `async def f(): return value` makes).
pub fn ready(py: Python<'_>, value: Py<PyAny>) -> PyResult<Py<PyAny>> {
    let c = Call {
        name: "ready",
        step: Mutex::new(Step::Ready(value)),
    };
    Ok(Py::new(py, c)?.into_any())
}

impl Call {
    fn take(&self) -> Step {
        std::mem::replace(
            &mut *self.step.lock().unwrap_or_else(PoisonError::into_inner),
            Step::Finished,
        )
    }

    fn put(&self, step: Step) {
        *self.step.lock().unwrap_or_else(PoisonError::into_inner) = step;
    }
}

#[pymethods]
impl Call {
    fn __await__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.send(py, &py.None().into_bound(py))
    }

    /// One step: the first starts the call; later ones return its result once it is there.
    fn send(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        match self.take() {
            Step::Start(start) => {
                if !value.is_none() {
                    return Err(PyTypeError::new_err(
                        "can't send non-None value to a just-started coroutine",
                    ));
                }
                // Yielded to the task, which waits on it, as `await future` does. The port
                // resolves it on the loop's own thread, later: it cannot be done yet.
                let waiter = spawn(py, guarded(start(py)))?;
                self.put(Step::Waiting(waiter.clone_ref(py)));
                Ok(waiter.into_any())
            }
            Step::Ready(v) => Err(PyStopIteration::new_err((v,))),
            // The task steps the coroutine again once the waiter is done; one that is not (a
            // step from elsewhere) raises `InvalidStateError` here.
            Step::Waiting(waiter) => {
                let value = waiter.get().outcome(py)?;
                Err(PyStopIteration::new_err((value,)))
            }
            Step::Finished => Err(PyRuntimeError::new_err(
                "cannot reuse already awaited coroutine",
            )),
        }
    }

    /// Raises `typ` (an exception, or a class and its value) in the coroutine: the call is
    /// abandoned (its task aborted, its future cancelled) and the exception leaves.
    #[pyo3(signature = (typ, val = None, _tb = None))]
    fn throw(
        &self,
        typ: &Bound<'_, PyAny>,
        val: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.close();
        let exc = match val {
            Some(v) if !v.is_none() && v.is_instance(typ)? => v.clone(),
            Some(v) if !v.is_none() && typ.is_instance_of::<PyType>() => typ.call1((v,))?,
            _ if typ.is_instance_of::<PyType>() => typ.call0()?,
            _ => typ.clone(),
        };
        Err(PyErr::from_value(exc))
    }

    /// Abandons the call: a started one has its task aborted. (A task cancelled by asyncio
    /// cancels the waiter, and is thrown `CancelledError` here on its next step.)
    fn close(&self) {
        if let Step::Waiting(waiter) = self.take() {
            waiter.get().abandon();
        }
    }

    fn __repr__(&self) -> String {
        format!("<fxpay call {}>", self.name)
    }
}

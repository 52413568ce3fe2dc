//! Reads of OpenTelemetry API objects made without running their Python code, where the
//! object is the API's own and its layout is known: the current context, the global
//! propagator, a span context's fields, and whether a context holds baggage. Each call's tracing makes these reads, and
//! each Python function they would run (a property, `get_current`, `baggage.get_all`) costs
//! a frame. Anything else (another runtime context, a span context of another class, a
//! context that is not a dict) goes through the public API, so the answer is always the
//! one the API gives.
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};
use std::sync::PoisonError;

static CONTEXT_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static CONTEXTVARS_RUNTIME: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static SPAN_CONTEXT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static BAGGAGE_KEY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static PROPAGATE_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static TRACE_STATE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
/// The last `get_global_textmap` seen, and whether it is a plain getter of its module's
/// `_HTTP_TEXT_FORMAT` (see [`plain_getter`]).
static TEXTMAP_GETTER: std::sync::Mutex<Option<(Py<PyAny>, bool)>> = std::sync::Mutex::new(None);

/// An attribute of an OpenTelemetry API module (a function, a class, a key), looked up once.
pub(super) fn api_function<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyAny>>,
    module: &str,
    name: &str,
) -> PyResult<&'py Bound<'py, PyAny>> {
    cell.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import(module)?.getattr(name)?.unbind())
    })
    .map(|f| f.bind(py))
}

/// `opentelemetry.context.get_current()`. With the API's default runtime context (context
/// variables), its variable is read directly, as `get_current` does.
pub(super) fn current_context(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let module = CONTEXT_MODULE
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("opentelemetry.context")?.unbind())
        })?
        .bind(py);
    // Looked up on every call: a test may swap the runtime context. Any step that fails
    // (an API without these names) leaves the answer to `get_current()`.
    let default = api_function(
        py,
        &CONTEXTVARS_RUNTIME,
        "opentelemetry.context.contextvars_context",
        "ContextVarsRuntimeContext",
    );
    if let (Ok(runtime), Ok(default)) = (module.getattr(intern!(py, "_RUNTIME_CONTEXT")), default) {
        if runtime.get_type().is(default) {
            // `ContextVar.get`, a C method: no Python frame.
            let current = runtime
                .getattr(intern!(py, "_current_context"))
                .and_then(|var| var.call_method0(intern!(py, "get")));
            if let Ok(current) = current {
                return Ok(current);
            }
        }
    }
    module.getattr(intern!(py, "get_current"))?.call0()
}

/// Whether a span context's trace state has entries (`bool(state)`, what W3C's propagator
/// asks before it writes `tracestate`). The API's `TraceState` keeps them in a dict, `_dict`,
/// whose size its `__len__` returns: read directly. Any other class is asked.
pub(super) fn trace_state_has_entries(py: Python<'_>, state: &Bound<'_, PyAny>) -> PyResult<bool> {
    let api_class = api_function(py, &TRACE_STATE, "opentelemetry.trace.span", "TraceState");
    if api_class.is_ok_and(|class| state.get_type().is(class)) {
        if let Ok(entries) = state.getattr(intern!(py, "_dict")) {
            if let Ok(entries) = entries.cast::<PyDict>() {
                return Ok(!entries.is_empty());
            }
        }
    }
    state.is_truthy()
}

/// `opentelemetry.propagate.get_global_textmap()`. The API's function returns its module's
/// `_HTTP_TEXT_FORMAT` (what `set_global_textmap` sets): read directly while the module's
/// `get_global_textmap` is still that function. One replaced (a test's patch) is called.
pub(super) fn global_textmap(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let module = PROPAGATE_MODULE
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("opentelemetry.propagate")?.unbind())
        })?
        .bind(py);
    let getter = module.getattr(intern!(py, "get_global_textmap"))?;
    let seen = {
        let last = TEXTMAP_GETTER
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        last.as_ref()
            .filter(|(f, _)| f.bind(py).is(&getter))
            .map(|(_, plain)| *plain)
    };
    let plain = match seen {
        Some(plain) => plain,
        None => {
            // Judged without holding the lock: reading attributes may run Python code.
            let plain = plain_getter(py, &getter, module, "_HTTP_TEXT_FORMAT");
            *TEXTMAP_GETTER
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some((getter.clone().unbind(), plain));
            plain
        }
    };
    if plain {
        if let Ok(textmap) = module.getattr(intern!(py, "_HTTP_TEXT_FORMAT")) {
            return Ok(textmap);
        }
    }
    getter.call0()
}

/// Whether `f` is a function of `module` that takes no argument and uses no name but
/// `global` (as `def f(): return global` is): what it returns is then `module.global`.
fn plain_getter(
    py: Python<'_>,
    f: &Bound<'_, PyAny>,
    module: &Bound<'_, PyModule>,
    global: &str,
) -> bool {
    let in_module = f
        .getattr(intern!(py, "__globals__"))
        .is_ok_and(|g| g.is(module.dict()));
    let Ok(code) = f.getattr(intern!(py, "__code__")) else {
        return false;
    };
    if !in_module {
        return false;
    }
    let names = code.getattr(intern!(py, "co_names"));
    let args = code.getattr(intern!(py, "co_argcount"));
    match (names, args) {
        (Ok(names), Ok(args)) => {
            args.extract::<u32>().ok() == Some(0)
                && names.extract::<Vec<String>>().ok().as_deref() == Some(&[global.to_string()][..])
        }
        _ => false,
    }
}

/// What `traceparent` and `tracestate` are made of: a span context's trace id, span id,
/// trace flags and trace state. The API's `SpanContext` is a tuple whose properties read
/// its items (0, 1, 3 and 4); those items are read here directly.
pub(super) type SpanContextFields<'py> = (u128, u64, u8, Bound<'py, PyAny>);

pub(super) fn span_context_fields<'py>(
    py: Python<'py>,
    context: &Bound<'py, PyAny>,
) -> PyResult<SpanContextFields<'py>> {
    let api_class = api_function(py, &SPAN_CONTEXT, "opentelemetry.trace.span", "SpanContext");
    let known = api_class.is_ok_and(|class| context.get_type().is(class) && layout_known(class));
    if known {
        if let Ok(items) = context.cast::<PyTuple>() {
            if items.len() >= 5 {
                return Ok((
                    items.get_item(0)?.extract()?,
                    items.get_item(1)?.extract()?,
                    items.get_item(3)?.extract()?,
                    items.get_item(4)?,
                ));
            }
        }
    }
    Ok((
        context.getattr(intern!(py, "trace_id"))?.extract()?,
        context.getattr(intern!(py, "span_id"))?.extract()?,
        context.getattr(intern!(py, "trace_flags"))?.extract()?,
        context.getattr(intern!(py, "trace_state"))?,
    ))
}

/// Whether the API's `SpanContext` keeps its fields where [`span_context_fields`] reads
/// them, checked once per process on one made from known values (through its public
/// constructor): an API that laid it out otherwise is only ever read through its properties.
fn layout_known(class: &Bound<'_, PyAny>) -> bool {
    static KNOWN: PyOnceLock<bool> = PyOnceLock::new();
    *KNOWN.get_or_init(class.py(), || probe_layout(class).unwrap_or(false))
}

fn probe_layout(class: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = class.py();
    const TRACE_ID: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
    const SPAN_ID: u64 = 0x0f1e_2d3c_4b5a_6978;
    let span = py.import("opentelemetry.trace.span")?;
    let state = span.getattr("TraceState")?.call0()?;
    let flags = span.getattr("TraceFlags")?.call1((1,))?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("trace_id", TRACE_ID)?;
    kwargs.set_item("span_id", SPAN_ID)?;
    kwargs.set_item("is_remote", false)?;
    kwargs.set_item("trace_flags", &flags)?;
    kwargs.set_item("trace_state", &state)?;
    let probe = class.call((), Some(&kwargs))?;
    let Ok(items) = probe.cast::<PyTuple>() else {
        return Ok(false);
    };
    Ok(items.len() >= 5
        && items.get_item(0)?.extract::<u128>()? == TRACE_ID
        && items.get_item(1)?.extract::<u64>()? == SPAN_ID
        && items.get_item(3)?.extract::<u8>()? == 1
        && items.get_item(4)?.is(&state))
}

/// True when `context` surely holds no baggage: it is a dict (the API's `Context` is one)
/// with no entry, or an empty one, under the baggage API's key. False means it may hold
/// some: `opentelemetry.baggage.get_all` is asked.
pub(super) fn surely_no_baggage(py: Python<'_>, context: &Bound<'_, PyAny>) -> bool {
    let Ok(dict) = context.cast::<PyDict>() else {
        return false;
    };
    let Ok(key) = api_function(py, &BAGGAGE_KEY, "opentelemetry.baggage", "_BAGGAGE_KEY") else {
        return false;
    };
    match dict.get_item(key) {
        Ok(None) => true,
        Ok(Some(value)) => value.cast::<PyDict>().is_ok_and(|d| d.is_empty()),
        Err(_) => false,
    }
}

//! Which OpenTelemetry tracer and propagator a call uses, asked of the API's public functions.
//!
//! Whether tracing is on is asked once per call, while the caller holds the GIL (and, for an
//! awaitable, in the calling task, so the parent span is that task's). With
//! `opentelemetry.trace` never imported, or holding no provider (and no
//! `OTEL_PYTHON_TRACER_PROVIDER`), the answer is two dictionary look-ups made here (no
//! Python function runs), the call gets no tracing observer, and its attempts never touch
//! Python. Otherwise `trace.get_tracer_provider()` answers: the API's proxy or its no-op
//! provider means off. The tracer (per
//! provider) and what the global propagator is (per propagator) are asked of `fxpay._otel`
//! once and kept here; a call then reads the current context
//! (`opentelemetry.context.get_current()`) and, when the propagator sends baggage, the
//! context's baggage (`opentelemetry.baggage.get_all`). Every read but one (see
//! [`provider`]) goes through the API's public functions and properties (issue 55), so a
//! runtime context, a span context or a propagator of the user's own answers as the API's
//! would.
use fxpay_core::{ExtraHeaders, HeaderName, HeaderValue};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;
use std::sync::{Mutex, OnceLock, PoisonError};

/// The pairs a propagator wrote, as headers: a pair HTTP does not allow (a name that is not a
/// token, a value with a control character) is left out, and the call goes on without it.
pub(super) fn typed(pairs: Vec<(String, String)>) -> ExtraHeaders {
    pairs
        .into_iter()
        .filter_map(|(name, value)| {
            Some((
                HeaderName::from_bytes(name.as_bytes()).ok()?,
                HeaderValue::from_str(&value).ok()?,
            ))
        })
        .collect()
}

static OTEL: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

pub(super) fn otel(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    OTEL.get_or_try_init(py, || Ok::<_, PyErr>(py.import("fxpay._otel")?.unbind()))
        .map(|m| m.bind(py))
}

/// An OpenTelemetry API module, imported once. Its functions are looked up on it at each use
/// (a test, or an instrumentation, may replace one).
pub(super) fn api<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyModule>>,
    name: &str,
) -> PyResult<&'py Bound<'py, PyModule>> {
    cell.get_or_try_init(py, || Ok::<_, PyErr>(py.import(name)?.unbind()))
        .map(|m| m.bind(py))
}

static TRACE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static CONTEXT: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static PROPAGATE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static BAGGAGE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// `opentelemetry.trace`, for its public names (`SpanKind`, `Status`, `StatusCode`...).
pub(super) fn trace_api(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    api(py, &TRACE, "opentelemetry.trace")
}

/// `OTEL_PYTHON_TRACER_PROVIDER` is set: a provider may come from the environment even
/// before anyone imports `opentelemetry.trace` (as `fxpay._otel` reads it).
fn env_provider() -> bool {
    static SET: OnceLock<bool> = OnceLock::new();
    *SET.get_or_init(|| {
        std::env::var_os("OTEL_PYTHON_TRACER_PROVIDER").is_some_and(|v| !v.is_empty())
    })
}

/// The global tracer provider, `opentelemetry.trace.get_tracer_provider()`; None when tracing
/// is off: the API was never imported (and the environment names no provider), it holds no
/// provider, or the provider is the API's proxy or its no-op one.
fn provider(py: Python<'_>) -> Option<Bound<'_, PyAny>> {
    let module = match super::imported::imported(py, intern!(py, "opentelemetry.trace")).ok()? {
        Some(module) => module,
        None if env_provider() => trace_api(py).ok()?.clone().into_any(),
        None => return None,
    };
    // The one private name of the API read here (issue 55): `_TRACER_PROVIDER`, None until a
    // provider is set, answers "off" with a dictionary look-up. The public
    // `get_tracer_provider()` looks `OTEL_PYTHON_TRACER_PROVIDER` up in `os.environ` on each
    // call (a `KeyError` raised and caught): 14,371 more instructions per call with the API
    // imported and no provider (bench: 512,222 -> 526,593 on a debug build, about 14% of a
    // release build's 105,000), for an answer the read gives. Any other value, or an API
    // without the name, goes through the public function.
    if !env_provider() {
        if let Ok(set) = module.getattr(intern!(py, "_TRACER_PROVIDER")) {
            if set.is_none() {
                return None;
            }
        }
    }
    let provider = module
        .getattr(intern!(py, "get_tracer_provider"))
        .and_then(|f| f.call0())
        .ok()?;
    for off in [
        intern!(py, "ProxyTracerProvider"),
        intern!(py, "NoOpTracerProvider"),
    ] {
        let class = module.getattr(off).ok()?;
        if provider.is_instance(&class).unwrap_or(true) {
            return None;
        }
    }
    Some(provider)
}

/// A provider and its tracer (None: the provider means off, e.g. a no-op one).
type TracerOf = (Py<PyAny>, Option<Py<PyAny>>);
/// The last provider seen and its tracer.
static TRACER_OF: Mutex<Option<TracerOf>> = Mutex::new(None);

/// fxpay's tracer from `provider`, asked of `fxpay._otel.tracer` once per provider.
fn tracer_of(py: Python<'_>, provider: &Bound<'_, PyAny>) -> Option<Py<PyAny>> {
    if let Some((seen, tracer)) = &*TRACER_OF.lock().unwrap_or_else(PoisonError::into_inner) {
        if seen.bind(py).is(provider) {
            return tracer.as_ref().map(|t| t.clone_ref(py));
        }
    }
    // Asked without holding the lock: Python code may let another thread run.
    let tracer = otel(py).ok()?.call_method0(intern!(py, "tracer")).ok()?;
    let tracer = (!tracer.is_none()).then(|| tracer.unbind());
    *TRACER_OF.lock().unwrap_or_else(PoisonError::into_inner) = Some((
        provider.clone().unbind(),
        tracer.as_ref().map(|t| t.clone_ref(py)),
    ));
    tracer
}

/// The last global propagator seen: it, whether it is W3C's only, and its baggage part.
type Textmap = (Py<PyAny>, bool, Option<Py<PyAny>>);
static TEXTMAP_OF: Mutex<Option<Textmap>> = Mutex::new(None);

/// See `PyTraceObserver::fixed`: the `baggage` header when the parent has baggage.
pub(super) fn fixed_headers(
    py: Python<'_>,
    parent: &Bound<'_, PyAny>,
) -> PyResult<Option<ExtraHeaders>> {
    let textmap = api(py, &PROPAGATE, "opentelemetry.propagate")?
        .getattr(intern!(py, "get_global_textmap"))?
        .call0()?;
    let mut known = None;
    if let Some((seen, w3c, baggage)) = &*TEXTMAP_OF.lock().unwrap_or_else(PoisonError::into_inner)
    {
        if seen.bind(py).is(&textmap) {
            known = Some((*w3c, baggage.as_ref().map(|b| b.clone_ref(py))));
        }
    }
    let (w3c, baggage) = match known {
        Some(k) => k,
        None => {
            let (w3c, baggage): (bool, Option<Py<PyAny>>) = otel(py)?
                .call_method1(intern!(py, "_w3c_parts"), (&textmap,))?
                .extract()?;
            *TEXTMAP_OF.lock().unwrap_or_else(PoisonError::into_inner) = Some((
                textmap.unbind(),
                w3c,
                baggage.as_ref().map(|b| b.clone_ref(py)),
            ));
            (w3c, baggage)
        }
    };
    if !w3c {
        return Ok(None);
    }
    let Some(baggage) = baggage else {
        return Ok(Some(Vec::new()));
    };
    let entries = api(py, &BAGGAGE, "opentelemetry.baggage")?
        .getattr(intern!(py, "get_all"))?
        .call1((parent,))?;
    if entries.len()? == 0 {
        return Ok(Some(Vec::new()));
    }
    Ok(Some(typed(
        otel(py)?
            .call_method1(intern!(py, "baggage_headers"), (baggage, parent))?
            .extract()?,
    )))
}

/// `opentelemetry.context.get_current()`: the parent of a call starting now.
fn current_context(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    api(py, &CONTEXT, "opentelemetry.context")?
        .getattr(intern!(py, "get_current"))?
        .call0()
}

/// What `traceparent` and `tracestate` are made of: a span context's trace id, span id,
/// trace flags and trace state, read through its public properties.
pub(super) fn span_context_fields<'py>(
    context: &Bound<'py, PyAny>,
) -> PyResult<(u128, u64, u8, Bound<'py, PyAny>)> {
    let py = context.py();
    let field = |name: &Bound<'py, PyString>| context.getattr(name);
    Ok((
        field(intern!(py, "trace_id"))?.extract()?,
        field(intern!(py, "span_id"))?.extract()?,
        field(intern!(py, "trace_flags"))?.extract()?,
        field(intern!(py, "trace_state"))?,
    ))
}

/// What the tracing of a call starting now needs (its tracer, its parent context and the
/// headers it sends besides `traceparent`, if this crate writes that), when a tracer provider
/// is configured.
pub(super) fn call_trace(py: Python<'_>) -> Option<(Py<PyAny>, Py<PyAny>, Option<ExtraHeaders>)> {
    let provider = provider(py)?;
    let tracer = tracer_of(py, &provider)?;
    let parent = current_context(py).ok()?;
    let fixed = fixed_headers(py, &parent).ok()?;
    Some((tracer, parent.unbind(), fixed))
}

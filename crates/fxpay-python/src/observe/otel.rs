//! Which OpenTelemetry tracer and propagator a call uses, found through `fxpay._otel`.
//!
//! Whether tracing is on is asked once per call, while the caller holds the GIL (and, for an
//! awaitable, in the calling task, so the parent span is that task's). With no tracer
//! provider the answer comes from two dictionary look-ups made here (no Python function
//! runs), the call gets no tracing observer, and its attempts never touch Python. With one,
//! the tracer (per provider) and what the global propagator is (per propagator) are asked
//! of `fxpay._otel` once and kept here; a call then only reads the current context (and
//! its baggage, if the propagator sends baggage and the context holds some), without running
//! the API's Python code where the objects are the API's own (`super::otel_reads`).
use super::otel_reads::api_function;
use fxpay_core::{ExtraHeaders, HeaderName, HeaderValue};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
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

/// `OTEL_PYTHON_TRACER_PROVIDER` is set: a provider may come from the environment even
/// before anyone imports `opentelemetry.trace` (as `fxpay._otel` reads it).
fn env_provider() -> bool {
    static SET: OnceLock<bool> = OnceLock::new();
    *SET.get_or_init(|| {
        std::env::var_os("OTEL_PYTHON_TRACER_PROVIDER").is_some_and(|v| !v.is_empty())
    })
}

/// What the API says of the global tracer provider, read without running Python code.
enum Provider<'py> {
    /// Surely off: `opentelemetry.trace` was never imported, or holds no provider (the
    /// API's proxy).
    Off,
    /// The provider set with `set_tracer_provider`.
    Set(Bound<'py, PyAny>),
    /// Only `fxpay._otel` can tell (a provider from the environment, an unknown API).
    Ask,
}

fn provider(py: Python<'_>) -> Provider<'_> {
    if env_provider() {
        return Provider::Ask;
    }
    match super::imported::imported(py, pyo3::intern!(py, "opentelemetry.trace")) {
        Ok(Some(module)) => match module.getattr(pyo3::intern!(py, "_TRACER_PROVIDER")) {
            Ok(p) if p.is_none() => Provider::Off,
            Ok(p) => Provider::Set(p),
            Err(_) => Provider::Ask,
        },
        Ok(None) => Provider::Off,
        Err(_) => Provider::Ask,
    }
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
    let tracer = otel(py)
        .ok()?
        .call_method0(pyo3::intern!(py, "tracer"))
        .ok()?;
    let tracer = (!tracer.is_none()).then(|| tracer.unbind());
    *TRACER_OF.lock().unwrap_or_else(PoisonError::into_inner) = Some((
        provider.clone().unbind(),
        tracer.as_ref().map(|t| t.clone_ref(py)),
    ));
    tracer
}

static BAGGAGE_OF: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The last global propagator seen: it, whether it is W3C's only, and its baggage part.
type Textmap = (Py<PyAny>, bool, Option<Py<PyAny>>);
static TEXTMAP_OF: Mutex<Option<Textmap>> = Mutex::new(None);

/// See `PyTraceObserver::fixed`: the `baggage` header when the parent has baggage.
pub(super) fn fixed_headers(
    py: Python<'_>,
    parent: &Bound<'_, PyAny>,
) -> PyResult<Option<ExtraHeaders>> {
    let textmap = super::otel_reads::global_textmap(py)?;
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
                .call_method1(pyo3::intern!(py, "_w3c_parts"), (&textmap,))?
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
    if super::otel_reads::surely_no_baggage(py, parent) {
        return Ok(Some(Vec::new()));
    }
    let entries =
        api_function(py, &BAGGAGE_OF, "opentelemetry.baggage", "get_all")?.call1((parent,))?;
    if entries.len()? == 0 {
        return Ok(Some(Vec::new()));
    }
    Ok(Some(typed(
        otel(py)?
            .call_method1(pyo3::intern!(py, "baggage_headers"), (baggage, parent))?
            .extract()?,
    )))
}

/// What the tracing of a call starting now needs (its tracer, its parent context and the
/// headers it sends besides `traceparent`, if this crate writes that), when a tracer provider
/// is configured.
pub(super) fn call_trace(py: Python<'_>) -> Option<(Py<PyAny>, Py<PyAny>, Option<ExtraHeaders>)> {
    let (tracer, parent, fixed) = match provider(py) {
        Provider::Off => return None,
        Provider::Set(provider) => {
            let tracer = tracer_of(py, &provider)?;
            let parent = super::otel_reads::current_context(py).ok()?;
            let fixed = fixed_headers(py, &parent).ok()?;
            (tracer, parent.unbind(), fixed)
        }
        Provider::Ask => {
            let answer = otel(py)
                .ok()?
                .call_method0(pyo3::intern!(py, "call_trace"))
                .ok()?;
            if answer.is_none() {
                return None;
            }
            let (tracer, parent, fixed) = answer
                .extract::<(Py<PyAny>, Py<PyAny>, Option<Vec<(String, String)>>)>()
                .ok()?;
            (tracer, parent, fixed.map(typed))
        }
    };
    Some((tracer, parent, fixed))
}

//! `fxpay.RateLimit`: a cap on every request of the clients given it (`crate::client`), in
//! this process (the core's bucket) or, with `redis=`, shared by every process that names the
//! same Redis (`fxpay._rate_limit.RedisBucket`, a script run on tokio's blocking pool with the
//! GIL, never on the event loop or a runtime worker, as token stores are).
//!
//! A Redis that fails is an outage, not a failed call: the core takes the turn from this
//! process's own bucket (see `fxpay_core::RateLimit`), and this side tells the `fxpay`
//! logger once per outage: one WARNING when Redis first fails, one INFO when it answers again.
use super::convert::type_name;
use super::errors::{Failure, Fallible};
use futures_util::future::BoxFuture;
use fxpay_core::{Error, RateLimit as CoreRateLimit, Result, SharedBucket};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A cap on every request of the clients given it (``Client(rate_limit=...)``): each attempt,
/// retries included, and each token request. Requests are spaced at least ``1 / per_second``
/// apart, so no second holds more than ``per_second`` of them. Every client given the same
/// ``RateLimit`` shares its bucket.
///
/// With ``redis=`` (a URL or a ``redis.Redis``), the bucket is the Redis key
/// ``fxpay:ratelimit:<name>`` (``<per_second>`` without a ``name``), shared by every process
/// that names the same Redis and name. While Redis fails, each process paces itself to
/// ``per_second`` alone, with one WARNING on the ``fxpay`` logger. See "Pacing" in
/// docs/payouts.md.
#[pyclass(module = "fxpay._fxpay", name = "RateLimit", frozen)]
pub struct RateLimit {
    pub(crate) inner: Arc<CoreRateLimit>,
    /// The Redis key of a shared bucket.
    key: Option<String>,
}

/// A number of requests per second: an int, a float or another real number (numpy's
/// `int64`, `float32`...; a bool is no number).
pub(crate) fn per_second_of(obj: &Bound<'_, PyAny>, name: &str) -> Fallible<f64> {
    let number = !obj.is_instance_of::<PyBool>()
        && (obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyFloat>() || is_real(obj)?);
    if !number {
        return Err(Failure::from(PyTypeError::new_err(format!(
            "{name} must be a number per second (an int or a float), not {}",
            type_name(obj)
        ))));
    }
    // An int too large for a float is no rate either.
    Ok(obj.extract::<f64>().unwrap_or(f64::INFINITY))
}

/// Whether `obj` is a `numbers.Real` (numpy registers its numbers there), not a bool.
fn is_real(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = obj.py();
    let real = py.import("numbers")?.getattr("Real")?;
    let bool_like = type_name(obj).starts_with("bool");
    Ok(!bool_like && obj.is_instance(&real)?)
}

#[pymethods]
impl RateLimit {
    #[new]
    #[pyo3(signature = (per_second, *, redis = None, name = None))]
    #[pyo3(text_signature = "(per_second, *, redis=None, name=None)")]
    fn new(
        py: Python<'_>,
        per_second: &Bound<'_, PyAny>,
        redis: Option<&Bound<'_, PyAny>>,
        name: Option<&Bound<'_, PyAny>>,
    ) -> Fallible<Self> {
        let rate = per_second_of(per_second, "per_second")?;
        let name = match name.filter(|n| !n.is_none()) {
            Some(n) if n.is_instance_of::<PyString>() => Some(n),
            Some(n) => {
                return Err(Failure::from(PyTypeError::new_err(format!(
                    "name must be a str or None, not {}",
                    type_name(n)
                ))))
            }
            None => None,
        };
        // The rate is checked before Redis is touched.
        let local = CoreRateLimit::new(rate)?;
        let Some(redis) = redis.filter(|r| !r.is_none()) else {
            if name.is_some() {
                return Err(Failure::from(Error::config(
                    "name names the shared bucket in Redis: it needs redis=",
                )));
            }
            return Ok(RateLimit {
                inner: Arc::new(local),
                key: None,
            });
        };
        let bucket = py
            .import("fxpay._rate_limit")?
            .getattr("RedisBucket")?
            .call1((redis, rate, name))?;
        let key: String = bucket.getattr("key")?.extract()?;
        let shared = PyBucket {
            obj: Arc::new(bucket.unbind()),
            failing: Arc::new(AtomicBool::new(false)),
        };
        Ok(RateLimit {
            inner: Arc::new(CoreRateLimit::shared(rate, Arc::new(shared))?),
            key: Some(key),
        })
    }

    /// The cap, in requests per second.
    #[getter]
    fn per_second(&self) -> f64 {
        self.inner.per_second()
    }

    /// The Redis key of the shared bucket; `None` for a bucket of this process.
    #[getter]
    fn key(&self) -> Option<String> {
        self.key.clone()
    }

    fn __repr__(&self) -> String {
        // The Redis URL may hold a password: never shown.
        match &self.key {
            Some(key) => format!(
                "RateLimit(per_second={}, redis=..., key={key:?})",
                fxpay_core::seconds_text(self.inner.per_second())
            ),
            None => format!(
                "RateLimit(per_second={})",
                fxpay_core::seconds_text(self.inner.per_second())
            ),
        }
    }
}

/// The Python `RedisBucket` seen from the core.
struct PyBucket {
    obj: Arc<Py<PyAny>>,
    /// Whether Redis is failing now, so an outage is reported once.
    failing: Arc<AtomicBool>,
}

fn log(py: Python<'_>, level: &str, message: &str) {
    let logged = py
        .import("logging")
        .and_then(|m| m.call_method1("getLogger", ("fxpay",)))
        .and_then(|l| l.call_method1(level, ("%s", message)));
    // A logging failure must not turn into a failed call.
    let _ = logged;
}

impl SharedBucket for PyBucket {
    fn reserve(&self, interval: Duration) -> BoxFuture<'static, Result<Duration>> {
        let (obj, failing) = (self.obj.clone(), self.failing.clone());
        let micros = u64::try_from(interval.as_micros()).unwrap_or(u64::MAX);
        Box::pin(async move {
            let run = move || {
                crate::exit_gate::attach(|py| {
                    let r = obj
                        .bind(py)
                        .call_method1("reserve", (micros,))
                        .and_then(|w| w.extract::<i64>());
                    match r {
                        Ok(wait) => {
                            if failing.swap(false, Ordering::AcqRel) {
                                log(
                                    py,
                                    "info",
                                    "the rate limit's Redis answers again; its bucket is shared again",
                                );
                            }
                            Ok(Duration::from_micros(u64::try_from(wait).unwrap_or(0)))
                        }
                        Err(e) => {
                            if !failing.swap(true, Ordering::AcqRel) {
                                let shown = e
                                    .value(py)
                                    .str()
                                    .map(|s| s.to_string())
                                    .unwrap_or_default();
                                let kind = e
                                    .get_type(py)
                                    .name()
                                    .map(|n| n.to_string())
                                    .unwrap_or_else(|_| "Exception".into());
                                log(
                                    py,
                                    "warning",
                                    &format!(
                                        "the rate limit's Redis failed ({kind}: {shown}); until it \
                                         answers again each process paces its own requests to \
                                         per_second"
                                    ),
                                );
                            }
                            Err(Error::Internal("the rate limit's Redis failed".into()))
                        }
                    }
                })
                .unwrap_or_else(|| {
                    Err(Error::Internal(
                        "the rate limit cannot use Redis: the interpreter is shutting down".into(),
                    ))
                })
            };
            fxpay_core::runtime()
                .spawn_blocking(run)
                .await
                .map_err(|e| Error::Internal(format!("the rate limit's Redis call failed: {e}")))?
        })
    }
}

/// The core rate limit of a `rate_limit=` argument (`None` or a `RateLimit`).
pub fn from_arg(obj: Option<&Bound<'_, PyAny>>) -> Fallible<Option<Arc<CoreRateLimit>>> {
    match obj.filter(|o| !o.is_none()) {
        None => Ok(None),
        Some(o) => match o.cast::<RateLimit>() {
            Ok(rl) => Ok(Some(rl.get().inner.clone())),
            Err(_) => Err(Failure::from(PyTypeError::new_err(format!(
                "rate_limit must be a fxpay.RateLimit or None, not {}",
                type_name(o)
            )))),
        },
    }
}

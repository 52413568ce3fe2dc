//! A Python token store (anything with `load(key)` and `save(key, token)`, and optionally
//! `lock(key)` returning an object with `release()`) seen from the core. Its methods run on
//! tokio's blocking pool, so a slow store (Redis over a network) never stalls the runtime.
//!
//! A store that fails is an outage, not a failed call: the core renews on its own (see
//! fxpay-core's `auth/token_cache.rs`). This side tells the `fxpay` logger once per outage: one
//! WARNING when the store first fails, one INFO when it answers again.
use super::models::{token, token_from_py};
use futures_util::future::BoxFuture;
use fxpay_core::{Error, Result, StoreLock, Token, TokenStore};
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub struct PyTokenStore {
    obj: Arc<Py<PyAny>>,
    health: Arc<Health>,
}

impl PyTokenStore {
    pub fn new(obj: Py<PyAny>) -> Self {
        PyTokenStore {
            obj: Arc::new(obj),
            health: Arc::new(Health::default()),
        }
    }
}

/// Whether the store is failing now, so an outage is reported once.
#[derive(Default)]
struct Health {
    failing: AtomicBool,
}

impl Health {
    /// Passes `r` on, logging the first failure of an outage and the first success after it.
    fn note<T>(&self, py: Python<'_>, what: &str, r: PyResult<T>) -> Result<T> {
        match r {
            Ok(v) => {
                if self.failing.swap(false, Ordering::AcqRel) {
                    log(
                        py,
                        "info",
                        "the token store answers again; fxpay uses it from the next renewal"
                            .to_string(),
                    );
                }
                Ok(v)
            }
            Err(e) => {
                let shown = shown(py, &e);
                if !self.failing.swap(true, Ordering::AcqRel) {
                    log(
                        py,
                        "warning",
                        format!(
                            "the token store's {what}() failed ({shown}); fxpay renews tokens \
                             on its own until the store answers again"
                        ),
                    );
                }
                Err(Error::Internal(format!(
                    "the token store's {what}() raised {shown}"
                )))
            }
        }
    }
}

/// The exception as `Type: message`.
fn shown(py: Python<'_>, e: &PyErr) -> String {
    let name = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".to_string());
    let text = e.value(py).str().map(|s| s.to_string()).unwrap_or_default();
    if text.is_empty() {
        name
    } else {
        format!("{name}: {text}")
    }
}

fn log(py: Python<'_>, level: &str, message: String) {
    let logged = py
        .import("logging")
        .and_then(|m| m.call_method1("getLogger", ("fxpay",)))
        .and_then(|l| l.call_method1(level, ("%s", message)));
    // A logging failure must not turn into a failed call.
    let _ = logged;
}

/// Runs `f` attached to Python from a store thread; an error once the interpreter is
/// shutting down (`crate::exit_gate`).
fn gated<T>(f: impl for<'py> FnOnce(Python<'py>) -> Result<T>) -> Result<T> {
    crate::exit_gate::attach(f).unwrap_or_else(|| {
        Err(Error::Internal(
            "the token store cannot be used: the interpreter is shutting down".into(),
        ))
    })
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    // The shared runtime's blocking pool, also for blocking calls (whose caller polls them):
    // one pool of store threads for the process.
    fxpay_core::runtime()
        .spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(format!("token store call failed: {e}")))?
}

impl TokenStore for PyTokenStore {
    fn load<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Token>>> {
        let (obj, health, key) = (self.obj.clone(), self.health.clone(), key.to_string());
        Box::pin(blocking(move || {
            gated(|py| {
                let r = obj.bind(py).call_method1("load", (key,)).and_then(|found| {
                    if found.is_none() {
                        Ok(None)
                    } else {
                        token_from_py(&found).map(Some)
                    }
                });
                health.note(py, "load", r)
            })
        }))
    }

    fn save<'a>(&'a self, key: &'a str, t: &'a Token) -> BoxFuture<'a, Result<()>> {
        let (obj, health) = (self.obj.clone(), self.health.clone());
        let (key, t) = (key.to_string(), t.clone());
        Box::pin(blocking(move || {
            gated(|py| {
                let r = token(py, &t)
                    .and_then(|pt| obj.bind(py).call_method1("save", (key, pt)))
                    .map(|_| ());
                health.note(py, "save", r)
            })
        }))
    }

    fn lock<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<StoreLock>>> {
        let (obj, health, key) = (self.obj.clone(), self.health.clone(), key.to_string());
        Box::pin(blocking(move || {
            gated(|py| {
                let store = obj.bind(py);
                let held = match store.hasattr("lock") {
                    Ok(false) => return Ok(None),
                    Ok(true) => store.call_method1("lock", (key,)).map(Bound::unbind),
                    Err(e) => Err(e),
                };
                let held = Arc::new(health.note(py, "lock", held)?);
                Ok(Some(StoreLock::new(Box::new(move || {
                    Box::pin(blocking(move || {
                        gated(|py| {
                            let r = held.bind(py).call_method0("release").map(|_| ());
                            health.note(py, "lock release", r)
                        })
                    }))
                }))))
            })
        }))
    }
}

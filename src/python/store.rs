//! A Python token store (anything with `load(key)` and `save(key, token)`, and optionally
//! `lock(key)` returning an object with `release()`) seen from the core. Its methods run on
//! tokio's blocking pool, so a slow store (Redis over a network) never stalls the runtime.
use super::models::{token, token_from_py};
use crate::auth::store::{StoreLock, TokenStore};
use crate::error::{Error, Result};
use crate::models::Token;
use futures_util::future::BoxFuture;
use pyo3::prelude::*;
use std::sync::Arc;

pub struct PyTokenStore {
    obj: Arc<Py<PyAny>>,
}

impl PyTokenStore {
    pub fn new(obj: Py<PyAny>) -> Self {
        PyTokenStore { obj: Arc::new(obj) }
    }
}

fn store_error(what: &str, e: PyErr) -> Error {
    Python::attach(|py| {
        let shown = e
            .value(py)
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_default();
        Error::Internal(format!("the token store's {what}() raised {shown}"))
    })
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    // The shared runtime's blocking pool, also for calls driven on a caller's own runtime:
    // one pool of store threads for the process.
    crate::runtime::runtime()
        .spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(format!("token store call failed: {e}")))?
}

impl TokenStore for PyTokenStore {
    fn load<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Token>>> {
        let (obj, key) = (self.obj.clone(), key.to_string());
        Box::pin(blocking(move || {
            Python::attach(|py| {
                let found = obj.bind(py).call_method1("load", (key,))?;
                if found.is_none() {
                    Ok(None)
                } else {
                    token_from_py(&found).map(Some)
                }
            })
            .map_err(|e| store_error("load", e))
        }))
    }

    fn save<'a>(&'a self, key: &'a str, t: &'a Token) -> BoxFuture<'a, Result<()>> {
        let (obj, key, t) = (self.obj.clone(), key.to_string(), t.clone());
        Box::pin(blocking(move || {
            Python::attach(|py| {
                obj.bind(py).call_method1("save", (key, token(py, &t)?))?;
                Ok(())
            })
            .map_err(|e| store_error("save", e))
        }))
    }

    fn lock<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<StoreLock>>> {
        let (obj, key) = (self.obj.clone(), key.to_string());
        Box::pin(blocking(move || {
            Python::attach(|py| {
                let store = obj.bind(py);
                if !store.hasattr("lock")? {
                    return Ok(None);
                }
                let held: Py<PyAny> = store.call_method1("lock", (key,))?.unbind();
                let held = Arc::new(held);
                Ok(Some(StoreLock {
                    release: Box::new(move || {
                        Box::pin(blocking(move || {
                            Python::attach(|py| held.bind(py).call_method0("release").map(|_| ()))
                                .map_err(|e| store_error("lock release", e))
                        }))
                    }),
                }))
            })
            .map_err(|e| store_error("lock", e))
        }))
    }
}

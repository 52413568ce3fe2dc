//! The client's tokens and account information: the client-credentials token of payments
//! calls, the user's authorization (`authorization_url`, `exchange_code`, `refresh_token`)
//! and `user_session`.
use super::{default, Client};
use crate::convert::{opt_text, text, type_name};
use crate::errors::{Failure, Fallible};
use crate::models::out::Out;
use crate::models::{authorization_from_py, authorization_into_py, token_from_py};
use crate::session::{on_token_callback, UserSession};
use crate::twin::{self, Obs, Start};
use fxpay_core::{AuthorizationRequest, AuthorizeParams, Error};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBool;

/// A `fxpay.AuthorizationRequest` as the core's; anything else is a `TypeError`.
fn authorization_request(auth: &Bound<'_, PyAny>) -> PyResult<AuthorizationRequest> {
    authorization_from_py(auth)
}

impl Client {
    /// The call of :meth:`_payments_token` and :meth:`_payments_token_async`.
    fn payments_token_call(&self) -> PyResult<impl Start> {
        let c = self.core()?.clone();
        Ok(move |obs: Obs| async move {
            let t = c.payments_token(obs.as_deref()).await?;
            Ok(Out::Token(Box::new((*t).clone())))
        })
    }

    /// The call of :meth:`exchange_code` and :meth:`exchange_code_async`.
    fn exchange_code_call(
        &self,
        auth: &Bound<'_, PyAny>,
        callback: &Bound<'_, PyAny>,
    ) -> PyResult<impl Start> {
        let c = self.core()?.clone();
        let auth = authorization_request(auth)?;
        let callback = text(callback, "callback")?;
        Ok(move |obs: Obs| async move {
            let token = c.exchange_code(&auth, &callback, obs.as_deref()).await?;
            Ok(Out::Token(Box::new(token)))
        })
    }

    /// The call of :meth:`refresh_token` and :meth:`refresh_token_async`.
    fn refresh_token_call(&self, refresh_token: &Bound<'_, PyAny>) -> PyResult<impl Start> {
        let c = self.core()?.clone();
        let refresh_token = text(refresh_token, "refresh_token")?;
        Ok(move |obs: Obs| async move {
            let token = c.refresh_token(&refresh_token, obs.as_deref()).await?;
            Ok(Out::Token(Box::new(token)))
        })
    }
}

#[pymethods]
impl Client {
    /// The client-credentials token payments calls use (for tests and diagnostics).
    fn _payments_token(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        twin::blocking(py, self.deadline(), self.payments_token_call()?)
    }

    /// :meth:`_payments_token`, awaitable.
    fn _payments_token_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        twin::awaitable(
            py,
            self.deadline(),
            "_payments_token_async",
            self.payments_token_call()?,
        )
    }

    /// Checks the callback (state, ``error=``) and trades its code (and PKCE verifier) for a
    /// user token.
    fn exchange_code(
        &self,
        py: Python<'_>,
        auth: &Bound<'_, PyAny>,
        callback: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        twin::blocking(
            py,
            self.deadline(),
            self.exchange_code_call(auth, callback)?,
        )
    }

    /// :meth:`exchange_code`, awaitable.
    fn exchange_code_async(
        &self,
        py: Python<'_>,
        auth: &Bound<'_, PyAny>,
        callback: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        twin::awaitable(
            py,
            self.deadline(),
            "exchange_code_async",
            self.exchange_code_call(auth, callback)?,
        )
    }

    /// Trades a refresh token for a new token (the old refresh token is then spent).
    fn refresh_token(
        &self,
        py: Python<'_>,
        refresh_token: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        twin::blocking(py, self.deadline(), self.refresh_token_call(refresh_token)?)
    }

    /// :meth:`refresh_token`, awaitable.
    fn refresh_token_async(
        &self,
        py: Python<'_>,
        refresh_token: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        twin::awaitable(
            py,
            self.deadline(),
            "refresh_token_async",
            self.refresh_token_call(refresh_token)?,
        )
    }

    /// The URL to send the user's browser to, with a fresh random state (256 bits).
    ///
    /// With ``pkce`` (the default) the URL carries an RFC 7636 ``S256`` ``code_challenge``;
    /// its ``code_verifier`` stays in the returned request (``to_dict()`` keeps it, ``repr``
    /// never shows it) and :meth:`exchange_code` sends it.
    #[pyo3(signature = (redirect_uri, *, state = None, scope = default("gca-aisp"), pkce = default(true)))]
    #[pyo3(text_signature = "(self, /, redirect_uri, *, state=None, scope='gca-aisp', pkce=True)")]
    fn authorization_url<'py>(
        &self,
        py: Python<'py>,
        redirect_uri: &Bound<'py, PyAny>,
        state: Option<&Bound<'py, PyAny>>,
        scope: Py<PyAny>,
        pkce: Py<PyAny>,
    ) -> Fallible<Bound<'py, PyAny>> {
        let core = self.initialised()?;
        let redirect_uri = text(redirect_uri, "redirect_uri")?;
        let state = opt_text(state, "state")?;
        let (scope, pkce) = (scope.bind(py), pkce.bind(py));
        let scope = text(scope, "scope")?;
        let pkce = pkce.cast::<PyBool>().map(|b| b.is_true()).map_err(|_| {
            PyTypeError::new_err(format!("pkce must be a bool, not {}", type_name(pkce)))
        })?;
        let params = AuthorizeParams {
            redirect_uri: &redirect_uri,
            state: state.as_deref(),
            scope: &scope,
            pkce,
        };
        let a = core.core.authorization_url(&params)?;
        Ok(authorization_into_py(py, a)?.into_bound(py).into_any())
    }

    /// A session over a user's token that refreshes it (with rotation) as needed.
    ///
    /// ``on_token(new)`` is called before a new token is first used: no request carries
    /// ``new`` before ``on_token(new)`` has returned. If it raises, the call fails with that
    /// exception and the session offers the same token again before its next use. With
    /// ``key`` (and a ``token_store`` on this client) refreshes are shared across processes
    /// under that key; a store that fails is passed over (the session refreshes on its own).
    #[pyo3(signature = (token, *, on_token = None, key = None))]
    fn user_session(
        &self,
        token: &Bound<'_, PyAny>,
        on_token: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
    ) -> Fallible<UserSession> {
        let core = self.core()?;
        let open = self.initialised()?;
        let on_token = match on_token.filter(|f| !f.is_none()) {
            Some(f) if !f.is_callable() => {
                return Err(PyTypeError::new_err(format!(
                    "on_token must be callable, not {}",
                    type_name(f)
                ))
                .into())
            }
            f => f.map(|f| f.clone().unbind()),
        };
        let t = token_from_py(token)?;
        let shared = match (opt_text(key, "key")?, &open.store) {
            (Some(k), Some(store)) => Some((
                store.clone(),
                format!("fxpay:{}:user:{k}", core.config().base_url),
            )),
            (Some(_), None) => {
                return Err(Failure::from(Error::config(
                    "user_session(key=...) needs a Client with a token_store",
                )));
            }
            _ => None,
        };
        let session = core.user_session(t, on_token.map(on_token_callback), shared);
        Ok(UserSession::new(session, self.closed.clone()))
    }
}

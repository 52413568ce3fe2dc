//! The model classes of `fxpay._fxpay`, each around its core struct (see `class.rs` for what
//! every class gets), and how core results become them.
pub mod class;
pub mod out;
mod token_dict;

use super::convert::type_name;
use super::errors::PyFieldError;
use class::attributes::install;
use class::pymodel::pymodel;
use class::{into_py, ModelClass, Nested, PyTypes, Raw};
use fxpay_core as core;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};
use serde_json::Value;
use std::any::{Any, TypeId};

pymodel! {
    /// Fee-free deals of a client: ``total``, ``claimed`` and ``remaining``.
    Freebies(core::Freebies) { money: true, raw: false } {}
}

pymodel! {
    /// A currency quote: ``sell_amount`` is ``buy_amount`` at ``customer_rate``.
    ///
    /// Money and rates are exact ``Decimal``. ``fee``, ``fee_currency`` and ``freebies`` are
    /// ``None`` when the service leaves them out (or sends ``null``); fields the service
    /// adds are kept in ``raw``.
    Quote(core::Quote) { money: true, raw: true } {}
}

pymodel! {
    /// A postal address; ``country`` is an ISO 3166-1 alpha-2 code.
    Address(core::Address) { money: false, raw: false } {}
}

pymodel! {
    /// The beneficiary's bank account.
    BankDetails(core::BankDetails) { money: false, raw: false } {}
}

pymodel! {
    /// A payment recipient, as sent to ``Client.create_beneficiary``.
    Beneficiary(core::Beneficiary) { money: false, raw: false } {}
}

pymodel! {
    /// One recipient of a deal and the amount paid to it.
    ///
    /// ``amount`` accepts ``Decimal``, ``int``, ``str`` or a ``float`` (through its shortest
    /// repr) and is kept as an exact ``Decimal``; zero, negative and non-finite amounts raise
    /// :class:`fxpay.InvalidRequestError`, any other type (``bool`` included) ``TypeError``.
    DealBeneficiary(core::DealBeneficiary) { money: true, raw: false } {}
}

pymodel! {
    /// A booked deal: the service's ``deal_id`` with the quote, funding source, channel and
    /// beneficiaries it was booked with; ``raw`` is the service's answer.
    Deal(core::Deal) { money: true, raw: true } {}
}

pymodel! {
    /// An accepted spot deal; its outcome arrives in a ``DealCreated`` notification.
    ///
    /// Store ``callback_nonce`` next to ``process_id`` to verify that notification; ``repr``
    /// never shows it.
    SpotDeal(core::SpotDeal) { money: false, raw: true } {}
}

pymodel! {
    /// Where to send the user's browser, with the state to check when it comes back and the
    /// PKCE ``code_verifier`` to send with the code (``None`` without PKCE).
    ///
    /// ``to_dict()`` keeps every field, so ``AuthorizationRequest(**auth.to_dict())`` rebuilds
    /// it after a trip through the user's session; ``repr`` shows none of the secrets.
    AuthorizationRequest(core::AuthorizationRequest) { money: false, raw: false } {}
}

pymodel! {
    /// An OAuth access token with its expiry (an aware ``datetime``). The token values never
    /// show in ``repr``.
    Token(core::Token) { money: false, raw: false } {
        /// Whether the token's expiry has passed.
        #[getter]
        fn expired(&self) -> bool {
            self.core.expires_at <= core::unix_now()
        }

        /// Rebuilds a token saved with :meth:`to_dict` (``expires_at`` as unix seconds, ISO
        /// 8601 text or a ``datetime``; without it, ``expires_in`` from now).
        ///
        /// A ``d`` that is not a mapping is a ``TypeError``; a missing ``access_token`` or a
        /// value that cannot be a token's is a :class:`fxpay.InvalidRequestError`.
        #[classmethod]
        fn from_dict(
            cls: &Bound<'_, pyo3::types::PyType>,
            d: &Bound<'_, PyAny>,
        ) -> PyResult<Self> {
            let _ = cls;
            let kwargs = token_dict::token_kwargs(d)?;
            let core = class::construction::new::<Token>(&PyTuple::empty(d.py()), Some(&kwargs))?;
            Ok(<Self as ModelClass>::wrap(core, Raw::None))
        }
    }
}

pymodel! {
    /// One error entry: ``error_code`` is ``<layer>:<component>:<number>`` when well formed,
    /// and then ``layer``, ``component`` and ``number`` are its parts (else ``None``).
    FieldError(core::FieldError) { money: false, raw: false } {
        #[getter]
        fn layer(&self) -> Option<&str> {
            self.core.parts().map(|p| p.0)
        }

        #[getter]
        fn component(&self) -> Option<&str> {
            self.core.parts().map(|p| p.1)
        }

        #[getter]
        fn number(&self) -> Option<u32> {
            self.core.parts().map(|p| p.2)
        }
    }
}

pymodel! {
    /// A verified ``DealCreated`` notification; ``raw`` is the whole JSON body.
    DealCreated(core::DealCreated) { money: false, raw: true } {
        /// Whether the deal was booked (``status == "success"``).
        #[getter]
        fn ok(&self) -> bool {
            self.core.status == core::EventStatus::Success
        }
    }
}

/// Registers every model class.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    install::<Freebies>(m)?;
    install::<Quote>(m)?;
    install::<Address>(m)?;
    install::<BankDetails>(m)?;
    install::<Beneficiary>(m)?;
    install::<DealBeneficiary>(m)?;
    install::<Deal>(m)?;
    install::<SpotDeal>(m)?;
    install::<AuthorizationRequest>(m)?;
    install::<Token>(m)?;
    install::<FieldError>(m)?;
    install::<DealCreated>(m)?;
    super::account::register(m)
}

// -- nested models -------------------------------------------------------------------------

/// The models that are fields of other models.
pub struct NestedModels;

fn wrap_py<'py, M: ModelClass>(py: Python<'py>, core: &M::Core) -> PyResult<Bound<'py, PyAny>>
where
    PyClassInitializer<M>: From<M>,
{
    Ok(into_py::<M>(py, core.clone(), Raw::None)?
        .into_bound(py)
        .into_any())
}

/// The core model inside a model object; anything else is a `TypeError` naming `name`.
pub fn extract<M: ModelClass>(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<M::Core> {
    match obj.cast::<M>() {
        Ok(m) => Ok(m.get().core().clone()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{name} must be a fxpay.{}, not {}",
            <M::Core as core::Model>::NAME,
            type_name(obj)
        ))),
    }
}

/// A sequence (not a str) of model objects.
pub fn extract_list<M: ModelClass>(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<M::Core>> {
    let model = <M::Core as core::Model>::NAME;
    if obj.is_instance_of::<PyString>() || obj.cast::<pyo3::types::PySequence>().is_err() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be a sequence of fxpay.{model}, not {}",
            type_name(obj)
        )));
    }
    obj.try_iter()?
        .enumerate()
        .map(|(i, item)| extract::<M>(&item?, &format!("{name}[{i}]")))
        .collect()
}

impl Nested for NestedModels {
    fn to_py<'py>(py: Python<'py>, v: &dyn Any) -> Option<PyResult<Bound<'py, PyAny>>> {
        if let Some(f) = v.downcast_ref::<core::Freebies>() {
            return Some(wrap_py::<Freebies>(py, f));
        }
        if let Some(f) = v.downcast_ref::<Option<core::Freebies>>() {
            return Some(match f {
                Some(f) => wrap_py::<Freebies>(py, f),
                None => Ok(py.None().into_bound(py)),
            });
        }
        if let Some(a) = v.downcast_ref::<core::Address>() {
            return Some(wrap_py::<Address>(py, a));
        }
        if let Some(b) = v.downcast_ref::<core::BankDetails>() {
            return Some(wrap_py::<BankDetails>(py, b));
        }
        if let Some(list) = v.downcast_ref::<Vec<core::DealBeneficiary>>() {
            let made = list.iter().map(|b| wrap_py::<DealBeneficiary>(py, b));
            return Some(
                made.collect::<PyResult<Vec<_>>>()
                    .and_then(|l| Ok(PyTuple::new(py, l)?.into_any())),
            );
        }
        if let Some(list) = v.downcast_ref::<Vec<core::FieldError>>() {
            let made = list.iter().map(|e| wrap_py::<FieldError>(py, e));
            return Some(
                made.collect::<PyResult<Vec<_>>>()
                    .and_then(|l| Ok(PyList::new(py, l)?.into_any())),
            );
        }
        None
    }

    fn from_py(obj: &Bound<'_, PyAny>, name: &str, ty: TypeId) -> Option<PyResult<Box<dyn Any>>> {
        fn boxed<T: Any>(r: PyResult<T>) -> PyResult<Box<dyn Any>> {
            r.map(|v| Box::new(v) as Box<dyn Any>)
        }
        if ty == TypeId::of::<core::Freebies>() {
            return Some(boxed(extract::<Freebies>(obj, name)));
        }
        if ty == TypeId::of::<Option<core::Freebies>>() {
            let r = match obj.is_none() {
                true => Ok(None),
                false => extract::<Freebies>(obj, name).map(Some),
            };
            return Some(boxed(r));
        }
        if ty == TypeId::of::<core::Address>() {
            return Some(boxed(extract::<Address>(obj, name)));
        }
        if ty == TypeId::of::<core::BankDetails>() {
            return Some(boxed(extract::<BankDetails>(obj, name)));
        }
        if ty == TypeId::of::<Vec<core::DealBeneficiary>>() {
            return Some(boxed(extract_list::<DealBeneficiary>(obj, name)));
        }
        if ty == TypeId::of::<Vec<core::FieldError>>() {
            return Some(boxed(extract_list::<FieldError>(obj, name)));
        }
        None
    }

    fn py_types(ty: TypeId) -> Option<PyTypes> {
        let kinds: [(TypeId, PyTypes); 7] = [
            (TypeId::of::<core::Freebies>(), ("Freebies", "Freebies")),
            (
                TypeId::of::<Option<core::Freebies>>(),
                ("Freebies | None", "Freebies | None"),
            ),
            (TypeId::of::<core::Address>(), ("Address", "Address")),
            (
                TypeId::of::<core::BankDetails>(),
                ("BankDetails", "BankDetails"),
            ),
            (
                TypeId::of::<Vec<core::DealBeneficiary>>(),
                ("Sequence[DealBeneficiary]", "tuple[DealBeneficiary, ...]"),
            ),
            (
                TypeId::of::<Vec<core::FieldError>>(),
                ("Sequence[FieldError]", "list[FieldError]"),
            ),
            // The one enum, crossing as its wire text (pythonize).
            (
                TypeId::of::<core::EventStatus>(),
                (
                    r#"Literal["success", "fail"]"#,
                    r#"Literal["success", "fail"]"#,
                ),
            ),
        ];
        kinds
            .iter()
            .find(|(t, _)| *t == ty)
            .map(|(_, types)| *types)
    }
}

// -- core results -> Python ----------------------------------------------------------------

/// A quote read from the service, with its answer's JSON text (decoded into `raw` on use).
pub fn quote_into_py(py: Python<'_>, q: core::Quote, raw_text: String) -> PyResult<Py<Quote>> {
    into_py::<Quote>(py, q, Raw::Text(raw_text))
}

pub fn deal_into_py(py: Python<'_>, d: core::Deal, raw: Value) -> PyResult<Py<Deal>> {
    into_py::<Deal>(py, d, Raw::Value(raw))
}

pub fn spot_deal_into_py(py: Python<'_>, s: core::SpotDeal, raw: Value) -> PyResult<Py<SpotDeal>> {
    into_py::<SpotDeal>(py, s, Raw::Value(raw))
}

pub fn token_into_py(py: Python<'_>, t: core::Token) -> PyResult<Py<Token>> {
    into_py::<Token>(py, t, Raw::None)
}

pub fn authorization_into_py(
    py: Python<'_>,
    a: core::AuthorizationRequest,
) -> PyResult<Py<AuthorizationRequest>> {
    into_py::<AuthorizationRequest>(py, a, Raw::None)
}

/// A `DealCreated` event with the body object it was parsed from (decoded into `raw` on use).
pub fn deal_created_into_py(
    py: Python<'_>,
    ev: core::DealCreated,
    body: Py<PyAny>,
) -> PyResult<Py<DealCreated>> {
    into_py::<DealCreated>(py, ev, Raw::Body(body))
}

pub fn field_error_into_py(py: Python<'_>, e: core::FieldError) -> PyResult<Py<FieldError>> {
    into_py::<FieldError>(py, e, Raw::None)
}

/// A token as a Python object (for `on_token` callbacks and token stores).
pub fn token<'py>(py: Python<'py>, t: &core::Token) -> PyResult<Bound<'py, PyAny>> {
    Ok(token_into_py(py, t.clone())?.into_bound(py).into_any())
}

/// A `fxpay.Token` -> core token; anything else is a `TypeError` naming `token`.
pub fn token_from_py(obj: &Bound<'_, PyAny>) -> PyResult<core::Token> {
    extract::<Token>(obj, "token")
}

/// A `fxpay.Beneficiary` -> core beneficiary (`TypeError` naming `beneficiary` otherwise).
pub fn beneficiary_from_py(obj: &Bound<'_, PyAny>) -> PyResult<core::Beneficiary> {
    extract::<Beneficiary>(obj, "beneficiary")
}

/// A sequence of `fxpay.DealBeneficiary` -> core list (`TypeError` naming `beneficiaries`).
pub fn deal_beneficiaries_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Vec<core::DealBeneficiary>> {
    extract_list::<DealBeneficiary>(obj, "beneficiaries")
}

/// A `fxpay.AuthorizationRequest` -> core request (`TypeError` naming `auth`).
pub fn authorization_from_py(obj: &Bound<'_, PyAny>) -> PyResult<core::AuthorizationRequest> {
    extract::<AuthorizationRequest>(obj, "auth")
}

impl<'py> IntoPyObject<'py> for PyFieldError {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        Ok(field_error_into_py(py, self.0)?.into_bound(py).into_any())
    }
}

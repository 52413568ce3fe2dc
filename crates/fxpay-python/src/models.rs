//! Core results -> instances of the Python models in `fxpay.models`.
use super::convert::{decimal_to_py, int, object_to_py, text_of, value_to_py};
use fxpay_core::error::Error;
use fxpay_core::models::{Deal, FieldError, Quote, SpotDeal, Token, VirtualAccount};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple};
use rust_decimal::Decimal;
use serde_json::Value;

static MODELS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let m = MODELS.get_or_try_init(py, || Ok::<_, PyErr>(py.import("fxpay.models")?.unbind()))?;
    m.bind(py).getattr(name)
}

/// What a core call hands back to Python.
pub enum Out {
    None,
    Str(String),
    /// A quote and its answer's JSON text (the Python `Quote` decodes `raw` from it on use).
    Quote(Box<(Quote, String)>),
    Deal(Box<(Deal, Value)>),
    Spot(Box<(SpotDeal, Value)>),
    Token(Box<Token>),
    Accounts(Vec<VirtualAccount>),
}

impl<'py> IntoPyObject<'py> for Out {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        match self {
            Out::None => Ok(py.None().into_bound(py)),
            Out::Str(s) => Ok(s.into_pyobject(py)?.into_any()),
            Out::Quote(b) => quote(py, &b.0, &b.1),
            Out::Deal(b) => deal(py, &b.0, &b.1),
            Out::Spot(b) => spot(py, &b.0, &b.1),
            Out::Token(t) => token(py, &t),
            Out::Accounts(list) => {
                let cls = class(py, "VirtualAccount")?;
                let items = list
                    .iter()
                    .map(|a| cls.call1((object_to_py(py, a)?,)))
                    .collect::<PyResult<Vec<_>>>()?;
                Ok(items.into_pyobject(py)?.into_any())
            }
        }
    }
}

/// A count that is whole stays an `int`; anything else is a `Decimal`.
fn count<'py>(py: Python<'py>, d: &Decimal) -> PyResult<Bound<'py, PyAny>> {
    if d.fract().is_zero() {
        if let Ok(i) = i64::try_from(d.trunc()) {
            return Ok(i.into_pyobject(py)?.into_any());
        }
    }
    decimal_to_py(py, d)
}

/// A model class and how to build one fast. A plain dataclass (generated `__init__`, no
/// `__post_init__`) whose fields are exactly `names` is built as its `__init__` would leave
/// it, without running it: `object.__new__(cls)` and the field values put in its `__dict__`.
/// A frozen dataclass's `__init__` pays an `object.__setattr__` call per field; this does not.
/// Anything else (a class changed to need its `__init__`) is called as usual.
struct Maker {
    cls: Py<PyAny>,
    /// Interned field names, when the fast path applies.
    fast: Option<Vec<Py<PyString>>>,
}

static OBJECT_NEW: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

impl Maker {
    fn new(py: Python<'_>, name: &str, names: &[&str]) -> PyResult<Self> {
        let cls = class(py, name)?;
        let fast = Self::plain_dataclass(py, &cls, names)?.then(|| {
            names
                .iter()
                .map(|n| PyString::intern(py, n).unbind())
                .collect()
        });
        Ok(Maker {
            cls: cls.unbind(),
            fast,
        })
    }

    fn plain_dataclass(py: Python<'_>, cls: &Bound<'_, PyAny>, names: &[&str]) -> PyResult<bool> {
        let dataclasses = py.import("dataclasses")?;
        if !dataclasses
            .call_method1("is_dataclass", (cls,))?
            .is_truthy()?
            || cls.hasattr("__post_init__")?
            || !cls
                .getattr("__dataclass_params__")?
                .getattr("init")?
                .is_truthy()?
        {
            return Ok(false);
        }
        let fields: Vec<String> = dataclasses
            .call_method1("fields", (cls,))?
            .try_iter()?
            .map(|f| f?.getattr("name")?.extract())
            .collect::<PyResult<_>>()?;
        if fields.iter().map(String::as_str).ne(names.iter().copied()) {
            return Ok(false);
        }
        // Instances must carry a `__dict__` (no `__slots__` dataclass).
        let probe = object_new(py)?.call1((cls,))?;
        probe.hasattr("__dict__")
    }

    /// An instance with these field values, in field order.
    fn make<'py, const N: usize>(
        &self,
        py: Python<'py>,
        values: [Bound<'py, PyAny>; N],
    ) -> PyResult<Bound<'py, PyAny>> {
        let cls = self.cls.bind(py);
        match &self.fast {
            Some(names) if names.len() == N => {
                let obj = object_new(py)?.call1((cls,))?;
                let dict = obj
                    .getattr(intern!(py, "__dict__"))?
                    .cast_into::<PyDict>()?;
                for (name, value) in names.iter().zip(values) {
                    dict.set_item(name.bind(py), value)?;
                }
                Ok(obj)
            }
            _ => cls.call1(PyTuple::new(py, values)?),
        }
    }
}

fn object_new(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    OBJECT_NEW
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(
                py.import("builtins")?
                    .getattr("object")?
                    .getattr("__new__")?
                    .unbind(),
            )
        })
        .map(|f| f.bind(py))
}

static QUOTE: PyOnceLock<Maker> = PyOnceLock::new();
static FREEBIES: PyOnceLock<Maker> = PyOnceLock::new();

fn quote<'py>(py: Python<'py>, q: &Quote, raw_text: &str) -> PyResult<Bound<'py, PyAny>> {
    let freebies = match &q.freebies {
        Some(f) => FREEBIES
            .get_or_try_init(py, || {
                Maker::new(py, "Freebies", &["total", "claimed", "remaining"])
            })?
            .make(
                py,
                [
                    count(py, &f.total)?,
                    count(py, &f.claimed)?,
                    count(py, &f.remaining)?,
                ],
            )?,
        None => py.None().into_bound(py),
    };
    let fee = match &q.fee {
        Some(d) => decimal_to_py(py, d)?,
        None => py.None().into_bound(py),
    };
    let values = [
        q.id.as_str().into_pyobject(py)?.into_any(),
        q.buy_currency.as_str().into_pyobject(py)?.into_any(),
        decimal_to_py(py, &q.buy_amount)?,
        q.sell_currency.as_str().into_pyobject(py)?.into_any(),
        decimal_to_py(py, &q.sell_amount)?,
        decimal_to_py(py, &q.customer_rate)?,
        decimal_to_py(py, &q.inverse_customer_rate)?,
        fee,
        q.fee_currency.as_deref().into_pyobject(py)?.into_any(),
        freebies,
    ];
    let maker = QUOTE.get_or_try_init(py, || {
        Maker::new(
            py,
            "Quote",
            &[
                "id",
                "buy_currency",
                "buy_amount",
                "sell_currency",
                "sell_amount",
                "customer_rate",
                "inverse_customer_rate",
                "fee",
                "fee_currency",
                "freebies",
                "raw",
            ],
        )
    })?;
    let text = PyString::new(py, raw_text).into_any();
    match &maker.fast {
        // The plain dataclass: the instance keeps the JSON text as `_body`, and `Quote`
        // decodes it into `raw` (exact Decimals, whole numbers as int) on first use.
        Some(names) if names.len() == values.len() + 1 => {
            let obj = object_new(py)?.call1((maker.cls.bind(py),))?;
            let dict = obj
                .getattr(intern!(py, "__dict__"))?
                .cast_into::<PyDict>()?;
            for (name, value) in names.iter().zip(values) {
                dict.set_item(name.bind(py), value)?;
            }
            dict.set_item(intern!(py, "_body"), text)?;
            Ok(obj)
        }
        _ => {
            let raw = class(py, "_decode_raw")?.call1((text,))?;
            let [a, b, c, d, e, f, g, h, i, j] = values;
            maker.make(py, [a, b, c, d, e, f, g, h, i, j, raw])
        }
    }
}

fn deal<'py>(py: Python<'py>, d: &Deal, raw: &Value) -> PyResult<Bound<'py, PyAny>> {
    let cls = class(py, "DealBeneficiary")?;
    let beneficiaries = d
        .request
        .beneficiaries
        .iter()
        .map(|b| {
            cls.call1((
                b.beneficiary_id.as_str(),
                decimal_to_py(py, &b.amount)?,
                b.pay_reason.as_str(),
                b.pay_reference.as_str(),
            ))
        })
        .collect::<PyResult<Vec<_>>>()?;
    class(py, "Deal")?.call1((
        d.deal_id.as_str(),
        d.request.quote_id.as_str(),
        d.request.funding_source.as_str(),
        d.request.channel.as_deref(),
        PyTuple::new(py, beneficiaries)?,
        value_to_py(py, raw)?,
    ))
}

fn spot<'py>(py: Python<'py>, s: &SpotDeal, raw: &Value) -> PyResult<Bound<'py, PyAny>> {
    class(py, "SpotDeal")?.call1((
        s.process_id.as_str(),
        s.callback_url.as_deref(),
        s.callback_nonce.as_deref(),
        value_to_py(py, raw)?,
    ))
}

static UTC_FROMTIMESTAMP: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

pub fn token<'py>(py: Python<'py>, t: &Token) -> PyResult<Bound<'py, PyAny>> {
    let (fromts, utc) = UTC_FROMTIMESTAMP.get_or_try_init(py, || {
        let dt = py.import("datetime")?;
        Ok::<_, PyErr>((
            dt.getattr("datetime")?.getattr("fromtimestamp")?.unbind(),
            dt.getattr("timezone")?.getattr("utc")?.unbind(),
        ))
    })?;
    let expires_at = fromts.bind(py).call1((t.expires_at, utc.bind(py)))?;
    class(py, "Token")?.call1((
        t.access_token.as_str(),
        t.token_type.as_str(),
        t.expires_in,
        expires_at,
        t.refresh_token.as_deref(),
        t.scope.as_deref(),
    ))
}

/// A Python `fxpay.Token` (or anything with the same attributes) -> core token. Anything
/// else is a `TypeError`; text with a lone surrogate an `InvalidRequestError`.
pub fn token_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Token> {
    let attr = |name: &str| -> PyResult<Bound<'_, PyAny>> {
        obj.getattr(name).map_err(|_| {
            let type_name = obj
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "another type".into());
            PyTypeError::new_err(format!(
                "token must be a fxpay.Token, got {type_name} (it has no {name})"
            ))
        })
    };
    fn wrong(name: &'static str, what: &'static str) -> impl Fn(PyErr) -> PyErr {
        move |_| PyTypeError::new_err(format!("token.{name} must be {what}"))
    }
    let text = |name: &str| -> PyResult<String> {
        let v = attr(name)?;
        let s = v
            .cast::<PyString>()
            .map_err(|_| PyTypeError::new_err(format!("token.{name} must be a str")))?;
        text_of(s, &format!("token.{name}"))
    };
    let optional_text = |name: &str| -> PyResult<Option<String>> {
        if attr(name)?.is_none() {
            Ok(None)
        } else {
            text(name).map(Some)
        }
    };
    let expires_at = attr("expires_at")?;
    let expires_at: f64 = if expires_at.is_none() {
        0.0
    } else {
        expires_at
            .call_method0("timestamp")
            .and_then(|t| t.extract())
            .map_err(wrong("expires_at", "a datetime"))?
    };
    let expires_in = int(
        &attr("expires_in")?,
        "token.expires_in",
        Error::InvalidRequest,
    )?;
    Ok(Token {
        access_token: text("access_token")?,
        token_type: text("token_type")?,
        expires_in: u64::try_from(expires_in.max(0)).unwrap_or(0),
        expires_at,
        refresh_token: optional_text("refresh_token")?,
        scope: optional_text("scope")?,
    })
}

pub fn field_error<'py>(py: Python<'py>, e: &FieldError) -> PyResult<Bound<'py, PyAny>> {
    let kwargs = PyDict::new(py);
    if let Some((layer, component, number)) = e.parts() {
        kwargs.set_item("layer", layer)?;
        kwargs.set_item("component", component)?;
        kwargs.set_item("number", number)?;
    }
    class(py, "FieldError")?.call(
        (
            e.error_code.as_str(),
            e.field_name.as_deref(),
            e.message.as_str(),
        ),
        Some(&kwargs),
    )
}

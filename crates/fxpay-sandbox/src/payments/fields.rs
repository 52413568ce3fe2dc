//! Field-by-field validation of JSON request objects, collecting every error.
use std::str::FromStr;

use rust_decimal::Decimal;
use serde_json::{Map, Number, Value};

use crate::http::errors::{Field, FieldError};
use crate::payments::rates;

/// Largest amount accepted anywhere (1,000,000,000 in the currency's major unit).
pub const MAX_AMOUNT: i64 = 1_000_000_000;

/// Writes a decimal as a JSON number with exactly its digits (no float noise).
pub fn number(d: &Decimal) -> Value {
    Number::from_str(&d.to_string())
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// Parses a JSON number exactly, as written.
pub fn decimal_of(n: &Number) -> Option<Decimal> {
    let s = n.to_string();
    if s.contains(['e', 'E']) {
        Decimal::from_scientific(&s).ok()
    } else {
        Decimal::from_str_exact(&s).ok()
    }
}

/// True when `s` has nothing but spaces, tabs and line breaks (the OpenAPI document's
/// `[^ \t\n\r]` pattern, identical in every regex dialect).
pub fn is_blank(s: &str) -> bool {
    s.chars().all(|c| matches!(c, ' ' | '\t' | '\n' | '\r'))
}

/// Collects the validation errors of one request.
#[derive(Debug)]
pub struct Checker {
    component: &'static str,
    pub errors: Vec<FieldError>,
}

impl Checker {
    pub fn new(component: &'static str) -> Self {
        Self {
            component,
            errors: Vec::new(),
        }
    }

    pub fn push(&mut self, kind: Field, field: &str, message: impl Into<String>) {
        self.errors
            .push(FieldError::field(self.component, kind, field, message));
    }

    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// The value of a required key; reports `Required` when absent or null.
    fn present<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Option<&'a Value> {
        match obj.get(key) {
            None | Some(Value::Null) => {
                self.push(Field::Required, field, format!("{key} is required"));
                None
            }
            Some(v) => Some(v),
        }
    }

    fn wrong_type(&mut self, field: &str, key: &str, want: &str, got: &Value) {
        self.push(
            Field::WrongType,
            field,
            format!("{key} must be a {want}, not {}", fxpay_core::json_kind(got)),
        );
    }

    /// A required, non-blank string of at most `max` characters.
    pub fn string(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        field: &str,
        max: usize,
    ) -> Option<String> {
        let v = self.present(obj, key, field)?;
        self.string_value(v, key, field, max)
    }

    /// An optional string (absent or null → `Some(None)`); blank or too long is an error.
    pub fn opt_string(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        field: &str,
        max: usize,
    ) -> Option<Option<String>> {
        match obj.get(key) {
            None | Some(Value::Null) => Some(None),
            Some(v) => self.string_value(v, key, field, max).map(Some),
        }
    }

    fn string_value(&mut self, v: &Value, key: &str, field: &str, max: usize) -> Option<String> {
        let Value::String(s) = v else {
            self.wrong_type(field, key, "string", v);
            return None;
        };
        if is_blank(s) {
            self.push(Field::Empty, field, format!("{key} must not be empty"));
            return None;
        }
        if s.chars().count() > max {
            self.push(
                Field::TooLong,
                field,
                format!("{key} must be at most {max} characters"),
            );
            return None;
        }
        Some(s.clone())
    }

    pub fn object<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Option<&'a Map<String, Value>> {
        let v = self.present(obj, key, field)?;
        match v {
            Value::Object(m) => Some(m),
            other => {
                self.wrong_type(field, key, "object", other);
                None
            }
        }
    }

    pub fn array<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Option<&'a Vec<Value>> {
        let v = self.present(obj, key, field)?;
        match v {
            Value::Array(a) => Some(a),
            other => {
                self.wrong_type(field, key, "array", other);
                None
            }
        }
    }

    /// An ISO 4217 code; with `priced`, also one the rate table knows.
    pub fn currency(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        field: &str,
        priced: bool,
    ) -> Option<String> {
        let v = self.present(obj, key, field)?;
        let Value::String(s) = v else {
            self.wrong_type(field, key, "string", v);
            return None;
        };
        let iso = s.len() == 3
            && s.bytes().all(|b| b.is_ascii_uppercase())
            && iso_currency::Currency::from_code(s).is_some();
        if !iso {
            self.push(
                Field::BadCurrency,
                field,
                format!("{key} must be an ISO 4217 currency code such as USD"),
            );
            return None;
        }
        if priced && rates::usd_value(s).is_none() {
            self.push(
                Field::UnsupportedCurrency,
                field,
                format!(
                    "the sandbox has no rate for {s}; supported: {}",
                    rates::supported().join(", ")
                ),
            );
            return None;
        }
        Some(s.clone())
    }

    /// An ISO 3166-1 alpha-2 country code (upper case).
    pub fn country(&mut self, obj: &Map<String, Value>, key: &str, field: &str) -> Option<String> {
        let v = self.present(obj, key, field)?;
        let Value::String(s) = v else {
            self.wrong_type(field, key, "string", v);
            return None;
        };
        let ok = s.len() == 2
            && s.bytes().all(|b| b.is_ascii_uppercase())
            && isocountry::CountryCode::for_alpha2(s).is_ok();
        if !ok {
            self.push(
                Field::BadCountry,
                field,
                format!("{key} must be an ISO 3166-1 alpha-2 country code such as GB"),
            );
            return None;
        }
        Some(s.clone())
    }

    /// A number of at most `places` decimals, at least `min` and at most [`MAX_AMOUNT`],
    /// parsed exactly.
    pub fn amount(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        field: &str,
        min: Decimal,
        places: u32,
    ) -> Option<Decimal> {
        let v = self.present(obj, key, field)?;
        let Value::Number(n) = v else {
            self.wrong_type(field, key, "number", v);
            return None;
        };
        let Some(d) = decimal_of(n) else {
            self.push(
                Field::TooLarge,
                field,
                format!("{key} is not a representable amount"),
            );
            return None;
        };
        if d.normalize().scale() > places {
            self.push(
                Field::TooManyDecimals,
                field,
                format!("{key} may have at most {places} decimal places"),
            );
            return None;
        }
        if d < min || d <= Decimal::ZERO {
            let message = if min <= Decimal::ZERO || min.normalize().scale() >= places {
                format!("{key} must be greater than zero")
            } else {
                format!("{key} must be at least {min}")
            };
            self.push(Field::NotPositive, field, message);
            return None;
        }
        if d > Decimal::from(MAX_AMOUNT) {
            self.push(
                Field::TooLarge,
                field,
                format!("{key} must be at most {MAX_AMOUNT}"),
            );
            return None;
        }
        Some(d)
    }

    /// An integer in `min..=max`.
    pub fn integer(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        field: &str,
        min: i64,
        max: i64,
    ) -> Option<i64> {
        let v = self.present(obj, key, field)?;
        let Value::Number(n) = v else {
            self.wrong_type(field, key, "integer", v);
            return None;
        };
        // JSON Schema counts 2.0 as an integer; so does the sandbox.
        let exact = decimal_of(n);
        let integral = n.as_i64().or_else(|| {
            exact
                .filter(|d| d.fract().is_zero())
                .and_then(|d| i64::try_from(d).ok())
        });
        let Some(i) = integral else {
            if exact.is_some_and(|d| d.fract().is_zero()) {
                self.push(
                    Field::OutOfRange,
                    field,
                    format!("{key} must be between {min} and {max}"),
                );
            } else {
                self.push(Field::WrongType, field, format!("{key} must be an integer"));
            }
            return None;
        };
        if i < min || i > max {
            self.push(
                Field::OutOfRange,
                field,
                format!("{key} must be between {min} and {max}"),
            );
            return None;
        }
        Some(i)
    }

    /// A UUID, returned in canonical lower-case hyphenated form.
    pub fn uuid(&mut self, obj: &Map<String, Value>, key: &str, field: &str) -> Option<String> {
        let v = self.present(obj, key, field)?;
        let Value::String(s) = v else {
            self.wrong_type(field, key, "string", v);
            return None;
        };
        match uuid::Uuid::try_parse(s) {
            Ok(u) if s.len() == 36 => Some(u.hyphenated().to_string()),
            _ => {
                self.push(Field::BadUuid, field, format!("{key} must be a UUID"));
                None
            }
        }
    }

    /// Exactly one of `allowed` (case-sensitive, as the OpenAPI enum says).
    pub fn one_of(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        field: &str,
        allowed: &[&'static str],
    ) -> Option<&'static str> {
        let s = self.string(obj, key, field, 64)?;
        let found = allowed.iter().find(|a| **a == s).copied();
        if found.is_none() {
            self.push(
                Field::NotAllowed,
                field,
                format!("{key} must be one of: {}", allowed.join(", ")),
            );
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn exact_numbers() {
        let m =
            obj(serde_json::from_str(r#"{"a": 1523.45, "b": 1e3, "c": 0.1}"#).unwrap_or(json!({})));
        let mut c = Checker::new("quote");
        let one = Decimal::ONE;
        let got = c.amount(&m, "a", "A", one, 2).map(|d| d.to_string());
        assert_eq!(got.as_deref(), Some("1523.45"));
        assert_eq!(c.amount(&m, "b", "B", one, 0), Some(Decimal::from(1000)));
        assert!(c.is_ok());
        assert_eq!(c.amount(&m, "c", "C", one, 2), None);
        assert_eq!(c.amount(&m, "a", "A", one, 1), None);
        let codes: Vec<_> = c.errors.iter().map(|e| e.code.as_str()).collect();
        assert_eq!(codes, ["validation:quote:1009", "validation:quote:1010"]);
        c.errors.clear();
        assert_eq!(number(&Decimal::new(1, 1)).to_string(), "0.1");
        assert!(c.is_ok());
    }

    #[test]
    fn collects_all_errors() {
        let m = obj(json!({"s": "", "n": "x", "i": 1.5, "cur": "usd", "cc": "XX", "u": "nope"}));
        let mut c = Checker::new("beneficiary");
        assert!(c.string(&m, "s", "S", 10).is_none());
        assert!(c.amount(&m, "n", "N", Decimal::ONE, 2).is_none());
        assert!(c.integer(&m, "i", "I", 1, 10).is_none());
        assert!(c.currency(&m, "cur", "Cur", false).is_none());
        assert!(c.country(&m, "cc", "Cc").is_none());
        assert!(c.uuid(&m, "u", "U").is_none());
        assert!(c.string(&m, "missing", "Missing", 10).is_none());
        let codes: Vec<_> = c.errors.iter().map(|e| e.code.as_str()).collect();
        assert_eq!(
            codes,
            [
                "validation:beneficiary:1004",
                "validation:beneficiary:1002",
                "validation:beneficiary:1002",
                "validation:beneficiary:1005",
                "validation:beneficiary:1007",
                "validation:beneficiary:1013",
                "validation:beneficiary:1001"
            ]
        );
    }
}

//! Exact amounts and ISO 4217 / ISO 3166-1 checks. Money never passes through `f64`.
use crate::error::{Error, Result};
use rust_decimal::Decimal;
use std::str::FromStr;

/// Parses a positive, finite amount written in decimal notation (`"1000"`, `"12.50"`,
/// `"1e3"`). The text is what Python's `str()` gives for an int, a `Decimal` or a float's
/// shortest repr, so the value is exactly the one the user wrote.
pub fn parse_amount(field: &str, text: &str) -> Result<Decimal> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    if lower.contains("nan") || lower.contains("inf") {
        return Err(Error::invalid(format!(
            "{field} must be a finite number, got {t}"
        )));
    }
    let value = if lower.contains('e') {
        Decimal::from_scientific(t)
    } else {
        Decimal::from_str(t)
    }
    .map_err(|_| Error::invalid(format!("{field} must be a decimal number, got {t:?}")))?;
    if value <= Decimal::ZERO {
        return Err(Error::invalid(format!(
            "{field} must be greater than zero, got {t}"
        )));
    }
    Ok(value)
}

/// Checks a three-letter ISO 4217 currency code (upper case, as the service writes it).
pub fn check_currency(field: &str, code: &str) -> Result<()> {
    if code.len() == 3 && iso_currency::Currency::from_code(code).is_some() {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{field} must be a three-letter ISO 4217 currency code, got {code:?}"
        )))
    }
}

/// Checks a two-letter ISO 3166-1 alpha-2 country code (upper case).
pub fn check_country(field: &str, code: &str) -> Result<()> {
    let upper = code.len() == 2 && code.bytes().all(|b| b.is_ascii_uppercase());
    if upper && isocountry::CountryCode::for_alpha2(code).is_ok() {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{field} must be a two-letter ISO 3166-1 country code, got {code:?}"
        )))
    }
}

/// Minor units of a currency (2 for USD, 0 for JPY), 2 when ISO 4217 gives none.
pub fn minor_units(code: &str) -> u32 {
    iso_currency::Currency::from_code(code)
        .and_then(|c| c.exponent())
        .map(u32::from)
        .unwrap_or(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_keep_their_exact_digits() {
        assert_eq!(
            parse_amount("a", "1000").map(|d| d.to_string()).ok(),
            Some("1000".into())
        );
        assert_eq!(
            parse_amount("a", "0.10").map(|d| d.to_string()).ok(),
            Some("0.10".into())
        );
        assert_eq!(
            parse_amount("a", "0.1").map(|d| d.to_string()).ok(),
            Some("0.1".into())
        );
        assert_eq!(
            parse_amount("a", "1e3")
                .map(|d| d.normalize().to_string())
                .ok(),
            Some("1000".into())
        );
    }

    #[test]
    fn refuses_non_positive_and_non_finite() {
        for t in [
            "0",
            "-1",
            "0.00",
            "nan",
            "NaN",
            "inf",
            "-Infinity",
            "",
            "abc",
            "1,5",
            "sNaN",
        ] {
            assert!(
                matches!(parse_amount("amount", t), Err(Error::InvalidRequest(_))),
                "{t}"
            );
        }
    }

    #[test]
    fn currency_codes() {
        assert!(check_currency("c", "USD").is_ok());
        assert!(check_currency("c", "JPY").is_ok());
        for bad in ["usd", "US", "USDX", "XYZ", "", "123"] {
            assert!(check_currency("c", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn country_codes() {
        assert!(check_country("c", "AU").is_ok());
        for bad in ["au", "AUS", "ZZ", "", "A1"] {
            assert!(check_country("c", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn minor_unit_table() {
        assert_eq!(minor_units("USD"), 2);
        assert_eq!(minor_units("JPY"), 0);
        assert_eq!(minor_units("KWD"), 3);
    }
}

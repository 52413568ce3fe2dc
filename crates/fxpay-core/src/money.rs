//! Exact amounts and ISO 4217 / ISO 3166-1 checks. Money never passes through `f64`.
use crate::error::{Error, Result};
use rust_decimal::Decimal;

/// The most significant digits an amount may have: what a `rust_decimal::Decimal` holds.
pub(crate) const MAX_SIGNIFICANT_DIGITS: usize = 28;

/// Parses a positive, finite amount written in decimal notation (`"1000"`, `"12.50"`,
/// `"1e3"`). The text is what Python's `str()` gives for an int, a `Decimal` or a float's
/// shortest repr, so the value is exactly the one the user wrote.
///
/// The value is kept exactly or refused, never rounded: more than
/// [`MAX_SIGNIFICANT_DIGITS`] significant digits, or a value too large (or with too many
/// decimal places) for a `Decimal`, is an [`Error::InvalidRequest`]. Trailing zeros are
/// kept as written (`"0.10"` stays `0.10`) when they fit, and all dropped when they do not.
pub(crate) fn parse_amount(field: &str, text: &str) -> Result<Decimal> {
    parse_number(field, text, false)
}

/// Parses a decimal number exactly, as [`parse_amount`] does, but of any sign: the rates,
/// fees and counts of a model built by hand.
pub fn parse_exact(field: &str, text: &str) -> Result<Decimal> {
    parse_number(field, text, true)
}

fn parse_number(field: &str, text: &str, any_sign: bool) -> Result<Decimal> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    if lower.contains("nan") || lower.contains("inf") {
        return Err(Error::invalid(format!(
            "{field} must be a finite number, got {}",
            shown(t)
        )));
    }
    let not_a_number = || {
        Error::invalid(format!(
            "{field} must be a decimal number, got {:?}",
            shown(t)
        ))
    };
    let parts = Parts::parse(t).ok_or_else(not_a_number)?;
    if !any_sign && (parts.negative || parts.digits.bytes().all(|b| b == b'0')) {
        return Err(Error::invalid(format!(
            "{field} must be greater than zero, got {}",
            shown(t)
        )));
    }
    let significant = parts
        .digits
        .trim_start_matches('0')
        .trim_end_matches('0')
        .len();
    let inexact = || {
        Error::invalid(format!(
            "{field} cannot be held exactly: an amount has at most {MAX_SIGNIFICANT_DIGITS} \
             significant digits, at most 28 decimal places, and is below 7.9e28 \
             (it is refused, never rounded), got {}",
            shown(t)
        ))
    };
    if significant > MAX_SIGNIFICANT_DIGITS {
        return Err(inexact());
    }
    parts
        .exact()
        .or_else(|| parts.normalized().exact())
        .ok_or_else(inexact)
}

/// At most 64 characters of the text, for messages (a huge number is not echoed whole).
fn shown(t: &str) -> String {
    if t.chars().count() <= 64 {
        t.to_owned()
    } else {
        let head: String = t.chars().take(61).collect();
        format!("{head}...")
    }
}

/// A number in decimal notation as `digits × 10^exponent`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parts {
    negative: bool,
    /// The digits as written, without the point, leading zeros removed (at least one digit).
    digits: String,
    exponent: i64,
}

impl Parts {
    /// `[+-]digits[.digits][(e|E)[+-]digits]`, with at least one digit in the mantissa.
    fn parse(t: &str) -> Option<Parts> {
        let (negative, rest) = match t.as_bytes().first()? {
            b'-' => (true, &t[1..]),
            b'+' => (false, &t[1..]),
            _ => (false, t),
        };
        let (mantissa, exp) = match rest.find(['e', 'E']) {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        let (int_part, frac_part) = match mantissa.find('.') {
            Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
            None => (mantissa, ""),
        };
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if int_part.len() + frac_part.len() == 0 || !all_digits(int_part) || !all_digits(frac_part)
        {
            return None;
        }
        let mut exponent: i64 = match exp {
            None => 0,
            Some(e) => {
                let body = e.strip_prefix(['+', '-']).unwrap_or(e);
                if body.is_empty() || !all_digits(body) || body.len() > 12 {
                    return None;
                }
                e.parse().ok()?
            }
        };
        exponent = exponent.checked_sub(i64::try_from(frac_part.len()).ok()?)?;
        let joined = format!("{int_part}{frac_part}");
        let trimmed = joined.trim_start_matches('0');
        let digits = if trimmed.is_empty() { "0" } else { trimmed };
        Some(Parts {
            negative,
            digits: digits.to_owned(),
            exponent,
        })
    }

    /// The same value without trailing zeros in the digits.
    fn normalized(&self) -> Parts {
        let kept = self.digits.trim_end_matches('0');
        let dropped = self.digits.len() - kept.len();
        Parts {
            negative: self.negative,
            digits: if kept.is_empty() {
                "0".into()
            } else {
                kept.into()
            },
            exponent: self
                .exponent
                .saturating_add(i64::try_from(dropped).unwrap_or(0)),
        }
    }

    /// The exact `Decimal` for these digits and exponent, if one exists.
    fn exact(&self) -> Option<Decimal> {
        // Beyond 29 digits no Decimal mantissa (below 2^96, about 7.9e28) can hold it.
        let (mantissa_text, scale) = if self.exponent >= 0 {
            let zeros = usize::try_from(self.exponent).ok()?;
            if self.digits.len().checked_add(zeros)? > 29 {
                return None;
            }
            (format!("{}{}", self.digits, "0".repeat(zeros)), 0u32)
        } else {
            let scale = u32::try_from(self.exponent.checked_neg()?).ok()?;
            if self.digits.len() > 29 || scale > 28 {
                return None;
            }
            (self.digits.clone(), scale)
        };
        let mantissa: i128 = mantissa_text.parse().ok()?;
        let mantissa = if self.negative { -mantissa } else { mantissa };
        Decimal::try_from_i128_with_scale(mantissa, scale).ok()
    }
}

/// Checks a three-letter ISO 4217 currency code (upper case, as the service writes it).
pub(crate) fn check_currency(field: &str, code: &str) -> Result<()> {
    if code.len() == 3 && iso_currency::Currency::from_code(code).is_some() {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{field} must be a three-letter ISO 4217 currency code, got {code:?}"
        )))
    }
}

/// Checks a two-letter ISO 3166-1 alpha-2 country code (upper case).
pub(crate) fn check_country(field: &str, code: &str) -> Result<()> {
    let upper = code.len() == 2 && code.bytes().all(|b| b.is_ascii_uppercase());
    if upper && isocountry::CountryCode::for_alpha2(code).is_ok() {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{field} must be a two-letter ISO 3166-1 country code, got {code:?}"
        )))
    }
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
    fn never_rounds() {
        let text = |t: &str| parse_amount("a", t).map(|d| d.to_string());
        // 28 significant digits: kept exactly.
        assert_eq!(
            text("1.000000000000000000000000001").ok(),
            Some("1.000000000000000000000000001".into())
        );
        assert_eq!(
            text("9999999999999999999999999999").ok(),
            Some("9999999999999999999999999999".into())
        );
        // Trailing zeros are kept when they fit; when they do not, they are dropped (the
        // value is the same).
        assert_eq!(
            text("1.0000000000000000000000000000").ok(),
            Some("1.0000000000000000000000000000".into())
        );
        assert_eq!(
            text("1.0000000000000000000000000000000").ok(),
            Some("1".into())
        );
        assert_eq!(text("1E+2").ok(), Some("100".into()));
        assert_eq!(text("1.50E-3").ok(), Some("0.00150".into()));
        for bad in [
            "1.00000000000000000000000000001",
            "12345678901234567890123456789",
            "100000000000000000000000000000",
            "1e40",
            "1E+29",
            "1e-29",
            "0.00000000000000000000000000001",
            "1e999999999999",
            "1e-999999999999",
            "1e9999999999999999999",
            &"9".repeat(5000),
        ] {
            assert!(
                matches!(parse_amount("amount", bad), Err(Error::InvalidRequest(_))),
                "{bad}"
            );
        }
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
            ".",
            "e5",
            "1e",
            "1e+",
            "--1",
            "1.2.3",
            "0e5",
            "-0.0",
            "+",
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

    fn refusal(text: &str) -> String {
        match parse_amount("buy_amount", text) {
            Err(Error::InvalidRequest(m)) => m,
            other => panic!("{text:?}: expected InvalidRequest, got {other:?}"),
        }
    }

    /// Found by cargo-mutants: a NaN or an infinity must be refused as not finite, not merely
    /// as unparsable.
    #[test]
    fn nan_and_infinities_are_refused_as_not_finite() {
        for t in ["NaN", "nan", "sNaN", "inf", "-inf", "Infinity", "-Infinity"] {
            let m = refusal(t);
            assert!(m.contains("must be a finite number"), "{t}: {m}");
            assert!(m.starts_with("buy_amount"), "{t}: the field is named: {m}");
        }
    }

    #[test]
    fn other_refusals_name_their_reason() {
        assert!(refusal("abc").contains("must be a decimal number"));
        assert!(refusal("1,5").contains("must be a decimal number"));
        assert!(refusal("0").contains("must be greater than zero"));
        assert!(refusal("-1").contains("must be greater than zero"));
    }
}

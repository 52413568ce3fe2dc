//! The built-in rate table and the pricing of quotes.
//!
//! Each currency has a mid value in US dollars and a flat fee in its own units.
//! For a quote (the service buys `buyCurrency` from the customer and sells `sellCurrency`):
//! - `mid = usd(buy) / usd(sell)` (units of sell currency per unit of buy currency);
//! - `customerRate = round6(mid × (1 − SPREAD))`: the 0.5 % spread is taken from the customer;
//! - `sellAmount = round(buyAmount × customerRate, minor units of sellCurrency)`;
//! - `inverseCustomerRate = round6(1 / customerRate)`;
//! - `fee` = the buy currency's flat fee (in `feeCurrency` = buyCurrency), or 0 when the
//!   client still has a freebie when the quote is made.
//!
//! Rounding is half away from zero everywhere.
use rust_decimal::{Decimal, RoundingStrategy};

/// The spread taken from the customer (0.5 %).
pub const SPREAD: Decimal = Decimal::from_parts(5, 0, 0, false, 3);
/// Decimal places of rates.
pub const RATE_DP: u32 = 6;

/// (code, value of one unit in USD (scaled by 10^-6), flat fee in the currency's units).
const TABLE: &[(&str, i64, &str)] = &[
    ("USD", 1_000_000, "5.00"),
    ("EUR", 1_085_000, "5.00"),
    ("GBP", 1_270_000, "4.00"),
    ("AUD", 655_000, "7.50"),
    ("NZD", 600_000, "8.00"),
    ("JPY", 6_700, "750"),
    ("CAD", 735_000, "7.00"),
    ("CHF", 1_130_000, "4.50"),
    ("SGD", 740_000, "7.00"),
    ("HKD", 128_000, "40.00"),
    ("ZAR", 54_000, "90.00"),
    ("SEK", 95_000, "50.00"),
    ("NOK", 93_000, "50.00"),
    ("DKK", 145_500, "35.00"),
    ("PLN", 250_000, "20.00"),
    ("CNY", 138_000, "35.00"),
    ("INR", 12_000, "400.00"),
    ("MXN", 58_000, "90.00"),
    ("AED", 272_300, "18.00"),
    ("KWD", 3_250_000, "1.500"),
];

/// The supported currency codes, in table order.
pub fn supported() -> Vec<&'static str> {
    TABLE.iter().map(|(c, _, _)| *c).collect()
}

/// The value of one unit of `code` in US dollars, if the table has it.
pub fn usd_value(code: &str) -> Option<Decimal> {
    TABLE
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, v, _)| Decimal::new(*v, 6))
}

/// The flat fee of `code`, in its own units.
pub fn flat_fee(code: &str) -> Option<Decimal> {
    TABLE
        .iter()
        .find(|(c, _, _)| *c == code)
        .and_then(|(_, _, f)| f.parse().ok())
}

/// Minor-unit exponent of an ISO 4217 currency (2 when the standard gives none).
pub fn minor_units(code: &str) -> u32 {
    iso_currency::Currency::from_code(code)
        .and_then(|c| c.exponent())
        .map(u32::from)
        .unwrap_or(2)
}

/// The priced part of a quote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Price {
    pub customer_rate: Decimal,
    pub inverse_rate: Decimal,
    pub sell_amount: Decimal,
    pub fee: Decimal,
}

/// Why a quote cannot be priced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriceError {
    Unsupported,
    TooSmall,
    Overflow,
}

/// Prices `buy_amount` of `buy` into `sell`; `free` waives the fee.
pub fn price(buy: &str, sell: &str, buy_amount: Decimal, free: bool) -> Result<Price, PriceError> {
    let (Some(b), Some(s)) = (usd_value(buy), usd_value(sell)) else {
        return Err(PriceError::Unsupported);
    };
    let mid = b.checked_div(s).ok_or(PriceError::Overflow)?;
    let customer_rate = mid
        .checked_mul(Decimal::ONE - SPREAD)
        .ok_or(PriceError::Overflow)?
        .round_dp_with_strategy(RATE_DP, RoundingStrategy::MidpointAwayFromZero);
    if customer_rate.is_zero() {
        return Err(PriceError::TooSmall);
    }
    let inverse_rate = Decimal::ONE
        .checked_div(customer_rate)
        .ok_or(PriceError::Overflow)?
        .round_dp_with_strategy(RATE_DP, RoundingStrategy::MidpointAwayFromZero);
    let sell_amount = buy_amount
        .checked_mul(customer_rate)
        .ok_or(PriceError::Overflow)?
        .round_dp_with_strategy(minor_units(sell), RoundingStrategy::MidpointAwayFromZero);
    if sell_amount <= Decimal::ZERO {
        return Err(PriceError::TooSmall);
    }
    let mut fee = if free {
        Decimal::ZERO
    } else {
        flat_fee(buy).ok_or(PriceError::Unsupported)?
    };
    fee.rescale(minor_units(buy));
    Ok(Price {
        customer_rate,
        inverse_rate,
        sell_amount,
        fee,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().expect("decimal literal")
    }

    #[test]
    fn gbp_to_usd() {
        let p = price("GBP", "USD", d("1000.00"), false).expect("priced");
        // 1.27 × 0.995 = 1.26365
        assert_eq!(p.customer_rate, d("1.26365"));
        assert_eq!(p.sell_amount.to_string(), "1263.65");
        assert_eq!(p.inverse_rate, d("0.791358"));
        assert_eq!(p.fee.to_string(), "4.00");
    }

    #[test]
    fn usd_to_jpy_has_no_minor_units() {
        let p = price("USD", "JPY", d("1000"), true).expect("priced");
        // 1 / 0.0067 = 149.253731343..., × 0.995 = 148.507462686... → 148.507463
        assert_eq!(p.customer_rate, d("148.507463"));
        assert_eq!(p.sell_amount.to_string(), "148507");
        assert_eq!(p.fee.to_string(), "0.00");
    }

    #[test]
    fn kwd_has_three_places_and_tiny_amounts_fail() {
        let p = price("KWD", "EUR", d("10.000"), false).expect("priced");
        assert_eq!(p.fee.to_string(), "1.500");
        assert_eq!(
            price("JPY", "KWD", d("0.1"), false),
            Err(PriceError::TooSmall)
        );
        assert_eq!(
            price("USD", "XAU", d("1"), false),
            Err(PriceError::Unsupported)
        );
    }
}

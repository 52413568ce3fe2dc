//! The refusals of `fxpay_core::parse_amount` say what is wrong with the value (found by cargo-mutants:
//! a NaN or an infinity must be refused as not finite, not merely as unparsable).
use fxpay_core::{parse_amount, Error};

fn message(text: &str) -> String {
    match parse_amount("buy_amount", text) {
        Err(Error::InvalidRequest(m)) => m,
        other => panic!("{text:?}: expected InvalidRequest, got {other:?}"),
    }
}

#[test]
fn nan_and_infinities_are_refused_as_not_finite() {
    for t in ["NaN", "nan", "sNaN", "inf", "-inf", "Infinity", "-Infinity"] {
        let m = message(t);
        assert!(m.contains("must be a finite number"), "{t}: {m}");
        assert!(m.starts_with("buy_amount"), "{t}: the field is named: {m}");
    }
}

#[test]
fn other_refusals_name_their_reason() {
    assert!(message("abc").contains("must be a decimal number"));
    assert!(message("1,5").contains("must be a decimal number"));
    assert!(message("0").contains("must be greater than zero"));
    assert!(message("-1").contains("must be greater than zero"));
}

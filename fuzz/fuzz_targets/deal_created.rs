//! Fuzzes `fxpay_core::parse_deal_created` with arbitrary bodies, headers and nonces
//! (the input format is in `input.rs`). Any panic is a crash; so is an accepted event that
//! breaks what the parser promises about it.
#![no_main]

use fxpay_core::EventStatus;
use libfuzzer_sys::fuzz_target;

mod input;

fuzz_target!(|data: &[u8]| {
    let case = input::decode(data);
    let headers = case.header_refs();
    let Ok((ev, raw)) = fxpay_core::parse_deal_created(case.body, &headers, case.nonce.as_deref())
    else {
        return;
    };
    assert!(case.body.len() <= fxpay_core::MAX_BODY_BYTES);
    if let Some(nonce) = &case.nonce {
        let matching: Vec<_> = headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("callback-nonce"))
            .collect();
        assert_eq!(matching.len(), 1);
        assert_eq!(matching[0].1, nonce.as_str());
        assert!(!nonce.is_empty());
    }
    assert!(fxpay_core::is_uuid(&ev.process_id));
    match ev.status {
        EventStatus::Success => {
            assert!(ev.deal_id.as_deref().is_some_and(fxpay_core::is_uuid));
            assert!(ev.errors.is_empty());
        }
        EventStatus::Fail => {
            assert!(ev.deal_id.is_none());
            assert!(!ev.errors.is_empty());
        }
    }
    assert!(raw.is_object());
});

//! The webhook checks, each rule and the order they run in.
use super::nonce::ct_equal;
use super::*;
use crate::error::Error;
use crate::models::{EventStatus, FieldError};

const PID: &str = "5b0c3a0e-1f2d-4c39-9d55-8a5f8d1e7a10";
const DID: &str = "c0ffee00-1234-4abc-8def-0123456789ab";

fn success() -> String {
    format!(
        r#"{{"status":"success","eventType":"DealCreated","eventBody":{{"processId":"{PID}","dealId":"{DID}"}}}}"#
    )
}

fn fail() -> String {
    format!(
        r#"{{"status":"fail","eventType":"DealCreated","eventBody":{{"processId":"{PID}","errors":[{{"errorCode":"validation:beneficiary:1004","fieldName":"PaymentReason","message":"Payment reason is required"}}]}}}}"#
    )
}

/// An event with the body it was parsed from.
#[derive(Debug)]
struct Parsed {
    ev: DealCreated,
    raw: Value,
}

impl std::ops::Deref for Parsed {
    type Target = DealCreated;
    fn deref(&self) -> &DealCreated {
        &self.ev
    }
}

fn parse(body: &str) -> Result<Parsed> {
    parse_deal_created(body.as_bytes(), &[], None).map(|(ev, raw)| Parsed { ev, raw })
}

fn payload_msg(body: &str) -> String {
    match parse(body) {
        Err(Error::WebhookPayload(m)) => m,
        other => panic!("expected a payload error for {body}, got {other:?}"),
    }
}

fn verification_msg(headers: &[(&str, &str)], nonce: &str) -> String {
    match parse_deal_created(success().as_bytes(), headers, Some(nonce)) {
        Err(Error::WebhookVerification(m)) => m,
        other => panic!("expected a verification error, got {other:?}"),
    }
}

/// The success event with one replacement made in its text.
fn success_with(from: &str, to: &str) -> String {
    let s = success();
    assert!(s.contains(from), "{from} not in the event");
    s.replacen(from, to, 1)
}

fn fail_with(from: &str, to: &str) -> String {
    let s = fail();
    assert!(s.contains(from), "{from} not in the event");
    s.replacen(from, to, 1)
}

#[test]
fn parses_a_success_event() {
    let ev = parse(&success()).expect("valid");
    assert_eq!(ev.status, EventStatus::Success);
    assert_eq!(ev.process_id, PID);
    assert_eq!(ev.deal_id.as_deref(), Some(DID));
    assert!(ev.errors.is_empty());
    assert_eq!(
        ev.raw,
        serde_json::from_str::<Value>(&success()).expect("json")
    );
}

#[test]
fn parses_a_fail_event() {
    let ev = parse(&fail()).expect("valid");
    assert_eq!(ev.status, EventStatus::Fail);
    assert_eq!(ev.process_id, PID);
    assert_eq!(ev.deal_id, None);
    assert_eq!(
        ev.errors,
        vec![FieldError {
            error_code: "validation:beneficiary:1004".into(),
            field_name: Some("PaymentReason".into()),
            message: "Payment reason is required".into(),
        }]
    );
    assert_eq!(
        ev.errors[0].parts(),
        Some(("validation", "beneficiary", 1004))
    );
}

#[test]
fn keeps_unknown_fields_and_exact_numbers_in_raw() {
    let body = success_with(
        r#""status":"success""#,
        r#""status":"success","extra":{"amount":1.10,"n":123456789012345678901234567890}"#,
    );
    let ev = parse(&body).expect("valid");
    let extra = &ev.raw["extra"];
    assert_eq!(extra["amount"].to_string(), "1.10");
    assert_eq!(extra["n"].to_string(), "123456789012345678901234567890");
    let keys: Vec<&str> = ev
        .raw
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["status", "extra", "eventType", "eventBody"]);
}

#[test]
fn accepts_extra_fields_in_the_event_body_and_errors() {
    let body = fail_with(r#""message":"#, r#""severity":3,"message":"#);
    let body = body.replacen(r#""processId""#, r#""note":null,"processId""#, 1);
    assert!(parse(&body).is_ok());
}

#[test]
fn accepts_uppercase_uuids_and_keeps_them_as_sent() {
    let upper = PID.to_uppercase();
    let ev = parse(&success_with(PID, &upper)).expect("valid");
    assert_eq!(ev.process_id, upper);
}

#[test]
fn success_may_carry_null_or_empty_errors() {
    for extra in [r#","errors":[]"#, r#","errors":null"#] {
        let body = success_with(&format!(r#""{DID}""#), &format!(r#""{DID}"{extra}"#));
        assert!(parse(&body).is_ok(), "{body}");
    }
}

#[test]
fn fail_may_carry_a_null_deal_id() {
    let body = fail_with(r#""errors""#, r#""dealId":null,"errors""#);
    assert!(parse(&body).is_ok());
}

#[test]
fn refuses_a_body_over_one_mib_before_parsing() {
    // Not JSON at all: the size check must come first.
    let big = vec![b'x'; MAX_BODY_BYTES + 1];
    match parse_deal_created(&big, &[], Some("n")) {
        Err(Error::WebhookPayload(m)) => assert!(m.contains("1 MiB"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn accepts_a_body_of_exactly_one_mib() {
    let base = success();
    let padding = MAX_BODY_BYTES - base.len() - r#","pad":"""#.len();
    let body = success_with(
        r#""status":"success""#,
        &format!(r#""status":"success","pad":"{}""#, "a".repeat(padding)),
    );
    assert_eq!(body.len(), MAX_BODY_BYTES);
    assert!(parse(&body).is_ok());
    let over = body.replacen("\"pad\":\"", "\"pad\":\"a", 1);
    assert!(matches!(parse(&over), Err(Error::WebhookPayload(_))));
}

#[test]
fn verifies_the_nonce_with_any_header_case() {
    for name in ["callback-nonce", "Callback-Nonce", "CALLBACK-NONCE"] {
        let headers = [("content-type", "application/json"), (name, "s3cr3t")];
        let ev = parse_deal_created(success().as_bytes(), &headers, Some("s3cr3t"));
        assert!(ev.is_ok(), "{name}");
    }
}

#[test]
fn ignores_headers_without_a_nonce() {
    let headers = [("callback-nonce", "anything"), ("callback-nonce", "twice")];
    assert!(parse_deal_created(success().as_bytes(), &headers, None).is_ok());
}

#[test]
fn refuses_a_missing_nonce_header() {
    let m = verification_msg(&[("content-type", "application/json")], "s3cr3t");
    assert_eq!(m, "the callback-nonce header is missing");
}

#[test]
fn refuses_a_wrong_nonce_without_echoing_either_value() {
    for received in ["wrong-value", "s3cr3", "s3cr3tt", "", "S3CR3T"] {
        let m = verification_msg(&[("callback-nonce", received)], "s3cr3t");
        assert_eq!(m, "the callback-nonce does not match");
        assert!(!m.contains("s3cr3t") && !m.contains("wrong-value"));
    }
}

#[test]
fn refuses_several_nonce_headers_even_if_one_matches() {
    let headers = [("callback-nonce", "s3cr3t"), ("Callback-Nonce", "s3cr3t")];
    let m = verification_msg(&headers, "s3cr3t");
    assert!(m.contains("more than once"), "{m}");
}

#[test]
fn refuses_an_empty_expected_nonce() {
    let m = verification_msg(&[("callback-nonce", "")], "");
    assert!(m.contains("empty"), "{m}");
}

#[test]
fn verification_comes_before_parsing() {
    let r = parse_deal_created(b"not json", &[], Some("s3cr3t"));
    assert!(matches!(r, Err(Error::WebhookVerification(_))), "{r:?}");
}

#[test]
fn constant_time_comparison_is_equality() {
    let cases: [(&[u8], &[u8], bool); 6] = [
        (b"abc", b"abc", true),
        (b"abc", b"abd", false),
        (b"abc", b"ab", false),
        (b"abc", b"abcd", false),
        (b"\xff", b"\x00", false),
        (b"a", b"", false),
    ];
    for (e, r, want) in cases {
        assert_eq!(bool::from(ct_equal(e, r)), want, "{e:?} {r:?}");
    }
}

#[test]
fn refuses_non_utf8_and_non_json() {
    let r = parse_deal_created(b"{\"status\":\"\xff\"}", &[], None);
    match r {
        Err(Error::WebhookPayload(m)) => assert!(m.contains("UTF-8"), "{m}"),
        other => panic!("{other:?}"),
    }
    for body in ["", "{", "nope", "{\"a\":1}x", "\u{feff}{}"] {
        assert!(payload_msg(body).contains("not valid JSON"), "{body:?}");
    }
}

#[test]
fn refuses_deep_nesting_without_overflowing() {
    let body = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(payload_msg(&body).contains("not valid JSON"));
}

#[test]
fn refuses_non_objects() {
    for body in ["[]", "1", "\"DealCreated\"", "null", "true"] {
        assert_eq!(payload_msg(body), "the body is not a JSON object");
    }
}

#[test]
fn refuses_a_bad_event_type() {
    let s = success();
    let cases = [
        (
            s.replacen(r#""eventType":"DealCreated","#, "", 1),
            "eventType is missing",
        ),
        (
            success_with(r#""DealCreated""#, "1"),
            "eventType is not a string",
        ),
        (
            success_with(r#""DealCreated""#, r#""dealcreated""#),
            "eventType is not \"DealCreated\"",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(payload_msg(&body), want, "{body}");
    }
}

#[test]
fn refuses_a_bad_status() {
    let s = success();
    let cases = [
        (
            s.replacen(r#""status":"success","#, "", 1),
            "status is missing",
        ),
        (
            success_with(r#""success""#, "true"),
            "status is not a string",
        ),
        (
            success_with(r#""success""#, r#""Success""#),
            "status is neither \"success\" nor \"fail\"",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(payload_msg(&body), want, "{body}");
    }
}

#[test]
fn refuses_a_bad_event_body() {
    let missing = r#"{"status":"success","eventType":"DealCreated"}"#;
    assert_eq!(payload_msg(missing), "eventBody is missing");
    for v in ["[]", "null", "\"x\"", "7"] {
        let body = format!(r#"{{"status":"success","eventType":"DealCreated","eventBody":{v}}}"#);
        assert_eq!(payload_msg(&body), "eventBody is not an object", "{v}");
    }
}

#[test]
fn refuses_a_bad_process_id() {
    let cases = [
        (
            format!(r#""processId":"{PID}","#),
            "",
            "eventBody.processId is missing",
        ),
        (
            format!(r#""{PID}""#),
            "42",
            "eventBody.processId is not a string",
        ),
        (
            format!(r#""{PID}""#),
            r#""not-a-uuid""#,
            "eventBody.processId is not a UUID",
        ),
        (
            PID.to_string(),
            &PID.replace('-', ""),
            "eventBody.processId is not a UUID",
        ),
        (
            PID.to_string(),
            &format!("{{{PID}}}"),
            "eventBody.processId is not a UUID",
        ),
        (
            PID.to_string(),
            &format!("urn:uuid:{PID}"),
            "eventBody.processId is not a UUID",
        ),
        (
            PID.to_string(),
            &PID.replacen('5', "g", 1),
            "eventBody.processId is not a UUID",
        ),
    ];
    for (from, to, want) in cases {
        assert_eq!(payload_msg(&success_with(&from, to)), want, "{to}");
        assert_eq!(payload_msg(&fail_with(&from, to)), want, "{to}");
    }
}

#[test]
fn refuses_a_bad_deal_id_on_success() {
    let cases = [
        (
            format!(r#","dealId":"{DID}""#),
            "",
            "eventBody.dealId is missing",
        ),
        (
            format!(r#""{DID}""#),
            "null",
            "eventBody.dealId is not a string",
        ),
        (
            format!(r#""{DID}""#),
            r#""""#,
            "eventBody.dealId is not a UUID",
        ),
    ];
    for (from, to, want) in cases {
        assert_eq!(payload_msg(&success_with(&from, to)), want, "{to}");
    }
}

#[test]
fn refuses_errors_on_success() {
    let body = success_with(
        &format!(r#""{DID}""#),
        &format!(r#""{DID}","errors":[{{"errorCode":"a:b:1","fieldName":"f","message":"m"}}]"#),
    );
    assert!(payload_msg(&body).contains("eventBody.errors must be absent or empty"));
    let body = success_with(&format!(r#""{DID}""#), &format!(r#""{DID}","errors":{{}}"#));
    assert!(payload_msg(&body).contains("eventBody.errors must be absent or empty"));
}

#[test]
fn refuses_a_deal_id_on_fail() {
    let body = fail_with(r#""errors""#, &format!(r#""dealId":"{DID}","errors""#));
    assert_eq!(
        payload_msg(&body),
        "eventBody.dealId must be absent when status is \"fail\""
    );
}

#[test]
fn refuses_bad_errors_on_fail() {
    let entry = r#"{"errorCode":"validation:beneficiary:1004","fieldName":"PaymentReason","message":"Payment reason is required"}"#;
    let errors = format!(r#""errors":[{entry}]"#);
    let cases = [
        (errors.clone(), String::new(), "eventBody.errors is missing"),
        (
            errors.clone(),
            r#""errors":{}"#.into(),
            "eventBody.errors is not an array",
        ),
        (
            errors.clone(),
            r#""errors":null"#.into(),
            "eventBody.errors is not an array",
        ),
        (
            errors.clone(),
            r#""errors":[]"#.into(),
            "eventBody.errors is empty",
        ),
        (
            errors.clone(),
            format!(r#""errors":[{entry},"x"]"#),
            "eventBody.errors[1] is not an object",
        ),
    ];
    for (from, to, want) in cases {
        let body = fail_with(&from, &to).replace(",}", "}");
        let m = payload_msg(&body);
        assert!(m.starts_with(want), "{body}: {m}");
    }
    for key in ["errorCode", "fieldName", "message"] {
        let without = fail().replacen(&format!(r#""{key}":"#), r#""other":"#, 1);
        assert_eq!(
            payload_msg(&without),
            format!("eventBody.errors[0].{key} is missing")
        );
        let not_string =
            fail().replacen(&format!(r#""{key}":""#), &format!(r#""{key}":1,"x":""#), 1);
        assert_eq!(
            payload_msg(&not_string),
            format!("eventBody.errors[0].{key} is not a string")
        );
    }
}

#[test]
fn refuses_duplicate_keys_where_it_interprets_them() {
    let cases = [
        (
            success_with(
                r#""status":"success""#,
                r#""status":"fail","status":"success""#,
            ),
            "the key status appears more than once",
        ),
        (
            success_with(r#""status":"success""#, r#""x":1,"status":"success","x":2"#),
            "the key x appears more than once",
        ),
        (
            success_with(
                r#""processId""#,
                &format!(r#""processId":"{DID}","processId""#),
            ),
            "the key eventBody.processId appears more than once",
        ),
        (
            fail_with(r#""message":"#, r#""message":"a","message":"#),
            "the key eventBody.errors[0].message appears more than once",
        ),
        (
            fail_with(
                r#"}]}}"#,
                r#"},{"errorCode":"e","fieldName":"f","message":"m","fieldName":"g"}]}}"#,
            ),
            "the key eventBody.errors[1].fieldName appears more than once",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(payload_msg(&body), want, "{body}");
    }
}

#[test]
fn finds_duplicates_among_many_keys() {
    let keys: String = (0..40).map(|i| format!(r#""k{i}":{i},"#)).collect();
    let body = success_with(r#""status""#, &format!(r#"{keys}"status""#));
    assert!(parse(&body).is_ok());
    let body = success_with(r#""status""#, &format!(r#"{keys}"k7":0,"status""#));
    assert_eq!(payload_msg(&body), "the key k7 appears more than once");
    let body = success_with(r#""status""#, &format!(r#"{keys}"k39":0,"status""#));
    assert_eq!(payload_msg(&body), "the key k39 appears more than once");
}

#[test]
fn the_keys_seen_turn_into_a_hash_set_past_a_few() {
    use super::duplicates::Seen;
    let mut seen = Seen::default();
    for i in 0..Seen::FEW {
        seen.insert(format!("k{i}").into());
    }
    assert!(!seen.is_many(), "{} keys are scanned as a list", Seen::FEW);
    seen.insert("one more".into());
    assert!(
        seen.is_many(),
        "a longer object is hashed, so checking it stays linear"
    );
    assert!(seen.contains("k0") && seen.contains("one more") && !seen.contains("k99"));
}

#[test]
fn last_duplicate_wins_inside_uninterpreted_values() {
    let body = success_with(
        r#""status":"success""#,
        r#""status":"success","x":{"a":1,"a":2}"#,
    );
    let ev = parse(&body).expect("valid");
    assert_eq!(ev.raw["x"]["a"].to_string(), "2");
}

#[test]
fn long_duplicate_keys_are_shortened_in_messages() {
    let key = "k".repeat(1000);
    let body = success_with(
        r#""status":"success""#,
        &format!(r#""status":"success","{key}":1,"{key}":2"#),
    );
    let m = payload_msg(&body);
    assert!(m.len() < 120 && m.contains("kkk..."), "{m}");
}

#[test]
fn escaped_keys_count_as_duplicates() {
    let body = success_with(
        r#""status":"success""#,
        r#""status":"success","st\u0061tus":"success""#,
    );
    assert_eq!(payload_msg(&body), "the key status appears more than once");
}

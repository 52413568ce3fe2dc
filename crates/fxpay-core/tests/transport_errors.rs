//! How `fxpay_core::api_error` words an error answer (found by cargo-mutants).
use bytes::Bytes;
use fxpay_core::{api_error, Error, Response};
use reqwest::header::HeaderMap;

fn message(body: &'static str) -> String {
    let resp = Response {
        status: 400,
        headers: HeaderMap::new(),
        body: Bytes::from_static(body.as_bytes()),
        cut: None,
    };
    match api_error(&resp) {
        Error::Api { message, .. } => message,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn one_error_names_its_field_and_code() {
    assert_eq!(
        message(
            r#"{"errors":[{"errorCode":"validation:quote:1001","fieldName":"BuyAmount","message":"too small"}]}"#
        ),
        "HTTP 400: too small (BuyAmount: validation:quote:1001)"
    );
}

#[test]
fn an_error_without_a_field_shows_its_code_only() {
    for field in [r#""fieldName":"","#, ""] {
        let body = format!(
            r#"{{"errors":[{{"errorCode":"auth:token:2001",{field}"message":"expired"}}]}}"#
        );
        let body: &'static str = Box::leak(body.into_boxed_str());
        assert_eq!(message(body), "HTTP 400: expired (auth:token:2001)");
    }
}

#[test]
fn further_errors_are_counted() {
    let two = r#"{"errors":[{"errorCode":"a:b:1","fieldName":"X","message":"m1"},{"errorCode":"a:b:2","fieldName":"Y","message":"m2"}]}"#;
    assert_eq!(message(two), "HTTP 400: m1 (X: a:b:1) and 1 more");
    assert_eq!(message(r#"{"errors":[]}"#), "HTTP 400");
    assert_eq!(message("not json"), "HTTP 400");
}

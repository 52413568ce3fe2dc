//! `fxpay_core::request_token` against a scripted token endpoint on loopback:
//! the scope a token gets when the answer names none, and which failures become
//! `Error::OAuth` and which keep their HTTP meaning.
mod support;

use fxpay_core::{request_token, Error, Grant};
use support::token_server::{token_body, TokenServer};

#[tokio::test]
async fn a_token_without_scope_gets_the_scope_of_its_grant() {
    let server = TokenServer::start(vec![
        (200, token_body("pay", None, None)),
        (200, token_body("user", Some("r2"), None)),
        (200, token_body("named", None, Some("openid"))),
    ])
    .await;
    let t = server.transport();
    let pay = request_token(&t, Grant::ClientCredentials, None)
        .await
        .expect("token");
    assert_eq!(pay.scope.as_deref(), Some("payments"));
    assert_eq!(server.field(0, "scope").as_deref(), Some("payments"));
    let user = request_token(
        &t,
        Grant::RefreshToken {
            refresh_token: "r1",
        },
        None,
    )
    .await
    .expect("token");
    assert_eq!(user.scope.as_deref(), Some("gca-aisp"));
    assert_eq!(server.field(1, "scope").as_deref(), Some("gca-aisp"));
    // A scope the service names is kept.
    let named = request_token(&t, Grant::ClientCredentials, None)
        .await
        .expect("token");
    assert_eq!(named.scope.as_deref(), Some("openid"));
}

const OAUTH_BODY: &str = r#"{"error":"invalid_client","error_description":"bad secret"}"#;

#[tokio::test]
async fn server_failures_and_rate_limits_keep_their_status_whatever_the_body() {
    for status in [500u16, 503, 429] {
        let server = TokenServer::start(vec![(status, OAUTH_BODY.into())]).await;
        let err = request_token(&server.transport(), Grant::ClientCredentials, None)
            .await
            .expect_err("a failure");
        assert!(
            matches!(&err, Error::Api { status: s, .. } if *s == status),
            "HTTP {status} became {err:?}"
        );
    }
}

#[tokio::test]
async fn client_errors_with_an_oauth_body_become_oauth_errors() {
    for status in [400u16, 401] {
        let server = TokenServer::start(vec![(status, OAUTH_BODY.into())]).await;
        let err = request_token(&server.transport(), Grant::ClientCredentials, None)
            .await
            .expect_err("a failure");
        match err {
            Error::OAuth {
                error,
                description,
                status: s,
                ..
            } => {
                assert_eq!(error, "invalid_client");
                assert_eq!(description.as_deref(), Some("bad secret"));
                assert_eq!(s, Some(status));
            }
            other => panic!("HTTP {status} became {other:?}"),
        }
    }
    // Without an OAuth body a client error stays an HTTP error.
    let server = TokenServer::start(vec![(400, "{}".into())]).await;
    let err = request_token(&server.transport(), Grant::ClientCredentials, None)
        .await
        .expect_err("a failure");
    assert!(matches!(err, Error::Api { status: 400, .. }), "{err:?}");
}

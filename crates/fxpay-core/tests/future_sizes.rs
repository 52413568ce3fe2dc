//! A call's future stays small. Every move of one (into a box, a wrapper, a runtime's task)
//! copies it whole, so what most calls never run is boxed where it starts:
//! - the live exchange, hyper's futures with the retries around them, inside
//!   `Transport::send`: inline, it made `get_quote`'s future 8.8 KB and a blocking call copied
//!   it three times (bench/: memmove per call);
//! - a cassette's recording and replay, also in `Transport::send`;
//! - a token renewal (`TokenCache::get`, `renew_after_reject`, `UserSession::token`): a token
//!   request with its own exchange. Inline, these two made `get_quote`'s future 2,376 bytes;
//!   boxed, 712 (bench/README.md, 2026-11-27).
use fxpay_core::{list_virtual_accounts, Client, ClientConfig, DealRequest, Token};
use std::future::Future;

fn size<F: Future>(_: &F) -> usize {
    std::mem::size_of::<F>()
}

/// Bytes a call's future may take: a renewal or a cassette left inline goes over it.
const LIMIT: usize = 1024;

#[test]
fn a_calls_future_is_a_few_kilobytes_at_most() {
    let config =
        ClientConfig::new("id", "secret", "http://127.0.0.1:9").expect("a loopback base URL");
    let client = Client::new(config, None).expect("client");
    let deal = DealRequest {
        quote_id: "q".into(),
        funding_source: "balance".into(),
        channel: None,
        beneficiaries: Vec::new(),
    };
    let token = Token {
        access_token: "a".into(),
        token_type: "Bearer".into(),
        expires_in: 3600,
        expires_at: 0.0,
        refresh_token: Some("r".into()),
        scope: None,
    };
    let session = client.user_session(token, None, None);
    let sizes = [
        ("get_quote", size(&client.get_quote("q", None))),
        ("payments_token", size(&client.payments_token(None))),
        ("create_deal", size(&client.create_deal(deal, None))),
        ("session.token", size(&session.token(None))),
        (
            "list_virtual_accounts",
            size(&list_virtual_accounts(&session, None)),
        ),
    ];
    for (name, bytes) in sizes {
        println!("SIZE {name} {bytes}");
        assert!(
            bytes <= LIMIT,
            "{name}'s future is {bytes} bytes, over {LIMIT}"
        );
    }
}

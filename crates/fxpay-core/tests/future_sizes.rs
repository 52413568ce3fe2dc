//! A call's future stays small. Every move of one (into a box, a wrapper, a runtime's task)
//! copies it whole, so the live exchange, reqwest's and hyper's futures with the retries
//! around them, is boxed inside `Transport::send`: inline, it made `get_quote`'s future
//! 8.8 KB (release) and a blocking call copied it three times (bench/: memmove per call).
use fxpay_core::client::Client;
use fxpay_core::config::ClientConfig;
use std::future::Future;

fn size<F: Future>(_: &F) -> usize {
    std::mem::size_of::<F>()
}

/// Bytes a call's future may take (release builds lay futures out tighter than this).
const LIMIT: usize = 4096;

#[test]
fn a_calls_future_is_a_few_kilobytes_at_most() {
    let config =
        ClientConfig::new("id", "secret", "http://127.0.0.1:9").expect("a loopback base URL");
    let client = Client::new(config, None).expect("client");
    let sizes = [
        ("get_quote", size(&client.get_quote("q", None))),
        ("payments_token", size(&client.payments_token(None))),
    ];
    for (name, bytes) in sizes {
        println!("SIZE {name} {bytes}");
        assert!(
            bytes <= LIMIT,
            "{name}'s future is {bytes} bytes, over {LIMIT}"
        );
    }
}

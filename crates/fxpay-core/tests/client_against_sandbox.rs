//! The core's `Client` against the sandbox crate over loopback HTTP: the payments calls end to
//! end, and the one replay after a 401 (`send_authorized` in `client.rs`).
use std::str::FromStr;

use fxpay_core::{
    Beneficiary, Client, ClientConfig, DealBeneficiary, DealRequest, Error, QuoteRequest,
};
use fxpay_sandbox::{Sandbox, SandboxConfig};
use rust_decimal::Decimal;
use serde_json::json;

async fn setup() -> (Sandbox, Client) {
    let sb = Sandbox::start(SandboxConfig::default())
        .await
        .expect("the sandbox starts");
    let config = ClientConfig::new(sb.client_id(), sb.client_secret(), &sb.base_url())
        .expect("a loopback base URL is accepted");
    let client = Client::new(config, None).expect("client");
    (sb, client)
}

fn beneficiary(currency: &str) -> Beneficiary {
    let address = json!({"addressLine": "1 Main St", "citySuburb": "Sydney",
        "stateProvince": "NSW", "postCode": "2000", "country": "AU"});
    serde_json::from_value(json!({
        "currency": currency, "name": "Jane Doe", "classification": "Individual",
        "paymentReason": "Invoice 42",
        "beneficiaryBankDetails": {"bankName": "Bank", "bankBranchName": "Main",
            "branchCode": "062000", "account": "12345678", "bankAddress": address},
        "beneficiaryAddress": address,
    }))
    .expect("a beneficiary")
}

fn token_requests(sb: &Sandbox) -> u64 {
    sb.stats()["token_requests"].as_u64().unwrap_or(u64::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quote_beneficiary_and_deal_end_to_end() {
    let (sb, client) = setup().await;
    let req = QuoteRequest::new("USD", "1000", "AUD", 1).expect("quote request");
    let (quote_id, _) = client.create_quote(&req, None).await.expect("quote");
    let (quote, _) = client.get_quote(&quote_id, None).await.expect("read quote");
    assert_eq!(quote.id, quote_id);
    assert_eq!(
        quote.buy_amount,
        Decimal::from_str("1000").expect("decimal")
    );
    assert_eq!(
        (quote.buy_currency.as_str(), quote.sell_currency.as_str()),
        ("USD", "AUD")
    );
    let (beneficiary_id, _) = client
        .create_beneficiary(&beneficiary("AUD"), None)
        .await
        .expect("beneficiary");
    let deal = DealRequest {
        quote_id: quote_id.clone(),
        funding_source: "Own account".into(),
        channel: None,
        beneficiaries: vec![DealBeneficiary {
            beneficiary_id,
            amount: quote.sell_amount,
            pay_reason: "Invoice 42".into(),
            pay_reference: "INV-42".into(),
        }],
    };
    let (deal, _) = client.create_deal(deal, None).await.expect("deal");
    assert_eq!(sb.deal_status(&deal.deal_id).as_deref(), Some("Booked"));
    assert_eq!(sb.deals()[0]["quoteId"], quote_id.as_str());
    assert_eq!(token_requests(&sb), 1, "one payments token for every call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_renews_the_token_and_replays_once() {
    let (sb, client) = setup().await;
    let req = QuoteRequest::new("GBP", "250.50", "EUR", 1).expect("quote request");
    let (quote_id, _) = client.create_quote(&req, None).await.expect("quote");
    assert_eq!(token_requests(&sb), 1);

    // One 401: a new token, and the request again with it.
    sb.fail_next("GET /v1/payments/quotes/*", 401, 1, None);
    let (quote, _) = client
        .get_quote(&quote_id, None)
        .await
        .expect("replayed after the 401");
    assert_eq!(quote.id, quote_id);
    assert_eq!(token_requests(&sb), 2, "the rejected token was renewed");

    // Two 401s in a row: one replay only, and the second 401 is the answer.
    sb.fail_next("GET /v1/payments/quotes/*", 401, 2, None);
    let err = client
        .get_quote(&quote_id, None)
        .await
        .expect_err("no second replay");
    assert!(
        matches!(err, Error::Api { status: 401, .. }),
        "a 401 after the replay is the caller's: {err:?}"
    );
    assert_eq!(token_requests(&sb), 3, "renewed once for that call");
    let (quote, _) = client
        .get_quote(&quote_id, None)
        .await
        .expect("then it works");
    assert_eq!(quote.id, quote_id);
}

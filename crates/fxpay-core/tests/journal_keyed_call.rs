//! The journal's state machine end to end, in plain Rust: the core's `Client` against the
//! sandbox crate over loopback HTTP, with a store kept in memory.
#[path = "support/beneficiary.rs"]
mod beneficiary;
#[path = "support/memory_journal_store.rs"]
mod memory_journal_store;

use std::sync::Arc;

use beneficiary::beneficiary;
use fxpay_core::{
    journaled_create_deal, journaled_create_quote, resolve_entry, Client, ClientConfig,
    DealBeneficiary, DealRequest, EntryState as State, Error, IdempotencyKind, JournalStore,
    QuoteRequest,
};
use fxpay_sandbox::{Sandbox, SandboxConfig};
use memory_journal_store::MemoryJournalStore;
use serde_json::json;

async fn setup() -> (Sandbox, Client, Arc<dyn JournalStore>) {
    let sb = Sandbox::start(SandboxConfig::default())
        .await
        .expect("the sandbox starts");
    let config = ClientConfig::new(sb.client_id(), sb.client_secret(), &sb.base_url())
        .expect("a loopback base URL is accepted");
    let client = Client::new(config, None).expect("client");
    (sb, client, Arc::new(MemoryJournalStore::default()))
}

async fn deal_request(c: &Client) -> DealRequest {
    let req = QuoteRequest::new("USD", "100", "AUD", 1).expect("quote request");
    let (quote_id, _) = c.create_quote(&req, None).await.expect("quote");
    let (quote, _) = c.get_quote(&quote_id, None).await.expect("read quote");
    let (bid, _) = c
        .create_beneficiary(&beneficiary(), None)
        .await
        .expect("beneficiary");
    DealRequest {
        quote_id,
        funding_source: "Own account".into(),
        channel: None,
        beneficiaries: vec![DealBeneficiary {
            beneficiary_id: bid,
            amount: quote.sell_amount,
            pay_reason: "r".into(),
            pay_reference: "REF-1".into(),
        }],
    }
}

fn deals_sent(sb: &Sandbox) -> u64 {
    sb.stats()["paths"]["POST /v1/payments/deals"]
        .as_u64()
        .unwrap_or(u64::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeat_replays_and_another_request_is_refused() {
    let (sb, c, store) = setup().await;
    let req = deal_request(&c).await;
    let ((first, _), replayed) = journaled_create_deal(&c, &store, "k", req.clone(), None)
        .await
        .expect("booked");
    assert!(!replayed);
    let ((again, _), replayed) = journaled_create_deal(&c, &store, "k", req.clone(), None)
        .await
        .expect("replayed");
    assert!(replayed);
    assert_eq!(again, first);
    assert_eq!(deals_sent(&sb), 1);
    let mut other = req;
    other.funding_source = "Direct Debit".into();
    let err = journaled_create_deal(&c, &store, "k", other, None)
        .await
        .expect_err("reused");
    assert!(matches!(
        err,
        Error::Idempotency {
            kind: IdempotencyKind::KeyReused,
            ..
        }
    ));
    assert_eq!(deals_sent(&sb), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_create_keeps_its_answer_as_it_came_and_a_repeat_replays_it() {
    let (sb, c, store) = setup().await;
    let req = QuoteRequest::new("USD", "100", "AUD", 1).expect("quote request");
    let ((id, text), replayed) = journaled_create_quote(&c, &store, "q", &req, None)
        .await
        .expect("created");
    assert!(!replayed);
    let kept = store.get("q").expect("read").expect("kept");
    // The answer's own text, byte for byte: no parsed tree encoded again.
    assert_eq!(kept.response.as_deref().map(str::as_bytes), Some(&text[..]));
    let answer: serde_json::Value = serde_json::from_slice(&text).expect("JSON");
    assert_eq!(answer, json!({ "id": id }));
    // The request kept is the one encoded for the fingerprint and sent (encoded once).
    let request = kept.request.as_deref().expect("the request is kept");
    assert_eq!(
        request.as_bytes(),
        &serde_json::to_vec(&req).expect("encoded")[..]
    );
    let quotes = || sb.stats()["paths"]["POST /v1/payments/quotes"].as_u64();
    let sent = quotes();
    let ((again, again_text), replayed) = journaled_create_quote(&c, &store, "q", &req, None)
        .await
        .expect("replayed");
    assert!(replayed);
    assert_eq!((again, again_text), (id, text));
    assert_eq!(quotes(), sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_is_unknown_until_resolved() {
    let (sb, c, store) = setup().await;
    let req = deal_request(&c).await;
    sb.drop_next("/v1/payments/deals", true);
    let err = journaled_create_deal(&c, &store, "lost", req.clone(), None)
        .await
        .expect_err("lost");
    let Error::Idempotency {
        kind: IdempotencyKind::OutcomeUnknown,
        entry: Some(entry),
        ..
    } = err
    else {
        panic!("{err:?}")
    };
    assert_eq!(entry.state, State::Unknown);
    let again = journaled_create_deal(&c, &store, "lost", req.clone(), None).await;
    assert!(again.is_err());
    assert_eq!(deals_sent(&sb), 1);
    let booked = sb.deals()[0]["dealId"]
        .as_str()
        .expect("a deal id")
        .to_string();
    resolve_entry(&*store, "lost", Some(booked.clone())).expect("resolved");
    let ((deal, _), replayed) = journaled_create_deal(&c, &store, "lost", req, None)
        .await
        .expect("replayed");
    assert!(replayed);
    assert_eq!(deal.deal_id, booked);
    assert_eq!(deals_sent(&sb), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_releases_the_key() {
    let (sb, c, store) = setup().await;
    let req = deal_request(&c).await;
    sb.fail_next("/v1/payments/deals", 400, 1, None);
    let err = journaled_create_deal(&c, &store, "r", req.clone(), None)
        .await
        .expect_err("refused");
    assert!(matches!(err, Error::Api { status: 400, .. }), "{err:?}");
    assert_eq!(
        store.get("r").expect("get").map(|e| e.state),
        Some(State::Released)
    );
    journaled_create_deal(&c, &store, "r", req, None)
        .await
        .expect("sent again");
    assert_eq!(deals_sent(&sb), 2);
}

//! The journal's state machine end to end, in plain Rust: the core's `Client` against the
//! sandbox crate over loopback HTTP, with a store kept in memory.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use fxpay_core::client::Client;
use fxpay_core::config::ClientConfig;
use fxpay_core::error::{Error, IdempotencyKind};
use fxpay_core::journal::holder::{HolderCheck, LocalProcesses};
use fxpay_core::journal::{admin, calls, Entry, State, Store};
use fxpay_core::models::{Beneficiary, DealBeneficiary, DealRequest, QuoteRequest};
use fxpay_sandbox::{Sandbox, SandboxConfig};
use serde_json::json;

/// Entries by key, as their JSON text (as a real store keeps them).
#[derive(Default)]
struct MemoryStore(Mutex<HashMap<String, String>>);

impl Store for MemoryStore {
    fn get(&self, key: &str) -> fxpay_core::error::Result<Option<Entry>> {
        let map = self.0.lock().expect("lock");
        Ok(map.get(key).map(|t| Entry::from_json(t).expect("valid")))
    }
    fn claim(&self, entry: &Entry) -> fxpay_core::error::Result<Option<Entry>> {
        let mut map = self.0.lock().expect("lock");
        match map.get(&entry.key) {
            Some(t) => Ok(Some(Entry::from_json(t).expect("valid"))),
            None => {
                map.insert(entry.key.clone(), entry.to_json());
                Ok(None)
            }
        }
    }
    fn swap(&self, old: &Entry, new: &Entry) -> fxpay_core::error::Result<bool> {
        let mut map = self.0.lock().expect("lock");
        if map.get(&old.key) != Some(&old.to_json()) {
            return Ok(false);
        }
        map.insert(old.key.clone(), new.to_json());
        Ok(true)
    }
    fn find(&self, result: &str) -> fxpay_core::error::Result<Option<Entry>> {
        let map = self.0.lock().expect("lock");
        Ok(map
            .values()
            .map(|t| Entry::from_json(t).expect("valid"))
            .find(|e| e.result.as_deref() == Some(result)))
    }
    fn holders(&self) -> &dyn HolderCheck {
        &LocalProcesses
    }
}

async fn setup() -> (Sandbox, Client, Arc<dyn Store>) {
    let sb = Sandbox::start(SandboxConfig::default())
        .await
        .expect("the sandbox starts");
    let config = ClientConfig::new(sb.client_id(), sb.client_secret(), &sb.base_url())
        .expect("a loopback base URL is accepted");
    let client = Client::new(config, None).expect("client");
    (sb, client, Arc::new(MemoryStore::default()))
}

fn beneficiary() -> Beneficiary {
    let address = json!({"addressLine": "1 Main St", "citySuburb": "Sydney",
        "stateProvince": "NSW", "postCode": "2000", "country": "AU"});
    serde_json::from_value(json!({
        "currency": "AUD", "name": "Jane Doe", "classification": "Individual",
        "paymentReason": "Invoice 42",
        "beneficiaryBankDetails": {"bankName": "Bank", "bankBranchName": "Main",
            "branchCode": "062000", "account": "12345678", "bankAddress": address},
        "beneficiaryAddress": address,
    }))
    .expect("a beneficiary")
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
    let ((first, _), replayed) = calls::create_deal(&c, &store, "k", req.clone(), None)
        .await
        .expect("booked");
    assert!(!replayed);
    let ((again, _), replayed) = calls::create_deal(&c, &store, "k", req.clone(), None)
        .await
        .expect("replayed");
    assert!(replayed);
    assert_eq!(again, first);
    assert_eq!(deals_sent(&sb), 1);
    let mut other = req;
    other.funding_source = "Direct Debit".into();
    let err = calls::create_deal(&c, &store, "k", other, None)
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
async fn a_lost_answer_is_unknown_until_resolved() {
    let (sb, c, store) = setup().await;
    let req = deal_request(&c).await;
    sb.drop_next("/v1/payments/deals", true);
    let err = calls::create_deal(&c, &store, "lost", req.clone(), None)
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
    let again = calls::create_deal(&c, &store, "lost", req.clone(), None).await;
    assert!(again.is_err());
    assert_eq!(deals_sent(&sb), 1);
    let booked = sb.deals()[0]["dealId"]
        .as_str()
        .expect("a deal id")
        .to_string();
    admin::resolve(&*store, "lost", Some(booked.clone())).expect("resolved");
    let ((deal, _), replayed) = calls::create_deal(&c, &store, "lost", req, None)
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
    let err = calls::create_deal(&c, &store, "r", req.clone(), None)
        .await
        .expect_err("refused");
    assert!(matches!(err, Error::Api { status: 400, .. }), "{err:?}");
    assert_eq!(
        store.get("r").expect("get").map(|e| e.state),
        Some(State::Released)
    );
    calls::create_deal(&c, &store, "r", req, None)
        .await
        .expect("sent again");
    assert_eq!(deals_sent(&sb), 2);
}

#[test]
fn a_deal_created_that_overtakes_its_spot_deal_is_kept_until_the_entry_is_there() {
    let store = MemoryStore::default();
    // The notification first: no entry holds its process id yet, so a note is left.
    assert!(admin::complete_spot(&store, "pid-1", "deal-1")
        .expect("complete")
        .is_none());
    // Then the spot deal's entry records the process id, and adopts the note.
    let pending =
        fxpay_core::journal::machine::claim("s", "create_spot_deal", "fp", "h/1/t", None, None, 1);
    assert!(store.claim(&pending).expect("claim").is_none());
    let done = fxpay_core::journal::machine::done(&pending, "pid-1".into(), None, 2);
    assert!(store.swap(&pending, &done).expect("swap"));
    let adopted = admin::adopt_early(&store, "pid-1")
        .expect("adopt")
        .expect("the note is found");
    assert_eq!(adopted.deal_id.as_deref(), Some("deal-1"));
    assert_eq!(
        store.get("s").expect("get").and_then(|e| e.deal_id),
        Some("deal-1".to_string())
    );
    // In the usual order (the entry first) the deal id is recorded at once.
    assert_eq!(
        admin::complete_spot(&store, "pid-1", "deal-1")
            .expect("complete")
            .and_then(|e| e.deal_id),
        Some("deal-1".to_string())
    );
    assert!(admin::adopt_early(&store, "pid-unknown")
        .expect("adopt")
        .is_none());
}

/// A call that outlasts its lease keeps it: while it runs, its holder renews the entry's
/// lease (every `RENEW_EVERY_MS`), so the key never lapses into "unknown" under a live call.
/// The runtime's clock is paused: the call's 25 s pass at once, and the renewals run in the
/// order of their timers.
#[tokio::test(start_paused = true)]
async fn a_call_longer_than_its_lease_keeps_renewing_it() {
    use fxpay_core::journal::machine::{LEASE_MS, RENEW_EVERY_MS};
    use fxpay_core::journal::once::{once, Keyed};
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let keyed = Keyed {
        key: "long".into(),
        operation: "create_beneficiary",
        fingerprint: "f".into(),
        nonce: None,
        request: None,
    };
    let seen = store.clone();
    let call = || async move {
        let claimed = seen.get("long")?.expect("claimed before the call runs");
        let mut leases = vec![claimed.lease_until];
        // Past the first lease (30 s) in steps of 1 s of the paused clock.
        for _ in 0..(LEASE_MS / 1000 - 5) {
            // A lease is wall-clock time: let the wall clock move on between renewals (which
            // are 10 s apart on the paused clock, but not on the wall's).
            std::thread::sleep(std::time::Duration::from_millis(2));
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            let e = seen.get("long")?.expect("still there");
            assert_eq!(e.state, State::Pending);
            if leases.last() != Some(&e.lease_until) {
                leases.push(e.lease_until);
            }
        }
        Ok::<_, Error>(leases)
    };
    let (leases, replayed) = once(
        &store,
        keyed,
        call,
        |_| ("b1".into(), None),
        |_| Ok(Vec::new()),
    )
    .await
    .expect("the call ends");
    assert!(!replayed);
    // 25 s of call: renewed at 10 s and 20 s, each lease later than the one before.
    assert_eq!(
        leases.len(),
        1 + (25_000 / RENEW_EVERY_MS) as usize,
        "{leases:?}"
    );
    assert!(leases.windows(2).all(|w| w[1] > w[0]), "{leases:?}");
    let done = store.get("long").expect("get").expect("entry");
    assert_eq!(
        (done.state, done.result.as_deref()),
        (State::Done, Some("b1"))
    );
}

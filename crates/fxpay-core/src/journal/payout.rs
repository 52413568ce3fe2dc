//! Bulk payouts, one row at a time: each row of a table is a quote, an optional beneficiary
//! and a deal, each under the row's key (the binding's `PayoutStream` runs the rows
//! concurrently on the core's runtime). A refused or unknown row never stops the others; a
//! table run again resumes (booked rows replay, nothing is sent).
use super::calls;
use super::entry::State;
use super::store::{blocking, JournalStore};
use crate::client::Client;
use crate::deadline::scope;
use crate::error::{Error, IdempotencyKind, Result};
use crate::models::{Beneficiary, DealBeneficiary, DealRequest, QuoteRequest};
use crate::paced::Paced;
use crate::transport::Observer;
use rust_decimal::Decimal;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One row: a payment of `quote.buy_amount` to a beneficiary.
#[derive(Debug, Clone)]
pub struct Row {
    pub key: String,
    pub quote: QuoteRequest,
    pub beneficiary: RowBeneficiary,
    pub pay_reason: String,
    pub pay_reference: String,
    pub funding_source: String,
}

/// Who a row pays: a registered beneficiary, or one to register under the row's key.
#[derive(Debug, Clone)]
pub enum RowBeneficiary {
    Id(String),
    New(Box<Beneficiary>),
}

/// How a row ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The deal was booked by this run.
    Booked,
    /// The journal already held the deal: nothing was sent for it.
    Replayed,
    /// A step's outcome is unknown (or another caller holds it): see `journal.unknown()`.
    Unknown,
    /// A step was refused (nothing was created by it), or the row is invalid.
    Refused,
}

/// What a row gave: the ids it reached, and how it ended.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub quote_id: Option<String>,
    pub beneficiary_id: Option<String>,
    pub deal_id: Option<String>,
    pub sell_amount: Option<Decimal>,
    pub status: Option<Status>,
    pub error: Option<String>,
}

/// How long a row goes on through 429s, from its first: its own deadline (the client's
/// `deadline`, when longer). Past it, the row is refused.
pub(crate) const RATE_LIMITED_FOR: Duration = Duration::from_secs(600);

/// One row's steps. Every error is kept in the outcome, never raised. A 429 is the service
/// refusing before it acted (the step's key is released): it slows the whole payout, not the
/// row. Every answer goes to the client's pacing (`crate::pacing`: a 429 lowers the pace and
/// holds every request for its `Retry-After`, with jitter), and every request of the row waits
/// its turn in that pace; the row goes on where it was refused, and is refused only when its
/// turn would come past its own deadline ([`RATE_LIMITED_FOR`] after its first 429).
pub async fn pay_row(
    c: &Client,
    store: &Arc<dyn JournalStore>,
    row: Row,
    obs: Option<&dyn Observer>,
) -> Outcome {
    let pacing = c.pacing();
    let paced = Paced { pacing, inner: obs };
    let mut o = Outcome::default();
    let mut end: Option<Instant> = None;
    let result = loop {
        // No leader of a group commit waits for a row's calls (`group_commit::promptly`).
        let row_steps = steps(c, store, row.clone(), &mut o, &paced, end);
        match super::group_commit::promptly(row_steps).await {
            Err(Error::Api {
                status: 429,
                retry_after,
                ..
            }) => {
                pacing.hold_for(retry_after.map(Duration::from_secs));
                let most = c
                    .config()
                    .deadline
                    .unwrap_or_default()
                    .max(RATE_LIMITED_FOR);
                end.get_or_insert_with(|| Instant::now() + most);
                // The row goes on where it was refused: what it reached (its quote's read,
                // say) is kept, so a retry sends only what the 429 refused.
            }
            r => break r,
        }
    };
    match result {
        Ok(replayed) => {
            o.status = Some(if replayed {
                Status::Replayed
            } else {
                Status::Booked
            })
        }
        Err(e) => {
            o.status = Some(match &e {
                Error::Idempotency {
                    kind: IdempotencyKind::OutcomeUnknown | IdempotencyKind::InProgress,
                    ..
                } => Status::Unknown,
                _ => Status::Refused,
            });
            o.error = Some(e.to_string());
        }
    }
    o
}

/// Waits for the next request's turn in the client's pace; an error (nothing sent) when it
/// would come past the row's deadline.
async fn turn(paced: &Paced<'_>, end: Option<Instant>, what: &str) -> Result<()> {
    if paced.pacing.turn(end).await {
        return Ok(());
    }
    Err(crate::deadline::passed_while(
        &format!(
            "before {what} could be sent: the service answered 429 (rate limited) for longer than \
             the row's own deadline"
        ),
        true,
    ))
}

/// The outcome of a row whose quote was replayed (`quote_id`) and whose deal the journal
/// already holds for that quote, read from the journal alone: a resumed table sends nothing
/// for it (not even the quote's read).
async fn already_booked(
    store: &Arc<dyn JournalStore>,
    key: &str,
    quote_id: &str,
) -> Result<Option<Outcome>> {
    let dk = format!("{key}/deal");
    let Some(deal) = blocking(store, move |s| s.get(&dk)).await? else {
        return Ok(None);
    };
    if deal.state != State::Done || deal.operation != "create_deal" {
        return Ok(None);
    }
    let Some(body) = deal
        .request
        .as_deref()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
    else {
        return Ok(None);
    };
    if body["quoteId"].as_str() != Some(quote_id) {
        return Ok(None);
    }
    let first = &body["beneficiaries"][0];
    let amount = first["amount"].to_string();
    Ok(Some(Outcome {
        quote_id: Some(quote_id.to_string()),
        beneficiary_id: first["beneficiaryId"].as_str().map(str::to_string),
        deal_id: deal.result.clone(),
        sell_amount: std::str::FromStr::from_str(amount.trim_matches('"')).ok(),
        status: None,
        error: None,
    }))
}

async fn steps(
    c: &Client,
    store: &Arc<dyn JournalStore>,
    row: Row,
    o: &mut Outcome,
    paced: &Paced<'_>,
    end: Option<Instant>,
) -> Result<bool> {
    let obs: Option<&dyn Observer> = Some(paced);
    turn(paced, end, "the row's quote").await?;
    // Each request a row makes is one call, bounded by the client's deadline as any other
    // call is (`crate::deadline`); the payout as a whole is not.
    let bounded = c.config().deadline;
    let ((quote_id, _), quote_replayed) = scope(
        bounded,
        calls::create_quote(c, store, &format!("{}/quote", row.key), &row.quote, obs),
    )
    .await?;
    if o.quote_id.as_deref() != Some(quote_id.as_str()) {
        o.sell_amount = None;
    }
    o.quote_id = Some(quote_id.clone());
    if quote_replayed {
        if let Some(done) = already_booked(store, &row.key, &quote_id).await? {
            *o = done;
            return Ok(true);
        }
    }
    // Read once: a row going on after a 429 keeps the amount it read.
    let sell_amount = match o.sell_amount {
        Some(amount) if o.quote_id.as_deref() == Some(quote_id.as_str()) => amount,
        _ => {
            turn(paced, end, "the row's quote read").await?;
            let (quote, _) = scope(bounded, c.get_quote(&quote_id, obs)).await?;
            quote.sell_amount
        }
    };
    o.sell_amount = Some(sell_amount);
    let beneficiary_id = match row.beneficiary {
        RowBeneficiary::Id(id) => id,
        RowBeneficiary::New(b) => {
            let key = format!("{}/beneficiary", row.key);
            turn(paced, end, "the row's beneficiary").await?;
            scope(bounded, calls::create_beneficiary(c, store, &key, &b, obs))
                .await?
                .0
                 .0
        }
    };
    o.beneficiary_id = Some(beneficiary_id.clone());
    let req = DealRequest {
        quote_id,
        funding_source: row.funding_source,
        channel: None,
        beneficiaries: vec![DealBeneficiary {
            beneficiary_id,
            amount: sell_amount,
            pay_reason: row.pay_reason,
            pay_reference: row.pay_reference,
        }],
    };
    turn(paced, end, "the row's deal").await?;
    let ((deal, _), replayed) = scope(
        bounded,
        calls::create_deal(c, store, &format!("{}/deal", row.key), req, obs),
    )
    .await?;
    o.deal_id = Some(deal.deal_id);
    Ok(replayed)
}

#[cfg(test)]
#[path = "../../tests/support/beneficiary.rs"]
mod beneficiary;

#[cfg(test)]
mod tests {
    use super::beneficiary::beneficiary;
    use super::*;
    use crate::journal::entry::Entry;
    use crate::journal::group_commit::gathered;
    use crate::journal::holder::HolderCheck;
    use crate::journal::store::memory::MemoryJournalStore;
    use crate::ClientConfig;
    use futures_util::future::BoxFuture;
    use std::sync::Mutex;

    /// The memory store, noting for each claim whether its call is counted in flight (what
    /// a durable store's group commit reads where it stores a claim).
    #[derive(Default)]
    struct Noting(MemoryJournalStore, Mutex<Vec<(String, bool)>>);

    impl JournalStore for Noting {
        fn get(&self, key: &str) -> Result<Option<Entry>> {
            self.0.get(key)
        }
        fn claim(&self, entry: &Entry) -> Result<Option<Entry>> {
            self.1
                .lock()
                .expect("lock")
                .push((entry.key.clone(), gathered()));
            self.0.claim(entry)
        }
        fn claim_queued(
            &self,
            entry: &Entry,
            gathered: bool,
        ) -> Option<BoxFuture<'static, Result<Option<Entry>>>> {
            self.1
                .lock()
                .expect("lock")
                .push((format!("queued {}", entry.key), gathered));
            None
        }
        fn swap(&self, old: &Entry, new: &Entry) -> Result<bool> {
            self.0.swap(old, new)
        }
        fn find(&self, result: &str) -> Result<Option<Entry>> {
            self.0.find(result)
        }
        fn holders(&self) -> &dyn HolderCheck {
            self.0.holders()
        }
    }

    /// No leader of a group commit waits for a row's calls: each claim of a row, queued or
    /// made on a thread of the blocking pool, is made as not counted in flight; the same
    /// call outside a payout is counted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_rows_claims_are_not_waited_for() {
        let sb = fxpay_sandbox::Sandbox::start(fxpay_sandbox::SandboxConfig::default())
            .await
            .expect("the sandbox starts");
        let config = ClientConfig::new(sb.client_id(), sb.client_secret(), &sb.base_url())
            .expect("a loopback base URL");
        let c = Client::new(config, None).expect("client");
        let noting = Arc::new(Noting::default());
        let store: Arc<dyn JournalStore> = noting.clone();
        let (bid, _) = c
            .create_beneficiary(&beneficiary(), None)
            .await
            .expect("beneficiary");
        let row = Row {
            key: "row-1".into(),
            quote: QuoteRequest::new("USD", "100", "AUD", 1).expect("quote request"),
            beneficiary: RowBeneficiary::Id(bid),
            pay_reason: "r".into(),
            pay_reference: "REF-1".into(),
            funding_source: "Own account".into(),
        };
        let o = pay_row(&c, &store, row.clone(), None).await;
        assert_eq!(o.status, Some(Status::Booked), "{:?}", o.error);
        let noted = std::mem::take(&mut *noting.1.lock().expect("lock"));
        let keys: Vec<&str> = noted.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "queued row-1/quote",
                "row-1/quote",
                "queued row-1/deal",
                "row-1/deal"
            ]
        );
        assert!(noted.iter().all(|(_, g)| !g), "{noted:?}");
        // The same call outside a payout: counted.
        calls::create_quote(&c, &store, "loop-1", &row.quote, None)
            .await
            .expect("quote");
        let noted = std::mem::take(&mut *noting.1.lock().expect("lock"));
        assert_eq!(noted.len(), 2);
        assert!(noted.iter().all(|(_, g)| *g), "{noted:?}");
    }
}

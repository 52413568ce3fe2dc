//! Bulk payouts: each row of a table is a quote, an optional beneficiary and a deal, each
//! under the row's key, run concurrently on the core's runtime. A refused or unknown row
//! never stops the others; a table run again resumes (booked rows replay, nothing is sent).
use super::calls;
use super::entry::State;
use super::store::{blocking, Store};
use crate::client::Client;
use crate::deadline::scope;
use crate::error::{Error, IdempotencyKind, Result};
use crate::models::{Beneficiary, DealBeneficiary, DealRequest, QuoteRequest};
use crate::transport::Observer;
use futures_util::stream::{self, StreamExt};
use rust_decimal::Decimal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Booked => "booked",
            Status::Replayed => "replayed",
            Status::Unknown => "unknown",
            Status::Refused => "refused",
        }
    }
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

/// Checks a table before anything is sent: keys present and unique.
pub fn check_rows(rows: &[Row]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for (i, r) in rows.iter().enumerate() {
        calls::check_key(&r.key).map_err(|_| {
            Error::invalid(format!(
                "rows[{i}].key must be 1 to 255 characters, none of them a control character"
            ))
        })?;
        if !seen.insert(r.key.as_str()) {
            return Err(Error::invalid(format!(
                "rows[{i}].key {:?} is not unique in the table",
                r.key
            )));
        }
    }
    Ok(())
}

/// Runs `rows`, at most `concurrency` at once, each row's calls traced through its own
/// observer (`observers[i]`, if any). `on_row(index, outcome)` is called as each
/// row ends. Once `stop` is set no further row starts; rows in flight run to their end.
/// Rows never started have no outcome (None).
pub async fn pay_out(
    c: &Client,
    store: &Arc<dyn Store>,
    rows: Vec<Row>,
    concurrency: usize,
    stop: Arc<AtomicBool>,
    on_row: &(dyn Fn(usize, &Outcome) + Send + Sync),
    observers: Vec<Option<Arc<dyn Observer>>>,
) -> Result<Vec<Option<Outcome>>> {
    check_rows(&rows)?;
    if concurrency == 0 {
        return Err(Error::invalid("concurrency must be at least 1"));
    }
    let n = rows.len();
    let mut out: Vec<Option<Outcome>> = vec![None; n];
    let stop_ref = &stop;
    // One observer per row (an observer follows one call's attempts at a time).
    let mut observers = observers.into_iter();
    let rows: Vec<_> = rows
        .into_iter()
        .enumerate()
        .map(|(i, r)| (i, r, observers.next().flatten()))
        .collect();
    // A row starts only while `stop` is not set; one never started has no outcome.
    // The rows' futures are made first (nothing runs until polled): a stream that stores no
    // closure keeps the future `Send` for any caller.
    let starts: Vec<_> = rows
        .into_iter()
        .map(|(i, row, obs)| start_row(c, store, stop_ref, i, row, obs))
        .collect();
    let mut running = stream::iter(starts).buffer_unordered(concurrency);
    while let Some((i, outcome)) = running.next().await {
        if let Some(outcome) = outcome {
            on_row(i, &outcome);
            out[i] = Some(outcome);
        }
    }
    Ok(out)
}

/// Row `i`, unless `stop` is set (then no outcome: it never started).
async fn start_row(
    c: &Client,
    store: &Arc<dyn Store>,
    stop: &AtomicBool,
    i: usize,
    row: Row,
    obs: Option<Arc<dyn Observer>>,
) -> (usize, Option<Outcome>) {
    if stop.load(Ordering::Acquire) {
        return (i, None);
    }
    (i, Some(pay_row(c, store, row, obs.as_deref()).await))
}

/// How many times a row waits out a 429 (the service's rate limit) before it gives up.
pub(crate) const RATE_LIMITED_TRIES: u32 = 100;
/// The longest wait a 429's `Retry-After` asks of a row (1 s without one).
const RATE_LIMITED_WAIT_MAX: Duration = Duration::from_secs(60);

/// One row's steps. Every error is kept in the outcome, never raised. A 429 is the service
/// refusing before it acted (the step's key is released): the row waits out its
/// `Retry-After` and goes on, so a rate limit never makes a row refused (up to
/// [`RATE_LIMITED_TRIES`] waits).
pub async fn pay_row(
    c: &Client,
    store: &Arc<dyn Store>,
    row: Row,
    obs: Option<&dyn Observer>,
) -> Outcome {
    let mut o = Outcome::default();
    let mut waits = 0;
    let result = loop {
        match steps(c, store, row.clone(), &mut o, obs).await {
            Err(Error::Api {
                status: 429,
                retry_after,
                ..
            }) if waits < RATE_LIMITED_TRIES => {
                waits += 1;
                let wait = retry_after.map_or(Duration::from_secs(1), Duration::from_secs);
                tokio::time::sleep(wait.min(RATE_LIMITED_WAIT_MAX)).await;
                o = Outcome::default();
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

/// The outcome of a row whose quote was replayed (`quote_id`) and whose deal the journal
/// already holds for that quote, read from the journal alone: a resumed table sends nothing
/// for it (not even the quote's read).
async fn already_booked(
    store: &Arc<dyn Store>,
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
    store: &Arc<dyn Store>,
    row: Row,
    o: &mut Outcome,
    obs: Option<&dyn Observer>,
) -> Result<bool> {
    // Each request a row makes is one call, bounded by the client's deadline as any other
    // call is (`crate::deadline`); the payout as a whole is not.
    let bounded = c.config().deadline;
    let ((quote_id, _), quote_replayed) = scope(
        bounded,
        calls::create_quote(c, store, &format!("{}/quote", row.key), &row.quote, obs),
    )
    .await?;
    o.quote_id = Some(quote_id.clone());
    if quote_replayed {
        if let Some(done) = already_booked(store, &row.key, &quote_id).await? {
            *o = done;
            return Ok(true);
        }
    }
    let (quote, _) = scope(bounded, c.get_quote(&quote_id, obs)).await?;
    let sell_amount = quote.sell_amount;
    o.sell_amount = Some(sell_amount);
    let beneficiary_id = match row.beneficiary {
        RowBeneficiary::Id(id) => id,
        RowBeneficiary::New(b) => {
            let key = format!("{}/beneficiary", row.key);
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
    let ((deal, _), replayed) = scope(
        bounded,
        calls::create_deal(c, store, &format!("{}/deal", row.key), req, obs),
    )
    .await?;
    o.deal_id = Some(deal.deal_id);
    Ok(replayed)
}

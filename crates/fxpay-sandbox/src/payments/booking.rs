//! Booking a deal: the business checks (see `http/errors.rs`, `business:deal:*`) and the atomic
//! change of the ledger. Used by the deal endpoint (answered at once) and by spot-deal
//! processing (`callbacks.rs`, answered in the `DealCreated` event).
//!
//! The quote exists, belongs to the client and has not been used (a quote books one deal:
//! reuse → 409); each beneficiary exists, belongs to the client, appears once and receives
//! the quote's sell currency; each amount has at most the sell currency's decimal places; the
//! count equals the quote's `beneficiaries`; the amounts sum exactly to the quote's
//! `sellAmount`. Every failed check is listed; 404 when the quote or a beneficiary is unknown,
//! else 422.
use std::collections::HashSet;
use std::sync::Arc;

use axum::http::StatusCode;
use rust_decimal::Decimal;
use serde_json::json;

use crate::http::errors::{code, ApiError, FieldError};
use crate::payments::fields::number;
use crate::payments::{quotes, rates};
use crate::state::{lock, Deal, DealKind, Ledger, Quote, State, FREEBIES};

/// One beneficiary line of a deal.
#[derive(Debug, Clone)]
pub struct DealLine {
    pub beneficiary_id: String,
    pub amount: Decimal,
    pub pay_reason: String,
    pub pay_reference: String,
}

/// A deal body that passed field validation.
#[derive(Debug, Clone)]
pub struct DealRequest {
    pub quote_id: String,
    pub funding_source: &'static str,
    pub channel: Option<String>,
    pub lines: Vec<DealLine>,
}

/// Runs the business checks and books the deal atomically.
pub fn book(
    state: &State,
    client_id: &str,
    req: &DealRequest,
    kind: DealKind,
    process_id: Option<&str>,
) -> Result<Deal, ApiError> {
    let quote = quotes::find(state, &req.quote_id).filter(|q| q.client_id == client_id);
    let mut ledger = lock(&state.ledger);
    let mut errors = Vec::new();
    check_quote(&ledger, quote.as_deref(), req, &mut errors)?;
    let mut seen = HashSet::new();
    for (i, line) in req.lines.iter().enumerate() {
        check_line(
            &ledger,
            client_id,
            quote.as_deref(),
            i,
            line,
            &mut seen,
            &mut errors,
        );
    }
    if let Some(q) = &quote {
        check_sum(q, req, &mut errors);
    }
    let quote = accepted(quote, errors)?;
    let deal = new_deal(state, client_id, &quote, req, kind, process_id);
    record(&mut ledger, client_id, &quote, &deal);
    Ok(deal)
}

/// The quote: known to this client, unused (else a 409 at once), and for as many
/// beneficiaries as the deal lists.
fn check_quote(
    ledger: &Ledger,
    quote: Option<&Quote>,
    req: &DealRequest,
    errors: &mut Vec<FieldError>,
) -> Result<(), ApiError> {
    let Some(q) = quote else {
        errors.push(FieldError::new(
            code::QUOTE_NOT_FOUND,
            "QuoteId",
            "no such quote for this client",
        ));
        return Ok(());
    };
    if let Some(deal) = ledger.used_quotes.get(&q.id) {
        return Err(ApiError::one(
            StatusCode::CONFLICT,
            code::QUOTE_USED,
            "QuoteId",
            format!("the quote was already used by deal {deal}"),
        ));
    }
    if req.lines.len() != q.beneficiaries as usize {
        errors.push(FieldError::new(
            code::COUNT_MISMATCH,
            "Beneficiaries",
            format!(
                "the quote is for {} beneficiaries, the deal lists {}",
                q.beneficiaries,
                req.lines.len()
            ),
        ));
    }
    Ok(())
}

/// Line `i`: its beneficiary listed once, known to this client and receiving the quote's
/// sell currency; its amount with no more decimal places than that currency has.
fn check_line<'r>(
    ledger: &Ledger,
    client_id: &str,
    quote: Option<&Quote>,
    i: usize,
    line: &'r DealLine,
    seen: &mut HashSet<&'r str>,
    errors: &mut Vec<FieldError>,
) {
    let field = format!("Beneficiaries[{i}].BeneficiaryId");
    if !seen.insert(line.beneficiary_id.as_str()) {
        errors.push(FieldError::new(
            code::DUPLICATE_BENEFICIARY,
            field.clone(),
            "the same beneficiary is listed twice",
        ));
    }
    match ledger
        .beneficiaries
        .get(&line.beneficiary_id)
        .filter(|b| b.client_id == client_id)
    {
        None => errors.push(FieldError::new(
            code::BENEFICIARY_NOT_FOUND,
            field,
            "no such beneficiary for this client",
        )),
        Some(b) => {
            if let Some(q) = quote {
                if b.currency != q.sell_currency {
                    errors.push(FieldError::new(
                        code::CURRENCY_MISMATCH,
                        field,
                        format!(
                            "the beneficiary receives {}, the quote sells {}",
                            b.currency, q.sell_currency
                        ),
                    ));
                }
            }
        }
    }
    if let Some(q) = quote {
        let places = rates::minor_units(&q.sell_currency);
        if line.amount.normalize().scale() > places {
            errors.push(FieldError::new(
                code::AMOUNT_DECIMALS,
                format!("Beneficiaries[{i}].Amount"),
                format!(
                    "{} amounts have at most {places} decimal places",
                    q.sell_currency
                ),
            ));
        }
    }
}

/// The amounts sum exactly to the quote's `sellAmount` (a sum too large for a decimal
/// cannot).
fn check_sum(quote: &Quote, req: &DealRequest, errors: &mut Vec<FieldError>) {
    let sum = req
        .lines
        .iter()
        .try_fold(Decimal::ZERO, |s, line| s.checked_add(line.amount));
    if sum != Some(quote.sell_amount) {
        let got = sum
            .map(|s| s.to_string())
            .unwrap_or_else(|| "too much".to_owned());
        errors.push(FieldError::new(
            code::SUM_MISMATCH,
            "Beneficiaries",
            format!(
                "the amounts sum to {got}, the quote's sellAmount is {}",
                quote.sell_amount
            ),
        ));
    }
}

/// The quote, when every check passed; else the errors: 404 when the quote or a beneficiary
/// is unknown, 422 otherwise.
fn accepted(quote: Option<Arc<Quote>>, errors: Vec<FieldError>) -> Result<Arc<Quote>, ApiError> {
    match quote {
        Some(q) if errors.is_empty() => Ok(q),
        _ => {
            let missing = errors
                .iter()
                .any(|e| e.code == code::QUOTE_NOT_FOUND || e.code == code::BENEFICIARY_NOT_FOUND);
            let status = if missing {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::UNPROCESSABLE_ENTITY
            };
            Err(ApiError::new(status, errors))
        }
    }
}

/// The deal a booking makes, created now by the sandbox's clock.
fn new_deal(
    state: &State,
    client_id: &str,
    quote: &Quote,
    req: &DealRequest,
    kind: DealKind,
    process_id: Option<&str>,
) -> Deal {
    Deal {
        id: crate::ids::uuid(),
        quote_id: quote.id.clone(),
        process_id: process_id.map(str::to_owned),
        kind,
        client_id: client_id.to_owned(),
        funding_source: req.funding_source.to_owned(),
        channel: req.channel.clone(),
        beneficiaries: req
            .lines
            .iter()
            .map(|l| {
                json!({
                    "beneficiaryId": l.beneficiary_id,
                    "amount": number(&l.amount),
                    "payReason": l.pay_reason,
                    "payReference": l.pay_reference,
                })
            })
            .collect(),
        created_at: state.clock.now(),
    }
}

/// Records the deal: indexed by id, its quote used, a freebie claimed if the quote was one.
fn record(ledger: &mut Ledger, client_id: &str, quote: &Quote, deal: &Deal) {
    let index = ledger.deals.len();
    ledger.deal_index.insert(deal.id.clone(), index);
    ledger.used_quotes.insert(quote.id.clone(), deal.id.clone());
    if quote.freebie {
        let claimed = ledger.claimed.entry(client_id.to_owned()).or_insert(0);
        *claimed = (*claimed + 1).min(FREEBIES);
    }
    ledger.deals.push(deal.clone());
}

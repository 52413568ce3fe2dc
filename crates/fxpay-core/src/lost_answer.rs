//! The words of the `OutcomeUnknownError` raised by the call whose request was sent and whose
//! answer was lost. The journal's refusal of an unknown key says "nothing was sent", true of
//! a repeat under the key; the call that sent the request says which request it sent, and
//! that it was sent.
use crate::error::{Error, IdempotencyKind};
use crate::journal::State;

/// The request (method and whole path) a creating call under a key sends, by the name the
/// journal keeps for its operation.
fn request_of(operation: &str) -> Option<&'static str> {
    Some(match operation {
        "create_quote" => "POST /v1/payments/quotes",
        "create_beneficiary" => "POST /v1/payments/beneficiaries",
        "create_deal" => "POST /v1/payments/deals",
        "create_spot_deal" => "POST /v1/payments/deals/spot",
        _ => return None,
    })
}

/// `e`, said by the call that sent its request: an outcome made unknown by this call's own
/// lost answer (its `cause`) names the request and says it was sent. Any other error is
/// returned as it is.
pub fn named_by_sender(e: Error) -> Error {
    match e {
        Error::Idempotency {
            kind: IdempotencyKind::OutcomeUnknown,
            entry: Some(entry),
            cause: Some(cause),
            message,
        } => {
            let message = if entry.state == State::Unknown {
                let request = match request_of(&entry.operation) {
                    Some(r) => format!("{r} ({})", entry.operation),
                    None => entry.operation.clone(),
                };
                format!(
                    "{request} under idempotency key {:?} was sent, and its answer was lost: \
                     {cause}. It may have been created: nothing more is sent under the key \
                     until you find out and settle it with journal.resolve(key, result=...)",
                    entry.key
                )
            } else {
                message
            };
            Error::Idempotency {
                kind: IdempotencyKind::OutcomeUnknown,
                message,
                entry: Some(entry),
                cause: Some(cause),
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_keyed_operation_has_its_request() {
        for op in [
            "create_quote",
            "create_beneficiary",
            "create_deal",
            "create_spot_deal",
        ] {
            let r = request_of(op).expect(op);
            assert!(r.starts_with("POST /v1/payments/"), "{r}");
        }
        assert_eq!(request_of("get_quote"), None);
    }
}

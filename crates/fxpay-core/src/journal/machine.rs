//! The journal's state machine: what a repeated key means, what a failed call leaves behind,
//! and every transition of an entry. Pure functions: the stores only keep entries.
use super::entry::{Entry, State};
use super::holder::HolderCheck;
use crate::error::{Error, IdempotencyKind};

/// The longest a claim stands without renewal. A holder renews it while its call runs.
pub(crate) const LEASE_MS: u64 = 30_000;
/// How often a holder renews its lease.
pub(crate) const RENEW_EVERY_MS: u64 = 10_000;

/// What a call finds under its key.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// Released: the key is free again; the call claims it.
    Free,
    /// Done, for the same request: its recorded result is returned, nothing is sent.
    Replay,
    /// Another operation or wire request: `KeyReusedError`.
    Reused,
    /// Pending with a live holder: `InProgressError`.
    InProgress,
    /// Unknown: `OutcomeUnknownError`, until resolved.
    Unknown,
    /// Pending, but its holder is gone (lease lapsed, or its process is dead): it becomes
    /// unknown.
    Lapsed,
}

/// What `existing` means for a call of `operation` whose request has `fingerprint`.
pub(crate) fn decide(
    existing: &Entry,
    operation: &str,
    fingerprint: &str,
    now: u64,
    holders: &dyn HolderCheck,
) -> Found {
    if existing.state == State::Released {
        return Found::Free;
    }
    if existing.operation != operation || existing.fingerprint != fingerprint {
        return Found::Reused;
    }
    match existing.state {
        State::Done => Found::Replay,
        State::Unknown => Found::Unknown,
        State::Pending if existing.lease_until <= now || holders.is_dead(&existing.holder) => {
            Found::Lapsed
        }
        State::Pending | State::Released => Found::InProgress,
    }
}

/// What a call's failure leaves its key as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settle {
    /// Proven not created: the key is released.
    Released,
    /// May have been created: the key is unknown.
    Unknown,
}

/// Whether `e` proves that nothing was created. A 4xx answer does (the service refused
/// the request); so does any failure before a byte was sent. A 5xx, a timeout, a lost
/// connection or a 2xx that cannot be read may hide a created object.
pub(crate) fn settle(e: &Error) -> Settle {
    match e {
        Error::Api { status, .. } if (400..500).contains(status) => Settle::Released,
        Error::Transport { unsent, .. } if *unsent => Settle::Released,
        Error::InvalidRequest(_)
        | Error::Configuration(_)
        | Error::OAuth { .. }
        | Error::StateMismatch
        | Error::CassetteMismatch(_)
        | Error::Idempotency { .. } => Settle::Released,
        _ => Settle::Unknown,
    }
}

/// A new claim of `key` by `holder`.
pub(crate) fn claim(
    key: &str,
    operation: &str,
    fingerprint: &str,
    holder: &str,
    nonce: Option<String>,
    request: Option<String>,
    now: u64,
) -> Entry {
    Entry {
        key: key.to_string(),
        operation: operation.to_string(),
        fingerprint: fingerprint.to_string(),
        state: State::Pending,
        result: None,
        deal_id: None,
        holder: holder.to_string(),
        lease_until: now.saturating_add(LEASE_MS),
        created_at: now,
        updated_at: now,
        error: None,
        response: None,
        nonce,
        request,
    }
}

/// `e` with its lease renewed.
pub(crate) fn renewed(e: &Entry, now: u64) -> Entry {
    Entry {
        lease_until: now.saturating_add(LEASE_MS),
        updated_at: now,
        ..e.clone()
    }
}

/// `e`, created as `result`.
pub(crate) fn done(e: &Entry, result: String, response: Option<String>, now: u64) -> Entry {
    Entry {
        state: State::Done,
        result: Some(result),
        response,
        error: None,
        updated_at: now,
        ..e.clone()
    }
}

/// `e`, released or unknown after `error`.
pub(crate) fn failed(e: &Entry, how: Settle, error: String, now: u64) -> Entry {
    Entry {
        state: match how {
            Settle::Released => State::Released,
            Settle::Unknown => State::Unknown,
        },
        error: Some(error),
        updated_at: now,
        ..e.clone()
    }
}

/// `e` settled by hand: `Some(id)` created as that id, `None` not created. Only an unknown
/// entry (or a pending one whose holder is gone) can be resolved.
pub(crate) fn resolved(
    e: &Entry,
    result: Option<String>,
    now: u64,
    holders: &dyn HolderCheck,
) -> Result<Entry, Error> {
    let lapsed = e.state == State::Pending && (e.lease_until <= now || holders.is_dead(&e.holder));
    if e.state != State::Unknown && !lapsed {
        return Err(Error::invalid(format!(
            "journal key {:?} is {}: only an unknown key can be resolved",
            e.key,
            e.state.as_str()
        )));
    }
    if let Some(id) = &result {
        if id.is_empty() {
            return Err(Error::invalid("result must be a non-empty id, or None"));
        }
    }
    let error = Some(match &result {
        Some(_) => "resolved by hand: created".to_string(),
        None => "resolved by hand: not created".to_string(),
    });
    Ok(Entry {
        state: if result.is_some() {
            State::Done
        } else {
            State::Released
        },
        result,
        error,
        response: None,
        updated_at: now,
        ..e.clone()
    })
}

/// `e` (a spot deal's entry) with its `DealCreated` deal id.
pub(crate) fn with_deal_id(e: &Entry, deal_id: &str, now: u64) -> Entry {
    Entry {
        deal_id: Some(deal_id.to_string()),
        updated_at: now,
        ..e.clone()
    }
}

/// The error of a call whose answer was lost (`lost`) after its key was settled by what
/// knows the outcome (a spot deal's `DealCreated`): `OutcomeUnknownError` with the settled
/// entry, saying how to get the result.
pub(crate) fn lost_but_settled(e: &Entry, operation: &str, lost: &str) -> Error {
    Error::Idempotency {
        kind: IdempotencyKind::OutcomeUnknown,
        message: format!(
            "the answer to {operation} under idempotency key {:?} was lost ({lost}), but its \
             notification has since settled the key as {}: call again with the key for its \
             result (nothing will be sent)",
            e.key,
            e.state.as_str()
        ),
        entry: Some(Box::new(e.clone())),
        cause: None,
    }
}

/// What a spot deal's verified `DealCreated` does to its entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ByEvent {
    /// The entry moves forward to this one.
    Settle(Box<Entry>),
    /// The entry already says what the notification says.
    Same,
    /// The notification contradicts the entry, which keeps what it had: why.
    Contradiction(String),
}

/// What a spot deal's verified `DealCreated` (`ok`: `success`; `process_id`, `deal_id`;
/// `failure`: the fail event's errors as text) makes of its entry `e`. Forward only: a
/// `pending` or `unknown` entry becomes `done` (the process id and deal id) on success and
/// `released` on failure; a `done` entry only gains the deal id of its own process. A `fail`
/// for a `done` entry, a success for another process id or another deal id, and a success
/// for a `released` entry are contradictions: the entry keeps what it had.
pub(crate) fn by_event(
    e: &Entry,
    ok: bool,
    process_id: &str,
    deal_id: Option<&str>,
    failure: &str,
    now: u64,
) -> ByEvent {
    let event = if ok { "success" } else { "fail" };
    let other_process = e
        .result
        .as_deref()
        .filter(|r| !r.eq_ignore_ascii_case(process_id));
    if let Some(r) = other_process {
        return ByEvent::Contradiction(format!(
            "a {event} DealCreated for spot deal {process_id} reached key {:?}, which is {} as \
             spot deal {r}",
            e.key,
            e.state.as_str()
        ));
    }
    match (e.state, ok) {
        (State::Pending | State::Unknown, true) => match deal_id {
            Some(d) => ByEvent::Settle(Box::new(Entry {
                state: State::Done,
                result: Some(e.result.clone().unwrap_or_else(|| process_id.to_string())),
                deal_id: Some(d.to_string()),
                error: None,
                updated_at: now,
                ..e.clone()
            })),
            None => ByEvent::Same,
        },
        (State::Pending | State::Unknown, false) => ByEvent::Settle(Box::new(Entry {
            state: State::Released,
            result: None,
            deal_id: None,
            error: Some(format!(
                "its DealCreated reported that spot deal {process_id} failed: {failure}"
            )),
            response: None,
            updated_at: now,
            ..e.clone()
        })),
        (State::Done, true) => match (e.deal_id.as_deref(), deal_id) {
            (_, None) => ByEvent::Same,
            (Some(have), Some(d)) if have == d => ByEvent::Same,
            (Some(have), Some(d)) => ByEvent::Contradiction(format!(
                "a success DealCreated for spot deal {process_id} names deal {d}, but key {:?} \
                 records deal {have}",
                e.key
            )),
            (None, Some(d)) => ByEvent::Settle(Box::new(with_deal_id(e, d, now))),
        },
        (State::Done, false) => ByEvent::Contradiction(format!(
            "a fail DealCreated for spot deal {process_id} reached key {:?}, which is done \
             (a fail never releases a done key): {failure}",
            e.key
        )),
        (State::Released, true) => ByEvent::Contradiction(format!(
            "a success DealCreated for spot deal {process_id} reached key {:?}, which is \
             released (nothing was created under this claim)",
            e.key
        )),
        (State::Released, false) => ByEvent::Same,
    }
}

/// The error a call raises for `found` (`Reused`, `InProgress` or `Unknown`) under `e`.
pub(crate) fn refusal(found: &Found, e: &Entry, operation: &str) -> Error {
    let (kind, message) = match found {
        Found::Reused => (
            IdempotencyKind::KeyReused,
            format!(
                "idempotency key {:?} was used for another request ({} with other arguments); \
                 nothing was sent",
                e.key, e.operation
            ),
        ),
        Found::InProgress => (
            IdempotencyKind::InProgress,
            format!(
                "idempotency key {:?} is being sent by another call ({}); nothing was sent",
                e.key, e.holder
            ),
        ),
        _ => (
            IdempotencyKind::OutcomeUnknown,
            format!(
                "the outcome of {operation} under idempotency key {:?} is unknown ({}): it may \
                 have been created. Nothing was sent; find out and settle it with \
                 journal.resolve(key, result=...)",
                e.key,
                e.error.as_deref().unwrap_or("its holder is gone")
            ),
        ),
    };
    Error::Idempotency {
        kind,
        message,
        entry: Some(Box::new(e.clone())),
        cause: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Alive(bool);
    impl HolderCheck for Alive {
        fn is_dead(&self, _holder: &str) -> bool {
            !self.0
        }
    }

    fn pending(now: u64) -> Entry {
        claim("k", "create_deal", "fp", "h/1/t", None, None, now)
    }

    #[test]
    fn a_repeat_of_a_done_key_replays() {
        let e = done(&pending(0), "d1".into(), None, 5);
        assert_eq!(
            decide(&e, "create_deal", "fp", 10, &Alive(true)),
            Found::Replay
        );
    }

    #[test]
    fn another_request_or_operation_is_reused() {
        let e = done(&pending(0), "d1".into(), None, 5);
        assert_eq!(
            decide(&e, "create_deal", "fp2", 10, &Alive(true)),
            Found::Reused
        );
        assert_eq!(
            decide(&e, "create_quote", "fp", 10, &Alive(true)),
            Found::Reused
        );
        // Reuse is checked before the state: a pending key with another request too.
        assert_eq!(
            decide(&pending(0), "create_deal", "x", 1, &Alive(true)),
            Found::Reused
        );
    }

    #[test]
    fn a_live_pending_key_is_in_progress_until_its_lease_lapses() {
        let e = pending(1_000);
        assert_eq!(
            decide(&e, "create_deal", "fp", 1_000, &Alive(true)),
            Found::InProgress
        );
        let last = 1_000 + LEASE_MS - 1;
        assert_eq!(
            decide(&e, "create_deal", "fp", last, &Alive(true)),
            Found::InProgress
        );
        assert_eq!(
            decide(&e, "create_deal", "fp", last + 1, &Alive(true)),
            Found::Lapsed
        );
    }

    #[test]
    fn a_dead_holder_lapses_at_once() {
        let e = pending(1_000);
        assert_eq!(
            decide(&e, "create_deal", "fp", 1_001, &Alive(false)),
            Found::Lapsed
        );
    }

    #[test]
    fn released_is_free_for_any_request() {
        let e = failed(&pending(0), Settle::Released, "400".into(), 1);
        assert_eq!(
            decide(&e, "create_quote", "zz", 2, &Alive(true)),
            Found::Free
        );
    }

    #[test]
    fn unknown_stays_unknown() {
        let e = failed(&pending(0), Settle::Unknown, "timeout".into(), 1);
        assert_eq!(
            decide(&e, "create_deal", "fp", u64::MAX, &Alive(false)),
            Found::Unknown
        );
    }

    fn api(status: u16) -> Error {
        Error::Api {
            status,
            message: String::new(),
            errors: Vec::new(),
            body: String::new(),
            retry_after: None,
            headers: Vec::new(),
        }
    }

    #[test]
    fn only_proof_of_nothing_created_releases() {
        assert_eq!(settle(&api(400)), Settle::Released);
        assert_eq!(settle(&api(499)), Settle::Released);
        assert_eq!(settle(&api(500)), Settle::Unknown);
        assert_eq!(settle(&api(399)), Settle::Unknown);
        assert_eq!(settle(&api(201)), Settle::Unknown);
        let lost = Error::Transport {
            message: String::new(),
            timeout: false,
            unsent: false,
        };
        assert_eq!(settle(&lost), Settle::Unknown);
        assert_eq!(settle(&lost.into_unsent()), Settle::Released);
        let timeout = Error::Transport {
            message: String::new(),
            timeout: true,
            unsent: false,
        };
        assert_eq!(settle(&timeout), Settle::Unknown);
        assert_eq!(settle(&Error::Internal(String::new())), Settle::Unknown);
        assert_eq!(settle(&Error::invalid("x")), Settle::Released);
    }

    #[test]
    fn resolve_needs_an_unknown_or_lapsed_key() {
        let unknown = failed(&pending(0), Settle::Unknown, "t".into(), 1);
        let r = resolved(&unknown, Some("d9".into()), 2, &Alive(true)).expect("resolves");
        assert_eq!((r.state, r.result.as_deref()), (State::Done, Some("d9")));
        let r = resolved(&unknown, None, 2, &Alive(true)).expect("resolves");
        assert_eq!((r.state, r.result), (State::Released, None));
        let done_e = done(&pending(0), "d1".into(), None, 1);
        assert!(resolved(&done_e, None, 2, &Alive(true)).is_err());
        let live = pending(0);
        assert!(resolved(&live, None, 1, &Alive(true)).is_err());
        assert!(resolved(&live, None, 1, &Alive(false)).is_ok());
        assert!(resolved(&live, None, LEASE_MS, &Alive(true)).is_ok());
        assert!(resolved(&unknown, Some(String::new()), 2, &Alive(true)).is_err());
    }

    #[test]
    fn a_deal_created_settles_its_entry_forward_only() {
        let pid = "7f1c0b9e-0000-4000-8000-000000000001";
        let spot = |state: State| Entry {
            operation: "create_spot_deal".into(),
            state,
            ..pending(0)
        };
        let settled = |b: ByEvent| match b {
            ByEvent::Settle(e) => *e,
            other => panic!("not settled: {other:?}"),
        };
        let contradiction = |b: ByEvent| matches!(b, ByEvent::Contradiction(_));
        for state in [State::Pending, State::Unknown] {
            let e = settled(by_event(&spot(state), true, pid, Some("d1"), "", 9));
            assert_eq!(e.state, State::Done, "{state:?}");
            assert_eq!(
                (e.result.as_deref(), e.deal_id.as_deref()),
                (Some(pid), Some("d1"))
            );
            assert_eq!((e.error, e.updated_at), (None, 9));
            let e = settled(by_event(&spot(state), false, pid, None, "no funds", 9));
            assert_eq!((e.state, e.result), (State::Released, None), "{state:?}");
            assert!(e.error.as_deref().is_some_and(|t| t.contains("no funds")));
        }
        // Done as this process: the deal id is added once; a fail never releases it.
        let done_e = done(&spot(State::Pending), pid.into(), None, 5);
        let e = settled(by_event(
            &done_e,
            true,
            &pid.to_uppercase(),
            Some("d1"),
            "",
            9,
        ));
        assert_eq!(e.result.as_deref(), Some(pid));
        assert_eq!(by_event(&e, true, pid, Some("d1"), "", 10), ByEvent::Same);
        assert!(contradiction(by_event(&e, true, pid, Some("d2"), "", 10)));
        assert!(contradiction(by_event(&done_e, false, pid, None, "x", 9)));
        assert!(contradiction(by_event(&e, false, pid, None, "x", 9)));
        // Another process id: never this entry's result.
        assert!(contradiction(by_event(
            &done_e,
            true,
            "other",
            Some("d1"),
            "",
            9
        )));
        assert!(contradiction(by_event(
            &done_e, false, "other", None, "", 9
        )));
        // Released: a fail changes nothing, a success contradicts it.
        assert_eq!(
            by_event(&spot(State::Released), false, pid, None, "x", 9),
            ByEvent::Same
        );
        assert!(contradiction(by_event(
            &spot(State::Released),
            true,
            pid,
            Some("d1"),
            "",
            9
        )));
        // A success without a deal id changes nothing.
        assert_eq!(
            by_event(&spot(State::Unknown), true, pid, None, "", 9),
            ByEvent::Same
        );
    }

    #[test]
    fn refusals_carry_their_kind_and_entry() {
        let e = pending(0);
        for (found, kind) in [
            (Found::Reused, IdempotencyKind::KeyReused),
            (Found::InProgress, IdempotencyKind::InProgress),
            (Found::Unknown, IdempotencyKind::OutcomeUnknown),
        ] {
            match refusal(&found, &e, "create_deal") {
                Error::Idempotency {
                    kind: k,
                    entry: Some(got),
                    ..
                } => {
                    assert_eq!(k, kind);
                    assert_eq!(*got, e);
                }
                other => panic!("{other:?}"),
            }
        }
    }
}

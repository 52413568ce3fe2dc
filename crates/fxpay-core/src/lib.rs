//! fxpay-core: the pure-Rust core of fxpay (client, transport, auth, models, money, webhook,
//! runtime). It knows no pyo3: the binding is the `fxpay-python` crate, the emulator `fxpay-sandbox`.
//!
//! Its modules are private, and this file is its front door: the `pub use` lines below are
//! everything the binding, the sandbox, the core's own tests and example, and the fuzz target
//! (fuzz/) use, and nothing else. Every other item is `pub(crate)` at most, and two lints keep
//! it so: `unreachable_pub` fails the build on a `pub` item not exported here, and
//! `unnameable_types` on a type that a public signature reaches but this file does not name.
//! A few items are public for the core's own loopback tests only; each says so where it is
//! defined (`Request`, `Transport::new`, `request_token`, `UserSession::new`, ...). The core
//! declares at most 180 `pub` items (`scripts/check_front_door`, run by `just lint`); each item
//! below is re-exported from the module that defines it (no module re-exports in between).
//! Inside the crate, code names items by their module's path (`crate::journal::...`), not by
//! these re-exports (scripts/check_circles would see every file import lib.rs).
#![deny(unreachable_pub, unnameable_types)]

// The crate's own name, for the test files it shares with tests/ (tests/support/memory_journal_store.rs).
#[cfg(test)]
extern crate self as fxpay_core;

mod auth;
mod callback_url;
mod cassette;
mod client;
mod config;
mod connector;
mod deadline;
mod error;
mod gate;
mod headers;
mod http_client;
mod journal;
mod json_kind;
mod lost_answer;
mod models;
mod money;
mod monotonic;
mod paced;
mod pacing;
mod paging;
mod rate_limit;
mod raw;
mod runtime;
mod seconds;
mod sha256;
mod tls;
mod trace;
mod transport;
mod wakeup;
mod webhook;

// The error every call returns.
pub use error::{Error, IdempotencyKind, Result};

// The client, its configuration, and the user's own session (three-legged OAuth).
pub use auth::authorize::AuthorizeParams;
pub use auth::grants::{request_token, Grant};
pub use auth::store::{StoreLock, TokenStore};
pub use auth::user_session::{OnToken, UserSession};
pub use client::{list_virtual_accounts, Client};
pub use config::{ClientConfig, RetryPolicy};
pub use seconds::seconds_text;

// The models (`is_uuid` checks their ids), and the trait that lists each one's fields for the
// binding's classes.
pub use models::model::{Absent, Build, FieldType, Model, Visit};
pub use models::token::unix_now;
pub use models::{
    account::VirtualAccount,
    authorization::AuthorizationRequest,
    beneficiary::{Address, BankDetails, Beneficiary},
    deal::{Deal, DealBeneficiary, DealRequest, SpotDeal},
    event::{DealCreated, EventStatus},
    field_error::FieldError,
    quote::{Freebies, Quote, QuoteRequest},
    token::Token,
};
pub use money::parse_exact;

// The journal: the creating calls made once per idempotency key, its admin and the payouts.
pub use journal::admin::{complete_spot, resolve as resolve_entry, unknown as unknown_entries};
pub use journal::background::drain as drain_journal;
pub use journal::calls::{
    check_key as check_journal_key, create_beneficiary as journaled_create_beneficiary,
    create_deal as journaled_create_deal, create_quote as journaled_create_quote,
    create_spot_deal as journaled_create_spot_deal,
};
pub use journal::entry::{Entry, State as EntryState};
pub use journal::flush::flush_all as flush_journals;
pub use journal::holder::{HolderCheck, LeaseOnly, LocalProcesses};
pub use journal::memory::MemoryStore;
pub use journal::payout::{
    pay_row, Outcome as PayoutOutcome, Row as PayoutRow, RowBeneficiary as PayoutRowBeneficiary,
    Status as PayoutStatus,
};
pub use journal::postgres::postgres_store;
pub use journal::redis::{redis_scripts, redis_store};
pub use journal::settle::{issued as issued_spot, settle_spot, Settled};
pub use journal::sqlite::{create_sqlite_journal, sqlite_store};
pub use journal::store::JournalStore;
pub use lost_answer::named_by_sender as lost_answer_named_by_sender;

// Webhooks: the checks of a `DealCreated` callback.
pub use webhook::nonce::{verify_nonce, NONCE_HEADER};
pub use webhook::{
    check_size as check_webhook_size, parse_body as parse_webhook_body, parse_deal_created,
    MAX_BODY_BYTES,
};

// Callback URLs: the rule the client and the sandbox share (the sandbox publishes its pattern).
pub use callback_url::{
    is_loopback as is_loopback_callback_url, parse as parse_callback_url,
    LOOPBACK_PATTERN as LOOPBACK_CALLBACK_URL_PATTERN, LOOPBACK_RULE as LOOPBACK_CALLBACK_URL_RULE,
    PATTERN as CALLBACK_URL_PATTERN, RULE as CALLBACK_URL_RULE,
};

// For the sandbox too: the word its refusals use for a JSON value's kind.
pub use json_kind::json_kind;

// The transport, as its observers (logging, tracing) and the core's retry tests see it.
pub use http::header::{HeaderName, HeaderValue};
pub use trace::{span_end, span_start, traceparent, SpanEnd, SpanStart};
pub use transport::{
    AttemptLog, AttemptStart, ExtraHeaders, Observer, Request, Response, Transport,
};

// Per call: its deadline, and the raw answer it keeps when asked (`RawInfo`, in a `RawSlot`).
pub use deadline::scope as deadline_scope;
pub use raw::{scope as raw_scope, RawInfo, RawSlot};

// Recording and replaying the service (cassettes), and the client's rate limit.
pub use cassette::{Cassette, Mode as CassetteMode};
pub use pacing::Pacing;
pub use rate_limit::{check_per_second, RateLimit, SharedBucket};

// The runtime: one per process (made anew after a fork), and the bridge's primitives.
pub use gate::{Gate, Inside};
pub use runtime::fork::{watch as watch_forks, PerProcess, ProcessBound};
pub use runtime::{blocking_here, runtime, worker_threads, Blocking};
pub use wakeup::Inbox as WakeupInbox;

//! The payments API: quotes (`quotes.rs`, priced from the rate table in `rates.rs`),
//! beneficiaries, deals (`deals.rs`: the endpoints; `booking.rs`: the business checks and the
//! booking), spot-deal processing and `DealCreated` deliveries (`callbacks.rs`), and the
//! field-by-field validation of request bodies (`fields.rs`).
pub mod beneficiaries;
pub mod booking;
pub mod callbacks;
pub mod deals;
pub mod fields;
pub mod quotes;
pub mod rates;

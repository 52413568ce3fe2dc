//! Wire types of the service, one file per resource.
pub mod account;
pub mod beneficiary;
pub mod deal;
pub mod event;
pub mod field_error;
pub mod quote;
pub mod token;

pub use account::VirtualAccount;
pub use beneficiary::{Address, BankDetails, Beneficiary};
pub use deal::{Deal, DealBeneficiary, DealRequest, SpotDeal};
pub use event::{DealCreated, EventStatus};
pub use field_error::FieldError;
pub use quote::{Freebies, Quote, QuoteRequest};
pub use token::Token;

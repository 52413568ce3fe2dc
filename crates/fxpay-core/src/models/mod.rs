//! Wire types of the service, one file per resource. Each is declared once with
//! [`model!`](crate::model), which also names its fields for the Python binding.
#[macro_use]
pub mod model;
pub mod account;
pub mod authorization;
pub mod beneficiary;
pub mod deal;
pub mod event;
pub mod field_error;
pub mod quote;
pub mod token;

pub use account::VirtualAccount;
pub use authorization::AuthorizationRequest;
pub use beneficiary::{Address, BankDetails, Beneficiary};
pub use deal::{Deal, DealBeneficiary, DealRequest, SpotDeal};
pub use event::{is_uuid, DealCreated, EventStatus};
pub use field_error::FieldError;
pub use model::Model;
pub use quote::{Freebies, Quote, QuoteRequest};
pub use token::Token;

// The nested models and the event's status may be the type of another model's field.
impl model::FieldType for quote::Freebies {}
impl model::FieldType for beneficiary::Address {}
impl model::FieldType for beneficiary::BankDetails {}
impl model::FieldType for deal::DealBeneficiary {}
impl model::FieldType for field_error::FieldError {}
impl model::FieldType for event::EventStatus {}

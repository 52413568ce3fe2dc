//! Wire types of the service, one file per resource. Each is declared once with
//! `model!` (model.rs), which also names its fields for the Python binding.
#[macro_use]
pub(crate) mod model;
pub(crate) mod account;
pub(crate) mod authorization;
pub(crate) mod beneficiary;
pub(crate) mod deal;
pub(crate) mod event;
pub(crate) mod field_error;
pub(crate) mod quote;
pub(crate) mod token;

pub(crate) use account::VirtualAccount;
pub(crate) use authorization::AuthorizationRequest;
pub(crate) use beneficiary::Beneficiary;
pub(crate) use deal::{Deal, DealBeneficiary, DealRequest, SpotDeal};
pub(crate) use event::{is_uuid, DealCreated, EventStatus};
pub(crate) use field_error::FieldError;
pub(crate) use quote::{Quote, QuoteRequest};
pub(crate) use token::Token;

// The nested models and the event's status may be the type of another model's field.
impl model::FieldType for quote::Freebies {}
impl model::FieldType for beneficiary::Address {}
impl model::FieldType for beneficiary::BankDetails {}
impl model::FieldType for deal::DealBeneficiary {}
impl model::FieldType for field_error::FieldError {}
impl model::FieldType for event::EventStatus {}

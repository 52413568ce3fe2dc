//! The `DealCreated` notification (spec 6.2), as parsed by `crate::webhook`.
use super::FieldError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventStatus {
    Success,
    Fail,
}

impl EventStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EventStatus::Success => "success",
            EventStatus::Fail => "fail",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DealCreated {
    pub status: EventStatus,
    pub process_id: String,
    /// Present exactly when `status` is success.
    pub deal_id: Option<String>,
    /// Non-empty exactly when `status` is fail.
    pub errors: Vec<FieldError>,
    /// The whole body as received.
    pub raw: serde_json::Value,
}

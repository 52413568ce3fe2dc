//! The `DealCreated` notification (spec 6.2), as parsed by `crate::webhook`.
use super::field_error::FieldError;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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

crate::model! {
    /// A verified `DealCreated` notification. Its wire form (`Serialize`) is the event as
    /// the service sends it.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct DealCreated {
        pub status: EventStatus,
        pub process_id: String,
        /// Present exactly when `status` is success.
        pub deal_id: Option<String>,
        /// Non-empty exactly when `status` is fail.
        pub errors: Vec<FieldError>,
    }
}

impl Serialize for DealCreated {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Body<'a> {
            process_id: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            deal_id: Option<&'a str>,
            #[serde(skip_serializing_if = "<[FieldError]>::is_empty")]
            errors: &'a [FieldError],
        }
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("eventType", "DealCreated")?;
        m.serialize_entry("status", &self.status)?;
        m.serialize_entry(
            "eventBody",
            &Body {
                process_id: &self.process_id,
                deal_id: self.deal_id.as_deref(),
                errors: &self.errors,
            },
        )?;
        m.end()
    }
}

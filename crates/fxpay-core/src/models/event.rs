//! The `DealCreated` notification (spec 6.2), as parsed by `crate::webhook`.
use super::field_error::FieldError;
use crate::error::{Error, Result};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventStatus {
    Success,
    Fail,
}

model! {
    /// A verified `DealCreated` notification. Its wire form (`Serialize`) is the event as
    /// the service sends it.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct DealCreated check(DealCreated::check) {
        pub status: EventStatus,
        pub process_id: String,
        /// Present exactly when `status` is success.
        pub deal_id: Option<String>,
        /// Non-empty exactly when `status` is fail.
        pub errors: Vec<FieldError>,
    }
}

/// A UUID in the 36-character hyphenated form (`8-4-4-4-12` hex digits, either case).
pub(crate) fn is_uuid(s: &str) -> bool {
    s.len() == 36 && uuid::Uuid::try_parse(s).is_ok()
}

impl DealCreated {
    /// What `parse_deal_created` checks of a body (spec 6.2), for an event built by hand:
    /// `process_id` is a UUID; a success has a UUID `deal_id` and no errors; a fail has no
    /// `deal_id` and at least one error, each naming its field. Every refusal names the
    /// field, as an `InvalidRequestError`.
    pub(crate) fn check(&self) -> Result<()> {
        if !is_uuid(&self.process_id) {
            return Err(Error::invalid(format!(
                "DealCreated.process_id must be a UUID, got {:?}",
                self.process_id
            )));
        }
        match self.status {
            EventStatus::Success => {
                match self.deal_id.as_deref() {
                    Some(d) if is_uuid(d) => {}
                    Some(d) => {
                        return Err(Error::invalid(format!(
                            "DealCreated.deal_id must be a UUID, got {d:?}"
                        )))
                    }
                    None => {
                        return Err(Error::invalid(
                            "DealCreated.deal_id is required when status is \"success\"",
                        ))
                    }
                }
                if !self.errors.is_empty() {
                    return Err(Error::invalid(
                        "DealCreated.errors must be empty when status is \"success\"",
                    ));
                }
            }
            EventStatus::Fail => {
                if self.deal_id.is_some() {
                    return Err(Error::invalid(
                        "DealCreated.deal_id must be None when status is \"fail\"",
                    ));
                }
                if self.errors.is_empty() {
                    return Err(Error::invalid(
                        "DealCreated.errors must not be empty when status is \"fail\"",
                    ));
                }
                if let Some(i) = self.errors.iter().position(|e| e.field_name.is_none()) {
                    return Err(Error::invalid(format!(
                        "DealCreated.errors[{i}].field_name is required in a \"fail\" event"
                    )));
                }
            }
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    const PID: &str = "3f2504e0-4f89-11d3-9a0c-0305e82c3301";
    const DID: &str = "9b2e1c44-7d1a-4c1e-8a53-2f6d0e5b7a10";

    fn event(status: EventStatus, pid: &str, did: Option<&str>, errors: usize) -> DealCreated {
        DealCreated {
            status,
            process_id: pid.into(),
            deal_id: did.map(Into::into),
            errors: (0..errors)
                .map(|_| FieldError {
                    error_code: "a:b:1".into(),
                    field_name: Some("f".into()),
                    message: "m".into(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_hand_made_event_is_checked_as_a_parsed_one() {
        use EventStatus::{Fail, Success};
        assert!(event(Success, PID, Some(DID), 0).check().is_ok());
        assert!(event(Fail, PID, None, 1).check().is_ok());
        for (bad, field) in [
            (event(Success, "p-1", Some(DID), 0), "process_id"),
            (event(Fail, "", None, 1), "process_id"),
            (event(Success, PID, None, 0), "deal_id"),
            (event(Success, PID, Some("d-1"), 0), "deal_id"),
            (event(Success, PID, Some(DID), 1), "errors"),
            (event(Fail, PID, Some(DID), 1), "deal_id"),
            (event(Fail, PID, None, 0), "errors"),
        ] {
            match bad.check() {
                Err(Error::InvalidRequest(m)) => assert!(m.contains(field), "{bad:?}: {m}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        let mut nameless = event(Fail, PID, None, 2);
        nameless.errors[1].field_name = None;
        assert!(nameless.check().is_err());
    }
}

//! Step 4 of the webhook checks: the schema of spec 6.2, every refusal naming the field.
use crate::error::{Error, Result};
use crate::models::{EventStatus, FieldError};
use serde_json::{Map, Value};

/// What the schema check read from a body that passed it.
pub(super) struct Checked {
    pub status: EventStatus,
    pub process_id: String,
    pub deal_id: Option<String>,
    pub errors: Vec<FieldError>,
}

fn payload(msg: String) -> Error {
    Error::WebhookPayload(msg)
}

/// Checks the parsed body against the schema (spec 6.2).
pub(super) fn check(raw: &Value) -> Result<Checked> {
    let top = raw
        .as_object()
        .ok_or_else(|| payload("the body is not a JSON object".into()))?;
    let event_type = string_field(top, "eventType", "eventType")?;
    if event_type != "DealCreated" {
        return Err(payload("eventType is not \"DealCreated\"".into()));
    }
    let status = match string_field(top, "status", "status")? {
        "success" => EventStatus::Success,
        "fail" => EventStatus::Fail,
        _ => return Err(payload("status is neither \"success\" nor \"fail\"".into())),
    };
    let body = match top.get("eventBody") {
        None => return Err(payload("eventBody is missing".into())),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(payload("eventBody is not an object".into())),
    };
    let process_id = uuid_field(body, "processId", "eventBody.processId")?;
    match status {
        EventStatus::Success => {
            let deal_id = uuid_field(body, "dealId", "eventBody.dealId")?;
            match body.get("errors") {
                None | Some(Value::Null) => {}
                Some(Value::Array(a)) if a.is_empty() => {}
                Some(_) => {
                    return Err(payload(
                        "eventBody.errors must be absent or empty when status is \"success\""
                            .into(),
                    ))
                }
            }
            Ok(Checked {
                status,
                process_id: process_id.into(),
                deal_id: Some(deal_id.into()),
                errors: Vec::new(),
            })
        }
        EventStatus::Fail => {
            if !matches!(body.get("dealId"), None | Some(Value::Null)) {
                return Err(payload(
                    "eventBody.dealId must be absent when status is \"fail\"".into(),
                ));
            }
            let list = match body.get("errors") {
                None => return Err(payload("eventBody.errors is missing".into())),
                Some(Value::Array(a)) => a,
                Some(_) => return Err(payload("eventBody.errors is not an array".into())),
            };
            if list.is_empty() {
                return Err(payload(
                    "eventBody.errors is empty; a \"fail\" event needs at least one error".into(),
                ));
            }
            let errors = list
                .iter()
                .enumerate()
                .map(|(i, item)| field_error(i, item))
                .collect::<Result<Vec<_>>>()?;
            Ok(Checked {
                status,
                process_id: process_id.into(),
                deal_id: None,
                errors,
            })
        }
    }
}

fn field_error(i: usize, item: &Value) -> Result<FieldError> {
    let obj = item
        .as_object()
        .ok_or_else(|| payload(format!("eventBody.errors[{i}] is not an object")))?;
    let get = |key: &str| string_field(obj, key, &format!("eventBody.errors[{i}].{key}"));
    Ok(FieldError {
        error_code: get("errorCode")?.to_string(),
        field_name: Some(get("fieldName")?.to_string()),
        message: get("message")?.to_string(),
    })
}

fn string_field<'a>(obj: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a str> {
    match obj.get(key) {
        None => Err(payload(format!("{path} is missing"))),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(payload(format!("{path} is not a string"))),
    }
}

fn uuid_field<'a>(obj: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a str> {
    let s = string_field(obj, key, path)?;
    if is_uuid(s) {
        Ok(s)
    } else {
        Err(payload(format!("{path} is not a UUID")))
    }
}

pub(crate) use crate::models::is_uuid;

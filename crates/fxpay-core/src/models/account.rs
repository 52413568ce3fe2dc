//! Virtual accounts. The spec shows no fields, so an account is kept as the JSON object the
//! service sent.
use serde_json::Value;

pub type VirtualAccount = serde_json::Map<String, Value>;

/// Keys that name the list of accounts when an object holds more than one list of objects.
const KNOWN_KEYS: &[&str] = &["virtualAccounts", "data", "items", "accounts", "results"];

/// Finds the list of accounts in a `GET /v1/gca/virtual-accounts` body: a bare array of
/// objects, or an object that holds exactly one array of objects under any key (paging
/// fields and other values beside it are ignored). When an object holds several arrays of
/// objects, the one under a well-known key (`virtualAccounts`, `data`, `items`, `accounts`,
/// `results`) is taken. `Err` describes the shape received.
pub(crate) fn accounts_from_body(body: &Value) -> Result<Vec<VirtualAccount>, String> {
    let list = match body {
        Value::Array(a) if is_list_of_objects(a) => a,
        Value::Object(o) => {
            let lists: Vec<(&String, &Vec<Value>)> = o
                .iter()
                .filter_map(|(k, v)| v.as_array().map(|a| (k, a)))
                .filter(|(_, a)| is_list_of_objects(a))
                .collect();
            match lists.as_slice() {
                [(_, a)] => *a,
                _ => KNOWN_KEYS
                    .iter()
                    .find_map(|k| lists.iter().find(|(name, _)| name == k))
                    .map(|(_, a)| *a)
                    .ok_or_else(|| shape(body))?,
            }
        }
        _ => return Err(shape(body)),
    };
    Ok(list.iter().filter_map(|v| v.as_object().cloned()).collect())
}

fn is_list_of_objects(a: &[Value]) -> bool {
    a.iter().all(Value::is_object)
}

/// A short description of a JSON value's shape, for error messages: types, not values
/// (three levels deep, at most 300 characters).
pub(crate) fn shape(v: &Value) -> String {
    const LIMIT: usize = 300;
    let s = describe(v, 3);
    match s.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s,
    }
}

fn describe(v: &Value, depth: usize) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "boolean".into(),
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::Array(a) => {
            let mut kinds: Vec<String> = Vec::new();
            for item in a {
                let k = if depth == 0 {
                    crate::json_kind::json_kind(item).to_string()
                } else {
                    describe(item, depth - 1)
                };
                if !kinds.contains(&k) {
                    kinds.push(k);
                }
                if kinds.len() == 3 {
                    break;
                }
            }
            match kinds.as_slice() {
                [] => "[]".into(),
                _ => format!("[{} x {}]", a.len(), kinds.join(" | ")),
            }
        }
        Value::Object(o) if depth == 0 => match o.len() {
            1 => "object with 1 key".into(),
            n => format!("object with {n} keys"),
        },
        Value::Object(o) => {
            const SHOWN: usize = 8;
            let mut parts: Vec<String> = o
                .iter()
                .take(SHOWN)
                .map(|(k, v)| format!("{k:?}: {}", describe(v, depth - 1)))
                .collect();
            if o.len() > SHOWN {
                parts.push(format!("… {} more", o.len() - SHOWN));
            }
            format!("{{{}}}", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn count(v: Value) -> Result<usize, String> {
        accounts_from_body(&v).map(|l| l.len())
    }

    #[test]
    fn finds_lists_in_any_wrapper() {
        assert_eq!(count(json!([{"id": "a"}])), Ok(1));
        assert_eq!(count(json!([])), Ok(0));
        assert_eq!(
            count(json!({"virtualAccounts": [{"id": "a"}, {"id": "b"}]})),
            Ok(2)
        );
        assert_eq!(
            count(json!({"results": [{"id": "a"}], "next": null, "count": 1})),
            Ok(1)
        );
        assert_eq!(
            count(json!({"whatever": [{"id": "a"}], "tags": ["x"]})),
            Ok(1)
        );
        assert_eq!(
            count(json!({"data": [{"id": "a"}], "links": [{"rel": "next"}]})),
            Ok(1)
        );
    }

    #[test]
    fn other_shapes_are_described() {
        let err = count(json!({"x": 1})).err().unwrap_or_default();
        assert_eq!(err, r#"{"x": number}"#);
        let err = count(json!([1, "a"])).err().unwrap_or_default();
        assert_eq!(err, "[2 x number | string]");
        let err = count(json!({"a": [{"i": 1}], "b": [{"i": 2}]}))
            .err()
            .unwrap_or_default();
        assert_eq!(
            err,
            r#"{"a": [1 x {"i": number}], "b": [1 x {"i": number}]}"#
        );
        assert_eq!(count(json!("text")).err().as_deref(), Some("string"));
        let deep = json!({"a": {"b": {"c": {"d": 1}}}});
        assert_eq!(
            count(deep).err().as_deref(),
            Some(r#"{"a": {"b": {"c": object with 1 key}}}"#)
        );
        let wide: serde_json::Map<String, Value> = (0..100)
            .map(|i| (format!("key{i:03}"), json!({"x": i})))
            .collect();
        let err = count(Value::Object(wide)).err().unwrap_or_default();
        assert!(
            err.contains("… 92 more") && err.chars().count() <= 301,
            "{err}"
        );
    }
}

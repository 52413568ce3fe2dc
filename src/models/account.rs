//! Virtual accounts. The spec shows no fields, so an account is kept as the JSON object the
//! service sent.
pub type VirtualAccount = serde_json::Map<String, serde_json::Value>;

/// Finds the list of accounts in a `GET /v1/gca/virtual-accounts` body: a bare array, or the
/// first array under `virtualAccounts`, `data`, `items` or `accounts`.
pub fn accounts_from_body(body: &serde_json::Value) -> Option<Vec<VirtualAccount>> {
    let list = match body {
        serde_json::Value::Array(a) => a,
        serde_json::Value::Object(o) => ["virtualAccounts", "data", "items", "accounts"]
            .iter()
            .find_map(|k| o.get(*k).and_then(|v| v.as_array()))?,
        _ => return None,
    };
    list.iter().map(|v| v.as_object().cloned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_lists_in_known_shapes() {
        let bare = serde_json::json!([{"id": "a"}]);
        let wrapped = serde_json::json!({"virtualAccounts": [{"id": "a"}, {"id": "b"}]});
        assert_eq!(accounts_from_body(&bare).map(|v| v.len()), Some(1));
        assert_eq!(accounts_from_body(&wrapped).map(|v| v.len()), Some(2));
        assert!(accounts_from_body(&serde_json::json!({"x": 1})).is_none());
        assert!(accounts_from_body(&serde_json::json!([1])).is_none());
    }
}

//! One entry of an `{"errors": [...]}` body or of a failed `DealCreated` event.
use serde::{Deserialize, Serialize};

model! {
    /// One error entry: `error_code` is `<layer>:<component>:<number>` when well formed.
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    pub struct FieldError {
        #[serde(default)]
        pub error_code: String,
        #[serde(default)]
        pub field_name: Option<String>,
        #[serde(default)]
        pub message: String,
    }
}

impl FieldError {
    /// `layer`, `component`, `number` of a `<layer>:<component>:<number>` code, where the code
    /// has exactly that shape (three non-empty parts, the last one all digits).
    pub fn parts(&self) -> Option<(&str, &str, u32)> {
        let mut it = self.error_code.split(':');
        let (layer, component, number) = (it.next()?, it.next()?, it.next()?);
        if it.next().is_some() || layer.is_empty() || component.is_empty() {
            return None;
        }
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some((layer, component, number.parse().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fe(code: &str) -> FieldError {
        FieldError {
            error_code: code.into(),
            ..Default::default()
        }
    }

    #[test]
    fn parses_three_part_codes() {
        assert_eq!(
            fe("validation:beneficiary:1004").parts(),
            Some(("validation", "beneficiary", 1004))
        );
    }

    #[test]
    fn refuses_other_shapes() {
        for code in [
            "",
            "a:b",
            "a:b:c",
            "a:b:1:2",
            ":b:1",
            "a::1",
            "a:b:-1",
            "a:b:99999999999",
        ] {
            assert_eq!(fe(code).parts(), None, "{code}");
        }
    }
}

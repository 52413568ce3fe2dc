//! Ids as the service writes them.

/// Whether `s` is a UUID in its 36-character hyphenated form (any case).
pub fn is_uuid(s: &str) -> bool {
    s.len() == 36 && uuid::Uuid::try_parse(s).is_ok()
}

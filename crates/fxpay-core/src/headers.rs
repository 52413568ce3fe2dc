//! Answer headers as plain pairs, for errors (`ApiError.headers`) and raw responses.
use http::header::HeaderMap;

/// The headers as (lower-case name, value) pairs; a value that is not text is left out.
pub(crate) fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect()
}

//! Following the pages of a listing (`GET /v1/gca/virtual-accounts`).
//!
//! Followed: a `next` link, as an absolute URL, a path or a reference relative to the page,
//! found at the top of the body (`"next"`), under `links`/`pagination`/`paging`/`meta`
//! (`{"links": {"next": ...}}`), as HAL (`{"_links": {"next": {"href": ...}}}`), or in an
//! RFC 8288 `Link: <...>; rel="next"` header. The last page has none (absent, `null` or
//! `""`).
//!
//! Refused (never a short list): a `next` on another origin or outside the API's base path,
//! a link already followed (a loop), and a paging marker that is not a link (a cursor, a
//! page token, `hasMore: true`, a page number below `totalPages`, ...).
use http::header::HeaderMap;
use serde_json::{Map, Value};

/// The most pages one listing follows.
pub(crate) const MAX_PAGES: usize = 10_000;

/// Containers a `next` link or marker may sit in.
const CONTAINERS: &[&str] = &[
    "links",
    "pagination",
    "paging",
    "meta",
    "page_info",
    "pageInfo",
];

/// Keys that mark a further page without being a link fxpay can follow.
const MARKERS: &[&str] = &[
    "nextcursor",
    "next_cursor",
    "cursor",
    "nextpagetoken",
    "next_page_token",
    "pagetoken",
    "page_token",
    "continuationtoken",
    "continuation_token",
    "nextpage",
    "next_page",
    "nextpageurl",
    "next_page_url",
    "startingafter",
    "starting_after",
];

/// The next page's link of a page (`Ok(None)` on the last page), or `Err` naming the marker
/// that says there is more but cannot be followed.
pub(crate) fn next_link(body: &Value, headers: &HeaderMap) -> Result<Option<String>, String> {
    let Value::Object(top) = body else {
        return Ok(link_header(headers));
    };
    if let Some(next) = link_in(top, "next")? {
        return Ok(Some(next));
    }
    for c in CONTAINERS {
        if let Some(Value::Object(inner)) = top.get(*c) {
            if let Some(next) = link_in(inner, &format!("{c}.next"))? {
                return Ok(Some(next));
            }
        }
    }
    if let Some(Value::Object(hal)) = top.get("_links") {
        match hal.get("next") {
            None | Some(Value::Null) => {}
            Some(Value::Object(n)) => match n.get("href") {
                Some(Value::String(s)) if !s.is_empty() => return Ok(Some(s.clone())),
                _ => return Err("_links.next without an href".into()),
            },
            Some(_) => return Err("_links.next that is not an object".into()),
        }
    }
    if let Some(next) = link_header(headers) {
        return Ok(Some(next));
    }
    marker(top, "")?;
    for c in CONTAINERS {
        if let Some(Value::Object(inner)) = top.get(*c) {
            marker(inner, &format!("{c}."))?;
        }
    }
    Ok(None)
}

/// `obj[key]` as a link: a non-empty string; absent, `null` or `""` is none.
fn link_in(obj: &Map<String, Value>, what: &str) -> Result<Option<String>, String> {
    let key = what.rsplit('.').next().unwrap_or(what);
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Object(o)) => match o.get("href") {
            Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
            _ => Err(format!("{what} that is an object without an href")),
        },
        Some(other) => Err(format!(
            "{what} that is a {} rather than a link",
            crate::json_kind::json_kind(other)
        )),
    }
}

/// `Err` when `obj` says a further page exists in a way that is not a link.
fn marker(obj: &Map<String, Value>, prefix: &str) -> Result<(), String> {
    for (k, v) in obj {
        let lower = k.to_ascii_lowercase();
        let set = match v {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::String(s) => !s.is_empty(),
            Value::Number(_) => true,
            _ => true,
        };
        if !set {
            continue;
        }
        if MARKERS.contains(&lower.as_str()) && !matches!(v, Value::Bool(_)) {
            return Err(format!("{prefix}{k}"));
        }
        if matches!(lower.as_str(), "hasmore" | "has_more" | "more") && v == &Value::Bool(true) {
            return Err(format!("{prefix}{k}: true"));
        }
    }
    let num = |names: &[&str]| {
        names.iter().find_map(|n| {
            obj.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                .and_then(|(_, v)| v.as_u64())
        })
    };
    if let (Some(page), Some(total)) = (
        num(&[
            "page",
            "pageNumber",
            "page_number",
            "currentPage",
            "current_page",
        ]),
        num(&["totalPages", "total_pages", "pageCount", "page_count"]),
    ) {
        if page < total {
            return Err(format!(
                "{prefix}page {page} of {total} without a next link"
            ));
        }
    }
    Ok(())
}

/// The target of an RFC 8288 `Link` header's `rel="next"`.
fn link_header(headers: &HeaderMap) -> Option<String> {
    for value in headers.get_all(http::header::LINK) {
        let Ok(text) = value.to_str() else { continue };
        for part in text.split(',') {
            let mut pieces = part.split(';');
            let target = pieces.next()?.trim();
            let is_next = pieces.any(|p| {
                let p = p.trim();
                p.split_once('=').is_some_and(|(k, v)| {
                    k.trim().eq_ignore_ascii_case("rel")
                        && v.trim()
                            .trim_matches('"')
                            .split_whitespace()
                            .any(|r| r.eq_ignore_ascii_case("next"))
                })
            });
            if is_next {
                if let Some(t) = target.strip_prefix('<').and_then(|t| t.strip_suffix('>')) {
                    return Some(t.to_owned());
                }
            }
        }
    }
    None
}

/// Where a `next` link leads, as a path below the API base (`/gca/...?...`), checked: the
/// same origin as `api_base`, under its path. `Err` says why it cannot be followed.
pub(crate) fn resolve(
    api_base: &url::Url,
    current: &url::Url,
    next: &str,
) -> Result<(url::Url, String), String> {
    let url = current
        .join(next)
        .map_err(|e| format!("a next link that is not a URL ({next:?}: {e})"))?;
    let same_origin = url.scheme() == api_base.scheme()
        && url.host_str() == api_base.host_str()
        && url.port_or_known_default() == api_base.port_or_known_default();
    if !same_origin {
        return Err(format!(
            "a next link on another origin ({}://{}), not the service's ({}://{})",
            url.scheme(),
            url.host_str().unwrap_or(""),
            api_base.scheme(),
            api_base.host_str().unwrap_or("")
        ));
    }
    let base_path = api_base.path().trim_end_matches('/');
    let rest = url
        .path()
        .strip_prefix(base_path)
        .filter(|r| r.starts_with('/'))
        .ok_or_else(|| format!("a next link outside the API ({})", url.path()))?;
    let path = match url.query() {
        Some(q) => format!("{rest}?{q}"),
        None => rest.to_owned(),
    };
    Ok((url, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes() {
        let h = HeaderMap::new();
        assert_eq!(
            next_link(&json!({"items": [], "next": "/v1/x?page=2"}), &h),
            Ok(Some("/v1/x?page=2".into()))
        );
        assert_eq!(next_link(&json!({"items": [], "next": null}), &h), Ok(None));
        assert_eq!(
            next_link(&json!({"links": {"next": "p2"}}), &h),
            Ok(Some("p2".into()))
        );
        assert_eq!(
            next_link(&json!({"_links": {"next": {"href": "h"}}}), &h),
            Ok(Some("h".into()))
        );
        assert!(next_link(&json!({"nextCursor": "abc"}), &h).is_err());
        assert!(next_link(&json!({"meta": {"has_more": true}}), &h).is_err());
        assert_eq!(
            next_link(&json!({"hasMore": false, "cursor": null}), &h),
            Ok(None)
        );
        assert!(next_link(&json!({"page": 1, "totalPages": 3}), &h).is_err());
        assert_eq!(
            next_link(&json!({"page": 3, "totalPages": 3}), &h),
            Ok(None)
        );
        let mut h = HeaderMap::new();
        h.insert(
            http::header::LINK,
            "<https://a/v1/x?p=2>; rel=\"next\"".parse().expect("h"),
        );
        assert_eq!(
            next_link(&json!([]), &h),
            Ok(Some("https://a/v1/x?p=2".into()))
        );
    }

    #[test]
    fn resolving() {
        let base = url::Url::parse("http://127.0.0.1:9/v1").expect("u");
        let cur = url::Url::parse("http://127.0.0.1:9/v1/gca/virtual-accounts").expect("u");
        let (_, p) = resolve(&base, &cur, "/v1/gca/virtual-accounts?page=2").expect("ok");
        assert_eq!(p, "/gca/virtual-accounts?page=2");
        let (_, p) = resolve(&base, &cur, "?page=3").expect("ok");
        assert_eq!(p, "/gca/virtual-accounts?page=3");
        assert!(resolve(&base, &cur, "http://evil.example/v1/gca/virtual-accounts").is_err());
        assert!(resolve(&base, &cur, "http://127.0.0.1:10/v1/x").is_err());
        assert!(resolve(&base, &cur, "/other/x").is_err());
    }
}

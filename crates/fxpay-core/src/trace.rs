//! What a tracing span says about one attempt, worked out from the transport's hooks: its
//! name, and the HTTP semantic-convention attributes. Knows nothing of Python; the binding
//! (`crate::python::trace`) makes the spans. Nothing here carries a secret: the attributes
//! are the method, the route template, the host, the port, the status and the error's type.
use crate::error::Error;
use crate::transport::{AttemptLog, AttemptStart};

/// The service's routes, below `/v1`. A path that matches none gets no `url.template`, so
/// no identifier ever lands in a span name.
const TEMPLATES: &[&str] = &[
    "/oauth/token",
    "/payments/quotes",
    "/payments/quotes/{quote_id}",
    "/payments/beneficiaries",
    "/payments/deals",
    "/payments/deals/spot",
    "/gca/virtual-accounts",
];

/// The attributes known when an attempt starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanStart {
    /// `"{METHOD} {url.template}"`, or just the method when the route is unknown.
    pub name: String,
    pub method: String,
    /// The full path template, with the base URL's own path in front (`/v1/...`).
    pub template: Option<String>,
    pub address: Option<String>,
    pub port: Option<u16>,
    /// `http.request.resend_count`: 0 on the first attempt (then left out), 1 on the next...
    pub resend_count: u32,
}

/// The attributes known when an attempt ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanEnd {
    pub status: Option<u16>,
    /// The status code as text for a 4xx/5xx answer; the Python exception's name when no
    /// answer came.
    pub error_type: Option<String>,
    /// `http.response.header.x-request-id`.
    pub request_id: Option<String>,
}

/// `path` without its query or fragment.
fn bare(path: &str) -> &str {
    let end = path.bytes().position(|b| b == b'?' || b == b'#');
    &path[..end.unwrap_or(path.len())]
}

/// The route template of `path` (below `/v1`, query ignored), if it is a known route.
fn template_of(path: &str) -> Option<&'static str> {
    let path = bare(path).as_bytes();
    TEMPLATES.iter().copied().find(|t| fits(t.as_bytes(), path))
}

/// Whether `path` fits `template` segment by segment: a template segment that starts with
/// `{` stands for any non-empty segment, every other one must be equal. Compared byte by
/// byte, without splitting either (this runs for every traced attempt).
fn fits(mut template: &[u8], mut path: &[u8]) -> bool {
    let segment_len = |s: &[u8]| s.iter().position(|&b| b == b'/').unwrap_or(s.len());
    let mut segment_start = true;
    loop {
        if segment_start && template.first() == Some(&b'{') {
            let taken = segment_len(path);
            if taken == 0 {
                return false;
            }
            template = &template[segment_len(template)..];
            path = &path[taken..];
            segment_start = false;
            continue;
        }
        match (template.split_first(), path.split_first()) {
            (None, None) => return true,
            (Some((want, t)), Some((got, p))) if want == got => {
                segment_start = *want == b'/';
                template = t;
                path = p;
            }
            _ => return false,
        }
    }
}

pub fn span_start(a: &AttemptStart<'_>) -> SpanStart {
    let parsed;
    let url = match a.parsed {
        Some(u) => Some(u),
        None => {
            parsed = url::Url::parse(a.url).ok();
            parsed.as_ref()
        }
    };
    let template = template_of(a.path).map(|t| {
        // The URL's path is the base's path, `/v1`, then `a.path`: keep what comes first.
        let full = url.map(|u| u.path()).unwrap_or("");
        let prefix = full.strip_suffix(bare(a.path)).unwrap_or("/v1");
        [prefix.trim_end_matches('/'), t].concat()
    });
    let name = match &template {
        Some(t) => [a.method, " ", t].concat(),
        None => a.method.to_string(),
    };
    SpanStart {
        name,
        method: a.method.to_string(),
        template,
        address: url
            .and_then(|u| u.host_str())
            .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string()),
        port: url.and_then(|u| u.port_or_known_default()),
        resend_count: a.attempt.saturating_sub(1),
    }
}

/// The W3C `traceparent` header's text for a span context,
/// `00-{trace_id:032x}-{span_id:016x}-{flags:02x}`, written without `core::fmt` (which took
/// about 2,100 of the 4,600 instructions that writing an attempt's W3C headers cost).
pub fn traceparent(trace_id: u128, span_id: u64, flags: u8) -> [u8; 55] {
    use data_encoding::HEXLOWER;
    let mut text = *b"00-................................-................-..";
    HEXLOWER.encode_mut(&trace_id.to_be_bytes(), &mut text[3..35]);
    HEXLOWER.encode_mut(&span_id.to_be_bytes(), &mut text[36..52]);
    HEXLOWER.encode_mut(&[flags], &mut text[53..55]);
    text
}

pub fn span_end(log: &AttemptLog<'_>) -> SpanEnd {
    let error_type = match (log.status, log.failure) {
        (Some(s), _) if s >= 400 => Some(s.to_string()),
        (Some(_), _) => None,
        (None, Some(Error::Transport { timeout: true, .. })) => Some("fxpay.TimeoutError".into()),
        (None, Some(Error::Transport { .. })) => Some("fxpay.TransportError".into()),
        (None, Some(Error::CassetteMismatch(_))) => {
            Some("fxpay.testing.CassetteMismatchError".into())
        }
        (None, _) => Some("_OTHER".into()),
    };
    SpanEnd {
        status: log.status,
        error_type,
        request_id: log.request_id.map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn traceparent_is_w3cs_text() {
        for (trace_id, span_id, flags) in [
            (
                0x5b8aa5a2d2c872e8321cf37308d69df2_u128,
                0x051581bf3cb55c13_u64,
                1_u8,
            ),
            (1, 1, 0),
            (u128::MAX, u64::MAX, 0xff),
            (0x0af7651916cd43dd8448eb211c80319c, 0x00f067aa0ba902b7, 0x01),
        ] {
            let text = traceparent(trace_id, span_id, flags);
            assert_eq!(
                String::from_utf8_lossy(&text),
                format!("00-{trace_id:032x}-{span_id:016x}-{flags:02x}")
            );
        }
        assert_eq!(
            &traceparent(0x0af7651916cd43dd8448eb211c80319c, 0x00f067aa0ba902b7, 1)[..],
            b"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
        );
    }

    fn start(method: &str, path: &str, url: &str, attempt: u32) -> SpanStart {
        let text = span_start(&AttemptStart {
            method,
            path,
            url,
            parsed: None,
            attempt,
        });
        if let Ok(parsed) = url::Url::parse(url) {
            let from_parsed = span_start(&AttemptStart {
                method,
                path,
                url,
                parsed: Some(&parsed),
                attempt,
            });
            assert_eq!(text, from_parsed);
        }
        text
    }

    #[test]
    fn ids_become_the_template() {
        let s = start(
            "GET",
            "/payments/quotes/q-123",
            "http://127.0.0.1:8080/v1/payments/quotes/q-123",
            1,
        );
        assert_eq!(s.name, "GET /v1/payments/quotes/{quote_id}");
        assert_eq!(
            s.template.as_deref(),
            Some("/v1/payments/quotes/{quote_id}")
        );
        assert_eq!(s.address.as_deref(), Some("127.0.0.1"));
        assert_eq!(s.port, Some(8080));
        assert_eq!(s.resend_count, 0);
    }

    #[test]
    fn base_paths_queries_and_default_ports() {
        let s = start(
            "GET",
            "/gca/virtual-accounts?page=2",
            "https://api.example.com/prefix/v1/gca/virtual-accounts?page=2",
            3,
        );
        assert_eq!(s.name, "GET /prefix/v1/gca/virtual-accounts");
        assert_eq!(s.port, Some(443));
        assert_eq!(s.resend_count, 2);
        let s = start("POST", "/oauth/token", "http://[::1]:9/v1/oauth/token", 1);
        assert_eq!(s.address.as_deref(), Some("::1"));
        assert_eq!(s.name, "POST /v1/oauth/token");
    }

    #[test]
    fn a_template_fits_segment_by_segment() {
        let fits = |t: &str, p: &str| fits(t.as_bytes(), p.as_bytes());
        assert!(fits("/a/{id}", "/a/x"));
        assert!(fits("/a/{id}/b", "/a/x-1/b"));
        assert!(fits("/{x}/{y}", "/1/2"));
        assert!(
            !fits("/a/{id}/b", "/a//b"),
            "a placeholder takes a non-empty segment"
        );
        assert!(!fits("/a/{id}/b", "/a/x/c"));
        assert!(
            !fits("/a/{id}", "/a/x/"),
            "a trailing slash is another segment"
        );
        assert!(!fits("/a/{id}", "/a/x/y"));
        assert!(!fits("/a", "/ab"));
        assert!(!fits("/ab", "/a"));
        // `{` inside a segment is a literal.
        assert!(fits("/a{b}", "/a{b}"));
        assert!(!fits("/a{b}", "/ax"));
        assert_eq!(
            template_of("/payments/deals/spot"),
            Some("/payments/deals/spot")
        );
        assert_eq!(
            template_of("/payments/quotes/q?x=1#f"),
            Some("/payments/quotes/{quote_id}")
        );
        assert_eq!(bare("/p?q#f"), "/p");
        assert_eq!(bare("/p#f?q"), "/p");
    }

    #[test]
    fn unknown_routes_have_no_template() {
        for path in ["/payments/quotes/", "/payments/quotes/a/b", "/secret-thing"] {
            let s = start("GET", path, "http://h/v1", 1);
            assert_eq!(s.template, None, "{path}");
            assert_eq!(s.name, "GET");
        }
    }

    #[test]
    fn error_types() {
        let log = |status, failure| AttemptLog {
            method: "GET",
            path: "/x",
            attempt: 1,
            status,
            duration: Duration::ZERO,
            error: None,
            failure,
            retry_in: None,
            request_id: None,
        };
        assert_eq!(span_end(&log(Some(200), None)).error_type, None);
        assert_eq!(
            span_end(&log(Some(503), None)).error_type.as_deref(),
            Some("503")
        );
        let t = Error::Transport {
            message: "m".into(),
            timeout: true,
            unsent: false,
        };
        assert_eq!(
            span_end(&log(None, Some(&t))).error_type.as_deref(),
            Some("fxpay.TimeoutError")
        );
        let c = Error::Transport {
            message: "m".into(),
            timeout: false,
            unsent: false,
        };
        assert_eq!(
            span_end(&log(None, Some(&c))).error_type.as_deref(),
            Some("fxpay.TransportError")
        );
        let m = Error::CassetteMismatch("GET /x".into());
        assert_eq!(
            span_end(&log(None, Some(&m))).error_type.as_deref(),
            Some("fxpay.testing.CassetteMismatchError")
        );
    }
}

//! Which redirect URIs a client may register (spec 5.1: a web application's redirect URI is
//! https; a native application's is a custom scheme). One grammar, checked here and
//! published as [`PATTERN`] in `/openapi.json`, so the document and the sandbox agree on
//! every string; every URI it admits is one the authorize page accepts.
//!
//! ```text
//! uri    = ( "https://" host [ ":" port ] | scheme ":" ) *( "/" *pchar ) [ "?" *qchar ]
//! host   = *( label "." ) last           label = alnum *( "-" 1*alnum )
//! last   = ALPHA *alnum *( "-" 1*alnum ) (never a number: an IPv4 or IDNA form is refused)
//! port   = 1-9 0*3DIGIT                  scheme = lower *( lower / DIGIT ) 1*( "." 1*( lower / DIGIT ) )
//! pchar  = ALPHA / DIGIT / "." / "_" / "~" / "-"      qchar = pchar / "=" / "&"
//! ```
//! A native scheme has a dot (reverse domain name, RFC 8252 7.1), which keeps out `http:`,
//! `javascript:`, `data:` and every other scheme a browser would act on.

/// The grammar above as an ECMA-262 regular expression.
pub const PATTERN: &str = concat!(
    r"^(https://([A-Za-z0-9]+(-[A-Za-z0-9]+)*\.)*[A-Za-z][A-Za-z0-9]*(-[A-Za-z0-9]+)*",
    r"(:[1-9][0-9]{0,3})?|[a-z][a-z0-9]*(\.[a-z0-9]+)+:)",
    r"(/[A-Za-z0-9._~-]*)*(\?[A-Za-z0-9._~=&-]*)?$"
);

/// The rule in words, for error messages and the rules page.
pub const RULE: &str = "an https:// URL whose host is a DNS name (labels of letters, digits and \
     inner hyphens, the last starting with a letter) with an optional port 1-9999, or a native \
     app's reverse-domain custom scheme (com.example.app:); then a path and query of letters, \
     digits and ._~- (= and & in the query), no fragment";

fn alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}

fn pchar(c: u8) -> bool {
    alnum(c) || matches!(c, b'.' | b'_' | b'~' | b'-')
}

/// `label = alnum *( "-" 1*alnum )`: no leading, trailing or doubled hyphen.
fn label(s: &[u8]) -> bool {
    !s.is_empty()
        && s.iter().all(|&c| alnum(c) || c == b'-')
        && s[0] != b'-'
        && s[s.len() - 1] != b'-'
        && !s.windows(2).any(|w| w == b"--")
}

fn host_and_port(s: &[u8]) -> bool {
    let (host, port) = match s.iter().position(|&c| c == b':') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let labels: Vec<&[u8]> = host.split(|&c| c == b'.').collect();
    let Some(last) = labels.last() else {
        return false;
    };
    let port_ok = port.is_none_or(|p| {
        (1..=4).contains(&p.len()) && p[0] != b'0' && p.iter().all(u8::is_ascii_digit)
    });
    labels.iter().all(|l| label(l)) && last[0].is_ascii_alphabetic() && port_ok
}

fn scheme(s: &[u8]) -> bool {
    let parts: Vec<&[u8]> = s.split(|&c| c == b'.').collect();
    parts.len() >= 2
        && s[0].is_ascii_lowercase()
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.iter()
                    .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

/// Whether `uri` is a redirect URI a client may register (the grammar above).
pub fn registrable(uri: &str) -> bool {
    let b = uri.as_bytes();
    let (rest, query) = match b.iter().position(|&c| c == b'?') {
        Some(i) => (&b[..i], Some(&b[i + 1..])),
        None => (b, None),
    };
    if !query.is_none_or(|q| q.iter().all(|&c| pchar(c) || c == b'=' || c == b'&')) {
        return false;
    }
    let (start, path) = if let Some(after) = rest.strip_prefix(b"https://") {
        let end = after.iter().position(|&c| c == b'/').unwrap_or(after.len());
        if !host_and_port(&after[..end]) {
            return false;
        }
        (true, &after[end..])
    } else {
        let Some(colon) = rest.iter().position(|&c| c == b':') else {
            return false;
        };
        (scheme(&rest[..colon]), &rest[colon + 1..])
    };
    start && (path.is_empty() || (path[0] == b'/' && path.iter().all(|&c| pchar(c) || c == b'/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_may_be_registered() {
        for ok in [
            crate::DEFAULT_REDIRECT_URI,
            crate::DEFAULT_NATIVE_REDIRECT_URI,
            "https://app.example.test/cb",
            "https://second.example.test/cb",
            "https://my-app.example.com:8443/oauth/callback?x=1&y=2",
            "https://localhost/cb",
            "https://a",
            "com.example.app:",
            "com.example.app:/cb/",
        ] {
            assert!(registrable(ok), "{ok}");
            assert!(crate::oauth::pages::acceptable_redirect(ok), "{ok}");
        }
        for bad in [
            "http://web.example.test/cb",
            "HTTPS://a.test/cb",
            "javascript:alert(1)",
            "data:text/html,x",
            "https://a.test/cb#frag",
            "https://1.2.3.4/cb",
            "https://a.1/cb",
            "https://xn--zz.test/cb",
            "https://-a.test/cb",
            "https://a-.test/cb",
            "https://a..test/cb",
            "https:///cb",
            "https://a.test:0/cb",
            "https://a.test:99999/cb",
            "https://user@a.test/cb",
            "https://a.test/c b",
            "https://a.test/%41",
            "com:/cb",
            "Com.example:/cb",
            "com.example:cb",
            "",
        ] {
            assert!(!registrable(bad), "{bad}");
        }
    }
}

//! The one rule for callback URLs (the `callback-location` / `callback-url` headers of a spot
//! deal), shared by the client (which refuses a URL before sending it) and the sandbox (which
//! answers `validation:callback:1016`). The sandbox's OpenAPI document publishes [`PATTERN`],
//! the same set written as a regular expression; a test checks the two agree.
//!
//! ```text
//! callback-url = https "://" host [":" port] [rest]
//!              / http "://" loopback [":" port] [rest]
//! https, http  = the scheme, in any case
//! host         = dns-name / ipv4
//! dns-name     = *(label ".") top-label        ; ASCII only: no IDN, no "--"
//! label        = alnum *("-" 1*alnum / alnum)  ; [A-Za-z0-9]+(-[A-Za-z0-9]+)*
//! top-label    = ALPHA ...                     ; a label that starts with a letter
//! ipv4         = dec-octet 3("." dec-octet)    ; 0..=255, no leading zeros
//! loopback     = "localhost" (any case) / "127." dec-octet 2("." dec-octet) / "[::1]"
//! port         = 1..=65535, no leading zeros
//! rest         = ("/" / "?" / "#") *(unreserved / gen-delims / sub-delims / "%" HEXDIG HEXDIG)
//! ```
//!
//! So no credentials (`user@`), no empty host, no empty or out-of-range port, and no
//! shorthand IPv4 forms (`127.1`) that URL parsers read differently.

/// The rule as a regular expression (ECMA 262 and Python `re` alike), anchored.
pub const PATTERN: &str = concat!(
    "^(",
    "[Hh][Tt][Tt][Pp][Ss]://(",
    "([A-Za-z0-9]+(-[A-Za-z0-9]+)*\\.)*[A-Za-z][A-Za-z0-9]*(-[A-Za-z0-9]+)*",
    "|(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(\\.(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3}",
    ")",
    "|[Hh][Tt][Tt][Pp]://(",
    "[Ll][Oo][Cc][Aa][Ll][Hh][Oo][Ss][Tt]",
    "|127(\\.(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3}",
    "|\\[::1\\]",
    ")",
    ")",
    "(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?",
    "([/?#]([-A-Za-z0-9._~:/?#\\[\\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*)?",
    "$"
);

/// The URLs the sandbox's `send_event` delivers to: [`PATTERN`]'s loopback part, with either
/// scheme (`http` or `https` on localhost, 127.x.y.z or [::1]), so a fuzzer given the document
/// can never make the sandbox send anything off this machine.
pub const LOOPBACK_PATTERN: &str = concat!(
    "^[Hh][Tt][Tt][Pp][Ss]?://(",
    "[Ll][Oo][Cc][Aa][Ll][Hh][Oo][Ss][Tt]",
    "|127(\\.(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3}",
    "|\\[::1\\]",
    ")",
    "(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?",
    "([/?#]([-A-Za-z0-9._~:/?#\\[\\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*)?",
    "$"
);

/// [`LOOPBACK_PATTERN`] in words.
pub const LOOPBACK_RULE: &str = "an http:// or https:// URL on localhost, 127.x.y.z or [::1]; \
     an optional port 1-65535; no user@; RFC 3986 characters only";

/// One sentence for error messages and docs.
pub const RULE: &str = "an https:// URL with a host name or IPv4 address, or an http:// URL \
     on localhost, 127.x.y.z or [::1]; an optional port 1-65535; no user@; \
     RFC 3986 characters only";

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn label(s: &str) -> bool {
    !s.is_empty()
        && s.split('-')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric()))
}

fn dns_name(s: &str) -> bool {
    let labels: Vec<&str> = s.split('.').collect();
    labels.iter().all(|l| label(l))
        && labels
            .last()
            .is_some_and(|l| l.bytes().next().is_some_and(|b| b.is_ascii_alphabetic()))
}

/// A decimal octet without leading zeros (`0`..=`255`).
fn octet(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 3
        && s.bytes().all(|b| b.is_ascii_digit())
        && (s == "0" || !s.starts_with('0'))
        && s.parse::<u16>().is_ok_and(|n| n <= 255)
}

fn ipv4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4 && parts.iter().all(|p| octet(p))
}

fn loopback(s: &str) -> bool {
    s.eq_ignore_ascii_case("localhost") || s == "[::1]" || (s.starts_with("127.") && ipv4(s))
}

fn port(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 5
        && s.bytes().all(|b| b.is_ascii_digit())
        && !s.starts_with('0')
        && s.parse::<u32>().is_ok_and(|n| (1..=65535).contains(&n))
}

fn rest(s: &str) -> bool {
    const ALLOWED: &[u8] = b"-._~:/?#[]@!$&'()*+,;=";
    if !(s.is_empty() || s.starts_with(['/', '?', '#'])) {
        return false;
    }
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |j: usize| b.get(j).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(i + 1) && hex(i + 2)) {
                return false;
            }
            i += 3;
        } else if b[i].is_ascii_alphanumeric() || ALLOWED.contains(&b[i]) {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

/// True when `s` follows the rule of this module (the same set as [`PATTERN`]).
pub(crate) fn is_valid(s: &str) -> bool {
    checked(s, false)
}

/// True when `s` is an http or https URL on a loopback host (the same set as
/// [`LOOPBACK_PATTERN`]).
pub fn is_loopback(s: &str) -> bool {
    checked(s, true)
}

fn checked(s: &str, loopback_only: bool) -> bool {
    let (https, after) = if let Some(a) = strip_prefix_ci(s, "https://") {
        (true, a)
    } else if let Some(a) = strip_prefix_ci(s, "http://") {
        (false, a)
    } else {
        return false;
    };
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (authority, tail) = after.split_at(end);
    // `[::1]` holds colons: the port separator is the last colon after any `]`.
    let host_end = match authority.rfind(']') {
        Some(close) => authority[close..].find(':').map(|i| close + i),
        None => authority.find(':'),
    };
    let (host, port_part) = match host_end {
        Some(i) => (&authority[..i], Some(&authority[i + 1..])),
        None => (authority, None),
    };
    let host_ok = if https && !loopback_only {
        dns_name(host) || ipv4(host)
    } else {
        loopback(host)
    };
    host_ok && port_part.is_none_or(port) && rest(tail)
}

/// Parses a URL that [`is_valid`] accepts (`None` otherwise).
pub fn parse(s: &str) -> Option<url::Url> {
    if !is_valid(s) {
        return None;
    }
    url::Url::parse(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const GOOD: &[&str] = &[
        "https://app.example.test/hook",
        "https://0.com",
        "https://A.Example.TEST:443/x?y=1#z",
        "HTTPS://a.test",
        "https://10.1.2.3:8443/",
        "https://a-b.c-d.test/%41[]@!$&'()*+,;=:~",
        "http://127.0.0.1:8080/hook",
        "http://localhost/x?y=1",
        "http://LOCALHOST:9/x",
        "http://LocalHost",
        "http://[::1]:9/h",
        "http://127.255.0.9",
        "https://a.test:65535",
        "https://a.test:1",
    ];

    pub(crate) const BAD: &[&str] = &[
        "https://:443/hook",
        "https://@/hook",
        "https://a.test:99999/hook",
        "http://127.0.0.1:99999/h",
        "http://127.1:9/x",
        "https://a.test:0/",
        "https://a.test:080/",
        "https://a.test:/",
        "https://user@a.test/",
        "https://user:pw@a.test/",
        "https://1.2.3/",
        "https://1.2.3.256/",
        "https://a.1/",
        "https://a..test/",
        "https://-a.test/",
        "https://a-.test/",
        "https://xn--zz.test/",
        "https://a.test./",
        "https://[2001:db8::1]/",
        "http://example.com/hook",
        "ftp://x/y",
        "http://127.0.0.1.evil.test/",
        "http://127.0.0.01/",
        "http://localhost.test/",
        "https:///path",
        "https://a b/",
        "https://a/%zz",
        "https://a/\"",
        "https://a/{}",
        "not a url",
        "",
    ];

    #[test]
    fn the_rule() {
        for ok in GOOD {
            assert!(is_valid(ok), "{ok}");
            assert!(parse(ok).is_some(), "{ok}");
        }
        for bad in BAD {
            assert!(!is_valid(bad), "{bad}");
        }
    }

    #[test]
    fn loopback_urls_are_the_valid_ones_on_this_machine() {
        for ok in [
            "http://127.0.0.1:9/hook",
            "https://localhost/x",
            "HTTP://LOCALHOST:8080",
            "https://[::1]:9/h?x=1",
            "http://127.255.255.255/h",
        ] {
            assert!(is_loopback(ok), "{ok}");
        }
        for bad in [
            "https://app.example.test/hook",
            "https://10.1.2.3/",
            "http://0.0.0.0:9/",
            "http://127.1:9/x",
            "http://user@127.0.0.1/x",
            "http://127.0.0.1:99999/x",
            "ftp://127.0.0.1/x",
            "http://localhost.example.test/x",
        ] {
            assert!(!is_loopback(bad), "{bad}");
        }
        for bad in BAD {
            assert!(!is_loopback(bad), "{bad}");
        }
    }
}

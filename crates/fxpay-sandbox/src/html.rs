//! Small HTML5 page templates of the login and consent screens, with escaping.
use axum::body::Body;
use axum::http::{header, HeaderValue, Response, StatusCode};

/// Escapes text for element content and double-quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Undoes [`escape`] (used by the sandbox's own browser driver).
pub fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;background:#f4f5f7;margin:0}\
main{max-width:26rem;margin:4rem auto;background:#fff;padding:2rem;border-radius:8px;\
box-shadow:0 1px 4px rgba(0,0,0,.15)}label{display:block;margin-top:1rem}\
input[type=text],input[type=password]{width:100%;padding:.5rem;box-sizing:border-box}\
button{margin-top:1.5rem;margin-right:.5rem;padding:.5rem 1.25rem}\
.error{color:#b00020}";

/// A complete page around `body` (already escaped/trusted markup).
pub fn page(status: StatusCode, title: &str, body: &str) -> Response<Body> {
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<title>{title} · fxpay sandbox</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n\
<h1>{title}</h1>\n{body}</main>\n</body>\n</html>\n",
        title = escape(title),
    );
    let mut resp = Response::new(Body::from(html));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
        ),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    resp
}

/// A hidden form field.
pub fn hidden(name: &str, value: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"{}\" value=\"{}\">\n",
        escape(name),
        escape(value)
    )
}

/// An error page (never a redirect).
pub fn error_page(status: StatusCode, message: &str) -> Response<Body> {
    page(
        status,
        "Request refused",
        &format!(
            "<p id=\"error\" class=\"error\" role=\"alert\">{}</p>\n",
            escape(message)
        ),
    )
}

/// The login form; `hidden` holds the authorization request fields.
pub fn login_page(
    status: StatusCode,
    client_id: &str,
    hidden_fields: &str,
    error: Option<&str>,
) -> Response<Body> {
    let error = error
        .map(|e| {
            format!(
                "<p id=\"error\" class=\"error\" role=\"alert\">{}</p>\n",
                escape(e)
            )
        })
        .unwrap_or_default();
    let body = format!(
        "<p>Sign in to let <strong id=\"client\">{client}</strong> read your account information.</p>\n\
{error}<form id=\"login-form\" method=\"post\" action=\"/v1/oauth/login\">\n{hidden_fields}\
<label for=\"username\">Username</label>\n\
<input type=\"text\" id=\"username\" name=\"username\" autocomplete=\"username\" required>\n\
<label for=\"password\">Password</label>\n\
<input type=\"password\" id=\"password\" name=\"password\" autocomplete=\"current-password\" required>\n\
<button type=\"submit\" id=\"login\">Sign in</button>\n</form>\n",
        client = escape(client_id),
    );
    page(status, "Sign in", &body)
}

/// The consent form: Allow / Deny buttons bound to a server-side consent id.
pub fn consent_page(client_id: &str, user: &str, consent_id: &str) -> Response<Body> {
    let body = format!(
        "<p>Signed in as <strong id=\"user\">{user}</strong>.</p>\n\
<p><strong id=\"client\">{client}</strong> asks for access with scope \
<code id=\"scope\">gca-aisp</code>: read your virtual accounts and balances.</p>\n\
<form id=\"consent-form\" method=\"post\" action=\"/v1/oauth/consent\">\n{hidden}\
<button type=\"submit\" id=\"allow\" name=\"decision\" value=\"allow\">Allow</button>\n\
<button type=\"submit\" id=\"deny\" name=\"decision\" value=\"deny\">Deny</button>\n</form>\n",
        user = escape(user),
        client = escape(client_id),
        hidden = hidden("consent_id", consent_id),
    );
    page(StatusCode::OK, "Allow access?", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_round_trips() {
        let s = "<script>\"x\" & 'y'</script>";
        let e = escape(s);
        assert!(!e.contains('<') && !e.contains('"') && !e.contains('\''));
        assert_eq!(unescape(&e), s);
    }
}

//! A tiny browser for `Sandbox::approve`: loads the authorize page, signs in, answers the
//! consent form, and returns the final redirect `Location` (no redirects are followed).
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use reqwest::redirect::Policy;

use crate::error::SandboxError;
use crate::oauth::html::unescape;

/// A parsed HTML form: its action and its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Form {
    pub action: String,
    pub fields: Vec<(String, String)>,
}

/// The attributes of one tag's text (`<input type="hidden" name="a" value="b">`).
fn attributes(tag: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = tag;
    while let Some(eq) = rest.find("=\"") {
        let name = rest[..eq]
            .rsplit(|c: char| c.is_whitespace())
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        let after = &rest[eq + 2..];
        let Some(end) = after.find('"') else { break };
        out.push((name, unescape(&after[..end])));
        rest = &after[end + 1..];
    }
    out
}

fn attr<'a>(attrs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The first form of a page, with its hidden and named inputs (not its buttons).
pub fn parse_form(html: &str) -> Option<Form> {
    let start = html.find("<form")?;
    let end = html[start..].find("</form>").map(|e| start + e)?;
    let form = &html[start..end];
    let open_end = form.find('>')?;
    let action = attr(&attributes(&form[..open_end]), "action")?.to_owned();
    let mut fields = Vec::new();
    let mut rest = form;
    while let Some(i) = rest.find("<input") {
        let tag_end = rest[i..].find('>').map(|e| i + e)?;
        let attrs = attributes(&rest[i..tag_end]);
        if attr(&attrs, "type") == Some("hidden") {
            if let Some(name) = attr(&attrs, "name") {
                fields.push((
                    name.to_owned(),
                    attr(&attrs, "value").unwrap_or("").to_owned(),
                ));
            }
        }
        rest = &rest[tag_end..];
    }
    Some(Form { action, fields })
}

/// The visible error message of a page, for error reports.
fn page_message(html: &str) -> String {
    html.find("id=\"error\"")
        .and_then(|i| {
            let s = &html[i..];
            let start = s.find('>')? + 1;
            let end = s.find("</p>")?;
            (start <= end).then(|| unescape(&s[start..end]))
        })
        .unwrap_or_default()
}

/// The sandbox's own authorize URL for `auth_url`: its path must be `/v1/oauth/authorize`;
/// the query is kept; the origin, if any (`scheme://authority`), is replaced by `base` (the
/// sandbox's own), so `approve` never fetches another address, whatever host name the caller
/// used for the sandbox. A relative `/v1/oauth/authorize?...` is accepted too.
pub fn own_authorize_url(base: &str, auth_url: &str) -> Result<String, SandboxError> {
    let path_and_query = match auth_url.split_once("://") {
        Some((scheme, rest))
            if scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c)) =>
        {
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            &rest[end..]
        }
        _ => auth_url,
    };
    let query = path_and_query
        .strip_prefix("/v1/oauth/authorize")
        .filter(|q| q.is_empty() || q.starts_with('?'))
        .ok_or_else(|| {
            SandboxError::InvalidUrl(
                "auth_url must be an authorize URL: [scheme://host[:port]]/v1/oauth/authorize[?query]"
                    .to_owned(),
            )
        })?;
    Ok(format!("{base}/v1/oauth/authorize{query}"))
}

/// A form-encoded POST of `fields`.
fn post_form(
    client: &reqwest::Client,
    url: url::Url,
    fields: &[(String, String)],
) -> reqwest::RequestBuilder {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields.iter())
        .finish();
    client
        .post(url)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body)
}

fn http_err(e: reqwest::Error) -> SandboxError {
    SandboxError::Http(e.to_string())
}

async fn fail(step: &'static str, resp: reqwest::Response) -> SandboxError {
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    SandboxError::UnexpectedStatus {
        step,
        status,
        message: page_message(&text),
    }
}

fn location(resp: &reqwest::Response) -> Result<String, SandboxError> {
    resp.headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .ok_or(SandboxError::MissingLocation)
}

/// Drives login and consent for `auth_url` as `username`.
pub async fn approve(
    auth_url: &str,
    allow: bool,
    username: &str,
    password: &str,
    root: Option<&reqwest::Certificate>,
) -> Result<String, SandboxError> {
    let start = url::Url::parse(auth_url).map_err(|e| SandboxError::InvalidUrl(e.to_string()))?;
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .redirect(Policy::none())
        .timeout(Duration::from_secs(30));
    if let Some(root) = root {
        // A TLS sandbox: trust its own CA.
        builder = builder.add_root_certificate(root.clone());
    }
    let client = builder.build().map_err(http_err)?;

    let resp = client.get(start.clone()).send().await.map_err(http_err)?;
    if resp.status().is_redirection() {
        return location(&resp);
    }
    if resp.status() != reqwest::StatusCode::OK {
        return Err(fail("authorize", resp).await);
    }
    let html = resp.text().await.map_err(http_err)?;
    let login = parse_form(&html).ok_or(SandboxError::MissingForm("login"))?;
    let mut fields = login.fields.clone();
    fields.push(("username".to_owned(), username.to_owned()));
    fields.push(("password".to_owned(), password.to_owned()));
    let action = start
        .join(&login.action)
        .map_err(|e| SandboxError::InvalidUrl(e.to_string()))?;
    let resp = post_form(&client, action, &fields)
        .send()
        .await
        .map_err(http_err)?;
    if resp.status().is_redirection() {
        return location(&resp);
    }
    if resp.status() == reqwest::StatusCode::UNAUTHORIZED {
        return Err(SandboxError::LoginFailed);
    }
    if resp.status() != reqwest::StatusCode::OK {
        return Err(fail("login", resp).await);
    }
    let cookie: Vec<String> = resp
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .map(|s| s.trim().to_owned())
        .collect();
    let html = resp.text().await.map_err(http_err)?;
    let consent = parse_form(&html).ok_or(SandboxError::MissingForm("consent"))?;
    let mut fields = consent.fields.clone();
    fields.push((
        "decision".to_owned(),
        if allow { "allow" } else { "deny" }.to_owned(),
    ));
    let action = start
        .join(&consent.action)
        .map_err(|e| SandboxError::InvalidUrl(e.to_string()))?;
    let mut req = post_form(&client, action, &fields);
    if !cookie.is_empty() {
        req = req.header(COOKIE, cookie.join("; "));
    }
    let resp = req.send().await.map_err(http_err)?;
    if resp.status().is_redirection() {
        return location(&resp);
    }
    Err(fail("consent", resp).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hidden_fields() {
        let html = "<p id=\"error\" class=\"error\">Bad &amp; worse</p>\
            <form id=\"f\" method=\"post\" action=\"/v1/oauth/login\">\
            <input type=\"hidden\" name=\"state\" value=\"a&amp;b&quot;c\">\
            <input type=\"text\" id=\"username\" name=\"username\" required>\
            <button type=\"submit\">Go</button></form>";
        let f = parse_form(html).expect("form");
        assert_eq!(f.action, "/v1/oauth/login");
        assert_eq!(f.fields, [("state".to_owned(), "a&b\"c".to_owned())]);
        assert_eq!(page_message(html), "Bad & worse");
    }
}

//! The endpoint calls, async, on top of `auth` and `transport`.
use crate::auth::authorize::{self, random_token, AuthorizationRequest};
use crate::auth::grants::{request_token, Grant};
use crate::auth::user_session::OnToken;
use crate::auth::{TokenCache, TokenStore, UserSession};
use crate::config::ClientConfig;
use crate::error::{Error, Result};
use crate::models::account::accounts_from_body;
use crate::models::{
    Beneficiary, Deal, DealRequest, Quote, QuoteRequest, SpotDeal, Token, VirtualAccount,
};
use crate::paging;
use crate::transport::{api_error, Observer, Request, Response, Transport};
use futures_util::future::Either;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;

/// A parsed answer with the JSON it came from.
pub(crate) type WithRaw<T> = (T, Value);
/// A created object's id, and its answer's JSON text as it came (UTF-8: it parsed as JSON),
/// kept by a journal as the call's response without encoding a parsed tree again.
pub(crate) type IdAndText = (String, bytes::Bytes);

/// The service client: one connection pool and one payments token cache.
#[derive(Clone)]
pub struct Client {
    transport: Arc<Transport>,
    tokens: Arc<TokenCache>,
    /// The pace after 429s (`crate::pacing`), when the client has no `RateLimit`.
    pacing: Arc<crate::pacing::Pacing>,
}

impl Client {
    pub fn new(config: ClientConfig, store: Option<Arc<dyn TokenStore>>) -> Result<Self> {
        let key = format!("fxpay:{}:{}:payments", config.base_url, config.client_id);
        if let Some(cassette) = &config.cassette {
            cassette.attach(&config.base_url, &config.client_id, &config.client_secret);
        }
        Ok(Client {
            transport: Arc::new(Transport::new(config)?),
            tokens: Arc::new(TokenCache::new(key, store)),
            pacing: Arc::new(crate::pacing::Pacing::new()),
        })
    }

    pub fn config(&self) -> &ClientConfig {
        self.transport.config()
    }

    /// A client with other per-call settings that shares this one's connection pools,
    /// token cache and store, and cassette. `config` must be this client's, changed only in
    /// `timeout`, `retry` and `deadline`.
    pub fn with_config(&self, config: ClientConfig) -> Client {
        Client {
            transport: Arc::new(self.transport.with_config(config)),
            tokens: self.tokens.clone(),
            pacing: self.pacing.clone(),
        }
    }

    /// The pace this client keeps after 429s: its `RateLimit`'s (shared by every client given
    /// it), else its own (shared with its clones and `with_config` children).
    pub(crate) fn pacing(&self) -> &crate::pacing::Pacing {
        match &self.config().rate_limit {
            Some(rl) => &rl.pacing,
            None => &self.pacing,
        }
    }

    /// The payments token, fetched on first use and renewed before it expires.
    pub async fn payments_token(&self, obs: Option<&dyn Observer>) -> Result<Arc<Token>> {
        let t = &self.transport;
        self.tokens
            .get(|| request_token(t, Grant::ClientCredentials, obs))
            .await
    }

    /// Sends a payments request with the bearer token; a 401 renews the token and replays once.
    async fn payments_call(
        &self,
        req: Request<'_>,
        obs: Option<&dyn Observer>,
    ) -> Result<Response> {
        // A failure to get a token comes before the request: nothing of it was sent.
        let token = self.payments_token(obs).await.map_err(Error::into_unsent)?;
        let t = &self.transport;
        let renew = || {
            self.tokens.renew_after_reject(&token.access_token, || {
                request_token(t, Grant::ClientCredentials, obs)
            })
        };
        success(send_authorized(t, &req, &token, renew, obs).await?)
    }

    pub async fn create_quote(
        &self,
        req: &QuoteRequest,
        obs: Option<&dyn Observer>,
    ) -> Result<IdAndText> {
        self.create_quote_encoded(to_json(req)?, obs).await
    }

    /// [`Client::create_quote`] of a request the caller encoded with [`to_json`]: a keyed
    /// call takes its fingerprint from the bytes it sends, and encodes them once.
    pub(crate) async fn create_quote_encoded(
        &self,
        body: Vec<u8>,
        obs: Option<&dyn Observer>,
    ) -> Result<IdAndText> {
        self.create_id_and_text("/payments/quotes", "id", body, obs)
            .await
    }

    /// POSTs an encoded body that creates one object: the created object's id (its answer's
    /// field `id_key`) and the answer's text.
    async fn create_id_and_text(
        &self,
        path: &'static str,
        id_key: &str,
        body: Vec<u8>,
        obs: Option<&dyn Observer>,
    ) -> Result<IdAndText> {
        let resp = self
            .payments_call(Request::post_json(path, body), obs)
            .await?;
        let raw = parse_body(&resp)?;
        Ok((id_field(&raw, id_key, &resp)?, resp.body))
    }

    pub async fn get_quote(
        &self,
        quote_id: &str,
        obs: Option<&dyn Observer>,
    ) -> Result<(Quote, String)> {
        check_id("quote_id", quote_id)?;
        let path = ["/payments/quotes/", quote_id].concat();
        let resp = self.payments_call(api_get(&path), obs).await?;
        // Parsed straight into the model, and the answer's own text kept as the raw form:
        // no intermediate `Value` to build, walk and encode again.
        let text = std::str::from_utf8(&resp.body).map_err(|_| unexpected(&resp, "JSON"))?;
        let mut quote: Quote =
            serde_json::from_str(text).map_err(|e| {
                match serde_json::from_str::<serde::de::IgnoredAny>(text) {
                    Ok(_) => typed_error(&resp, "quote", &e),
                    Err(_) => unexpected(&resp, "JSON"),
                }
            })?;
        if quote.id.is_empty() {
            quote.id = quote_id.to_string();
        } else if !quote.id.eq_ignore_ascii_case(quote_id) {
            // Another quote than the one asked for: never returned as this one.
            return Err(unexpected(
                &resp,
                &format!("quote {quote_id:?}: its answer is quote {:?}", quote.id),
            ));
        }
        Ok((quote, text.to_string()))
    }

    pub async fn create_beneficiary(
        &self,
        b: &Beneficiary,
        obs: Option<&dyn Observer>,
    ) -> Result<IdAndText> {
        b.check()?;
        self.create_beneficiary_encoded(to_json(b)?, obs).await
    }

    /// [`Client::create_beneficiary`] of a beneficiary the caller checked and encoded with
    /// [`to_json`] (see [`Client::create_quote_encoded`]).
    pub(crate) async fn create_beneficiary_encoded(
        &self,
        body: Vec<u8>,
        obs: Option<&dyn Observer>,
    ) -> Result<IdAndText> {
        self.create_id_and_text("/payments/beneficiaries", "beneficiaryId", body, obs)
            .await
    }

    /// Books a deal. Not an `async fn`: the future is [`Client::create_deal_encoded`]'s
    /// alone, with no second copy of the request around it (tests/future_sizes.rs).
    pub fn create_deal<'a>(
        &'a self,
        req: DealRequest,
        obs: Option<&'a dyn Observer>,
    ) -> impl Future<Output = Result<WithRaw<Deal>>> + 'a {
        let body = check_id("quote_id", &req.quote_id)
            .and_then(|()| req.check())
            .and_then(|()| to_json(&req));
        match body {
            Ok(body) => Either::Left(self.create_deal_encoded(req, body, obs)),
            Err(e) => Either::Right(std::future::ready(Err(e))),
        }
    }

    /// [`Client::create_deal`] of a request the caller checked and encoded with [`to_json`]
    /// (see [`Client::create_quote_encoded`]). The quote's id is checked here too: a keyed
    /// deal checks it after its claim, as it always has.
    pub(crate) async fn create_deal_encoded(
        &self,
        req: DealRequest,
        body: Vec<u8>,
        obs: Option<&dyn Observer>,
    ) -> Result<WithRaw<Deal>> {
        check_id("quote_id", &req.quote_id)?;
        let resp = self
            .payments_call(Request::post_json("/payments/deals", body), obs)
            .await?;
        let raw = parse_body(&resp)?;
        let deal_id = id_field(&raw, "dealId", &resp)?;
        Ok((Deal::booked(deal_id, req), raw))
    }

    pub async fn create_spot_deal(
        &self,
        req: DealRequest,
        callback_url: Option<String>,
        callback_nonce: Option<String>,
        obs: Option<&dyn Observer>,
    ) -> Result<WithRaw<SpotDeal>> {
        check_id("quote_id", &req.quote_id)?;
        req.check()?;
        let nonce = match (&callback_url, callback_nonce) {
            (None, Some(_)) => return Err(Error::invalid("callback_nonce needs a callback_url")),
            (None, None) => None,
            (Some(url), nonce) => {
                check_callback_url(url)?;
                match nonce {
                    Some(n) => {
                        check_nonce(&n)?;
                        Some(n)
                    }
                    None => Some(random_token(32)?),
                }
            }
        };
        let mut headers = Vec::new();
        if let Some(url) = &callback_url {
            headers.push(("callback-location", url.clone()));
        }
        if let Some(n) = &nonce {
            headers.push(("callback-nonce", n.clone()));
        }
        let body = to_json(&req)?;
        let mut req_http = Request::post_json("/payments/deals/spot", body);
        req_http.headers = headers;
        let resp = self.payments_call(req_http, obs).await?;
        let raw = parse_body(&resp)?;
        let process_id = id_field(&raw, "processId", &resp)?;
        Ok((
            SpotDeal {
                process_id,
                callback_url,
                callback_nonce: nonce,
            },
            raw,
        ))
    }

    pub fn authorization_url(
        &self,
        params: &authorize::AuthorizeParams<'_>,
    ) -> Result<AuthorizationRequest> {
        let cfg = self.config();
        authorize::authorization_url(&cfg.base_url, &cfg.client_id, params)
    }

    pub async fn exchange_code(
        &self,
        auth: &AuthorizationRequest,
        callback: &str,
        obs: Option<&dyn Observer>,
    ) -> Result<Token> {
        let code = authorize::code_from_callback(auth, callback)?;
        let grant = Grant::AuthorizationCode {
            code: &code,
            redirect_uri: &auth.redirect_uri,
            code_verifier: auth.code_verifier.as_deref(),
        };
        request_token(&self.transport, grant, obs).await
    }

    pub async fn refresh_token(
        &self,
        refresh_token: &str,
        obs: Option<&dyn Observer>,
    ) -> Result<Token> {
        if refresh_token.is_empty() {
            return Err(Error::invalid("refresh_token must not be empty"));
        }
        request_token(&self.transport, Grant::RefreshToken { refresh_token }, obs).await
    }

    /// A session over a user's token. With `shared`, refreshes take the store's lock so
    /// processes sharing the token never use a rotated refresh token twice.
    pub fn user_session(
        &self,
        token: Token,
        on_token: Option<OnToken>,
        shared: Option<(Arc<dyn TokenStore>, String)>,
    ) -> UserSession {
        UserSession::new(self.transport.clone(), token, on_token, shared)
    }
}

/// `GET /v1/gca/virtual-accounts` with the session's token; a 401 refreshes and replays once.
pub async fn list_virtual_accounts(
    session: &UserSession,
    obs: Option<&dyn Observer>,
) -> Result<WithRaw<Vec<VirtualAccount>>> {
    const PATH: &str = "/gca/virtual-accounts";
    let api_base = url::Url::parse(&session.transport().config().url(""))
        .map_err(|e| Error::config(format!("the base URL is not a URL: {e}")))?;
    let mut current = url::Url::parse(&session.transport().config().url(PATH))
        .map_err(|e| Error::config(format!("the base URL is not a URL: {e}")))?;
    let mut path = PATH.to_owned();
    let mut followed = std::collections::HashSet::from([current.as_str().to_owned()]);
    let mut all = Vec::new();
    let mut first: Option<Value> = None;
    loop {
        let token = session.token(obs).await?;
        let renew = || session.renew_after_reject(&token.access_token, obs);
        let resp =
            send_authorized(session.transport(), &api_get(&path), &token, renew, obs).await?;
        let resp = success(resp)?;
        let raw = parse_body(&resp)?;
        let accounts = accounts_from_body(&raw).map_err(|shape| {
            unexpected(
                &resp,
                &format!("a list of virtual accounts (a JSON array of objects, or an object holding one); it sent {shape}"),
            )
        })?;
        all.extend(accounts);
        let next = paging::next_link(&raw, &resp.headers).map_err(|marker| {
            paging_error(&resp, format!("the listing has more pages behind a paging marker fxpay cannot follow: {marker}"))
        })?;
        first.get_or_insert(raw);
        let Some(next) = next else { break };
        let (url, next_path) = paging::resolve(&api_base, &current, &next).map_err(|why| {
            paging_error(
                &resp,
                format!("the listing's next page cannot be followed: {why}"),
            )
        })?;
        if !followed.insert(url.as_str().to_owned()) {
            return Err(paging_error(
                &resp,
                format!(
                    "the listing's next link leads to a page already fetched ({}): a loop",
                    url.path()
                ),
            ));
        }
        if followed.len() > paging::MAX_PAGES {
            return Err(paging_error(
                &resp,
                format!("the listing has more than {} pages", paging::MAX_PAGES),
            ));
        }
        current = url;
        path = next_path;
    }
    Ok((all, first.unwrap_or(Value::Null)))
}

fn paging_error(resp: &Response, message: String) -> Error {
    Error::Paging {
        status: resp.status,
        message,
        body: String::from_utf8_lossy(&resp.body).into_owned(),
        headers: crate::transport::header_pairs(&resp.headers),
    }
}

/// Sends `req` with `token`. A 401 means the service no longer takes that token: `renew`
/// gets a new one (one renewal however many calls saw the same rejection) and the request
/// is replayed once with it; the replay's answer is the answer.
async fn send_authorized<F, Fut>(
    transport: &Transport,
    req: &Request<'_>,
    token: &Token,
    renew: F,
    obs: Option<&dyn Observer>,
) -> Result<Response>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Arc<Token>>>,
{
    let resp = transport.send(req, Some(&token.access_token), obs).await?;
    if resp.status != 401 {
        return Ok(resp);
    }
    let renewed = renew().await?;
    transport.send(req, Some(&renewed.access_token), obs).await
}

fn success(resp: Response) -> Result<Response> {
    if (200..300).contains(&resp.status) {
        Ok(resp)
    } else {
        Err(api_error(&resp))
    }
}

/// A request's JSON body.
pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| Error::Internal(format!("cannot encode the request: {e}")))
}

fn unexpected(resp: &Response, what: &str) -> Error {
    Error::Api {
        status: resp.status,
        message: format!(
            "HTTP {}: the service answered something other than {what}",
            resp.status
        ),
        errors: Vec::new(),
        body: String::from_utf8_lossy(&resp.body).into_owned(),
        retry_after: None,
        headers: crate::transport::header_pairs(&resp.headers),
    }
}

/// A GET of the payments or account-information API. It carries `Content-Type:
/// application/json` although it has no body: spec section 4 says every request to those
/// endpoints does, and a server that routes by it (a handler declared to consume JSON) would
/// refuse a GET without it with 415. The header costs a few bytes (one with HTTP/2's HPACK).
fn api_get(path: &str) -> Request<'_> {
    let mut req = Request::get(path);
    req.headers
        .push(("content-type", "application/json".to_string()));
    req
}

fn parse_body(resp: &Response) -> Result<Value> {
    serde_json::from_slice(&resp.body).map_err(|_| unexpected(resp, "JSON"))
}

/// An answer that is JSON but not the `what` expected.
fn typed_error(resp: &Response, what: &str, e: &serde_json::Error) -> Error {
    let mut err = unexpected(resp, what);
    if let Error::Api { message, .. } = &mut err {
        message.push_str(&format!(" ({e})"));
    }
    err
}

fn id_field(raw: &Value, name: &str, resp: &Response) -> Result<String> {
    match raw.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(unexpected(resp, &format!("an object with {name}"))),
    }
}

/// Ids go into URL paths: only the characters of UUIDs and similar tokens are allowed.
fn check_id(field: &str, id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{field} must be an id such as a UUID, got {id:?}"
        )))
    }
}

fn check_callback_url(url: &str) -> Result<()> {
    // The URL travels as the `callback-location` header: a character a header value cannot
    // hold (CR, LF, spaces, controls, non-ASCII) is refused here, before anything is sent.
    // The URL parser would silently drop tabs and newlines, so this check comes first.
    if url.is_empty() || !url.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(Error::invalid(
            "callback_url must be an absolute URL of visible ASCII characters \
             (no spaces, CR, LF or other control characters)",
        ));
    }
    // One rule with the sandbox (`crate::callback_url`): a URL the sandbox would refuse with
    // `validation:callback:1016` never leaves the client.
    if crate::callback_url::is_valid(url) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "callback_url must be {}; got {url:?}",
            crate::callback_url::RULE
        )))
    }
}

fn check_nonce(nonce: &str) -> Result<()> {
    if nonce.is_empty() || nonce.len() > 512 || !nonce.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(Error::invalid(
            "callback_nonce must be 1 to 512 visible ASCII characters",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_urls() {
        assert!(check_id("q", "3f2b6a1e-9c1d-4d7a-8b0e-2f6f1c2d3e4f").is_ok());
        for bad in ["", "../x", "a/b", "a?b", "a b"] {
            assert!(check_id("q", bad).is_err(), "{bad}");
        }
        assert!(check_callback_url("https://hooks.example/fx").is_ok());
        assert!(check_callback_url("http://127.0.0.1:9/fx").is_ok());
        assert!(check_callback_url("http://hooks.example/fx").is_err());
        for bad in [
            "https://hooks.example/fx\r\nX-Injected: 1",
            "https://hooks.example/f x",
            " https://hooks.example/fx",
            "https://hooks.example/fx\n",
            "https://hooks.example/\tfx",
            "https://hooks.example/fx\u{0}",
            "https://hooks.example/f\u{e9}",
            "",
        ] {
            assert!(
                matches!(check_callback_url(bad), Err(Error::InvalidRequest(_))),
                "{bad:?}"
            );
        }
        assert!(check_nonce("abc").is_ok());
        assert!(check_nonce("a b").is_err());
    }
}

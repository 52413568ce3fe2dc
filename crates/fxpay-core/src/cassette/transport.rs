//! The hook between `crate::transport` and a client's cassette: a recording lets the request
//! go out and keeps what came back; a replay answers from the cassette and never lets the
//! request go out.
use crate::cassette::{Cassette, Interaction, Mode, Outcome};
use crate::error::{Error, Result};
use crate::transport::{Body, Request, Response};
use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use std::future::Future;

/// The answer's headers a cassette keeps: the ones the client reads, and a few that help a
/// reader of the file. Dates, lengths and connection headers are left out.
const KEPT_HEADERS: &[&str] = &[
    "content-type",
    "retry-after",
    "location",
    "www-authenticate",
    "link",
    "x-request-id",
    "request-id",
];

impl Cassette {
    /// Runs one request through the cassette. `live` is the request on the network (with
    /// the transport's retries); a replay drops it without starting it.
    pub(crate) async fn around<F>(
        &self,
        req: &Request<'_>,
        bearer: Option<&str>,
        live: F,
    ) -> Result<Response>
    where
        F: Future<Output = Result<Response>>,
    {
        let authorization = bearer.map(|t| format!("Bearer {t}"));
        let mut headers: Vec<(&str, &str)> = Vec::new();
        if let Some(a) = &authorization {
            headers.push(("authorization", a));
        }
        match req.body_kind {
            Body::None => {}
            Body::Json => headers.push(("content-type", "application/json")),
            Body::Form => headers.push(("content-type", "application/x-www-form-urlencoded")),
        }
        headers.extend(req.headers.iter().map(|(k, v)| (*k, v.as_str())));
        let request = self.scrub_request(
            req.method.as_str(),
            req.path,
            &headers,
            &req.body,
            req.body_kind == Body::Json,
        );
        match self.mode() {
            Mode::Replay => {
                drop(live);
                answer(self.play(&request)?)
            }
            Mode::Record => {
                let outcome = live.await;
                match &outcome {
                    Ok(resp) => {
                        let headers = KEPT_HEADERS
                            .iter()
                            .filter_map(|name| {
                                let v = resp.headers.get(*name)?.to_str().ok()?;
                                Some((name.to_string(), v.to_string()))
                            })
                            .collect();
                        self.record(
                            request,
                            Outcome::Answer {
                                status: resp.status,
                                headers,
                                body: &resp.body,
                            },
                        );
                    }
                    Err(Error::Transport {
                        message, timeout, ..
                    }) => self.record(
                        request,
                        Outcome::Failed {
                            message,
                            timeout: *timeout,
                        },
                    ),
                    // Refused before anything was sent: nothing to record.
                    Err(_) => {}
                }
                outcome
            }
        }
    }
}

/// The recorded answer (or connection failure) of a replayed exchange.
fn answer(x: Interaction) -> Result<Response> {
    if let Some(e) = x.error {
        return Err(Error::Transport {
            message: e.message,
            timeout: e.timeout,
            unsent: false,
        });
    }
    let Some(r) = x.response else {
        return Err(Error::CassetteMismatch(format!(
            "the cassette's exchange {} {} has neither a response nor an error",
            x.request.method, x.request.path
        )));
    };
    let mut headers = HeaderMap::new();
    for (k, v) in &r.headers {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            headers.insert(k, v);
        }
    }
    Ok(Response {
        status: r.status,
        headers,
        body: Bytes::from(r.body.bytes()),
        cut: None,
    })
}

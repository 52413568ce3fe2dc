//! The extractors of the API handlers: who calls (a valid bearer token of the endpoint's
//! scope) and the JSON object body. A handler that takes both checks the token first, then
//! the media type and the body, as the service does; each refusal is the answer.
use std::marker::PhantomData;
use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use crate::http::body::json_object;
use crate::oauth::bearer::{self, Principal};
use crate::state::{Scope, State};

/// The scope an endpoint's token must have.
pub trait NeedsScope {
    const SCOPE: Scope;
}

/// The payments endpoints' scope.
pub struct Payments;

impl NeedsScope for Payments {
    const SCOPE: Scope = Scope::Payments;
}

/// The account-information endpoints' scope (`gca-aisp`, a user's token).
pub struct GcaAisp;

impl NeedsScope for GcaAisp {
    const SCOPE: Scope = Scope::GcaAisp;
}

/// Who a request speaks for: its bearer token is valid and has the scope `S`.
pub struct Caller<S> {
    pub principal: Principal,
    scope: PhantomData<S>,
}

impl<S: NeedsScope> FromRequestParts<Arc<State>> for Caller<S> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<State>) -> Result<Self, Response> {
        match bearer::check(state, &parts.headers, S::SCOPE) {
            Ok(principal) => Ok(Caller {
                principal,
                scope: PhantomData,
            }),
            Err(e) => Err(e.into_response()),
        }
    }
}

/// A request body that is a JSON object: `Content-Type: application/json`, at most 1 MiB,
/// read within the body timeout.
pub struct JsonObject(pub Map<String, Value>);

impl FromRequest<Arc<State>> for JsonObject {
    type Rejection = Response;

    async fn from_request(req: Request, _state: &Arc<State>) -> Result<Self, Response> {
        let (parts, body) = req.into_parts();
        match json_object(&parts.headers, body).await {
            Ok(obj) => Ok(JsonObject(obj)),
            Err(e) => Err(e.into_response()),
        }
    }
}

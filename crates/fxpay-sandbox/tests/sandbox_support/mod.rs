//! Shared helpers of the sandbox integration tests: a started sandbox, an HTTP client,
//! token helpers and a tiny callback receiver.
#![allow(dead_code)]

use std::str::FromStr;
use std::sync::{Arc, Mutex};

use fxpay_sandbox::{Sandbox, SandboxConfig};
use reqwest::header::HeaderMap;
use serde_json::{json, Number, Value};

pub struct Ctx {
    pub sb: Sandbox,
    pub http: reqwest::Client,
}

/// A JSON number with exactly these digits.
pub fn num(s: &str) -> Value {
    Value::Number(Number::from_str(s).expect("number literal"))
}

pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

pub async fn start() -> Ctx {
    let sb = Sandbox::start(SandboxConfig::default())
        .await
        .expect("sandbox starts");
    Ctx {
        sb,
        http: http_client(),
    }
}

pub fn beneficiary_body(currency: &str) -> Value {
    json!({
        "currency": currency,
        "name": "Jane Doe",
        "classification": "Own Account",
        "paymentReason": "Savings transfer",
        "beneficiaryBankDetails": {
            "bankName": "Example Bank",
            "bankBranchName": "City Branch",
            "branchCode": "601613",
            "account": "31926819",
            "bankAddress": {
                "addressLine": "1 Bank Street",
                "citySuburb": "London",
                "stateProvince": "Greater London",
                "postCode": "EC2R 8AH",
                "country": "GB"
            }
        },
        "beneficiaryAddress": {
            "addressLine": "2 Home Road",
            "citySuburb": "Leeds",
            "stateProvince": "West Yorkshire",
            "postCode": "LS1 4AP",
            "country": "GB"
        }
    })
}

pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub text: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    /// The `errorCode`s of an `errors` body.
    pub fn codes(&self) -> Vec<String> {
        self.json()["errors"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| e["errorCode"].as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `(errorCode, fieldName)` pairs of an `errors` body.
    pub fn fields(&self) -> Vec<(String, String)> {
        self.json()["errors"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        (
                            e["errorCode"].as_str().unwrap_or("").to_owned(),
                            e["fieldName"].as_str().unwrap_or("").to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

pub async fn finish(r: reqwest::Response) -> Resp {
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let text = r.text().await.expect("body");
    Resp {
        status,
        headers,
        text,
    }
}

impl Ctx {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.sb.base_url(), path)
    }

    pub async fn form(&self, pairs: &[(&str, &str)]) -> Resp {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs.iter())
            .finish();
        let r = self
            .http
            .post(self.url("/v1/oauth/token"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .expect("send");
        finish(r).await
    }

    /// A client-credentials token of the default client.
    pub async fn cc_token(&self) -> String {
        self.cc_token_of(self.sb.client_id(), self.sb.client_secret())
            .await
    }

    pub async fn cc_token_of(&self, id: &str, secret: &str) -> String {
        let r = self
            .form(&[
                ("grant_type", "client_credentials"),
                ("client_id", id),
                ("client_secret", secret),
                ("scope", "payments"),
            ])
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()["access_token"].as_str().expect("token").to_owned()
    }

    pub fn auth_url(&self, redirect_uri: &str, state: &str) -> String {
        let q = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("response_type", "code")
            .append_pair("client_id", self.sb.client_id())
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("scope", "gca-aisp")
            .append_pair("state", state)
            .finish();
        self.url(&format!("/v1/oauth/authorize?{q}"))
    }

    /// Runs the whole authorization-code flow; returns the token response.
    pub async fn user_tokens(&self) -> Value {
        let redirect = self.sb.redirect_uri().to_owned();
        let back = self
            .sb
            .approve(&self.auth_url(&redirect, "st-1"), true)
            .await
            .expect("approve");
        let code = query_param(&back, "code").expect("code");
        let r = self
            .form(&[
                ("grant_type", "authorization_code"),
                ("client_id", self.sb.client_id()),
                ("client_secret", self.sb.client_secret()),
                ("code", &code),
                ("redirect_uri", &redirect),
                ("scope", "gca-aisp"),
            ])
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()
    }

    pub async fn post_json(&self, path: &str, token: &str, body: &Value) -> Resp {
        let r = self
            .http
            .post(self.url(path))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("send");
        finish(r).await
    }

    pub async fn get(&self, path: &str, token: &str) -> Resp {
        let r = self
            .http
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .expect("send");
        finish(r).await
    }

    /// Creates a quote; returns its id.
    pub async fn quote(&self, token: &str, buy: &str, amount: &str, sell: &str, n: u32) -> String {
        let body = json!({"buyCurrency": buy, "buyAmount": num(amount), "sellCurrency": sell, "beneficiaries": n});
        let r = self.post_json("/v1/payments/quotes", token, &body).await;
        assert_eq!(r.status, 201, "{}", r.text);
        r.json()["id"].as_str().expect("id").to_owned()
    }

    pub async fn get_quote(&self, token: &str, id: &str) -> Value {
        let r = self.get(&format!("/v1/payments/quotes/{id}"), token).await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()
    }

    /// Creates a beneficiary; returns its id.
    pub async fn beneficiary(&self, token: &str, currency: &str) -> String {
        let r = self
            .post_json(
                "/v1/payments/beneficiaries",
                token,
                &beneficiary_body(currency),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        r.json()["beneficiaryId"].as_str().expect("id").to_owned()
    }

    /// A deal body paying `amount` to one beneficiary.
    pub fn deal_body(quote_id: &str, beneficiary_id: &str, amount: &str) -> Value {
        json!({
            "quoteId": quote_id,
            "fundingSource": "Own account",
            "channel": "ExampleSecure",
            "beneficiaries": [{
                "beneficiaryId": beneficiary_id,
                "amount": num(amount),
                "payReason": "Invoice 42",
                "payReference": "REF-42"
            }]
        })
    }
}

pub fn query_param(url: &str, name: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    parsed
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// One notification received by the test receiver.
#[derive(Debug, Clone)]
pub struct Received {
    pub nonce: Option<String>,
    pub content_type: Option<String>,
    pub body: Value,
}

/// A tiny callback receiver that answers the statuses in `plan` in turn (then 200).
pub struct Receiver {
    pub url: String,
    pub got: Arc<Mutex<Vec<Received>>>,
}

pub async fn receiver(plan: Vec<u16>) -> Receiver {
    use axum::http::{HeaderMap as AxHeaders, StatusCode};
    let got: Arc<Mutex<Vec<Received>>> = Arc::default();
    let plan = Arc::new(Mutex::new(plan.into_iter()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let got2 = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: AxHeaders, body: String| {
            let got = got2.clone();
            let plan = plan.clone();
            async move {
                let text = |n: &str| {
                    headers
                        .get(n)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned)
                };
                got.lock().expect("lock").push(Received {
                    nonce: text("callback-nonce"),
                    content_type: text("content-type"),
                    body: serde_json::from_str(&body).unwrap_or(Value::Null),
                });
                let code = plan.lock().expect("lock").next().unwrap_or(200);
                StatusCode::from_u16(code).unwrap_or(StatusCode::OK)
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Receiver {
        url: format!("http://{addr}/hook"),
        got,
    }
}

impl Receiver {
    pub fn received(&self) -> Vec<Received> {
        self.got.lock().expect("lock").clone()
    }

    /// Waits (up to 10 s) until `n` notifications arrived.
    pub async fn wait_for(&self, n: usize) -> Vec<Received> {
        for _ in 0..200 {
            let r = self.received();
            if r.len() >= n {
                return r;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!(
            "only {} notifications arrived, wanted {n}",
            self.received().len()
        );
    }
}

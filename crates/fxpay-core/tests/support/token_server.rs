//! A scripted token endpoint on loopback: answers each request with the next canned
//! `(status, JSON body)` (500 once the script runs out) and keeps every request's
//! form-encoded body.
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use fxpay_core::{ClientConfig, Transport};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// One request's form fields, in order.
pub type Form = Vec<(String, String)>;

pub struct TokenServer {
    base_url: String,
    forms: Arc<Mutex<Vec<Form>>>,
}

impl TokenServer {
    pub async fn start(script: Vec<(u16, String)>) -> TokenServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let script = Arc::new(Mutex::new(script.into_iter().collect::<VecDeque<_>>()));
        let forms = Arc::new(Mutex::new(Vec::new()));
        let kept = forms.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let (script, kept) = (script.clone(), kept.clone());
                tokio::spawn(async move { handle(conn, &script, &kept).await });
            }
        });
        TokenServer {
            base_url: format!("http://{addr}"),
            forms,
        }
    }

    /// A transport to this server that never retries.
    pub fn transport(&self) -> Transport {
        let cfg = ClientConfig::new("id", "secret", &self.base_url)
            .and_then(|c| c.with_max_retries(0))
            .expect("config");
        Transport::new(cfg).expect("transport")
    }

    /// The form fields of every request so far, in order.
    pub fn forms(&self) -> Vec<Form> {
        self.forms.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// Field `name` of request `i`.
    pub fn field(&self, i: usize, name: &str) -> Option<String> {
        self.forms()
            .get(i)?
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

/// A token response body.
pub fn token_body(access: &str, refresh: Option<&str>, scope: Option<&str>) -> String {
    let mut v = serde_json::json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": 3600,
    });
    if let Some(r) = refresh {
        v["refresh_token"] = r.into();
    }
    if let Some(s) = scope {
        v["scope"] = s.into();
    }
    v.to_string()
}

async fn handle(
    mut conn: TcpStream,
    script: &Mutex<VecDeque<(u16, String)>>,
    forms: &Mutex<Vec<Form>>,
) {
    let Some(body) = super::http::read_request(&mut conn).await else {
        return;
    };
    let form = url::form_urlencoded::parse(&body).into_owned().collect();
    if let Ok(mut f) = forms.lock() {
        f.push(form);
    }
    let (status, body) = script
        .lock()
        .ok()
        .and_then(|mut s| s.pop_front())
        .unwrap_or((500, "{}".into()));
    let extra = if status == 429 {
        "Retry-After: 0\r\n"
    } else {
        ""
    };
    let answer = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(answer.as_bytes()).await;
    let _ = conn.shutdown().await;
}

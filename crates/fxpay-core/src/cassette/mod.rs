//! Cassettes: the HTTP exchanges of a client, recorded to a readable JSON file and answered
//! from it later with no network at all.
//!
//! - `Mode::Record` sends every request and keeps each exchange (method, path, query,
//!   request body, the request headers that matter, status, the answer's headers that
//!   matter, the answer's body); `save` writes them, pretty and in a fixed key order.
//! - `Mode::Replay` answers each request with the first exchange not played yet whose
//!   method, path, query and body are the same (so identical requests replay in the order
//!   they were recorded), and refuses any other with `Error::CassetteMismatch`.
//!
//! Secrets are scrubbed (`crate::cassette::scrub`) before anything is kept or compared.
//! Connection failures are recorded and replayed too. The transport hook is in
//! `crate::cassette::transport`.
pub(crate) mod scrub;
pub(crate) mod transport;

use crate::cassette::scrub::{Kind, Scrubber};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// The version written in every file.
const FORMAT: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Record,
    Replay,
}

/// One cassette file and what has been recorded or played of it.
#[derive(Debug)]
pub struct Cassette {
    path: PathBuf,
    mode: Mode,
    /// The process that opened it: a forked child never writes its copy when dropped.
    pid: u32,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    file: CassetteFile,
    played: Vec<bool>,
    scrub: Scrubber,
    /// Recorded exchanges not yet written.
    dirty: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CassetteFile {
    fxpay_cassette: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_id: Option<String>,
    #[serde(default)]
    interactions: Vec<Interaction>,
}

/// One request and what came back: an answer, or a connection failure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Interaction {
    pub request: RecordedRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<RecordedResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedError>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecordedRequest {
    pub method: String,
    /// Below `/v1`, without the query.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    #[serde(flatten)]
    pub body: RecordedBody,
}

/// A body: JSON kept as JSON (numbers exactly as written), anything else as text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecordedBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RecordedResponse {
    pub status: u16,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    #[serde(flatten)]
    pub body: RecordedBody,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RecordedError {
    pub message: String,
    #[serde(default)]
    pub timeout: bool,
}

impl RecordedBody {
    /// `bytes` as JSON when `json` says so and it parses, else as text; nothing for no bytes.
    pub(crate) fn new(bytes: &[u8], json: bool, scrub: &mut Scrubber) -> Self {
        if bytes.is_empty() {
            return RecordedBody::default();
        }
        if json {
            if let Ok(mut v) = serde_json::from_slice::<Value>(bytes) {
                scrub.json(&mut v);
                return RecordedBody {
                    body: Some(v),
                    text: None,
                };
            }
        }
        let text = String::from_utf8_lossy(bytes);
        let text = if json {
            scrub.redact_known(&text)
        } else {
            scrub.form(&text)
        };
        RecordedBody {
            body: None,
            text: Some(text),
        }
    }

    /// The bytes to answer with.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        match (&self.body, &self.text) {
            (Some(v), _) => serde_json::to_vec(v).unwrap_or_default(),
            (None, Some(t)) => t.as_bytes().to_vec(),
            (None, None) => Vec::new(),
        }
    }
}

impl Mode {
    /// `"record"`, `"replay"`, or `"once"` (replay if `path` exists, else record).
    pub(crate) fn parse(mode: &str, path: &Path) -> Result<Mode> {
        match mode {
            "record" => Ok(Mode::Record),
            "replay" => Ok(Mode::Replay),
            "once" if path.exists() => Ok(Mode::Replay),
            "once" => Ok(Mode::Record),
            other => Err(Error::invalid(format!(
                "mode must be \"once\", \"record\" or \"replay\", got {other:?}"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Record => "record",
            Mode::Replay => "replay",
        }
    }
}

impl Cassette {
    /// Opens `path` in `mode`; replaying reads the file now.
    pub fn open(path: impl Into<PathBuf>, mode: &str) -> Result<Cassette> {
        let path = path.into();
        let mode = Mode::parse(mode, &path)?;
        let file = match mode {
            Mode::Record => CassetteFile {
                fxpay_cassette: FORMAT,
                ..CassetteFile::default()
            },
            Mode::Replay => read(&path)?,
        };
        Ok(Cassette::with(path, mode, file))
    }

    fn with(path: PathBuf, mode: Mode, file: CassetteFile) -> Cassette {
        let played = vec![false; file.interactions.len()];
        Cassette {
            path,
            mode,
            pid: std::process::id(),
            state: Mutex::new(State {
                file,
                played,
                scrub: Scrubber::default(),
                dirty: false,
            }),
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The base URL and client id of the client that recorded the file (or is recording it).
    pub fn recorded_by(&self) -> (Option<String>, Option<String>) {
        let st = self.lock();
        (st.file.base_url.clone(), st.file.client_id.clone())
    }

    /// How many exchanges the cassette holds, and how many of them were played.
    pub fn counts(&self) -> (usize, usize) {
        let st = self.lock();
        (
            st.file.interactions.len(),
            st.played.iter().filter(|p| **p).count(),
        )
    }

    /// Called when a client starts using the cassette: its secret takes the first
    /// client-secret placeholder, and a recording notes its base URL and client id.
    pub(crate) fn attach(&self, base_url: &str, client_id: &str, client_secret: &str) {
        let mut st = self.lock();
        st.scrub.placeholder(Kind::ClientSecret, client_secret);
        if self.mode == Mode::Record {
            // A client that records writes its file on close, even with no exchange.
            st.dirty = true;
        }
        if self.mode == Mode::Record && st.file.base_url.is_none() {
            st.file.base_url = Some(base_url.to_owned());
            st.file.client_id = Some(client_id.to_owned());
        }
    }

    /// Scrubs a request with this cassette's placeholders.
    pub(crate) fn scrub_request(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        json: bool,
    ) -> RecordedRequest {
        let mut st = self.lock();
        let scrub = &mut st.scrub;
        let (path, query) = match path_and_query.split_once('?') {
            Some((p, q)) => (p.to_string(), Some(scrub.form(q))),
            None => (path_and_query.to_string(), None),
        };
        let headers = headers
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), scrub.header(k, v)))
            .collect();
        RecordedRequest {
            method: method.to_string(),
            path,
            query,
            headers,
            body: RecordedBody::new(body, json, scrub),
        }
    }

    /// Keeps one exchange (the answer is scrubbed here).
    pub(crate) fn record(&self, request: RecordedRequest, outcome: Outcome<'_>) {
        let mut st = self.lock();
        let (response, error) = match outcome {
            Outcome::Answer {
                status,
                headers,
                body,
            } => {
                let json = headers
                    .iter()
                    .any(|(k, v)| k == "content-type" && v.contains("json"));
                let body = RecordedBody::new(body, json, &mut st.scrub);
                let headers = headers
                    .into_iter()
                    .map(|(k, v)| {
                        let v = st.scrub.header(&k, &v);
                        (k, v)
                    })
                    .collect();
                (
                    Some(RecordedResponse {
                        status,
                        headers,
                        body,
                    }),
                    None,
                )
            }
            Outcome::Failed { message, timeout } => (
                None,
                Some(RecordedError {
                    message: st.scrub.redact_known(message),
                    timeout,
                }),
            ),
        };
        st.file.interactions.push(Interaction {
            request,
            response,
            error,
        });
        st.played.push(true);
        st.dirty = true;
    }

    /// The first exchange not played yet that matches `request`, marked as played.
    pub(crate) fn play(&self, request: &RecordedRequest) -> Result<Interaction> {
        let mut st = self.lock();
        let found = st.file.interactions.iter().enumerate().position(|(i, x)| {
            !st.played[i]
                && x.request.method == request.method
                && x.request.path == request.path
                && x.request.query == request.query
                && x.request.body == request.body
        });
        match found {
            Some(i) => {
                st.played[i] = true;
                Ok(st.file.interactions[i].clone())
            }
            None => {
                let same_route = st.file.interactions.iter().enumerate().any(|(i, x)| {
                    !st.played[i]
                        && x.request.method == request.method
                        && x.request.path == request.path
                });
                let hint = if same_route {
                    " (one with the same method and path is recorded, but its query or body differs)"
                } else {
                    ""
                };
                Err(Error::CassetteMismatch(format!(
                    "the cassette {} holds no unplayed request matching {} {}{hint}",
                    self.path.display(),
                    request.method,
                    request.path
                )))
            }
        }
    }

    /// Writes the file if this cassette records (creating its folder), atomically.
    pub fn save(&self) -> Result<()> {
        if self.mode != Mode::Record {
            return Ok(());
        }
        let mut st = self.lock();
        if !st.dirty {
            return Ok(());
        }
        let mut text = serde_json::to_vec_pretty(&st.file)
            .map_err(|e| Error::Internal(format!("cannot encode the cassette: {e}")))?;
        text.push(b'\n');
        write_atomically(&self.path, &text)?;
        st.dirty = false;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind: keep using it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Cassette {
    /// A recording nobody saved is written when the cassette goes away (errors are lost here;
    /// closing the client reports them), except in a forked child, which would overwrite the
    /// parent's file with its own copy.
    fn drop(&mut self) {
        if self.pid == std::process::id() {
            let _ = self.save();
        }
    }
}

/// What one request came back with, before scrubbing.
pub(crate) enum Outcome<'a> {
    Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: &'a [u8],
    },
    Failed {
        message: &'a str,
        timeout: bool,
    },
}

fn read(path: &Path) -> Result<CassetteFile> {
    let text = std::fs::read(path).map_err(|e| {
        Error::config(format!(
            "cannot read the cassette {} (mode \"replay\" needs a recorded file): {e}",
            path.display()
        ))
    })?;
    let file: CassetteFile = serde_json::from_slice(&text).map_err(|e| {
        Error::config(format!(
            "the cassette {} is not a cassette file: {e}",
            path.display()
        ))
    })?;
    if file.fxpay_cassette != FORMAT {
        return Err(Error::config(format!(
            "the cassette {} has format {}, this fxpay reads format {FORMAT}",
            path.display(),
            file.fxpay_cassette
        )));
    }
    Ok(file)
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let fail = |e: std::io::Error| {
        Error::config(format!("cannot write the cassette {}: {e}", path.display()))
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClientConfig;

    fn temp_path(name: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        std::env::temp_dir()
            .join(format!("fxpay-cassette-{}-{nanos}", std::process::id()))
            .join(name)
    }

    fn answer(status: u16, body: &[u8]) -> Outcome<'_> {
        Outcome::Answer {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body,
        }
    }

    fn get(c: &Cassette, path: &str) -> RecordedRequest {
        c.scrub_request(
            "GET",
            path,
            &[("authorization", "Bearer tok-123456789")],
            b"",
            false,
        )
    }

    #[test]
    fn records_saves_and_replays_in_order() {
        let path = temp_path("c.json");
        let config =
            ClientConfig::new("cid", "the-client-secret", "http://127.0.0.1:9").expect("config");
        let rec = Cassette::open(&path, "once").expect("open");
        assert_eq!(rec.mode(), Mode::Record);
        rec.attach(&config.base_url, &config.client_id, &config.client_secret);
        let body = br#"{"amount":1000.10,"access_token":"tok-123456789"}"#;
        for (i, status) in [(1, 500), (2, 200)] {
            let req = get(&rec, "/payments/quotes/q1?page=1");
            rec.record(req, answer(status, body));
            assert_eq!(rec.counts(), (i, i));
        }
        let post = rec.scrub_request(
            "POST",
            "/payments/quotes",
            &[],
            br#"{"buyAmount":5.50}"#,
            true,
        );
        rec.record(post, answer(201, br#"{"id":"q2"}"#));
        rec.save().expect("save");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(!text.contains("tok-123456789"), "{text}");
        assert!(!text.contains("the-client-secret"), "{text}");
        assert!(text.contains("1000.10"), "{text}");

        let rep = Cassette::open(&path, "once").expect("open");
        assert_eq!(rep.mode(), Mode::Replay);
        assert_eq!(
            rep.recorded_by(),
            (Some("http://127.0.0.1:9".into()), Some("cid".into()))
        );
        let statuses: Vec<u16> = (0..2)
            .filter_map(|_| rep.play(&get(&rep, "/payments/quotes/q1?page=1")).ok())
            .filter_map(|x| x.response.map(|r| r.status))
            .collect();
        assert_eq!(statuses, vec![500, 200]);
        let third = rep.play(&get(&rep, "/payments/quotes/q1?page=1"));
        assert!(
            matches!(&third, Err(Error::CassetteMismatch(m)) if m.contains("GET /payments/quotes/q1")),
            "{third:?}"
        );
        let other = rep.scrub_request(
            "POST",
            "/payments/quotes",
            &[],
            br#"{"buyAmount":5.5}"#,
            true,
        );
        assert!(
            matches!(rep.play(&other), Err(Error::CassetteMismatch(m)) if m.contains("body differs"))
        );
        let same = rep.scrub_request(
            "POST",
            "/payments/quotes",
            &[],
            br#"{"buyAmount":5.50}"#,
            true,
        );
        let x = rep.play(&same).expect("recorded");
        assert_eq!(
            x.response.map(|r| r.body.bytes()),
            Some(br#"{"id":"q2"}"#.to_vec())
        );
        if let Some(dir) = path.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    #[test]
    fn bad_modes_and_missing_files() {
        let path = temp_path("missing.json");
        assert!(matches!(
            Cassette::open(&path, "rewind"),
            Err(Error::InvalidRequest(_))
        ));
        assert!(matches!(
            Cassette::open(&path, "replay"),
            Err(Error::Configuration(_))
        ));
    }
}

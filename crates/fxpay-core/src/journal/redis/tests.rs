//! The Redis store against a real `redis-server` (on a Unix socket in a temporary folder).
use super::*;
use crate::journal::entry::{Entry, State};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Instant;

struct Server {
    child: Child,
    dir: PathBuf,
}

impl Server {
    fn start(appendonly: &str) -> Server {
        let dir = std::env::temp_dir().join(format!(
            "fxpay-redis-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).expect("redis");
        let child = Command::new("redis-server")
            .args(["--port", "0", "--save", "", "--appendonly", appendonly])
            .args(["--appendfsync", "always", "--unixsocket"])
            .arg(dir.join("sock"))
            .arg("--dir")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server (apt install redis-server)");
        // Ready when it answers, not when its socket file appears: redis-server binds the
        // file before it listens on it, and a connection made in between is refused.
        let server = Server { child, dir };
        let until = Instant::now() + Duration::from_secs(20);
        while !server.answers() {
            assert!(Instant::now() < until, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn answers(&self) -> bool {
        let Ok(mut c) = Client::open(self.url()).and_then(|c| c.get_connection()) else {
            return false;
        };
        redis::cmd("PING").query::<String>(&mut c).is_ok()
    }

    fn url(&self) -> String {
        format!("unix://{}", self.dir.join("sock").display())
    }

    /// A plain connection, to look and to meddle.
    fn raw(&self) -> Connection {
        Client::open(self.url())
            .expect("redis")
            .get_connection()
            .expect("redis")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn open(s: &Server, prefix: &str, persist: bool) -> (Arc<RedisStore>, Arc<Mutex<Vec<String>>>) {
    let said = Arc::new(Mutex::new(Vec::new()));
    let (a, b) = (said.clone(), said.clone());
    let store = RedisStore::open(
        &s.url(),
        prefix,
        persist,
        Duration::from_secs(5),
        Duration::from_millis(50),
        Box::new(|| {}),
        Box::new(move |k, _| lock(&a).push(format!("not recorded {k}"))),
        Box::new(move |m| lock(&b).push(m.to_owned())),
    )
    .expect("redis");
    (store, said)
}

fn claim(key: &str) -> Entry {
    Entry {
        key: key.into(),
        operation: "create_quote".into(),
        fingerprint: "f".into(),
        state: State::Pending,
        result: None,
        deal_id: None,
        holder: "h/1/t".into(),
        lease_until: u64::MAX / 2,
        created_at: 1,
        updated_at: 1,
        error: None,
        response: None,
        nonce: None,
        request: None,
    }
}

fn done(c: &Entry) -> Entry {
    let mut d = c.clone();
    d.state = State::Done;
    d.result = Some(format!("id-{}", c.key));
    d
}

#[test]
fn a_journal_is_refused_until_created_then_claims_once() {
    let s = Server::start("yes");
    let (store, _) = open(&s, "t:", true);
    let e = store.claim(&claim("a")).expect_err("refused").to_string();
    assert!(e.contains("found no journal under prefix 't:'"), "{e}");
    assert!(store.create().expect("redis"));
    assert!(!store.create().expect("redis"));
    assert!(store.claim(&claim("a")).expect("redis").is_none());
    let again = store.claim(&claim("a")).expect("redis").expect("stored");
    assert_eq!(again.state, State::Pending);
    let mut raw = s.raw();
    let open: Vec<String> = redis::cmd("SMEMBERS")
        .arg("t:open")
        .query(&mut raw)
        .expect("redis");
    assert_eq!(open, vec!["a".to_owned()]);
}

#[test]
fn a_result_waits_is_read_here_and_lands_with_the_next_claim() {
    let s = Server::start("yes");
    let (store, _) = open(&s, "t:", true);
    store.create().expect("redis");
    let c = claim("a");
    assert!(store.claim(&c).expect("redis").is_none());
    assert!(store.swap_at_once(&c, &done(&c)));
    assert_eq!(
        store.get("a").expect("redis").expect("redis").state,
        State::Done
    );
    let mut raw = s.raw();
    // The claim of another key carries it.
    assert!(store.claim(&claim("b")).expect("redis").is_none());
    let text: String = redis::cmd("GET")
        .arg("t:k:a")
        .query(&mut raw)
        .expect("redis");
    assert!(text.contains("\"done\""), "{text}");
    let index: String = redis::cmd("GET")
        .arg("t:r:id-a")
        .query(&mut raw)
        .expect("redis");
    assert_eq!(index, "a");
    assert_eq!(
        store.diagnostic("results_waiting", None).expect("redis"),
        "0"
    );
    let open: Vec<String> = redis::cmd("SMEMBERS")
        .arg("t:open")
        .query(&mut raw)
        .expect("redis");
    assert_eq!(open, vec!["b".to_owned()]);
}

#[test]
fn a_flushed_redis_refuses_the_next_claim_and_the_results_wait() {
    let s = Server::start("yes");
    let (store, _) = open(&s, "t:", true);
    store.create().expect("redis");
    let c = claim("a");
    assert!(store.claim(&c).expect("redis").is_none());
    let mut raw = s.raw();
    redis::cmd("FLUSHALL").query::<()>(&mut raw).expect("redis");
    let e = store.claim(&claim("b")).expect_err("refused").to_string();
    assert!(e.contains("is gone from this Redis"), "{e}");
    // Made again by someone: another journal.
    let (other, _) = open(&s, "t:", true);
    other.create().expect("redis");
    let e = store.claim(&claim("b")).expect_err("refused").to_string();
    assert!(e.contains("now holds another journal"), "{e}");
    assert!(store.candidates().is_err());
}

#[test]
fn a_redis_that_forgets_is_refused_unless_vouched_for() {
    let s = Server::start("no");
    let (store, _) = open(&s, "t:", true);
    let e = store.create().expect_err("refused").to_string();
    assert!(e.contains("its appendonly setting is 'no'"), "{e}");
    let (vouched, said) = open(&s, "t:", false);
    assert!(vouched.create().expect("redis"));
    assert!(vouched.claim(&claim("a")).expect("redis").is_none());
    assert!(lock(&said).is_empty());
    assert_eq!(vouched.diagnostic("connected", None).expect("redis"), "1");
}

#[test]
fn a_result_that_lands_while_get_reads_redis_reads_done() {
    // As SQLite's: Redis read (the claim), the result landed, and only then the result
    // looked up here: in neither, the key would read pending.
    let s = Server::start("yes");
    let (store, _) = open(&s, "t:", true);
    store.create().expect("redis");
    let c = claim("a");
    assert!(store.claim(&c).expect("redis").is_none());
    assert!(store.swap_at_once(&c, &done(&c)));
    let got = durable::get_then(&*store, "a", || store.flush().expect("redis")).expect("redis");
    let mut raw = s.raw();
    let text: String = redis::cmd("GET")
        .arg("t:k:a")
        .query(&mut raw)
        .expect("redis");
    assert!(text.contains("\"done\""), "landed: {text}");
    assert_eq!(got.map(|e| e.state), Some(State::Done));
}

//! The SQLite store on real files (a temporary folder per test).
use super::*;
use crate::journal::entry::State;
use std::sync::atomic::AtomicUsize;

struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A new journal file, made as `fxpay.SqliteJournal` makes one (here in place, not linked).
fn journal_file() -> (Dir, String) {
    let dir = std::env::temp_dir().join(format!(
        "fxpay-sqlite-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("j.db").to_string_lossy().into_owned();
    create_sqlite_journal(&path).expect("create");
    (Dir(dir), path)
}

fn ident(path: &str) -> (u64, u64) {
    file::identity(&std::fs::metadata(path).expect("stat"))
}

#[derive(Default)]
struct Told {
    waits: AtomicUsize,
    lost: Mutex<Vec<String>>,
}

/// A store of `path` (`timeout` and `delay` as `SqliteStore::open` takes them) and what its
/// hooks were told.
fn open(path: &str, timeout: Duration, delay: Duration) -> (Arc<SqliteStore>, Arc<Told>) {
    let told = Arc::new(Told::default());
    let (a, b) = (told.clone(), told.clone());
    let store = SqliteStore::open(
        path,
        ident(path),
        timeout,
        delay,
        Box::new(move || {
            a.waits.fetch_add(1, Ordering::SeqCst);
        }),
        Box::new(move |key, _| lock(&b.lost).push(key.to_owned())),
    )
    .expect("open");
    (store, told)
}

fn entry(key: &str, state: State, result: Option<&str>) -> Entry {
    Entry {
        key: key.into(),
        operation: "create_quote".into(),
        fingerprint: "f".into(),
        state,
        result: result.map(Into::into),
        deal_id: None,
        holder: "h/1/t".into(),
        lease_until: 2,
        created_at: 1,
        updated_at: 1,
        error: None,
        response: None,
        nonce: None,
        request: None,
    }
}

/// What the file holds for `key`, read by a connection of its own.
fn on_disk(path: &str, key: &str) -> Option<String> {
    let c = Connection::open(path).expect("open");
    c.query_row(
        "SELECT state FROM fxpay_journal WHERE key = ?1",
        [key],
        |r| r.get(0),
    )
    .optional()
    .expect("read")
}

const LONG: Duration = Duration::from_secs(3600);
const TIMEOUT: Duration = Duration::from_secs(2);

#[test]
fn a_claim_is_on_disk_and_a_second_claim_gets_the_stored_entry() {
    let (_d, path) = journal_file();
    let (s, _) = open(&path, TIMEOUT, LONG);
    let claim = entry("k", State::Pending, None);
    assert_eq!(s.claim(&claim).expect("claim"), None);
    assert_eq!(on_disk(&path, "k").as_deref(), Some("pending"));
    assert_eq!(s.claim(&claim).expect("again"), Some(claim.clone()));
    assert_eq!(s.get("k").expect("get"), Some(claim));
    assert_eq!(s.get("other").expect("get"), None);
}

#[test]
fn a_result_waits_for_the_next_commit_and_is_read_here_meanwhile() {
    let (_d, path) = journal_file();
    let (s, told) = open(&path, TIMEOUT, LONG);
    let claim = entry("k", State::Pending, None);
    s.claim(&claim).expect("claim");
    let done = entry("k", State::Done, Some("q1"));
    assert!(s.swap(&claim, &done).expect("swap"));
    assert_eq!(
        told.waits.load(Ordering::SeqCst),
        1,
        "the owner is told once"
    );
    assert_eq!(
        on_disk(&path, "k").as_deref(),
        Some("pending"),
        "not written yet"
    );
    assert_eq!(s.get("k").expect("get"), Some(done.clone()));
    assert_eq!(s.find("q1").expect("find"), Some(done.clone()));
    assert!(
        s.candidates().expect("list").is_empty(),
        "done here, not a candidate"
    );
    // The next claim's commit carries it.
    s.claim(&entry("k2", State::Pending, None))
        .expect("claim 2");
    assert_eq!(on_disk(&path, "k").as_deref(), Some("done"));
    assert_eq!(s.diagnostic("results_waiting", None).expect("count"), "0");
    assert!(lock(&told.lost).is_empty());
}

#[test]
fn flush_writes_what_waits() {
    let (_d, path) = journal_file();
    let (s, _) = open(&path, TIMEOUT, LONG);
    let claim = entry("k", State::Pending, None);
    s.claim(&claim).expect("claim");
    s.swap(&claim, &entry("k", State::Done, Some("q")))
        .expect("swap");
    s.flush().expect("flush");
    assert_eq!(on_disk(&path, "k").as_deref(), Some("done"));
}

#[test]
fn the_flusher_writes_a_result_after_its_delay() {
    let (_d, path) = journal_file();
    let (s, _) = open(&path, TIMEOUT, Duration::from_millis(20));
    let claim = entry("k", State::Pending, None);
    s.claim(&claim).expect("claim");
    s.swap(&claim, &entry("k", State::Done, Some("q")))
        .expect("swap");
    let until = Instant::now() + Duration::from_secs(20);
    while on_disk(&path, "k").as_deref() != Some("done") {
        assert!(Instant::now() < until, "the flusher never wrote it");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_journal_is_flushed_at_its_own_delay_never_at_anothers() {
    let (_d1, slow_path) = journal_file();
    let (_d2, fast_path) = journal_file();
    let (slow, _) = open(&slow_path, TIMEOUT, LONG);
    let (fast, _) = open(&fast_path, TIMEOUT, Duration::from_millis(20));
    for s in [&slow, &fast] {
        let claim = entry("k", State::Pending, None);
        s.claim(&claim).expect("claim");
        s.swap(&claim, &entry("k", State::Done, Some("q")))
            .expect("swap");
    }
    let until = Instant::now() + Duration::from_secs(20);
    while on_disk(&fast_path, "k").as_deref() != Some("done") {
        assert!(Instant::now() < until, "the flusher never wrote it");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        on_disk(&slow_path, "k").as_deref(),
        Some("pending"),
        "the other journal's turn wrote this one's result"
    );
    assert_eq!(slow.diagnostic("results_waiting", None).expect("n"), "1");
}

#[test]
fn a_waiting_result_over_an_unknown_claim_is_written_and_over_another_claim_is_reported() {
    let (_d, path) = journal_file();
    let (s, told) = open(&path, TIMEOUT, LONG);
    for (key, holder, expect) in [("lapsed", "h/1/t", "done"), ("taken", "x/2/y", "pending")] {
        let claim = entry(key, State::Pending, None);
        s.claim(&claim).expect("claim");
        s.swap(&claim, &entry(key, State::Done, Some("q")))
            .expect("swap");
        // Another process rewrites the claim: lapsed to unknown (still this claim), or
        // taken by another holder.
        let mut other = claim.clone();
        other.holder = holder.into();
        other.state = if holder == "h/1/t" {
            State::Unknown
        } else {
            State::Pending
        };
        let c = Connection::open(&path).expect("open");
        c.execute(
            "UPDATE fxpay_journal SET state = ?1, data = ?2 WHERE key = ?3",
            rusqlite::params![other.state.as_str(), other.to_json(), key],
        )
        .expect("rewrite");
        drop(c);
        s.flush().expect("flush");
        assert_eq!(on_disk(&path, key).as_deref(), Some(expect), "{key}");
    }
    assert_eq!(*lock(&told.lost), vec!["taken".to_owned()]);
}

#[test]
fn a_file_removed_or_replaced_under_the_journal_refuses_every_claim() {
    let (d, path) = journal_file();
    let (s, _) = open(&path, TIMEOUT, LONG);
    let moved = d.0.join("moved.db");
    std::fs::rename(&path, &moved).expect("move");
    let err = s
        .claim(&entry("k", State::Pending, None))
        .expect_err("gone");
    assert!(err.to_string().contains("was removed"), "{err}");
    std::fs::copy(&moved, &path).expect("copy back");
    let err = s
        .claim(&entry("k", State::Pending, None))
        .expect_err("replaced");
    assert!(err.to_string().contains("was replaced"), "{err}");
}

#[test]
fn the_fork_gate_keeps_calls_out_until_the_parent_lets_go() {
    let (_d, path) = journal_file();
    let (s, _) = open(&path, TIMEOUT, LONG);
    s.before_fork();
    let s2 = s.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let got = s2.get("k");
        tx.send(()).expect("send");
        got
    });
    let went_in = rx.recv_timeout(Duration::from_millis(200)).is_ok();
    s.after_fork_in_parent(); // first: a failed assertion must not leave the gate held
    assert!(
        !went_in,
        "a call went into SQLite while the forking thread held the gate"
    );
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the call went on once the gate was released");
    assert_eq!(t.join().expect("thread").expect("get"), None);
}

#[test]
fn stores_of_one_path_share_their_waiting_results() {
    let (_d, path) = journal_file();
    let (a, _) = open(&path, TIMEOUT, LONG);
    let (b, _) = open(&path, TIMEOUT, LONG);
    let claim = entry("k", State::Pending, None);
    a.claim(&claim).expect("claim");
    a.swap(&claim, &entry("k", State::Done, Some("q")))
        .expect("swap");
    assert_eq!(b.get("k").expect("get").map(|e| e.state), Some(State::Done));
}

#[test]
fn an_unknown_diagnostic_is_refused() {
    let (_d, path) = journal_file();
    let (s, _) = open(&path, TIMEOUT, LONG);
    assert!(s.diagnostic("cache_size", None).is_err());
    assert!(s.diagnostic("synchronous", Some(0)).is_err());
    assert_eq!(s.diagnostic("synchronous", None).expect("read"), "2");
    assert_eq!(s.diagnostic("journal_mode", None).expect("read"), "wal");
}

#[test]
fn the_journals_of_one_fork_share_the_gate_and_none_waits_for_another() {
    // Every journal of the process has a fork hook; with a long timeout, a second journal
    // that waited for the gate the first one holds would stall the fork for that long.
    let (_d1, p1) = journal_file();
    let (_d2, p2) = journal_file();
    let slow = |path: &str| open(path, Duration::from_secs(60), LONG).0;
    let (s1, s2) = (slow(&p1), slow(&p2));
    let started = Instant::now();
    s1.before_fork();
    s2.before_fork();
    let waited = started.elapsed();
    s2.after_fork_in_parent();
    s1.after_fork_in_parent();
    assert!(
        waited < Duration::from_secs(5),
        "the fork hooks took {waited:?}"
    );
    // Given back: a call goes in.
    assert_eq!(s1.get("k").expect("get"), None);
    assert_eq!(s2.get("k").expect("get"), None);
}

#[test]
fn a_new_journal_file_is_complete_and_closed() {
    let (d, path) = journal_file();
    let c = Connection::open(&path).expect("open");
    let one = |sql: &str| -> String {
        c.query_row(sql, [], |r| {
            Ok(match r.get_ref(0)? {
                rusqlite::types::ValueRef::Integer(i) => i.to_string(),
                v => String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned(),
            })
        })
        .expect(sql)
    };
    assert_eq!(
        one("PRAGMA application_id"),
        file::APPLICATION_ID.to_string()
    );
    assert_eq!(one("PRAGMA journal_mode"), "wal");
    assert_eq!(one("PRAGMA page_size"), file::PAGE_SIZE.to_string());
    assert_eq!(file::PAGE_SIZE, 2048);
    let names: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master ORDER BY name")
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<rusqlite::Result<_>>()
        .expect("names");
    assert_eq!(
        names,
        [
            "fxpay_journal",
            "fxpay_journal_open",
            "fxpay_journal_result",
            "sqlite_autoindex_fxpay_journal_1"
        ]
    );
    drop(c);
    // Closed by its last connection: nothing waits in a WAL file beside it.
    let mut left: Vec<String> = std::fs::read_dir(&d.0)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["j.db"]);
}

#[test]
fn a_journal_that_cannot_be_made_is_said_as_pythons_sqlite3_says_it() {
    let (d, _) = journal_file();
    let path = d.0.join("no-such-folder").join("j.db");
    let err = create_sqlite_journal(&path.to_string_lossy())
        .expect_err("a missing folder")
        .to_string();
    assert!(
        err.contains("OperationalError: unable to open database file"),
        "{err}"
    );
    assert!(!err.contains("no-such-folder"), "{err}");
}

#[test]
fn a_result_that_lands_while_get_reads_the_file_reads_done() {
    // The fork stress found it in RedisJournal.get(): the file read (the claim), the result
    // landed, and only then the result looked up here: in neither, the key read pending.
    let (_d, path) = journal_file();
    let (s, _) = open(&path, TIMEOUT, LONG);
    let claim = entry("k", State::Pending, None);
    s.claim(&claim).expect("claim");
    let done = entry("k", State::Done, Some("q1"));
    assert!(s.swap(&claim, &done).expect("swap"));
    assert_eq!(on_disk(&path, "k").as_deref(), Some("pending"));
    let got = durable::get_then(&*s, "k", || s.flush().expect("flush")).expect("get");
    assert_eq!(on_disk(&path, "k").as_deref(), Some("done"), "landed");
    assert_eq!(got, Some(done));
}

/// The plan SQLite makes for `sql` (its parameters `"x"`) on the file at `path`, as one line.
fn plan(path: &str, sql: &str) -> String {
    let c = Connection::open(path).expect("open");
    let mut q = c
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .expect("prepare");
    let rows: Vec<String> = q
        .query_map(
            rusqlite::params_from_iter(std::iter::repeat_n("x", sql.matches('?').count())),
            |r| r.get(3),
        )
        .expect("plan")
        .collect::<rusqlite::Result<_>>()
        .expect("rows");
    rows.join(" / ")
}

#[test]
fn reads_by_result_and_of_open_keys_use_the_partial_indexes() {
    let (_d, path) = journal_file();
    let by_result = plan(&path, FIND);
    assert!(by_result.contains("fxpay_journal_result"), "{by_result}");
    let open_keys = plan(&path, CANDIDATES);
    assert!(open_keys.contains("fxpay_journal_open"), "{open_keys}");
}

#[test]
fn a_journal_with_the_earlier_full_indexes_keeps_them_and_gets_no_second() {
    let (_d, path) = journal_file();
    let c = Connection::open(&path).expect("open");
    c.execute_batch(
        "DROP INDEX fxpay_journal_open; DROP INDEX fxpay_journal_result;
         CREATE INDEX fxpay_journal_result ON fxpay_journal (result);
         CREATE INDEX fxpay_journal_state ON fxpay_journal (state);",
    )
    .expect("earlier schema");
    drop(c);
    let indexes = |path: &str| -> Vec<String> {
        let c = Connection::open(path).expect("open");
        let mut q = c
            .prepare("SELECT sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name")
            .expect("prepare");
        q.query_map([], |r| r.get(0))
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows")
    };
    let before = indexes(&path);
    let (s, _) = open(&path, TIMEOUT, LONG);
    let claim = entry("k", State::Pending, None);
    s.claim(&claim).expect("claim");
    assert_eq!(indexes(&path), before);
    // A file whose indexes were dropped gets the new ones.
    let (_d2, bare) = journal_file();
    let c = Connection::open(&bare).expect("open");
    c.execute_batch("DROP INDEX fxpay_journal_open; DROP INDEX fxpay_journal_result;")
        .expect("drop");
    drop(c);
    let (s2, _) = open(&bare, TIMEOUT, LONG);
    s2.claim(&claim).expect("claim");
    assert_eq!(indexes(&bare).len(), 2, "{:?}", indexes(&bare));
    assert!(plan(&bare, CANDIDATES).contains("fxpay_journal_open"));
}

/// Runs `f` on a multi-thread runtime of two workers (as fxpay's own).
fn on_runtime<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime")
        .block_on(f)
}

/// A lone call's claim is left to `claim` (its thread leads its own commit). With a call in
/// flight, claims queued at once (no thread each) are all on disk when answered, a taken
/// key answers what is stored, as `claim` does, and a removed file falls back to `claim`'s
/// refusal.
#[test]
fn queued_claims_land_on_disk_and_answer_as_claim_does() {
    let (d, path) = journal_file();
    let (s, _) = open(&path, TIMEOUT, LONG);
    let lone = on_runtime(async {
        s.claim_queued(&entry("lone", State::Pending, None), true)
            .is_none()
    });
    assert!(lone, "no other call about: the claim leads its own commit");
    assert_eq!(
        s.claim(&entry("flying", State::Pending, None))
            .expect("claim"),
        None
    );
    let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    let answers = on_runtime(async {
        let claims: Vec<_> = keys
            .iter()
            .map(|k| {
                let e = entry(k, State::Pending, None);
                s.claim_queued(&e, true).expect("SQLite queues its claims")
            })
            .collect();
        futures_util::future::join_all(claims).await
    });
    for (k, a) in keys.iter().zip(answers) {
        assert_eq!(a.expect("claim"), None, "{k} claimed");
        assert_eq!(on_disk(&path, k).as_deref(), Some("pending"), "{k} on disk");
    }
    let taken = entry("k0", State::Pending, None);
    let again = on_runtime(async { s.claim_queued(&taken, true).expect("queued").await });
    assert_eq!(again.expect("again"), Some(taken), "the stored entry");
    std::fs::rename(&path, d.0.join("moved.db")).expect("move");
    let gone = on_runtime(async {
        s.claim_queued(&entry("x", State::Pending, None), true)
            .is_none()
    });
    assert!(
        gone,
        "a file that fails its check is left to `claim`, which refuses it"
    );
}

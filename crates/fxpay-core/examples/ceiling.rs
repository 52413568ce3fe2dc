//! The pure-Rust ceiling for `bench/run.py`: the same work as the Python clients with no
//! Python at all. One client-credentials token, then `n` GETs of one quote, each body parsed
//! by serde_json into a struct of `rust_decimal::Decimal`s.
//!
//! Usage: cargo run --release --example ceiling -- <base_url> <client_id> <secret> <quote_id> <n>
//!        [--ca <pem>] [--http1] [--server-pid <pid>] [--cold] [--self-stats] [--only <name>]
//!
//! - `--ca`: trust this CA (PEM) besides the system's, for an https sandbox;
//! - `--http1`: offer only HTTP/1.1 (by default reqwest offers h2 and http/1.1 by ALPN over
//!   https, as fxpay does);
//! - `--server-pid`: also print the server's CPU time (clock ticks of `/proc/<pid>/stat`,
//!   user + system) spent during each timed measurement, as `<name>_server_ticks=`;
//! - `--self-stats`: also print this process's counters during each timed measurement
//!   (`<name>_self=utime,stime,vcsw,ivcsw,syscr,syscw`: CPU ticks, context switches, syscalls),
//!   for `bench/profile.py`;
//! - `--only loop_mt|async64|loop_ct`: only that measurement (for `bench/profile.py`, which
//!   counts a whole process's system calls with perf);
//! - `--cold`: no loop: the time from the start of `main` to the first answered GET (a
//!   runtime, a client, the TLS handshake, the token, the GET), printed as `cold_s=`.
//!
//! The runtime has as many workers as fxpay's own (`fxpay_core::worker_threads`).
//! Prints one `name=value` line per measurement (requests per second):
//! - `loop_mt_rps=`: one request at a time from `block_on` on that multi-threaded runtime
//!   (what `#[tokio::main]` does), its connection driven by a worker thread;
//! - `loop_ct_rps=`: one request at a time on a `current_thread` runtime, everything on one
//!   thread (`#[tokio::main(flavor = "current_thread")]`);
//! - `loop_rps=`: the faster of the two, the ceiling for a blocking loop;
//! - `async64_rps=`: 64 concurrent tasks sharing the `n` requests, on the multi-threaded
//!   runtime.
use rust_decimal::Decimal;
use serde::Deserialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The command line: five positional values and the options above.
struct Args {
    base: String,
    id: String,
    secret: String,
    quote: String,
    n: usize,
    ca: Option<String>,
    http1: bool,
    server_pid: Option<u32>,
    cold: bool,
    self_stats: bool,
    /// Only this measurement (`loop_mt`, `async64` or `loop_ct`), for `bench/profile.py`.
    only: Option<String>,
}

impl Args {
    fn wants(&self, name: &str) -> bool {
        self.only.as_deref().is_none_or(|o| o == name)
    }
}

const USAGE: &str = "usage: ceiling <base_url> <client_id> <secret> <quote_id> <n> \
                     [--ca <pem>] [--http1] [--server-pid <pid>] [--cold] [--self-stats] [--only loop_mt|async64|loop_ct]";

fn parse_args(raw: &[String]) -> Result<Args, BoxError> {
    let mut positional = Vec::new();
    let (mut ca, mut http1, mut server_pid, mut cold, mut self_stats, mut only) =
        (None, false, None, false, false, None);
    let mut it = raw.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--ca" => ca = Some(it.next().ok_or(USAGE)?.clone()),
            "--http1" => http1 = true,
            "--server-pid" => server_pid = Some(it.next().ok_or(USAGE)?.parse()?),
            "--cold" => cold = true,
            "--self-stats" => self_stats = true,
            "--only" => only = Some(it.next().ok_or(USAGE)?.clone()),
            _ => positional.push(a.clone()),
        }
    }
    let [base, id, secret, quote, n] = <[String; 5]>::try_from(positional).map_err(|_| USAGE)?;
    Ok(Args {
        base,
        id,
        secret,
        quote,
        n: n.parse()?,
        ca,
        http1,
        server_pid,
        cold,
        self_stats,
        only,
    })
}

/// The server's CPU time so far (user + system, clock ticks), if it can be read.
fn server_ticks(pid: Option<u32>) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    // The fields after the command name (which may hold spaces) in parentheses; utime and
    // stime are the 14th and 15th fields of the line, the 12th and 13th after it.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// This process's counters (for `bench/profile.py`): user and system CPU ticks, voluntary and
/// involuntary context switches summed over its threads, read-like and write-like syscalls.
fn self_stats() -> Option<[u64; 6]> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let (mut vcsw, mut ivcsw) = (0, 0);
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        for line in status.lines() {
            let value = |l: &str| l.split_whitespace().last()?.parse::<u64>().ok();
            if line.starts_with("voluntary_ctxt_switches") {
                vcsw += value(line).unwrap_or(0);
            } else if line.starts_with("nonvoluntary_ctxt_switches") {
                ivcsw += value(line).unwrap_or(0);
            }
        }
    }
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    let count = |key: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
    };
    Some([
        utime,
        stime,
        vcsw,
        ivcsw,
        count("syscr:")?,
        count("syscw:")?,
    ])
}

/// Times `f`; prints the server's ticks spent meanwhile as `<name>_server_ticks=` and, with
/// `--self-stats`, this process's counters as `<name>_self=utime,stime,vcsw,ivcsw,syscr,syscw`.
async fn timed<F: std::future::Future<Output = Result<(), BoxError>>>(
    args: &Args,
    name: &str,
    f: F,
) -> Result<Duration, BoxError> {
    let before = server_ticks(args.server_pid);
    let mine = if args.self_stats { self_stats() } else { None };
    let started = Instant::now();
    f.await?;
    let elapsed = started.elapsed();
    if let (Some(a), Some(b)) = (mine, self_stats()) {
        let d: Vec<String> = a
            .iter()
            .zip(b.iter())
            .map(|(x, y)| y.saturating_sub(*x).to_string())
            .collect();
        println!("{name}_self={}", d.join(","));
    }
    if let (Some(a), Some(b)) = (before, server_ticks(args.server_pid)) {
        println!("{name}_server_ticks={}", b.saturating_sub(a));
    }
    Ok(elapsed)
}

#[derive(Deserialize)]
#[allow(dead_code)] // the fields are parsed to do the work; nobody reads them
struct Freebies {
    #[serde(with = "rust_decimal::serde::arbitrary_precision")]
    total: Decimal,
    #[serde(with = "rust_decimal::serde::arbitrary_precision")]
    claimed: Decimal,
    #[serde(with = "rust_decimal::serde::arbitrary_precision")]
    remaining: Decimal,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct Quote {
    id: String,
    buy_currency: String,
    #[serde(with = "rust_decimal::serde::arbitrary_precision")]
    buy_amount: Decimal,
    sell_currency: String,
    #[serde(with = "rust_decimal::serde::arbitrary_precision")]
    sell_amount: Decimal,
    #[serde(with = "rust_decimal::serde::arbitrary_precision")]
    customer_rate: Decimal,
    #[serde(with = "rust_decimal::serde::arbitrary_precision")]
    inverse_customer_rate: Decimal,
    #[serde(with = "rust_decimal::serde::arbitrary_precision")]
    fee: Decimal,
    fee_currency: String,
    freebies: Freebies,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

struct Bench {
    http: reqwest::Client,
    url: String,
    auth: String,
}

impl Bench {
    async fn one(&self) -> Result<Quote, BoxError> {
        let resp = self
            .http
            .get(&self.url)
            .header(reqwest::header::AUTHORIZATION, &self.auth)
            .send()
            .await?;
        if resp.status() != reqwest::StatusCode::OK {
            return Err(format!("GET answered {}", resp.status()).into());
        }
        let body = resp.bytes().await?;
        Ok(serde_json::from_slice(&body)?)
    }

    async fn many(&self, n: usize) -> Result<(), BoxError> {
        for _ in 0..n {
            std::hint::black_box(self.one().await?);
        }
        Ok(())
    }
}

async fn token(
    http: &reqwest::Client,
    base: &str,
    id: &str,
    secret: &str,
) -> Result<String, BoxError> {
    let form = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "client_credentials")
        .append_pair("client_id", id)
        .append_pair("client_secret", secret)
        .append_pair("scope", "payments")
        .finish();
    let resp = http
        .post(format!("{base}/v1/oauth/token"))
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(form)
        .send()
        .await?;
    if !resp.status().is_success() {
        return Err(format!("the token request answered {}", resp.status()).into());
    }
    let t: TokenResponse = serde_json::from_slice(&resp.bytes().await?)?;
    Ok(t.access_token)
}

fn http(args: &Args) -> Result<reqwest::Client, BoxError> {
    let mut builder = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(256);
    if let Some(path) = &args.ca {
        for cert in reqwest::Certificate::from_pem_bundle(&std::fs::read(path)?)? {
            builder = builder.add_root_certificate(cert);
        }
    }
    if args.http1 {
        builder = builder.http1_only();
    }
    Ok(builder.build()?)
}

/// A fresh client's first answered call: the TLS handshake, the token, one GET.
async fn first_call(args: &Args) -> Result<(), BoxError> {
    let http = http(args)?;
    let access = token(&http, &args.base, &args.id, &args.secret).await?;
    let bench = Bench {
        http,
        url: format!("{}/v1/payments/quotes/{}", args.base, args.quote),
        auth: format!("Bearer {access}"),
    };
    std::hint::black_box(bench.one().await?);
    Ok(())
}

/// The sequential loop with everything on one thread: its own client, token and warm-up.
async fn run_single_thread(args: &Args) -> Result<f64, BoxError> {
    let http = http(args)?;
    let access = token(&http, &args.base, &args.id, &args.secret).await?;
    let bench = Bench {
        http,
        url: format!("{}/v1/payments/quotes/{}", args.base, args.quote),
        auth: format!("Bearer {access}"),
    };
    let n = args.n;
    bench.many((n / 10).clamp(50, 1000)).await?;
    let elapsed = timed(args, "loop_ct", bench.many(n)).await?;
    Ok(rate(n, elapsed))
}

fn rate(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64()
}

/// The measurements on the multi-threaded runtime; returns the loop's rate.
async fn run(args: &Args) -> Result<f64, BoxError> {
    let n = args.n;
    let http = http(args)?;
    let access = token(&http, &args.base, &args.id, &args.secret).await?;
    let bench = Arc::new(Bench {
        http,
        url: format!("{}/v1/payments/quotes/{}", args.base, args.quote),
        auth: format!("Bearer {access}"),
    });
    let warm = (n / 10).clamp(50, 1000);

    let mut loop_mt = 0.0;
    if args.wants("loop_mt") {
        bench.many(warm).await?;
        loop_mt = rate(n, timed(args, "loop_mt", bench.many(n)).await?);
        println!("loop_mt_rps={loop_mt:.1}");
    }
    if !args.wants("async64") {
        return Ok(loop_mt);
    }

    const TASKS: usize = 64;
    let concurrent = |total: usize| {
        let bench = bench.clone();
        async move {
            let mut set = tokio::task::JoinSet::new();
            for i in 0..TASKS {
                let b = bench.clone();
                let share = total / TASKS + usize::from(i < total % TASKS);
                set.spawn(async move { b.many(share).await });
            }
            while let Some(r) = set.join_next().await {
                r??;
            }
            Ok::<(), BoxError>(())
        }
    };
    concurrent(warm.max(TASKS)).await?;
    let elapsed = timed(args, "async64", concurrent(n)).await?;
    println!("async64_rps={:.1}", rate(n, elapsed));
    Ok(loop_mt)
}

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("ceiling: {e}");
    std::process::exit(1);
}

fn main() {
    let started = Instant::now();
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let args = parse_args(&raw).unwrap_or_else(|e| fail(e));
    // As many workers as fxpay's own runtime has on this machine, so that the difference
    // to fxpay is the Python binding and nothing else.
    let workers =
        fxpay_core::worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(format!("cannot start tokio: {e}")));
    if args.cold {
        if let Err(e) = rt.block_on(first_call(&args)) {
            fail(e);
        }
        println!("cold_s={:.6}", started.elapsed().as_secs_f64());
        return;
    }
    let loop_mt = rt.block_on(run(&args)).unwrap_or_else(|e| fail(e));
    drop(rt);
    if !args.wants("loop_ct") {
        return;
    }
    let single = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(BoxError::from)
        .and_then(|rt| rt.block_on(run_single_thread(&args)));
    match single {
        Ok(loop_ct) => {
            println!("loop_ct_rps={loop_ct:.1}");
            if args.only.is_none() {
                println!("loop_rps={:.1}", loop_mt.max(loop_ct));
            }
        }
        Err(e) => fail(e),
    }
}

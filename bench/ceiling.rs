//! The pure-Rust ceiling for `bench/run.py`: the same work as the Python clients with no
//! Python at all. One client-credentials token, then `n` GETs of one quote, each body parsed
//! by serde_json into a struct of `rust_decimal::Decimal`s.
//!
//! Usage: cargo run --release --example ceiling -- <base_url> <client_id> <secret> <quote_id> <n>
//!
//! The runtime has as many workers as fxpay's own (`fxpay_core::runtime::worker_threads`).
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

fn http() -> Result<reqwest::Client, BoxError> {
    Ok(reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(256)
        .build()?)
}

/// The sequential loop with everything on one thread: its own client, token and warm-up.
async fn run_single_thread(args: &[String]) -> Result<f64, BoxError> {
    let [base, id, secret, quote, n] = args else {
        return Err("usage: ceiling <base_url> <client_id> <secret> <quote_id> <n>".into());
    };
    let n: usize = n.parse()?;
    let http = http()?;
    let access = token(&http, base, id, secret).await?;
    let bench = Bench {
        http,
        url: format!("{base}/v1/payments/quotes/{quote}"),
        auth: format!("Bearer {access}"),
    };
    bench.many((n / 10).clamp(50, 1000)).await?;
    let started = Instant::now();
    bench.many(n).await?;
    Ok(rate(n, started.elapsed()))
}

fn rate(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64()
}

/// The measurements on the multi-threaded runtime; returns the loop's rate.
async fn run(args: &[String]) -> Result<f64, BoxError> {
    let [base, id, secret, quote, n] = args else {
        return Err("usage: ceiling <base_url> <client_id> <secret> <quote_id> <n>".into());
    };
    let n: usize = n.parse()?;
    let http = http()?;
    let access = token(&http, base, id, secret).await?;
    let bench = Arc::new(Bench {
        http,
        url: format!("{base}/v1/payments/quotes/{quote}"),
        auth: format!("Bearer {access}"),
    });
    let warm = (n / 10).clamp(50, 1000);

    bench.many(warm).await?;
    let started = Instant::now();
    bench.many(n).await?;
    let loop_mt = rate(n, started.elapsed());
    println!("loop_mt_rps={loop_mt:.1}");

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
    let started = Instant::now();
    concurrent(n).await?;
    println!("async64_rps={:.1}", rate(n, started.elapsed()));
    Ok(loop_mt)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // As many workers as fxpay's own runtime has on this machine, so that the difference
    // to fxpay is the Python binding and nothing else.
    let workers = fxpay_core::runtime::worker_threads(
        std::thread::available_parallelism().map_or(2, |n| n.get()),
    );
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ceiling: cannot start tokio: {e}");
            std::process::exit(2);
        }
    };
    let loop_mt = match rt.block_on(run(&args)) {
        Ok(rps) => rps,
        Err(e) => {
            eprintln!("ceiling: {e}");
            std::process::exit(1);
        }
    };
    drop(rt);
    let single = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(BoxError::from)
        .and_then(|rt| rt.block_on(run_single_thread(&args)));
    match single {
        Ok(loop_ct) => {
            println!("loop_ct_rps={loop_ct:.1}");
            println!("loop_rps={:.1}", loop_mt.max(loop_ct));
        }
        Err(e) => {
            eprintln!("ceiling: {e}");
            std::process::exit(1);
        }
    }
}

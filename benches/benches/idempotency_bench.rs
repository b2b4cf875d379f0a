//! idempotency_bench: the idempotency layer's overhead, in one run.
//!
//! ```text
//! cargo bench -p redlock-benches --bench idempotency_bench
//! cargo bench -p redlock-benches --bench idempotency_bench -- --quick   # ~5 s smoke run
//! cargo bench -p redlock-benches --bench idempotency_bench -- --help
//! ```
//!
//! Needs `redis-server` on PATH (or `REDLOCK_REDIS_SERVER`): it starts its own
//! on a free loopback port through the test harness, never your Redis on 6379.
//!
//! It serves one handler (`POST`, reads a small JSON body, answers `201` with
//! a JSON body and a `Location`) on two routes of one axum server in this
//! process: `/bare/orders` as it is, and `/idem/orders` behind
//! `IdempotencyLayer` (key required, global scope, records in that Redis).
//! A load generator in the same process keeps `--connections` HTTP/1.1
//! keep-alive connections busy (closed loop), every request with a new
//! `Idempotency-Key` (the worst case: every request claims and stores a
//! record, two Redis round trips), and reports requests/s and p50/p99
//! latency for both routes and the ratio idempotent / bare.
//!
//! Two handlers are measured: one that does nothing (`work 0 ms`: the
//! layer's whole cost shows) and one that waits `--work-ms` (default 5 ms)
//! as a handler waiting on a database would. The routes alternate in 1 s
//! slices (0.5 s with `--quick`) so that drift in the machine's state hits
//! both alike. Load generator, server and Redis share the machine's cores.
//!
//! `cargo test --benches` runs it without `cargo bench`'s `--bench`
//! argument: then it measures 0.2 s per cell over 4 connections, as a check
//! that the benchmark still works.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use http_body_util::Full;
use redlock_axum::IdempotencyLayer;
use redlock_runtime::LockClient;
use redlock_tests::RedisServer;
use redlock_tests::http::Connection;

const HELP: &str = "\
idempotency_bench: requests/s and p99 of one handler with and without IdempotencyLayer

options:
  --quick            short run (~5 s): 0.5 s slices, 2 per route and handler
  --seconds <s>      measured seconds per route and handler (default 4)
  --connections <n>  concurrent keep-alive connections (default 32)
  --work-ms <ms>     the slow handler's simulated wait (default 5)
  --help             this text

Needs redis-server on PATH, or REDLOCK_REDIS_SERVER set to one. Without
--bench (which `cargo bench` passes; `cargo test --benches` does not), the
defaults are 0.2 s per cell in 0.1 s slices over 4 connections.";

#[derive(Debug, Clone, Copy)]
struct Args {
    seconds: f64,
    slice: f64,
    connections: usize,
    work_ms: u64,
}

fn parse_args() -> Result<Args, String> {
    let bench = std::env::args().any(|a| a == "--bench");
    let mut args = match bench {
        true => Args {
            seconds: 4.0,
            slice: 1.0,
            connections: 32,
            work_ms: 5,
        },
        false => Args {
            seconds: 0.2,
            slice: 0.1,
            connections: 4,
            work_ms: 5,
        },
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--bench" => {}
            "--quick" => {
                args.seconds = 1.0;
                args.slice = 0.5;
            }
            "--seconds" => {
                args.seconds = value("--seconds")?
                    .parse()
                    .map_err(|e| format!("--seconds: {e}"))?
            }
            "--connections" => {
                args.connections = value("--connections")?
                    .parse()
                    .map_err(|e| format!("--connections: {e}"))?
            }
            "--work-ms" => {
                args.work_ms = value("--work-ms")?
                    .parse()
                    .map_err(|e| format!("--work-ms: {e}"))?
            }
            "--help" | "-h" => {
                println!("{HELP}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other:?}\n\n{HELP}")),
        }
    }
    if args.connections == 0 || args.seconds <= 0.0 {
        return Err("--connections and --seconds must be positive".to_owned());
    }
    if !bench {
        eprintln!(
            "idempotency_bench: no --bench argument (not run by `cargo bench`): a test-sized run"
        );
    }
    Ok(args)
}

/// The handler, on both routes: reads the body, waits `work`, answers 201.
async fn create(work: Duration, body: Bytes) -> impl IntoResponse {
    if !work.is_zero() {
        tokio::time::sleep(work).await;
    }
    let json = format!(
        r#"{{"id":42,"status":"created","request_bytes":{}}}"#,
        body.len()
    );
    (
        StatusCode::CREATED,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::LOCATION, "/orders/42"),
        ],
        json,
    )
}

fn routes(prefix: &str, work: Duration) -> Router {
    Router::new().route(
        &format!("{prefix}/orders"),
        post(move |body: Bytes| create(work, body)),
    )
}

/// What one route measured.
#[derive(Debug, Default)]
struct Tally {
    latencies_us: Vec<u32>,
    elapsed: Duration,
    failures: u64,
}

impl Tally {
    fn rate(&self) -> f64 {
        self.latencies_us.len() as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile_ms(&mut self, p: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return f64::NAN;
        }
        self.latencies_us.sort_unstable();
        let i = ((self.latencies_us.len() as f64 - 1.0) * p).round() as usize;
        f64::from(self.latencies_us[i]) / 1000.0
    }
}

/// One slice: `connections` closed-loop clients for `length`.
async fn slice(
    addr: std::net::SocketAddr,
    path: &'static str,
    connections: usize,
    length: Duration,
    nonce: u64,
    tally: &mut Tally,
) {
    let started = Instant::now();
    let deadline = started + length;
    let mut workers = Vec::with_capacity(connections);
    for worker in 0..connections {
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut failures = 0u64;
            let Ok(mut connection) = Connection::open(addr).await else {
                return (latencies, 1);
            };
            let mut n = 0u64;
            while Instant::now() < deadline {
                n += 1;
                let request = http::Request::post(path)
                    .header(header::HOST, "bench")
                    .header(header::CONTENT_TYPE, "application/json")
                    .header("idempotency-key", format!("{nonce}-{worker}-{n}"))
                    .body(Full::new(Bytes::from_static(br#"{"sku":"A-17","qty":1}"#)));
                let Ok(request) = request else {
                    failures += 1;
                    continue;
                };
                let sent = Instant::now();
                match connection.call(request).await {
                    Ok(reply) if reply.status == StatusCode::CREATED => {
                        let us = sent.elapsed().as_micros();
                        latencies.push(u32::try_from(us).unwrap_or(u32::MAX));
                    }
                    Ok(_) => failures += 1,
                    Err(_) => {
                        failures += 1;
                        break;
                    }
                }
            }
            (latencies, failures)
        }));
    }
    for worker in workers {
        if let Ok((latencies, failures)) = worker.await {
            tally.latencies_us.extend(latencies);
            tally.failures += failures;
        }
    }
    tally.elapsed += started.elapsed();
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    eprintln!("starting redis-server (harness) ...");
    let redis = RedisServer::start().await;
    let locks = match LockClient::connect(redis.url()).await {
        Ok(locks) => locks,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let work = Duration::from_millis(args.work_ms);
    let layer = || IdempotencyLayer::global(&locks).required();
    let app = Router::new()
        .merge(routes("/bare", Duration::ZERO))
        .merge(routes("/idem", Duration::ZERO).layer(layer()))
        .merge(routes("/bare-work", work))
        .merge(routes("/idem-work", work).layer(layer()));
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("bind: {e}");
            std::process::exit(1);
        }
    };
    let addr = listener.local_addr().unwrap_or_else(|e| {
        eprintln!("local_addr: {e}");
        std::process::exit(1)
    });
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let slice_len = Duration::from_secs_f64(args.slice);
    let slices = (args.seconds / args.slice).ceil().max(1.0) as usize;
    let nonce = Arc::new(std::sync::atomic::AtomicU64::new(
        u64::from(std::process::id()) << 32,
    ));
    let next_nonce = || nonce.fetch_add(1, std::sync::atomic::Ordering::Relaxed);

    let mut rows = Vec::new();
    for (label, bare, idem) in [
        ("work 0 ms", "/bare/orders", "/idem/orders"),
        ("work", "/bare-work/orders", "/idem-work/orders"),
    ] {
        let label = if label == "work" {
            format!("work {} ms", args.work_ms)
        } else {
            label.to_owned()
        };
        eprintln!("{label}: warming up ...");
        let mut scratch = Tally::default();
        for path in [bare, idem] {
            slice(
                addr,
                path,
                args.connections,
                slice_len / 2,
                next_nonce(),
                &mut scratch,
            )
            .await;
        }
        let (mut b, mut i) = (Tally::default(), Tally::default());
        for n in 0..slices {
            eprintln!("{label}: slice {}/{slices}", n + 1);
            // Alternate which goes first, too.
            let mut order = [(bare, &mut b), (idem, &mut i)];
            if n % 2 == 1 {
                order.swap(0, 1);
            }
            for (path, tally) in order {
                slice(addr, path, args.connections, slice_len, next_nonce(), tally).await;
            }
        }
        rows.push((label, b, i));
    }
    server.abort();

    println!();
    println!(
        "idempotency_bench: {} connections, unique keys, {:.1} s per cell, {cores} cores (load generator, server and redis-server share them)",
        args.connections,
        slices as f64 * args.slice
    );
    println!();
    println!("| handler | route | req/s | p50 ms | p99 ms | failures | ratio (req/s) |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    let mut verdicts = Vec::new();
    for (label, mut b, mut i) in rows {
        let ratio = i.rate() / b.rate();
        for (route, t) in [("bare", &mut b), ("with layer", &mut i)] {
            let (p50, p99) = (t.percentile_ms(0.50), t.percentile_ms(0.99));
            let r = if route == "bare" {
                "1.00".to_owned()
            } else {
                format!("{ratio:.2}")
            };
            println!(
                "| {label} | {route} | {:.0} | {p50:.2} | {p99:.2} | {} | {r} |",
                t.rate(),
                t.failures
            );
        }
        verdicts.push((label, ratio));
    }
    println!();
    for (label, ratio) in verdicts {
        println!(
            "target: layer keeps >= 70% of the bare route's req/s ({label}): {ratio:.2} {}",
            if ratio >= 0.70 { "PASS" } else { "MISS" }
        );
    }
    drop(redis);
}

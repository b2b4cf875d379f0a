//! idempotent_bench: what a run-once call (`LockClient::idempotent`) costs
//! over calling its work directly, and what a replay costs, in one run.
//!
//! ```text
//! cargo bench -p redlock-benches --bench idempotent_bench
//! cargo bench -p redlock-benches --bench idempotent_bench -- --quick   # ~10 s smoke run
//! cargo bench -p redlock-benches --bench idempotent_bench -- --help
//! ```
//!
//! Needs `redis-server` on PATH (or `REDLOCK_REDIS_SERVER`): it starts its
//! own on a free loopback port through the test harness, never your Redis
//! on 6379.
//!
//! The work is a `--work-ms` sleep (default 1 ms: a short database call).
//! `--concurrency` tasks (1 and 32 by default) call it in a closed loop,
//! either directly (`bare`) or through `client.idempotent(key).run(..)` with
//! a new key per call (`once`: every call claims and completes a record,
//! two round trips), or around the same two scripts sent by hand on a
//! redis-rs connection (`raw`: the floor of two round trips, without the
//! client's lease, watchdog, give-back and record end around them). The
//! three alternate in slices, so that drift in the machine's state hits
//! them alike; the ratios once / bare and once / raw of the mean call time
//! are the figures. `replay` then calls a key that completed
//! already: one round trip, the stored result decoded, the work not run.
//!
//! The last line is one JSON object with the figures (field names stable;
//! new ones are added, never renamed).
//!
//! `cargo test --benches` runs it without `cargo bench`'s `--bench`
//! argument: then it measures 0.2 s per cell, as a check that the benchmark
//! still works.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_runtime::LockClient;
use redlock_tests::RedisServer;

const HELP: &str = "\
idempotent_bench: a run-once call's overhead over its bare work, and a replay's cost

options:
  --quick              short run: 1 s per cell in 0.5 s slices
  --seconds <s>        measured seconds per cell (default 4)
  --work-ms <ms>       the work's simulated wait (default 1)
  --concurrency <list> comma-separated task counts (default 1,32)
  --help               this text

Needs redis-server on PATH, or REDLOCK_REDIS_SERVER set to one. Without
--bench (which `cargo bench` passes; `cargo test --benches` does not), the
defaults are 0.2 s per cell in 0.1 s slices.";

#[derive(Debug, Clone)]
struct Args {
    seconds: f64,
    slice: f64,
    work_ms: u64,
    concurrency: Vec<usize>,
}

fn parse_args() -> Result<Args, String> {
    let bench = std::env::args().any(|a| a == "--bench");
    let mut args = Args {
        seconds: if bench { 4.0 } else { 0.2 },
        slice: if bench { 1.0 } else { 0.1 },
        work_ms: 1,
        concurrency: vec![1, 32],
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
            "--work-ms" => {
                args.work_ms = value("--work-ms")?
                    .parse()
                    .map_err(|e| format!("--work-ms: {e}"))?
            }
            "--concurrency" => {
                args.concurrency = value("--concurrency")?
                    .split(',')
                    .map(|n| n.trim().parse::<usize>())
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("--concurrency: {e}"))?
            }
            "--help" | "-h" => {
                println!("{HELP}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other:?}\n\n{HELP}")),
        }
    }
    if args.seconds <= 0.0 || args.concurrency.contains(&0) {
        return Err("--seconds and each --concurrency must be positive".to_owned());
    }
    if !bench {
        eprintln!(
            "idempotent_bench: no --bench argument (not run by `cargo bench`): a test-sized run"
        );
    }
    Ok(args)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Bare,
    Raw,
    Once,
    Replay,
}

/// The raw baseline: the record's claim and completion scripts, by hand.
#[derive(Clone)]
struct Raw {
    conn: redis::aio::MultiplexedConnection,
    claim: Arc<redis::Script>,
    complete: Arc<redis::Script>,
}

impl Raw {
    /// Claims a new record, waits `work`, completes it: `true` when both
    /// answered as the client expects.
    async fn call(&self, work: Duration) -> bool {
        let mut conn = self.conn.clone();
        let id = uuid::Uuid::new_v4().simple().to_string();
        let (record, fence) = (format!("raw:{{{id}}}"), format!("raw:{{{id}}}:fence"));
        let claimed: redis::RedisResult<Vec<Vec<u8>>> = self
            .claim
            .key(&record)
            .key(&fence)
            .arg(&id)
            .arg(30_000)
            .arg("")
            .arg(86_430_000)
            .invoke_async(&mut conn)
            .await;
        if !matches!(claimed.as_deref(), Ok([state, _]) if state.as_slice() == b"claimed") {
            return false;
        }
        tokio::time::sleep(work).await;
        let done: redis::RedisResult<i64> = self
            .complete
            .key(&record)
            .arg(&id)
            .arg("c")
            .arg(200)
            .arg("redlock-idempotent/1")
            .arg("42")
            .arg(86_400_000)
            .invoke_async(&mut conn)
            .await;
        matches!(done, Ok(1))
    }
}

/// Calls made and their total and sorted latencies.
#[derive(Default)]
struct Cell {
    latencies: Vec<Duration>,
    failures: u64,
    elapsed: Duration,
    /// This process's CPU time during the cell's slices.
    cpu: Duration,
}

impl Cell {
    fn mean_ms(&self) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        let total: Duration = self.latencies.iter().sum();
        total.as_secs_f64() * 1e3 / self.latencies.len() as f64
    }

    fn percentile_ms(&mut self, p: f64) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        self.latencies.sort_unstable();
        let at = ((self.latencies.len() - 1) as f64 * p).round() as usize;
        self.latencies[at].as_secs_f64() * 1e3
    }

    /// This process's CPU µs per call (the work's sleep costs next to
    /// nothing, so `bare` shows the load generator's own share).
    fn cpu_us_per_call(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.latencies.len().max(1) as f64
    }

    fn calls_per_s(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }
}

/// `tasks` tasks calling in a closed loop for `slice`; latencies into
/// `cell`.
async fn slice(
    raw: &Raw,
    client: &LockClient,
    mode: Mode,
    tasks: usize,
    work: Duration,
    slice: Duration,
    cell: &mut Cell,
) {
    let (start, cpu) = (Instant::now(), process_cpu());
    let end = start + slice;
    let mut handles = Vec::new();
    for task in 0..tasks {
        let (client, raw) = (client.clone(), raw.clone());
        handles.push(tokio::spawn(async move {
            let (mut latencies, mut failures) = (Vec::new(), 0u64);
            while Instant::now() < end {
                let t0 = Instant::now();
                let ok = match mode {
                    Mode::Bare => {
                        tokio::time::sleep(work).await;
                        true
                    }
                    Mode::Raw => raw.call(work).await,
                    Mode::Once => {
                        let key = uuid::Uuid::new_v4().simple().to_string();
                        let ran = client
                            .idempotent(key)
                            .scope("bench")
                            .run(|_| async move {
                                tokio::time::sleep(work).await;
                                Ok::<_, String>(42u64)
                            })
                            .await;
                        matches!(ran, Ok(Ok(42)))
                    }
                    Mode::Replay => {
                        let ran = client
                            .idempotent(format!("replayed-{}", task % 8))
                            .scope("bench")
                            .run(|_| async { Ok::<_, String>(0u64) })
                            .await;
                        matches!(ran, Ok(Ok(42)))
                    }
                };
                if ok {
                    latencies.push(t0.elapsed());
                } else {
                    failures += 1;
                }
            }
            (latencies, failures)
        }));
    }
    for handle in handles {
        if let Ok((latencies, failures)) = handle.await {
            cell.latencies.extend(latencies);
            cell.failures += failures;
        } else {
            cell.failures += 1;
        }
    }
    cell.elapsed += start.elapsed();
    cell.cpu += process_cpu().saturating_sub(cpu);
}

/// This process's CPU time: the sum over its threads of the first field
/// of `/proc/self/task/<tid>/schedstat` (ns on a CPU; zero elsewhere than
/// Linux), as lockbench reads it.
fn process_cpu() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let ns: u64 = tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(ns)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
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
    let client = match LockClient::connect(redis.url()).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("cannot connect: {e}");
            std::process::exit(1);
        }
    };
    let work = Duration::from_millis(args.work_ms);
    let slice_len = Duration::from_secs_f64(args.slice);
    let slices = (args.seconds / args.slice).ceil().max(1.0) as usize;
    // The replayed keys, completed once.
    for i in 0..8 {
        let stored = client
            .idempotent(format!("replayed-{i}"))
            .scope("bench")
            .run(|_| async { Ok::<_, String>(42u64) })
            .await;
        if !matches!(stored, Ok(Ok(42))) {
            eprintln!("could not store the replayed results: {stored:?}");
            std::process::exit(1);
        }
    }
    let raw = match redis::Client::open(redis.url()) {
        Ok(raw) => raw.get_multiplexed_async_connection().await,
        Err(e) => Err(e),
    };
    let raw = match raw {
        Ok(conn) => {
            let (claim, complete) = redlock_runtime::test_util::record_lua();
            Raw {
                conn,
                claim: Arc::new(redis::Script::new(&claim)),
                complete: Arc::new(redis::Script::new(&complete)),
            }
        }
        Err(e) => {
            eprintln!("cannot connect the raw baseline: {e}");
            std::process::exit(1);
        }
    };
    println!();
    println!(
        "idempotent_bench: work {} ms, {} s per cell in {} s slices, {}",
        args.work_ms,
        args.seconds,
        args.slice,
        redis.url()
    );
    println!();
    println!(
        "| concurrency | call | calls/s | mean ms | p50 ms | p99 ms | client CPU µs/call | \
         failures | ratio (mean) |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut json = Vec::new();
    for &tasks in &args.concurrency {
        let mut cells: [Cell; 4] = Default::default();
        let [bare, raw_cell, once, replay] = &mut cells;
        // Warm-up: connections, scripts loaded.
        for mode in [Mode::Raw, Mode::Once] {
            let warm = &mut Cell::default();
            slice(&raw, &client, mode, tasks, work, slice_len / 2, warm).await;
        }
        // Bare, raw and once in turns, each first in every third slice.
        let order = [(Mode::Bare, 0), (Mode::Raw, 1), (Mode::Once, 2)];
        for n in 0..slices {
            eprintln!("concurrency {tasks}: slice {}/{slices}", n + 1);
            for i in 0..order.len() {
                let (mode, at) = order[(n + i) % order.len()];
                let cell = match at {
                    0 => &mut *bare,
                    1 => &mut *raw_cell,
                    _ => &mut *once,
                };
                slice(&raw, &client, mode, tasks, work, slice_len, cell).await;
            }
            let half = slice_len / 2;
            slice(&raw, &client, Mode::Replay, tasks, work, half, replay).await;
        }
        let ratio = once.mean_ms() / bare.mean_ms();
        let raw_ratio = raw_cell.mean_ms() / bare.mean_ms();
        let over_raw = once.mean_ms() / raw_cell.mean_ms();
        for (name, cell, ratio) in [
            ("bare", &mut *bare, String::new()),
            ("raw", &mut *raw_cell, format!("{raw_ratio:.3}")),
            (
                "once",
                &mut *once,
                format!("{ratio:.3} ({over_raw:.3} × raw)"),
            ),
            ("replay", &mut *replay, String::new()),
        ] {
            println!(
                "| {tasks} | {name} | {:.0} | {:.3} | {:.3} | {:.3} | {:.1} | {} | {ratio} |",
                cell.calls_per_s(),
                cell.mean_ms(),
                cell.percentile_ms(0.5),
                cell.percentile_ms(0.99),
                cell.cpu_us_per_call(),
                cell.failures,
            );
        }
        json.push(serde_json::json!({
            "concurrency": tasks,
            "work_ms": args.work_ms,
            "bare_mean_ms": bare.mean_ms(),
            "once_mean_ms": once.mean_ms(),
            "once_over_bare": ratio,
            "once_p99_ms": once.percentile_ms(0.99),
            "replay_mean_ms": replay.mean_ms(),
            "replay_p99_ms": replay.percentile_ms(0.99),
            "replay_calls_per_s": replay.calls_per_s(),
            "bare_client_cpu_us": bare.cpu_us_per_call(),
            "once_client_cpu_us": once.cpu_us_per_call(),
            "replay_client_cpu_us": replay.cpu_us_per_call(),
            "raw_mean_ms": raw_cell.mean_ms(),
            "raw_over_bare": raw_ratio,
            "once_over_raw": over_raw,
            "raw_client_cpu_us": raw_cell.cpu_us_per_call(),
            "failures": bare.failures + raw_cell.failures + once.failures + replay.failures,
        }));
    }
    println!();
    println!(
        "{}",
        serde_json::json!({ "bench": "idempotent_bench", "cells": json })
    );
}

//! The README's run command: the demo binary, run as a child process once
//! in memory (no `REDIS_URL`, as on a fresh machine) and once against a
//! `redis-server` started by the harness. Each run must exit with 0, say
//! which backend it uses in its first line, and print the lines that show
//! the three use cases.

use std::process::Stdio;
use std::time::Duration;

use redlock_tests::{MASTER_NAME, RedisCluster, RedisServer, SentinelSet};

/// Runs the demo (bounded: killed after 60 s) and returns its stdout.
async fn run_demo(redis_url: Option<&str>) -> String {
    match redis_url {
        Some(url) => run_demo_with(&[("REDIS_URL", url)]).await,
        None => run_demo_with(&[]).await,
    }
}

/// Runs the demo with these store variables (the others removed).
async fn run_demo_with(vars: &[(&str, &str)]) -> String {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_demo"));
    for var in [
        "REDIS_URL",
        "REDIS_CLUSTER_URLS",
        "REDIS_SENTINEL_URLS",
        "REDIS_SENTINEL_MASTER",
    ] {
        command.env_remove(var);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in vars {
        command.env(name, value);
    }
    let child = command.spawn().expect("start the demo binary");
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the demo finished within 60 s")
        .expect("wait for the demo");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "the demo exited with {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    stdout
}

/// What every run must show.
fn check_use_cases(out: &str) {
    let has = |needle: &str| {
        assert!(
            out.contains(needle),
            "the demo's output lacks {needle:?}:\n{out}"
        );
    };
    // 1. The service method: same order serialized, other order parallel.
    // (node-1 or node-2 wins the race for order 42; the other waits.)
    has("found it placed by node-");
    has(": not placed twice");
    has("ok: the same order serialized");
    has("ok: the other order ran in parallel with the first");
    // 2. Double-submit: 201, 409 "processing", the replay.
    has("201 Created  {");
    has("409 Conflict  Retry-After: ");
    has("\"Request is being processed\"");
    has("201 Created  Idempotent-Replayed: true");
    has("redlock_idempotency_requests_total{outcome=\"in_progress\"} 1");
    // 3. The scheduled job: one node per tick, five ticks.
    for tick in 1..=5 {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("tick {tick}:")))
            .unwrap_or_else(|| panic!("no line for tick {tick}:\n{out}"));
        assert!(
            line.contains(" ran the report; the other 2 skipped"),
            "tick {tick}: {line}"
        );
    }
    has("ok: exactly one run per tick, 15 calls in all");
    assert!(!out.contains("UNEXPECTED"), "{out}");
    // It finishes within the 15 s the README promises.
    let secs: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("done in "))
        .and_then(|l| l.strip_suffix(" s"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no \"done in .. s\" line:\n{out}"));
    assert!(secs < 15.0, "the demo took {secs} s");
}

#[tokio::test]
async fn demo_in_memory() {
    let out = run_demo(None).await;
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("redlock demo using the in-memory backend: REDIS_URL is not set"),
        "first line: {first}"
    );
    check_use_cases(&out);
}

#[tokio::test]
async fn demo_on_redis() {
    let redis = RedisServer::start().await;
    let out = run_demo(Some(&redis.url())).await;
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("redlock demo using Redis at ")
            && first.contains(&format!("127.0.0.1:{}", redis.port())),
        "first line: {first}"
    );
    check_use_cases(&out);
    // The locks were taken in that Redis: the fencing counters are there.
    assert!(
        redlock_tests::key_exists(redis.url(), "redlock-demo:{order:42:A-17}:fence").await,
        "the demo's fencing counter is in the harness Redis"
    );
}

#[tokio::test]
async fn demo_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0).await;
    let urls = cluster.urls().join(",");
    let out = run_demo_with(&[("REDIS_CLUSTER_URLS", urls.as_str())]).await;
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("redlock demo using Redis at cluster["),
        "first line: {first}"
    );
    check_use_cases(&out);
    let slot = cluster.slot_of("redlock-demo:{order:42:A-17}:fence").await;
    let master = cluster.master_of_slot(slot).await;
    assert!(
        redlock_tests::key_exists(
            cluster.node(master).url(),
            "redlock-demo:{order:42:A-17}:fence"
        )
        .await,
        "the demo's fencing counter is on its slot's master"
    );
}

#[tokio::test]
async fn demo_through_sentinel() {
    let set = SentinelSet::start(1).await;
    let urls = set.sentinel_urls().join(",");
    let out = run_demo_with(&[
        ("REDIS_SENTINEL_URLS", urls.as_str()),
        ("REDIS_SENTINEL_MASTER", MASTER_NAME),
    ])
    .await;
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("redlock demo using Redis at sentinel[mymaster @ "),
        "first line: {first}"
    );
    check_use_cases(&out);
    assert!(
        redlock_tests::key_exists(set.primary().url(), "redlock-demo:{order:42:A-17}:fence").await,
        "the demo's fencing counter is on the primary"
    );
}

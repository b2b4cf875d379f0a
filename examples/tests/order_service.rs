//! The `order_service` binary as documented at its top: started as a child
//! process with `ADDR` and `REDIS_URL` (a harness Redis), then driven over
//! HTTP: a double submit (`201` + `409`), the replay, another key for the
//! same order (`200`, placed once), and `/metrics` with the lock and
//! idempotency series.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use http::StatusCode;
use redlock_examples::client::{Reply, get, post_order};
use redlock_tests::RedisServer;

async fn order(addr: SocketAddr, key: &str, body: &str) -> Reply {
    post_order(addr, "ann", key, body)
        .await
        .expect("POST /orders answered")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_service_as_documented() {
    let redis = RedisServer::start().await;
    // A free port for ADDR.
    let addr = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        probe.local_addr().expect("addr")
    };
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_order_service"))
        .env("ADDR", addr.to_string())
        .env("REDIS_URL", redis.url())
        .env("NODE", "node-a")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start order_service");

    // Up when /healthz answers (bounded: 20 s).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(reply) = get(addr, "/healthz").await
            && reply.status == StatusCode::OK
        {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("order_service exited early with {status}");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "order_service did not answer /healthz within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let body = r#"{"order_id":"A-17","sku":"book","qty":1}"#;
    let (one, two) = tokio::join!(order(addr, "\"k-1\"", body), order(addr, "\"k-1\"", body));
    let mut statuses = [one.status, two.status];
    statuses.sort();
    assert_eq!(
        statuses,
        [StatusCode::CREATED, StatusCode::CONFLICT],
        "{} / {}",
        one.body,
        two.body
    );
    let created = if one.status == StatusCode::CREATED {
        one
    } else {
        two
    };
    assert!(
        created.body.contains("\"placed_by\":\"node-a\""),
        "{}",
        created.body
    );

    let again = order(addr, "\"k-1\"", body).await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert!(again.replayed, "the replay says so");
    assert_eq!(again.body, created.body);

    // Another key, the same order: the annotated method finds it placed.
    let other = order(addr, "\"k-2\"", body).await;
    assert_eq!(other.status, StatusCode::OK, "{}", other.body);
    assert!(!other.replayed);

    let metrics = get(addr, "/metrics").await.expect("GET /metrics");
    assert_eq!(metrics.status, StatusCode::OK);
    let has = |needle: &str| {
        assert!(
            metrics.body.contains(needle),
            "/metrics lacks {needle:?}:\n{}",
            metrics.body
        );
    };
    // Two place_order calls took the order's lock (k-1 once, k-2 once).
    has(r#"redlock_lock_acquired_total{lock="order:<user_id>:<order_id>",backend="redis"} 2"#);
    has(r#"redlock_idempotency_requests_total{outcome="claimed"} 2"#);
    has(r#"redlock_idempotency_requests_total{outcome="in_progress"} 1"#);
    has(r#"redlock_idempotency_requests_total{outcome="replayed"} 1"#);
    has("# HELP redlock_lock_hold_seconds");
    has("redlock_lock_hold_seconds_bucket{");

    child.start_kill().expect("stop order_service");
    let _ = child.wait().await;
}

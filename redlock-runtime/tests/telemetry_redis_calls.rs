//! Each Redis call is a `redis` span at `TRACE` (target `redlock::redis`)
//! with OpenTelemetry's database client attribute names: the command or
//! the script's name, the error prefix of a failed call, and never a key.
//!
//! Its own test binary: `tracing` caches per call site whether anyone
//! listens, and the capture is a thread-local subscriber.

use std::time::Duration;

use redlock_runtime::LockClient;
use redlock_tests::{LogCapture, RedisServer, raw_connection};
use tracing_subscriber::fmt::format::FmtSpan;

/// Captures every span's close (with the fields recorded on it) and
/// every event, at all levels, on this thread.
fn capture() -> (LogCapture, tracing::subscriber::DefaultGuard) {
    let captured = LogCapture::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(FmtSpan::CLOSE)
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    (captured, tracing::subscriber::set_default(subscriber))
}

/// The Redis call spans closed in `text`, each as its own name and fields
/// (`redis{...}`, without the spans it ran in).
fn calls(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| l.contains("}: redlock::redis: close time.busy="))
        .filter_map(|l| {
            let start = l.find("redis{db.system.name=")?;
            let end = l[start..].find("}: ")?;
            Some(&l[start..=start + end])
        })
        .collect()
}

/// The first call span of `operation` that succeeded (the first call of
/// a script to a fresh server fails with `NOSCRIPT`, then loads it).
fn call<'t>(text: &'t str, operation: &str) -> &'t str {
    let needle = format!("db.operation.name=\"{operation}\"");
    calls(text)
        .into_iter()
        .find(|l| l.contains(&needle) && !l.contains("otel.status_code"))
        .unwrap_or_else(|| panic!("no call span of {operation} in:\n{text}"))
}

#[tokio::test(flavor = "current_thread")]
async fn redis_calls_carry_opentelemetry_names_and_no_key() {
    let (logs, _guard) = capture();
    let redis = RedisServer::start().await;
    let locks = LockClient::connect(redis.url()).await.expect("connect");

    let guard = locks
        .lock("invoice:7")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .expect("acquire");
    guard.fencing_token().await.expect("fencing token");
    guard.release().await.expect("release");
    let text = logs.text();
    let release = call(&text, "lock/release");
    for field in [
        "db.system.name=\"redis\"",
        "otel.name=\"lock/release\"",
        "otel.kind=\"client\"",
    ] {
        assert!(release.contains(field), "{field} missing: {release}");
    }
    assert!(!release.contains("status_code"), "{release}");
    call(&text, "lock/issue_fence");

    // Redis forgets its scripts: the next script call fails with
    // NOSCRIPT (its prefix on the span, as an error), then the script is
    // loaded and the call sent again.
    // A pipeline (the connect's reading of the server's settings) is a
    // batch.
    let batch = calls(&text)
        .into_iter()
        .find(|l| l.contains("db.operation.batch.size=2"))
        .unwrap_or_else(|| panic!("no pipeline of two in:\n{text}"));
    assert!(batch.contains("db.operation.name=\"BATCH "), "{batch}");

    let before = text.len();
    let mut raw = raw_connection(redis.url()).await;
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut raw)
        .await
        .expect("SCRIPT FLUSH");
    locks
        .lock("invoice:7")
        .acquire()
        .await
        .expect("acquire")
        .release()
        .await
        .expect("release");
    let all = logs.text();
    let text = &all[before..];
    let failed = calls(text)
        .into_iter()
        .find(|l| l.contains("NOSCRIPT"))
        .unwrap_or_else(|| panic!("no call failed with NOSCRIPT in:\n{text}"));
    for field in [
        "db.response.status_code=\"NOSCRIPT\"",
        "error.type=\"NOSCRIPT\"",
        "otel.status_code=\"ERROR\"",
    ] {
        assert!(failed.contains(field), "{field} missing: {failed}");
    }
    call(text, "SCRIPT LOAD");

    // No key (nor anything else a user sent) is on a call span.
    assert!(calls(&all).len() >= 6, "{all}");
    for line in calls(&all) {
        assert!(!line.contains("invoice"), "a key on a call span: {line}");
    }
}

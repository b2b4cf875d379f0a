//! What the idempotency layer logs when it is built: a store over a
//! Redlock client warns that its records are per process.
//!
//! Its own test binary: `tracing` caches per call site whether anyone
//! listens, and the capture is a thread-local subscriber.

use redlock_runtime::LockClient;
use redlock_tests::LogCapture;

#[tokio::test(flavor = "current_thread")]
async fn an_idempotency_layer_over_a_redlock_client_warns_that_it_is_per_process() {
    let (logs, _guard) = LogCapture::start();
    // Unchecked: no node needs to be up to build the client and the store.
    let redlock = LockClient::builder()
        .redlock([
            "redis://127.0.0.1:1",
            "redis://127.0.0.1:2",
            "redis://127.0.0.1:3",
        ])
        .build_unchecked()
        .expect("a Redlock client");
    assert_eq!(redlock.mode().as_str(), "redlock");
    assert_eq!(LockClient::in_memory().mode().as_str(), "memory");
    let store = redlock_axum::IdempotencyStore::from(redlock);
    assert_eq!(format!("{store:?}"), "IdempotencyStore(in-memory)");
    let text = logs.text();
    assert!(
        text.contains("WARN")
            && text.contains("a Redlock client has no single Redis to keep idempotency records in"),
        "{text}"
    );
    // An in-memory client is per-process by choice: no warning.
    let before = logs.text().len();
    let _ = redlock_axum::IdempotencyStore::from(LockClient::in_memory());
    assert_eq!(logs.text().len(), before, "{}", logs.text());
}

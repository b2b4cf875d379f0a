//! The `tracing` spans: `redlock.acquire`, `redlock.hold` and
//! `redlock.release` carry the key and the fencing token, so every event
//! logged while a lock is held says which lock and which token.
//!
//! Its own test binary: `tracing` caches per call site whether anyone
//! listens, and the capture is a thread-local subscriber.

use std::time::Duration;

use redlock_runtime::{LockClient, LostReason};
use redlock_tests::{LogCapture, RedisServer};
use tracing::Instrument as _;

/// The first line of `text` that holds `needle`.
fn line_with(text: &str, needle: &str) -> String {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
        .to_owned()
}

#[tokio::test(flavor = "current_thread")]
async fn spans_carry_the_key_and_the_fencing_token() {
    let (logs, _guard) = LogCapture::start();
    let redis = RedisServer::start().await;
    let locks = LockClient::connect(redis.url()).await.expect("connect");

    // Two acquisitions: the spans carry the second one's token.
    locks
        .lock("invoice:7")
        .acquire()
        .await
        .expect("acquire")
        .release()
        .await
        .expect("release");
    let token = locks
        .lock("invoice:7")
        .run(async {
            // The token is recorded on the hold span once issued (here, on
            // first ask): events from then on carry it.
            let token = match redlock_runtime::current_lock() {
                Some(held) => Some(held.fencing_token().await.expect("fencing token")),
                None => None,
            };
            tracing::info!("writing the invoice");
            token
        })
        .await
        .expect("run")
        .expect("inside the scope");
    let hold = format!("redlock.hold{{key=invoice:7 fencing_token={token}}}");
    let text = logs.text();
    let line = |needle: &str| line_with(&text, needle);
    // The body's own event, inside the hold span.
    let body = line("writing the invoice");
    assert!(body.contains(&hold), "{body}");
    // The acquire's events, inside the acquire span.
    let acquired = line("lock acquired");
    assert!(
        acquired.contains("redlock.acquire{key=invoice:7 wait_ms=0"),
        "{acquired}"
    );
    // The release, inside the hold span of the token it released.
    let released = text
        .lines()
        .filter(|l| l.contains("lock released"))
        .nth(1)
        .unwrap_or_else(|| panic!("two releases in:\n{text}"));
    assert!(
        released.contains(&format!(
            "{hold}:redlock.release{{key=invoice:7 fencing_token={token}}}"
        )),
        "{released}"
    );

    // A guard's span, for the plain API; and the loss is logged in it.
    let guard = locks
        .lock("invoice:8")
        .ttl(Duration::from_millis(100))
        .renew(false)
        .acquire()
        .await
        .expect("acquire");
    let hold = format!(
        "redlock.hold{{key=invoice:8 fencing_token={}}}",
        guard.fencing_token().await.expect("fencing token")
    );
    async { tracing::info!("working under the guard") }
        .instrument(guard.span().clone())
        .await;
    assert_eq!(guard.lost().await, LostReason::Expired);
    drop(guard);
    let text = logs.text();
    let work = text
        .lines()
        .find(|l| l.contains("working under the guard"))
        .expect("the work's event");
    assert!(work.contains(&hold), "{work}");
    let lost = text
        .lines()
        .find(|l| l.contains("lock lost"))
        .expect("the loss is logged");
    assert!(lost.contains("WARN") && lost.contains(&hold), "{lost}");
}

#[tokio::test(flavor = "current_thread")]
async fn the_hold_is_beside_the_acquire_under_the_callers_span() {
    // The acquire span ends when the wait does: the hold span is not its
    // child (a child keeps its parent open, so "acquire" looked as long
    // as the work), but its sibling under the caller's span. No token is
    // shown as 0 when none was issued.
    let (logs, _guard) = LogCapture::start();
    let redis = RedisServer::start().await;
    // A plain lock on one Redis: no fencing token until one is asked for.
    let locks = LockClient::connect(redis.url()).await.expect("connect");
    locks
        .lock("report:9")
        .run(async { tracing::info!("writing the report") })
        .instrument(tracing::info_span!("request", id = 7))
        .await
        .expect("run");
    let text = logs.text();
    let line = |needle: &str| line_with(&text, needle);
    let body = line("writing the report");
    assert!(
        body.contains("request{id=7}:redlock.hold{key=report:9}"),
        "the hold span, right under the caller's: {body}"
    );
    assert!(!body.contains("redlock.acquire"), "{body}");
    let acquired = line("lock acquired");
    assert!(
        acquired.contains("request{id=7}:redlock.acquire{key=report:9 wait_ms=0}"),
        "{acquired}"
    );
    for l in text.lines().filter(|l| l.contains("report:9")) {
        assert!(!l.contains("fencing_token=0"), "a token shown as 0: {l}");
    }
}

//! What the runtime logs: every lock event with its key, never the owner
//! token or a password.
//!
//! A test binary of its own: `tracing` caches per call site whether anyone
//! listens, and tests on other threads of the same process (with no
//! subscriber) race with the thread-local subscriber used here.

use std::time::Duration;

use redlock_runtime::LockClient;
use redlock_tests::{LogCapture, RedisServer};

async fn client(url: &str) -> LockClient {
    LockClient::connect(url)
        .await
        .expect("connect to the test Redis")
}

#[test]
fn logs_carry_the_key_and_never_the_token_or_password() {
    let (captured, _capturing) = LogCapture::start();
    // One thread: every task, the watchdog included, logs to this subscriber.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut tokens = Vec::new();
    rt.block_on(async {
        let server = RedisServer::start().await;
        let locks = client(&server.url()).await;
        let ttl = Duration::from_millis(300);
        // acquire, renew, release
        let guard = locks
            .lock("audit")
            .ttl(ttl)
            .acquire()
            .await
            .expect("acquire");
        tokens.push(redlock_runtime::test_util::owner_token(&guard).to_owned());
        tokio::time::sleep(ttl).await;
        guard.release().await.expect("release");
        // wait, then lost
        let guard = locks
            .lock("audit")
            .ttl(ttl)
            .renew(false)
            .acquire()
            .await
            .expect("acquire");
        tokens.push(redlock_runtime::test_util::owner_token(&guard).to_owned());
        let err = locks
            .lock("audit")
            .wait(Duration::from_millis(50))
            .acquire()
            .await
            .expect_err("busy");
        assert!(err.is_busy());
        guard.lost().await;
        // An unreachable server with a password in its URL.
        let _ = LockClient::connect("redis://:hunter2@127.0.0.1:1").await;
    });
    let logs = captured.text();
    for event in [
        "lock acquired",
        "lock busy, waiting",
        "lock renewed",
        "lock released",
        "lock lost",
    ] {
        assert!(logs.contains(event), "no {event:?} event in:\n{logs}");
    }
    assert!(logs.contains("key=audit"), "events carry the key:\n{logs}");
    for token in &tokens {
        assert!(
            !logs.contains(token.as_str()),
            "the owner token leaked into the logs"
        );
    }
    assert!(
        !logs.contains("hunter2"),
        "the password leaked into the logs"
    );
}

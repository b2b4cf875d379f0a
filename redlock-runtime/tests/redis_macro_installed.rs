//! `#[distributed_lock]` without `client = ..`: the process-wide client from
//! `redlock_runtime::install`. Its own test binary, with one test, because
//! the installed client is global to the process.

use std::sync::atomic::{AtomicUsize, Ordering};

use redlock_runtime::{ConfigError, LockClient, LockError, current_lock, distributed_lock};
use redlock_tests::RedisServer;

static RUNS: AtomicUsize = AtomicUsize::new(0);

#[distributed_lock(key = "report:<id>", ttl = "10s")]
async fn report(id: u32) -> Result<(String, usize), LockError> {
    RUNS.fetch_add(1, Ordering::SeqCst);
    let held = current_lock().expect("held");
    // Nested call on the same key through the same installed client.
    let depth = nested(id).await?;
    Ok((held.key().to_owned(), depth))
}

#[distributed_lock(key = "report:<id>")]
async fn nested(id: u32) -> Result<usize, LockError> {
    Ok(current_lock().expect("held").depth())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_installed_client_serves_functions_without_their_own() {
    // Before install: a clear error naming `install`, and no body run.
    let error = report(1).await.expect_err("no client is installed yet");
    assert!(
        matches!(error, LockError::Config(ConfigError::NotInstalled)),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("redlock_runtime::install(client)"),
        "{message}"
    );
    assert!(message.contains("client = .."), "{message}");
    assert_eq!(RUNS.load(Ordering::SeqCst), 0);

    let first = RedisServer::start().await;
    let second = RedisServer::start().await;
    let previous =
        redlock_runtime::install(LockClient::connect(first.url()).await.expect("connect"));
    assert!(previous.is_none());
    assert_eq!(
        report(1).await.expect("locks through the installed client"),
        ("report:1".to_owned(), 2)
    );

    // The key lives in the installed client's Redis while held.
    let guard = redlock_runtime::installed()
        .expect("installed")
        .lock("report:2")
        .acquire()
        .await
        .expect("acquire");
    assert!(redlock_tests::key_exists(&first.url(), "lock:{report:2}").await);
    let busy = report(2).await.expect_err("held by the guard");
    assert!(busy.is_busy(), "{busy}");
    drop(guard);

    // Installing again replaces the client.
    let replaced =
        redlock_runtime::install(LockClient::connect(second.url()).await.expect("connect"));
    assert!(replaced.is_some());
    let held = LockClient::connect(first.url())
        .await
        .expect("connect")
        .lock("report:3")
        .acquire()
        .await
        .expect("acquire on the first Redis");
    // Held on the first Redis only: the second one lets the call run.
    assert!(report(3).await.is_ok());
    held.release().await.expect("release");
    assert_eq!(RUNS.load(Ordering::SeqCst), 2);
}

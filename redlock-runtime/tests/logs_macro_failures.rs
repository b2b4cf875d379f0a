//! A `#[distributed_lock]` job that returns `()` or `Option<T>` cannot hand
//! a lock failure to its caller, so each failure that is not "busy" (no
//! installed client, Redis unreachable) is an error-level event naming the
//! function and the key template; `Result<Option<T>, E>` returns it
//! instead, and `require_installed` catches a forgotten `install` at
//! start-up. Also where `#[instrument(err)]` sees the lock, by attribute
//! order. A test binary of its own, as `logs.rs` explains; one test, so
//! that no other install races with the missing one.

use std::time::Duration;

use redlock_runtime::{LockClient, LockError, distributed_lock};
use redlock_tests::LogCapture;

/// Uses the installed client: there is none until the test installs one.
#[distributed_lock(key = "job:daily-report", on_busy = "skip")]
async fn daily_report() {
    unreachable!("the body must not run without a client");
}

#[distributed_lock(key = "report:<id>", on_busy = "skip", client = locks)]
async fn report(locks: &LockClient, id: u32) -> Option<u32> {
    Some(id)
}

#[distributed_lock(key = "sync:<id>", on_busy = "skip", client = locks)]
async fn sync(locks: &LockClient, id: u32) -> Result<Option<u32>, LockError> {
    Ok(Some(id))
}

/// `#[instrument]` below `#[distributed_lock]`: wraps the whole call.
#[distributed_lock(key = "outer", client = locks)]
#[tracing::instrument(name = "around_the_lock", err, skip_all)]
async fn around_the_lock(locks: &LockClient) -> Result<(), LockError> {
    Ok(())
}

/// `#[instrument]` above `#[distributed_lock]`: wraps the body only.
#[tracing::instrument(name = "inside_the_lock", err, skip_all)]
#[distributed_lock(key = "inner", client = locks)]
async fn inside_the_lock(locks: &LockClient) -> Result<(), LockError> {
    Ok(())
}

/// The captured lines at ERROR level.
fn errors(logs: &str) -> Vec<&str> {
    logs.lines().filter(|l| l.contains("ERROR")).collect()
}

#[test]
fn failures_of_jobs_that_cannot_return_them_are_logged_at_error_level() {
    let (captured, _capturing) = LogCapture::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        // No client installed: the start-up check says so, and each call
        // of the job is an error event naming it and its key.
        let missing = redlock_runtime::require_installed().expect_err("nothing installed");
        assert!(missing.to_string().contains("install"), "{missing}");
        daily_report().await;
        daily_report().await;
        let logs = captured.text();
        let lines = errors(&logs);
        assert_eq!(lines.len(), 2, "one error event per call:\n{logs}");
        for line in lines {
            assert!(
                line.contains("function=logs_macro_failures::daily_report"),
                "{line}"
            );
            assert!(line.contains("key_template=job:daily-report"), "{line}");
            assert!(line.contains("redlock_runtime::install"), "{line}");
        }

        // Redis unreachable (nothing listens on the port).
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("addr").port()
        };
        let down = LockClient::builder()
            .url(format!("redis://127.0.0.1:{port}"))
            .connection_timeout(Duration::from_millis(200))
            .command_timeout(Duration::from_millis(200))
            .build_unchecked()
            .expect("a client");
        let before = errors(&captured.text()).len();
        assert_eq!(report(&down, 7).await, None, "looks skipped to the caller");
        let logs = captured.text();
        let lines = errors(&logs);
        assert_eq!(lines.len(), before + 1, "{logs}");
        let line = lines[before];
        assert!(
            line.contains("function=logs_macro_failures::report"),
            "{line}"
        );
        assert!(line.contains("key_template=report:<id>"), "{line}");
        assert!(line.contains("report:7"), "the error names the key: {line}");

        // `Result<Option<T>, E>`: the caller gets the error, not a skip,
        // and nothing is logged for it.
        let error = sync(&down, 1).await.expect_err("Redis is down");
        assert!(error.is_transient() && !error.is_busy(), "{error}");
        assert_eq!(errors(&captured.text()).len(), before + 1);

        // Busy is not a failure: skipped, at debug level only.
        let locks = LockClient::in_memory();
        let held = locks.lock("report:8").acquire().await.expect("acquire");
        assert_eq!(report(&locks, 8).await, None);
        assert!(matches!(sync(&locks, 2).await, Ok(Some(2))));
        held.release().await.expect("release");
        assert_eq!(errors(&captured.text()).len(), before + 1);

        // Once a client is installed, the check passes and the job runs.
        redlock_runtime::install(locks.clone());
        redlock_runtime::require_installed().expect("installed");

        // `#[instrument(err)]` below `#[distributed_lock]` sees a busy error
        // (and the wait); above it, only the body, so not the busy error.
        let held_outer = locks.lock("outer").acquire().await.expect("acquire");
        let held_inner = locks.lock("inner").acquire().await.expect("acquire");
        assert!(around_the_lock(&locks).await.expect_err("busy").is_busy());
        assert!(inside_the_lock(&locks).await.expect_err("busy").is_busy());
        held_outer.release().await.expect("release");
        held_inner.release().await.expect("release");
    });
    let logs = captured.text();
    let busy_errors: Vec<&str> = errors(&logs)
        .into_iter()
        .filter(|l| l.contains("held by another owner"))
        .collect();
    assert_eq!(busy_errors.len(), 1, "{logs}");
    assert!(
        busy_errors[0].contains("around_the_lock"),
        "{}",
        busy_errors[0]
    );
}

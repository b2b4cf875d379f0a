//! `on_busy = "skip"` on the three return shapes that tell a skipped call
//! from one that ran, decided by type (so aliases work): `()`, `Option<T>`
//! (`None`: skipped) and `Result<Option<T>, E>` (`Ok(None)`: skipped,
//! `Err`: the lock failed).
use redlock_runtime::{LockClient, LockError, distributed_lock};

#[derive(Debug)]
enum AppError {
    Lock(LockError),
}

impl From<LockError> for AppError {
    fn from(e: LockError) -> Self {
        AppError::Lock(e)
    }
}

type AppResult<T> = Result<T, AppError>;

#[distributed_lock(key = "job:unit", on_busy = "skip", client = locks)]
async fn unit(locks: &LockClient, ran: &mut bool) {
    *ran = true;
}

#[distributed_lock(key = "job:option", on_busy = "skip", client = locks)]
async fn option(locks: &LockClient) -> Option<u32> {
    Some(1)
}

#[distributed_lock(key = "job:result", on_busy = "skip", wait = "0s", client = locks)]
async fn result(locks: &LockClient) -> Result<Option<Vec<u32>>, LockError> {
    Ok(Some(vec![1]))
}

#[distributed_lock(key = "job:alias", on_busy = "skip", client = locks)]
async fn alias(locks: &LockClient) -> AppResult<Option<u32>> {
    Ok(Some(2))
}

#[distributed_lock(key = "job:io", on_busy = "skip", client = locks)]
async fn io(locks: &LockClient) -> std::io::Result<Option<u32>> {
    Ok(Some(3))
}

#[distributed_lock(key = "job:boxed", on_busy = "skip", client = locks)]
async fn boxed(
    locks: &LockClient,
) -> Result<Option<u32>, Box<dyn std::error::Error + Send + Sync>> {
    Ok(Some(4))
}

#[derive(Debug, PartialEq)]
struct Report {
    lines: usize,
}

#[distributed_lock(key = "job:report", on_busy = "skip", hold_at_least = "1m", client = locks)]
async fn report(locks: &LockClient) -> Option<Report> {
    Some(Report { lines: 3 })
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let locks = LockClient::in_memory();
    let mut ran = false;
    unit(&locks, &mut ran).await;
    assert!(ran);
    assert_eq!(option(&locks).await, Some(1));
    assert_eq!(result(&locks).await.unwrap(), Some(vec![1]));
    assert_eq!(alias(&locks).await.unwrap(), Some(2));
    assert_eq!(io(&locks).await.unwrap(), Some(3));
    assert_eq!(boxed(&locks).await.unwrap(), Some(4));
    assert_eq!(report(&locks).await, Some(Report { lines: 3 }));
    // hold_at_least keeps the job taken after the first run.
    assert_eq!(report(&locks).await, None);

    // Held by another owner: every body is skipped, and says so.
    let mut held = Vec::new();
    for key in ["job:unit", "job:option", "job:result", "job:alias", "job:io", "job:boxed"] {
        held.push(locks.lock(key).acquire().await.unwrap());
    }
    let mut ran = false;
    unit(&locks, &mut ran).await;
    assert!(!ran);
    assert_eq!(option(&locks).await, None);
    assert_eq!(result(&locks).await.unwrap(), None);
    assert_eq!(alias(&locks).await.unwrap(), None);
    assert_eq!(io(&locks).await.unwrap(), None);
    assert_eq!(boxed(&locks).await.unwrap(), None);

    // A failure other than busy (here a key whose `Display` fails) is an
    // error the `Result` shapes return.
    struct Failing;
    impl std::fmt::Display for Failing {
        fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            Err(std::fmt::Error)
        }
    }
    #[distributed_lock(key = "job:<name>", on_busy = "skip", client = locks)]
    async fn failing(locks: &LockClient, name: Failing) -> AppResult<Option<u32>> {
        Ok(Some(5))
    }
    #[distributed_lock(key = "job:<name>", on_busy = "skip", client = locks)]
    async fn failing_io(locks: &LockClient, name: Failing) -> std::io::Result<Option<u32>> {
        Ok(Some(6))
    }
    assert!(matches!(
        failing(&locks, Failing).await,
        Err(AppError::Lock(LockError::InvalidKey { .. }))
    ));
    let io_error = failing_io(&locks, Failing).await.unwrap_err();
    assert_eq!(io_error.kind(), std::io::ErrorKind::Other);
    assert!(io_error.to_string().contains("invalid lock key"), "{io_error}");
}

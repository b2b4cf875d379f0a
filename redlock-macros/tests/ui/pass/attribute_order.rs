//! Attributes that rewrite an `async fn` compose when `#[distributed_lock]`
//! is above them, since the top attribute expands first: it sees the
//! `async fn` and leaves a rewritten `async fn` for the next one.
use redlock_runtime::{LockClient, LockError, distributed_lock};

/// `#[instrument]` below: its span and `err` cover the whole call, the
/// wait for the lock and a busy error included.
#[distributed_lock(key = "outer:<id>", client = locks)]
#[tracing::instrument(err, skip(locks))]
async fn span_around_the_lock(locks: &LockClient, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

/// `#[instrument]` above: it rewrites the body first, so its span and `err`
/// cover only the body, which runs holding the lock.
#[tracing::instrument(err, skip(locks))]
#[distributed_lock(key = "inner:<id>", client = locks)]
async fn span_inside_the_lock(locks: &LockClient, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

/// `#[tokio::test]` below: the test body runs holding the lock.
#[distributed_lock(key = "test:locked")]
#[tokio::test]
async fn locked_test() -> Result<(), LockError> {
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let locks = LockClient::in_memory();
    assert_eq!(span_around_the_lock(&locks, 1).await.unwrap(), 1);
    assert_eq!(span_inside_the_lock(&locks, 2).await.unwrap(), 2);
}

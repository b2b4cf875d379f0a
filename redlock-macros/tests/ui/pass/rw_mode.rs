//! `mode = "read"` and `mode = "write"`: a read/write lock's read and write
//! locks, with every option a read/write lock takes, on free functions and
//! methods, with both `on_busy`; and `mode = "exclusive"`, today's plain
//! lock with every option.
use std::time::Duration;

use redlock_runtime::{LockClient, LockError, distributed_lock};

mod renamed {
    pub use redlock_runtime as locks;
}

#[distributed_lock(key = "product:<id>", mode = "read", client = locks)]
async fn read(locks: &LockClient, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock(
    key = "product:<id>",
    mode = "write",
    ttl = "1h 30m",
    wait = Duration::from_millis(250),
    on_busy = "error",
    renew = false,
    on_lost = "signal",
    client = locks,
    crate = "crate::renamed::locks",
)]
async fn write(locks: &LockClient, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock(key = "product:<id>", mode = "read", on_busy = "skip", client = locks)]
async fn read_or_skip(locks: &LockClient, id: u32) -> Option<u32> {
    Some(id)
}

#[distributed_lock(key = "product:<id>", mode = "write", on_busy = "skip", client = locks)]
async fn write_or_skip(locks: &LockClient, id: u32) -> Result<Option<u32>, LockError> {
    Ok(Some(id))
}

#[distributed_lock(
    key = "plain:<id>",
    mode = "exclusive",
    hold_at_least = "1ms",
    fair = true,
    client = locks
)]
async fn exclusive(locks: &LockClient, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

struct Catalog {
    locks: LockClient,
}

impl Catalog {
    #[distributed_lock(key = "product:<id>", mode = "read", wait = "1s", client = self.locks)]
    async fn price(&self, id: u32) -> Result<u32, LockError> {
        // A read inside a read of the same key re-enters.
        read(&self.locks, id).await
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let locks = LockClient::in_memory();
    assert_eq!(read(&locks, 1).await.unwrap(), 1);
    assert_eq!(write(&locks, 2).await.unwrap(), 2);
    assert_eq!(exclusive(&locks, 3).await.unwrap(), 3);
    let catalog = Catalog {
        locks: locks.clone(),
    };
    assert_eq!(catalog.price(4).await.unwrap(), 4);

    // A read/write lock's keys are apart from a plain lock's.
    let plain = locks.lock("product:5").acquire().await.unwrap();
    assert_eq!(read(&locks, 5).await.unwrap(), 5);
    plain.release().await.unwrap();

    let writer = locks.rw_lock("product:6").write().acquire().await.unwrap();
    assert!(read(&locks, 6).await.unwrap_err().is_busy());
    assert_eq!(read_or_skip(&locks, 6).await, None);
    assert!(matches!(write_or_skip(&locks, 6).await, Ok(None)));
    writer.release().await.unwrap();
    assert_eq!(read_or_skip(&locks, 6).await, Some(6));
}

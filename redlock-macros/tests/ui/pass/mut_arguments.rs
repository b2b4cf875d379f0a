//! Assigning to a field of a `mut` argument is no `unused_assignments`
//! warning (the body's `async move` block would capture `req.attempts` on
//! its own): compiled with every warning an error.
#![deny(warnings)]

use redlock_runtime::{LockClient, LockError, distributed_lock};

struct Request {
    id: u64,
    attempts: u32,
}

#[distributed_lock(key = "req:<req.id>", client = locks)]
async fn by_value(locks: &LockClient, mut req: Request) -> Result<u32, LockError> {
    req.attempts = 1;
    req.attempts += 1;
    Ok(req.attempts)
}

#[distributed_lock(key = "req:<req.id>", client = locks)]
async fn by_mut_ref(locks: &LockClient, req: &mut Request) -> Result<u32, LockError> {
    req.attempts = 1;
    Ok(req.attempts)
}

#[distributed_lock(key = "n:<n>", on_busy = "skip", client = locks)]
async fn counter(locks: &LockClient, mut n: u32) -> Option<u32> {
    n += 1;
    Some(n)
}

/// `mut` on an argument only the key names.
#[distributed_lock(key = "k:<n>", client = locks)]
async fn key_only(locks: &LockClient, n: u32) -> Result<(), LockError> {
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let locks = LockClient::in_memory();
    let req = Request { id: 1, attempts: 0 };
    assert_eq!(by_value(&locks, req).await.unwrap(), 2);
    let mut req = Request { id: 2, attempts: 0 };
    assert_eq!(by_mut_ref(&locks, &mut req).await.unwrap(), 1);
    assert_eq!(req.attempts, 1);
    assert_eq!(counter(&locks, 1).await, Some(2));
    key_only(&locks, 3).await.unwrap();
}

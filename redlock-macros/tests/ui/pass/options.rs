//! Every option at once, each form of value, and `crate = ".."`.
use redlock_runtime::{LockClient, LockError, distributed_lock};

mod renamed {
    pub use redlock_runtime as locks;
}

#[distributed_lock(
    key = "all:<id>",
    ttl = "1h 30m",
    wait = "250ms",
    on_busy = "error",
    hold_at_least = "2s",
    renew = false,
    on_lost = "signal",
    fair = true,
    client = locks,
    crate = "crate::renamed::locks",
)]
async fn all_options(locks: &LockClient, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock(key = "renew:<id>", renew = true, on_lost = "cancel", fair = false, client = locks)]
async fn defaults_spelled_out(locks: &LockClient, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[derive(Debug)]
enum AppError {
    Lock(LockError),
    Parse(std::num::ParseIntError),
}

impl From<LockError> for AppError {
    fn from(e: LockError) -> Self {
        AppError::Lock(e)
    }
}

impl From<std::num::ParseIntError> for AppError {
    fn from(e: std::num::ParseIntError) -> Self {
        AppError::Parse(e)
    }
}

/// `?` and `return` inside the body, an inner attribute, `<<` and `>>`.
#[distributed_lock(key = "parse:<<<text>>>", client = locks)]
async fn parse(locks: &LockClient, text: &str) -> Result<u32, AppError> {
    #![allow(clippy::needless_return)]
    if text.is_empty() {
        return Ok(0);
    }
    let n: u32 = text.parse()?;
    Ok(n)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let locks = LockClient::in_memory();
    assert_eq!(all_options(&locks, 1).await.unwrap(), 1);
    assert_eq!(defaults_spelled_out(&locks, 2).await.unwrap(), 2);
    assert_eq!(parse(&locks, "").await.unwrap(), 0);
    assert_eq!(parse(&locks, "12").await.unwrap(), 12);
    assert!(matches!(parse(&locks, "x").await, Err(AppError::Parse(_))));
    let held = locks.lock("parse:<12>").acquire().await.unwrap();
    assert!(matches!(parse(&locks, "12").await, Err(AppError::Lock(e)) if e.is_busy()));
    drop(held);
}

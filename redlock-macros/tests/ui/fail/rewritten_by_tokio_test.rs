//! `#[tokio::test]` above `#[distributed_lock]` expands first and turns the
//! `async fn` into a plain `fn` that runs an `async` block.
use redlock_runtime::distributed_lock;

#[tokio::test]
#[distributed_lock(key = "job:<id>")]
async fn locked_test() -> Result<(), redlock_runtime::LockError> {
    Ok(())
}

/// Likewise `#[tokio::main]`, or any attribute that makes an `async fn` a
/// plain one.
#[tokio::main(flavor = "current_thread")]
#[distributed_lock(key = "main")]
async fn main() -> Result<(), redlock_runtime::LockError> {
    Ok(())
}

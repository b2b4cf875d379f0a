//! Without `client = ..` and before `install`: a runtime error naming
//! `install`, and the body does not run.
use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "job:<id>")]
async fn job(id: u32) -> Result<u32, LockError> {
    unreachable!("the body must not run without a client ({id})")
}

#[distributed_lock(key = "job:<id>", on_busy = "skip")]
async fn skipped(id: u32) -> Option<u32> {
    unreachable!("the body must not run without a client ({id})")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let error = job(1).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("redlock_runtime::install(client)"), "{message}");
    assert_eq!(skipped(1).await, None);
}

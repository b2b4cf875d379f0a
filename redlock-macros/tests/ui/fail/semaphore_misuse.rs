use redlock_runtime::{LockError, distributed_semaphore};

#[distributed_semaphore(key = "jobs:<queue>", permits = 2)]
async fn unknown_placeholder(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_semaphore(key = "jobs", permits = 2)]
async fn unit() {}

#[distributed_semaphore(key = "jobs", permits = 2)]
fn not_async() -> Result<(), LockError> {
    Ok(())
}

#[distributed_semaphore(key = "jobs", permits = 2, on_busy = "skip")]
async fn skip_as_value() -> Result<u32, LockError> {
    Ok(1)
}

fn main() {}

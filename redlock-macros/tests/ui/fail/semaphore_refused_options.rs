use redlock_runtime::{LockError, distributed_lock, distributed_semaphore};

#[distributed_semaphore(
    key = "jobs",
    permits = 2,
    mode = "read",
    keys = ["a", "b"],
    fair = true,
    hold_at_least = "1s",
    tll = "1s"
)]
async fn job(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock(key = "jobs", permits = 2)]
async fn lock_with_permits(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {}

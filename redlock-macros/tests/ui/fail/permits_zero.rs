use redlock_runtime::{LockError, distributed_semaphore};

#[distributed_semaphore(key = "jobs", permits = 0)]
async fn job(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {}

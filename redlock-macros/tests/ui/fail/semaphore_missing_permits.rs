use redlock_runtime::{LockError, distributed_semaphore};

#[distributed_semaphore(key = "jobs", wait = "5s")]
async fn job(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_semaphore]
async fn bare(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {}

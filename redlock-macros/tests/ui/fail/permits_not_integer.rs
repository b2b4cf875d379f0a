use redlock_runtime::{LockError, distributed_semaphore};

const LIMIT: u32 = 4;

#[distributed_semaphore(key = "jobs", permits = "4")]
async fn string(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_semaphore(key = "jobs", permits = 2.5)]
async fn float(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_semaphore(key = "jobs", permits = LIMIT)]
async fn constant(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_semaphore(key = "jobs", permits = 4i8)]
async fn suffixed(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_semaphore(key = "jobs", permits = 4294967296)]
async fn too_large(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {}

use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(ttl = "15s")]
async fn job(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock]
async fn bare(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {}

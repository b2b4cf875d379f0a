use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "job:<id>", ttl = "15s", ttl = "20s", key = "job")]
async fn job(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {}

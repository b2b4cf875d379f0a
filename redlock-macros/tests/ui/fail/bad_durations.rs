use redlock_runtime::{LockError, distributed_lock};

// All three reported at once.
#[distributed_lock(key = "a:<id>", ttl = "0s", wait = "2days", hold_at_least = "15 parsecs")]
async fn a(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock(key = "b:<id>", ttl = "15", wait = "soon", hold_at_least = "0ms")]
async fn b(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {}

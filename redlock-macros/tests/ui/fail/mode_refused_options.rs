use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "product:<id>", mode = "read", fair = true)]
async fn fair_read(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock(key = "product:<id>", mode = "write", hold_at_least = "30s", fair = false)]
async fn held_write(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {}

use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "a:<id>", on_busy = "sometimes", on_lost = "panic", renew = "no")]
async fn a(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock(key = job, ttl = 15, crate = "1 + 2", fair = yes)]
async fn b(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {}

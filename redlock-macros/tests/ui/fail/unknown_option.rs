use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "job:<id>", tll = "15s", timeout = "1s")]
async fn job(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {
    // The function is still emitted, so this call adds no second error.
    let _ = job(1);
}

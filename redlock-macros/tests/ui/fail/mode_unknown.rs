use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "product:<id>", mode = "upgrade")]
async fn upgrade(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock(key = "product:<id>", mode = read)]
async fn unquoted(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {
    // The functions are still emitted, so these calls add no second error.
    let _ = upgrade(1);
    let _ = unquoted(1);
}

use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "")]
async fn empty(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock(key = "order:<user id>:<>:<id")]
async fn malformed(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock(key = "order:<id.>:x>")]
async fn unmatched(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {}

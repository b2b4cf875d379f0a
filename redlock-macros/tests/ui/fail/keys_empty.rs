use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(keys = [], wait = "5s")]
async fn nothing(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {}

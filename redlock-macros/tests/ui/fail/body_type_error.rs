//! A type error in the body points into the body and at the return type,
//! as it would without the macro.
use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "job:<id>")]
async fn job(id: u32) -> Result<String, LockError> {
    Ok(id)
}

fn main() {}

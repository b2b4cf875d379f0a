//! `dead_code` still fires on an annotated function nobody calls.
#![deny(dead_code)]

use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "job:<id>")]
async fn unused(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {}

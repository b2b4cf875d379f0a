use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "job:<id>")]
fn job(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {
    // Still emitted: the caller compiles.
    let _ = job(1);
}

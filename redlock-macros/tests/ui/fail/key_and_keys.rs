use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "account:<from>", keys = ["account:<from>", "account:<to>"])]
async fn transfer(from: u64, to: u64) -> Result<(), LockError> {
    Ok(())
}

fn main() {}

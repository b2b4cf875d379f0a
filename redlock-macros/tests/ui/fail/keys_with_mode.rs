use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(keys = ["account:<from>", "account:<to>"], mode = "read")]
async fn balances(from: u64, to: u64) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(keys = ["a:<from>", "b:<to>"], fair = true, hold_at_least = "1s")]
async fn fair_transfer(from: u64, to: u64) -> Result<(), LockError> {
    Ok(())
}

fn main() {}

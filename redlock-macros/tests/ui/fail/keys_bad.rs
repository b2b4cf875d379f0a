use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(keys = "account:<from>")]
async fn not_a_list(from: u64) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(keys = ["account:<from>", to])]
async fn not_a_literal(from: u64, to: u64) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(keys = ["account:<from>", "account:<from>"])]
async fn twice(from: u64) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(keys = ["account:<from>", "account:<too>", "ledger:<"])]
async fn bad_templates(from: u64, to: u64) -> Result<(), LockError> {
    Ok(())
}

fn main() {}

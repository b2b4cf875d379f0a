use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "order:<user_id>:<order>")]
async fn place(user_id: u64, order_id: &str) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(key = "tenant:<self.tenant>")]
async fn free(tenant: &str) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(key = "job:<id>")]
async fn no_args() -> Result<(), LockError> {
    Ok(())
}

fn main() {}

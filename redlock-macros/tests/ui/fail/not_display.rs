use redlock_runtime::{LockError, distributed_lock};

struct OrderId(u64);

#[distributed_lock(key = "order:<id>")]
async fn place(id: OrderId) -> Result<u64, LockError> {
    Ok(id.0)
}

fn main() {}

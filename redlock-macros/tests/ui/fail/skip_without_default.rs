use redlock_runtime::{LockError, distributed_lock};

struct Order;

#[distributed_lock(key = "order:<id>", on_busy = "skip")]
async fn plain(id: u64) -> Order {
    let _ = id;
    Order
}

#[distributed_lock(key = "order:<id>", on_busy = "skip")]
async fn in_result(id: u64) -> Result<Order, LockError> {
    let _ = id;
    Ok(Order)
}

fn main() {}

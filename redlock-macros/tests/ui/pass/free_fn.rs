//! A free function with the installed client: placeholders, ttl, wait.
use redlock_runtime::{LockClient, LockError, current_lock, distributed_lock};

/// Docs and attributes stay on the function.
#[must_use = "the order must be checked"]
#[distributed_lock(key = "order:<user_id>:<order_id>", ttl = "15s", wait = "5s")]
pub async fn place_order(user_id: u64, order_id: &str) -> Result<String, LockError> {
    let held = current_lock().expect("the body runs holding the lock");
    Ok(format!("{} {user_id} {order_id}", held.key()))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    redlock_runtime::install(LockClient::in_memory());
    let placed = place_order(42, "A:17").await.unwrap();
    assert_eq!(placed, "order:42:A%3A17 42 A:17");
}

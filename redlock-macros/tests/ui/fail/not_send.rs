//! The future is `Send` exactly when the original body's is: an `Rc` held
//! across an `.await` makes it not `Send`, as it would without the macro.
use std::rc::Rc;

use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "job:<id>")]
async fn job(id: u32) -> Result<u32, LockError> {
    let shared = Rc::new(id);
    std::future::ready(()).await;
    Ok(*shared)
}

fn assert_send<T: Send>(_: T) {}

fn main() {
    assert_send(job(1));
}

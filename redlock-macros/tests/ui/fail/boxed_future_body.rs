//! A plain `fn` returning a boxed future is taken only in the shape
//! `#[async_trait]` writes: `Box::pin(async move { .. })`.
use std::future::Future;
use std::pin::Pin;

use redlock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "job:<id>")]
fn job(id: u32) -> Pin<Box<dyn Future<Output = Result<u32, LockError>> + Send>> {
    let ready = std::future::ready(Ok(id));
    Box::pin(ready)
}

fn main() {}

//! A lock failure cannot be returned as `()`. The rejected function is
//! still emitted, quietly: `id`, named only in the key, is not reported
//! unused.
use redlock_runtime::distributed_lock;

#[distributed_lock(key = "job:<id>")]
async fn job(id: u32) {}

fn main() {}

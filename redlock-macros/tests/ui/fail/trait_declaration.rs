use redlock_runtime::{LockError, distributed_lock};

trait Jobs {
    #[distributed_lock(key = "job:<id>")]
    async fn run(&self, id: u32) -> Result<u32, LockError>;
}

#[distributed_lock(key = "job")]
struct NotAFunction;

fn main() {}

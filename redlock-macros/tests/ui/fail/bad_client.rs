use redlock_runtime::{LockError, distributed_lock};

struct Service {
    name: String,
}

impl Service {
    #[distributed_lock(key = "job:<id>", client = self.name)]
    async fn job(&self, id: u32) -> Result<u32, LockError> {
        Ok(id)
    }
}

fn main() {}

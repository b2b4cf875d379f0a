use redlock_runtime::{LockError, distributed_lock};

// An expression must be a `Duration`: the error points at it.
#[distributed_lock(key = "a:<id>", ttl = 15_000u64)]
async fn a(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

struct Settings {
    wait_ms: u64,
}

static SETTINGS: Settings = Settings { wait_ms: 5 };

#[distributed_lock(key = "b:<id>", wait = SETTINGS.wait_ms)]
async fn b(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {}

use redlock_runtime::{IdempotentError, idempotent};

#[idempotent(key = "<id>", mode = "read", on_busy = "skip")]
async fn lock_options(id: u32) -> Result<u32, IdempotentError> {
    Ok(id)
}

#[idempotent(key = "<id>", ttl = "0s", lease = "1ms", scope = "")]
async fn out_of_range(id: u32) -> Result<u32, IdempotentError> {
    Ok(id)
}

#[idempotent(key = "<id>", fingerprint = "<body>")]
async fn unknown_fingerprint_placeholder(id: u32) -> Result<u32, IdempotentError> {
    Ok(id)
}

#[idempotent(ttl = "1h")]
async fn missing_key(id: u32) -> Result<u32, IdempotentError> {
    Ok(id)
}

#[redlock_runtime::distributed_lock(key = "<id>", scope = "jobs")]
async fn scope_on_a_lock(id: u32) -> Result<u32, redlock_runtime::LockError> {
    Ok(id)
}

fn main() {}

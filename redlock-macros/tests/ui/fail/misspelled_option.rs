use redlock_runtime::{LockError, distributed_lock, distributed_semaphore};

// A near miss names the option meant; so does another library's name for it.
#[distributed_lock(key = "job:<id>", ttll = "15s", on_bussy = "skip", lease = "5s")]
async fn job(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

// The semaphore's own option, which is then not also reported missing.
#[distributed_semaphore(key = "jobs", permit = 2)]
async fn work(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {
    let _ = job(1);
    let _ = work(1);
}

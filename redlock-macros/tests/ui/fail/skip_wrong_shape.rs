//! `on_busy = "skip"` on a return type whose value cannot say "skipped":
//! `Result<String, E>` (it would return `Ok(String::new())`, which reads as
//! success) and a `Default` type (it would return the default).
use redlock_runtime::{LockError, distributed_lock};

#[derive(Debug)]
struct AppError;

impl From<LockError> for AppError {
    fn from(_: LockError) -> Self {
        AppError
    }
}

#[distributed_lock(key = "report:<id>", on_busy = "skip")]
async fn in_result(id: u64) -> Result<String, AppError> {
    Ok(id.to_string())
}

#[derive(Default)]
struct Report {
    lines: usize,
}

#[distributed_lock(key = "report:<id>", on_busy = "skip")]
async fn plain(id: u64) -> Report {
    Report { lines: id as usize }
}

fn main() {}

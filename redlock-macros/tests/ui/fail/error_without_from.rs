use redlock_runtime::distributed_lock;

#[derive(Debug)]
struct AppError;

#[distributed_lock(key = "order:<id>")]
async fn place_order(id: u64) -> Result<u64, AppError> {
    Ok(id)
}

fn main() {}

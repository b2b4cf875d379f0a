use redlock_runtime::{IdempotentError, idempotent};

struct NotSerializable;

#[idempotent(key = "<id>")]
async fn not_serializable(id: u32) -> Result<NotSerializable, IdempotentError> {
    Ok(NotSerializable)
}

#[derive(Debug)]
struct MyError;

#[idempotent(key = "<id>")]
async fn error_without_from(id: u32) -> Result<u32, MyError> {
    Ok(id)
}

#[idempotent(key = "<id>")]
async fn unit(id: u32) {}

fn main() {}

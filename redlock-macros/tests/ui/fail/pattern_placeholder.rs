use redlock_runtime::{LockError, distributed_lock};

struct Point {
    x: i32,
    y: i32,
}

#[distributed_lock(key = "pair:<a>:<b>")]
async fn pair((a, b): (u32, u32)) -> Result<u32, LockError> {
    Ok(a + b)
}

#[distributed_lock(key = "point:<x>")]
async fn point(Point { x, y }: Point) -> Result<i32, LockError> {
    Ok(x + y)
}

fn main() {}

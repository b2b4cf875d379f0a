use redlock_runtime::distributed_lock;

#[distributed_lock(key = "job:<id>")]
async fn job(id: u32) {
    let _ = id;
}

fn main() {}

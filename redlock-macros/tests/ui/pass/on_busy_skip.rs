//! `on_busy = "skip"` on every return type that has a value for a skipped
//! call: `()`, `Option<T>`, `Result<T: Default, E>`, any `Default` type.
use redlock_runtime::{LockClient, LockError, distributed_lock};

#[distributed_lock(key = "job:unit", on_busy = "skip", client = locks)]
async fn unit(locks: &LockClient, ran: &mut bool) {
    *ran = true;
}

#[distributed_lock(key = "job:option", on_busy = "skip", client = locks)]
async fn option(locks: &LockClient) -> Option<u32> {
    Some(1)
}

#[distributed_lock(key = "job:result", on_busy = "skip", wait = "0s", client = locks)]
async fn result(locks: &LockClient) -> Result<Vec<u32>, LockError> {
    Ok(vec![1])
}

#[distributed_lock(key = "job:boxed", on_busy = "skip", client = locks)]
async fn boxed(locks: &LockClient) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
    Ok(1)
}

#[derive(Default, Debug, PartialEq)]
struct Report {
    lines: usize,
}

#[distributed_lock(key = "job:report", on_busy = "skip", hold_at_least = "1m", client = locks)]
async fn report(locks: &LockClient) -> Report {
    Report { lines: 3 }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let locks = LockClient::in_memory();
    let mut ran = false;
    unit(&locks, &mut ran).await;
    assert!(ran);
    assert_eq!(option(&locks).await, Some(1));
    assert_eq!(result(&locks).await.unwrap(), vec![1]);
    assert_eq!(boxed(&locks).await.unwrap(), 1);
    assert_eq!(report(&locks).await, Report { lines: 3 });
    // hold_at_least keeps the job taken after the first run.
    assert_eq!(report(&locks).await, Report::default());

    // Held by another owner: every body is skipped.
    let mut held = Vec::new();
    for key in ["job:unit", "job:option", "job:result", "job:boxed"] {
        held.push(locks.lock(key).acquire().await.unwrap());
    }
    let mut ran = false;
    unit(&locks, &mut ran).await;
    assert!(!ran);
    assert_eq!(option(&locks).await, None);
    assert_eq!(result(&locks).await.unwrap(), Vec::<u32>::new());
    assert_eq!(boxed(&locks).await.unwrap(), 0);
}

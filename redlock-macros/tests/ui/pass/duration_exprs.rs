//! Durations from configuration: a `const`, a call, a field of a static
//! config, an argument. Checked by the compiler (type) and at run time
//! (range), as with the builder API.
use std::sync::LazyLock;
use std::time::Duration;

use redlock_runtime::{LockClient, LockError, current_lock, distributed_lock};

const LOCK_TTL: Duration = Duration::from_secs(15);

struct Config {
    lock_wait: Duration,
}

static CONFIG: LazyLock<Config> = LazyLock::new(|| Config {
    lock_wait: Duration::from_millis(250),
});

#[distributed_lock(
    key = "order:<id>",
    ttl = LOCK_TTL,
    wait = CONFIG.lock_wait,
    hold_at_least = Duration::from_millis(1)
)]
async fn configured(id: u32) -> Result<Duration, LockError> {
    Ok(current_lock().expect("held").remaining())
}

#[distributed_lock(key = "job:<id>", ttl = ttl, wait = "1s")]
async fn from_an_argument(id: u32, ttl: Duration) -> Result<u32, LockError> {
    Ok(id)
}

// A value out of range is refused when the function runs.
#[distributed_lock(key = "zero:<id>", ttl = Duration::ZERO)]
async fn zero(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    redlock_runtime::install(LockClient::in_memory());
    let left = configured(7).await.unwrap();
    assert!(left > Duration::from_secs(14) && left <= LOCK_TTL, "{left:?}");
    assert_eq!(from_an_argument(1, Duration::from_secs(2)).await.unwrap(), 1);
    let err = zero(1).await.unwrap_err();
    assert!(err.to_string().contains("ttl"), "{err}");
}

//! Key values: control characters are percent-encoded (they never reach a
//! key or a log raw), and a `Display` that fails is an error, not a key cut
//! short that another call could share.
use std::fmt;

use redlock_runtime::{LockClient, LockError, current_lock, distributed_lock};

struct Failing;

impl fmt::Display for Failing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("cut")?;
        Err(fmt::Error)
    }
}

#[distributed_lock(key = "user:<name>")]
async fn by_name(name: &str) -> Result<String, LockError> {
    Ok(current_lock().expect("held").key().to_owned())
}

#[distributed_lock(key = "thing:<thing>")]
async fn by_failing(thing: Failing) -> Result<(), LockError> {
    drop(thing);
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    redlock_runtime::install(LockClient::in_memory());
    assert_eq!(by_name("a\nb\u{1b}[31m").await.unwrap(), "user:a%0Ab%1B[31m");
    match by_failing(Failing).await {
        Err(LockError::InvalidKey { key, .. }) => assert_eq!(key, "thing:cut"),
        other => panic!("{other:?}"),
    }
}

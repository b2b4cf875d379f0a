//! `keys = [..]`: several locks held together, each key a template with
//! placeholders (arguments, fields, `self`), with the options a multi-lock
//! takes and both `on_busy`.
use redlock_runtime::{LockClient, LockError, current_lock, distributed_lock};

mod renamed {
    pub use redlock_runtime as locks;
}

struct Transfer {
    from: u64,
    to: u64,
}

#[distributed_lock(keys = ["account:<from>", "account:<to>"], client = locks)]
async fn transfer(locks: &LockClient, from: u64, to: u64) -> Result<(u64, u64), LockError> {
    Ok((from, to))
}

#[distributed_lock(
    keys = ["account:<t.from>", "account:<t.to>", "ledger",],
    ttl = "15s",
    wait = "250ms",
    renew = false,
    on_lost = "signal",
    client = locks,
    crate = "crate::renamed::locks",
)]
async fn with_options(locks: &LockClient, t: Transfer) -> Result<u64, LockError> {
    drop(t); // the keys were built before the body ran
    match current_lock() {
        Some(held) => held.fencing_token().await,
        None => Ok(0),
    }
}

#[distributed_lock(keys = ["job:<id>"], on_busy = "skip", client = locks)]
async fn one_key(locks: &LockClient, id: u32) -> Option<u32> {
    Some(id)
}

#[distributed_lock(keys = ["a:<id>", "b:<id>"], on_busy = "skip", client = locks)]
async fn skip_result(locks: &LockClient, id: u32) -> Result<Option<u32>, LockError> {
    Ok(Some(id))
}

struct Bank {
    locks: LockClient,
    name: String,
}

impl Bank {
    #[distributed_lock(keys = ["<self.name>:<from>", "<self.name>:<to>"], client = self.locks)]
    async fn transfer(&self, from: u64, to: u64) -> Result<u64, LockError> {
        // A lock of one of the keys re-enters.
        self.locks
            .lock(format!("{}:{from}", self.name))
            .run(async { to })
            .await
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let locks = LockClient::in_memory();
    assert_eq!(transfer(&locks, 1, 2).await.unwrap(), (1, 2));
    // The same key twice (from == to) is one lock.
    assert_eq!(transfer(&locks, 3, 3).await.unwrap(), (3, 3));
    let t = Transfer { from: 4, to: 5 };
    with_options(&locks, t).await.unwrap();
    let bank = Bank {
        locks: locks.clone(),
        name: "bank".to_owned(),
    };
    assert_eq!(bank.transfer(6, 7).await.unwrap(), 7);

    let held = locks.lock("b:8").acquire().await.unwrap();
    assert_eq!(one_key(&locks, 8).await, Some(8));
    assert!(matches!(skip_result(&locks, 8).await, Ok(None)));
    held.release().await.unwrap();
    assert!(matches!(skip_result(&locks, 8).await, Ok(Some(8))));

    let held = locks.lock("account:9").acquire().await.unwrap();
    assert!(transfer(&locks, 10, 9).await.unwrap_err().is_busy());
    held.release().await.unwrap();
}

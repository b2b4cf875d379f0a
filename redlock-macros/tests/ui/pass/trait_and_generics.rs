//! Trait impl methods, generics, `impl Trait` arguments, `where` clauses,
//! lifetimes, and a `Send` future for `tokio::spawn`.
use std::fmt::Display;

use redlock_runtime::{LockClient, LockError, distributed_lock};

trait Jobs {
    async fn run(&self, id: u64) -> Result<u64, LockError>;
}

struct Worker {
    locks: LockClient,
}

impl Jobs for Worker {
    #[distributed_lock(key = "job:<id>", client = self.locks)]
    async fn run(&self, id: u64) -> Result<u64, LockError> {
        Ok(id * 2)
    }
}

#[distributed_lock(key = "generic:<item>:<label>", client = locks)]
async fn generic<T>(locks: &LockClient, item: T, label: impl Display) -> Result<String, LockError>
where
    T: Display + Send,
{
    Ok(format!("{item}/{label}"))
}

#[distributed_lock(key = "borrow:<name>", client = locks)]
async fn borrowed<'a>(locks: &LockClient, name: &'a str) -> Result<&'a str, LockError> {
    Ok(name)
}

fn assert_send<T: Send>(t: T) -> T {
    t
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let locks = LockClient::in_memory();
    let worker = Worker { locks: locks.clone() };
    assert_eq!(worker.run(21).await.unwrap(), 42);
    assert_eq!(generic(&locks, 1, "a").await.unwrap(), "1/a");
    assert_eq!(borrowed(&locks, "n").await.unwrap(), "n");
    let spawned = tokio::spawn(async move {
        assert_send(generic(&locks, 2, String::from("b"))).await
    });
    assert_eq!(spawned.await.unwrap().unwrap(), "2/b");
}

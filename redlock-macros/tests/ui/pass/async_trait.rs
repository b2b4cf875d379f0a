//! `#[distributed_lock]` on a method of an `#[async_trait]` impl. The
//! impl's attribute expands first and turns the method into a plain `fn`
//! returning `Box::pin(async move { .. })`; the lock is taken inside that
//! block, and the body runs holding it.
use async_trait::async_trait;
use redlock_runtime::{LockClient, LockError, current_lock, distributed_lock};

#[async_trait]
trait Jobs {
    async fn run(&self, id: u64) -> Result<String, LockError>;
    async fn tick(&self, ran: &mut bool);
    async fn report(&self) -> Option<u32>;
    async fn consume(self: Box<Self>, mut attempts: u32) -> Result<u32, LockError>;
}

struct Worker {
    locks: LockClient,
    tenant: String,
}

#[async_trait]
impl Jobs for Worker {
    #[distributed_lock(key = "job:<self.tenant>:<id>", client = self.locks)]
    async fn run(&self, id: u64) -> Result<String, LockError> {
        let _ = (id, &self.tenant);
        Ok(current_lock().unwrap().key().to_owned())
    }

    #[distributed_lock(key = "tick:<self.tenant>", on_busy = "skip", client = self.locks)]
    async fn tick(&self, ran: &mut bool) {
        *ran = true;
    }

    #[distributed_lock(key = "report", on_busy = "skip", client = self.locks)]
    async fn report(&self) -> Option<u32> {
        Some(1)
    }

    #[distributed_lock(key = "consume:<self.tenant>", client = self.locks.clone())]
    async fn consume(self: Box<Self>, mut attempts: u32) -> Result<u32, LockError> {
        attempts += 1;
        Ok(attempts)
    }
}

/// The boxed future is `Send`: it can be spawned.
fn spawned(worker: std::sync::Arc<Worker>) -> tokio::task::JoinHandle<Result<String, LockError>> {
    tokio::spawn(async move { worker.run(2).await })
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let locks = LockClient::in_memory();
    let worker = Worker { locks: locks.clone(), tenant: "acme".to_owned() };
    assert_eq!(worker.run(1).await.unwrap(), "job:acme:1");
    let mut ran = false;
    worker.tick(&mut ran).await;
    assert!(ran);

    let held = locks.lock("tick:acme").acquire().await.unwrap();
    let mut ran = false;
    worker.tick(&mut ran).await;
    assert!(!ran, "skipped while another owner holds the lock");
    held.release().await.unwrap();

    let held = locks.lock("report").acquire().await.unwrap();
    assert_eq!(worker.report().await, None);
    held.release().await.unwrap();
    assert_eq!(worker.report().await, Some(1));

    let held = locks.lock("job:acme:1").acquire().await.unwrap();
    assert!(worker.run(1).await.unwrap_err().is_busy());
    held.release().await.unwrap();

    let worker = std::sync::Arc::new(worker);
    assert_eq!(spawned(worker.clone()).await.unwrap().unwrap(), "job:acme:2");
    let worker = std::sync::Arc::try_unwrap(worker).ok().unwrap();
    assert_eq!(Box::new(worker).consume(1).await.unwrap(), 2);
}

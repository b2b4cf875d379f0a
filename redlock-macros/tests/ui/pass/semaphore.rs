//! `#[distributed_semaphore]`: one permit per call of `client.semaphore(key,
//! permits)`, with every option it takes, on free functions, methods and
//! `#[async_trait]` methods, with both `on_busy`.
use async_trait::async_trait;
use redlock_runtime::{LockClient, LockError, distributed_semaphore};

mod renamed {
    pub use redlock_runtime as locks;
}

#[distributed_semaphore(key = "jobs", permits = 2, client = locks)]
async fn job(locks: &LockClient, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_semaphore(
    key = "render:<tenant>",
    permits = 4_u32,
    ttl = "1m",
    wait = "250ms",
    on_busy = "error",
    renew = false,
    on_lost = "signal",
    client = locks,
    crate = "crate::renamed::locks",
)]
async fn render(locks: &LockClient, tenant: &str) -> Result<String, LockError> {
    Ok(tenant.to_owned())
}

#[distributed_semaphore(key = "crawl", permits = 1, on_busy = "skip", client = locks)]
async fn crawl(locks: &LockClient) {}

#[distributed_semaphore(key = "crawl", permits = 1, on_busy = "skip", client = locks)]
async fn crawl_option(locks: &LockClient) -> Option<u32> {
    Some(1)
}

#[distributed_semaphore(key = "crawl", permits = 1, on_busy = "skip", client = locks)]
async fn crawl_result(locks: &LockClient) -> Result<Option<u32>, LockError> {
    Ok(Some(2))
}

struct Pool {
    locks: LockClient,
    name: String,
}

impl Pool {
    #[distributed_semaphore(key = "pool:<self.name>", permits = 3, client = self.locks)]
    async fn borrow(&self) -> Result<u32, LockError> {
        Ok(self
            .locks
            .semaphore(format!("pool:{}", self.name), 3)
            .available()
            .await?)
    }
}

#[async_trait]
trait Job {
    async fn run(&self, id: u64) -> Result<u64, LockError>;
}

#[async_trait]
impl Job for Pool {
    #[distributed_semaphore(key = "job:<id>", permits = 8, client = self.locks)]
    async fn run(&self, id: u64) -> Result<u64, LockError> {
        Ok(id)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let locks = LockClient::in_memory();
    assert_eq!(job(&locks, 1).await.unwrap(), 1);
    assert_eq!(render(&locks, "acme").await.unwrap(), "acme");
    let pool = Pool {
        locks: locks.clone(),
        name: "db".to_owned(),
    };
    // One of the three permits is this call's.
    assert_eq!(pool.borrow().await.unwrap(), 2);
    assert_eq!(pool.run(5).await.unwrap(), 5);

    crawl(&locks).await;
    let taken = locks.semaphore("crawl", 1).acquire().await.unwrap();
    crawl(&locks).await; // skipped
    assert_eq!(crawl_option(&locks).await, None);
    assert!(matches!(crawl_result(&locks).await, Ok(None)));
    taken.release().await.unwrap();
    assert_eq!(crawl_option(&locks).await, Some(1));

    let two = locks
        .semaphore("jobs", 2)
        .permits(2)
        .acquire()
        .await
        .unwrap();
    assert!(job(&locks, 2).await.unwrap_err().is_busy());
    two.release().await.unwrap();
}

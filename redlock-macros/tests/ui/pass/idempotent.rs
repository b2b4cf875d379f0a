//! `#[idempotent]` on free functions and methods, with every option, and
//! the body run once per key.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redlock_runtime::{IdempotentError, LockClient, WorkContext, idempotent};

static RUNS: AtomicUsize = AtomicUsize::new(0);

#[derive(Debug)]
enum Error {
    Idempotency(IdempotentError),
}

impl From<IdempotentError> for Error {
    fn from(e: IdempotentError) -> Self {
        Error::Idempotency(e)
    }
}

struct Message {
    id: u64,
    body: String,
}

#[idempotent(key = "msg:<msg.id>")]
async fn handle(msg: &Message) -> Result<usize, Error> {
    RUNS.fetch_add(1, Ordering::SeqCst);
    assert!(WorkContext::current().is_some());
    Ok(msg.body.len())
}

#[idempotent(
    key = "<id>",
    scope = "jobs/v2",
    ttl = "1h",
    lease = "10s",
    wait = "2s",
    fingerprint = "<payload>",
    client = client
)]
async fn with_options(client: &LockClient, id: u32, payload: &str) -> Result<Vec<String>, Error> {
    Ok(vec![format!("{id}:{payload}")])
}

#[idempotent(key = "<id>", lease = Duration::from_secs(5), wait = Duration::ZERO)]
async fn duration_exprs(id: u32) -> Result<u32, IdempotentError> {
    Ok(id)
}

struct Service {
    client: LockClient,
    region: &'static str,
}

impl Service {
    #[idempotent(key = "order:<self.region>:<order>", client = self.client)]
    async fn place(&self, order: u64) -> Result<String, IdempotentError> {
        Ok(format!("placed {order}"))
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let client = LockClient::in_memory();
        redlock_runtime::install(client.clone());
        let msg = Message { id: 1, body: "four".into() };
        assert_eq!(handle(&msg).await.ok(), Some(4));
        assert_eq!(handle(&msg).await.ok(), Some(4));
        assert_eq!(RUNS.load(Ordering::SeqCst), 1);
        assert_eq!(with_options(&client, 1, "a").await.ok(), Some(vec!["1:a".to_owned()]));
        let other = with_options(&client, 1, "b").await;
        assert!(matches!(other, Err(Error::Idempotency(IdempotentError::Mismatch))));
        assert_eq!(duration_exprs(3).await.ok(), Some(3));
        let service = Service { client, region: "eu" };
        assert_eq!(service.place(9).await.ok(), Some("placed 9".to_owned()));
    });
}

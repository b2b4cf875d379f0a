//! Methods: `&self`, `client = self.locks`, field paths, tuple indices,
//! `self` by value and `Arc` clients.
use std::sync::Arc;

use redlock_runtime::{LockClient, LockError, current_lock, distributed_lock};

struct Request {
    user_id: u64,
    pair: (u32, &'static str),
}

struct Service {
    locks: LockClient,
    shared: Arc<LockClient>,
    tenant: String,
}

impl Service {
    #[distributed_lock(key = "req:<self.tenant>:<req.user_id>:<req.pair.1>", client = self.locks)]
    async fn handle(&self, req: Request) -> Result<String, LockError> {
        drop(req); // the key was captured before the body ran
        Ok(current_lock().unwrap().key().to_owned())
    }

    #[distributed_lock(key = "arc:<n>", client = self.shared)]
    async fn with_arc(&self, n: u8) -> Result<u8, LockError> {
        Ok(n)
    }

    #[distributed_lock(key = "ref:<n>", client = &self.locks)]
    async fn with_ref(&mut self, n: u8) -> Result<u8, LockError> {
        self.tenant.push('!');
        Ok(n)
    }

    #[distributed_lock(key = "owned:<self.tenant>", client = self.locks.clone())]
    async fn consume(self) -> Result<String, LockError> {
        Ok(self.tenant)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let locks = LockClient::in_memory();
    let mut service = Service {
        shared: Arc::new(locks.clone()),
        locks,
        tenant: "acme".to_owned(),
    };
    let req = Request { user_id: 7, pair: (1, "x") };
    assert_eq!(service.handle(req).await.unwrap(), "req:acme:7:x");
    assert_eq!(service.with_arc(3).await.unwrap(), 3);
    assert_eq!(service.with_ref(4).await.unwrap(), 4);
    assert_eq!(service.consume().await.unwrap(), "acme!");
}

//! The redlock demo: distributed locks in a few seconds.
//!
//! ```text
//! cargo run -p redlock-examples --bin demo                              # in-memory
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p redlock-examples --bin demo  # real Redis
//! ```
//!
//! It shows three "nodes" serialising on one order while another order runs
//! in parallel, the watchdog keeping a lock past its ttl, a lost lock being
//! noticed, and a fencing token stopping a stale writer.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlock_runtime::{LockClient, LockError};

#[tokio::main]
async fn main() -> Result<(), LockError> {
    let (nodes, backend) = match std::env::var("REDIS_URL") {
        Ok(url) => {
            let mut nodes = Vec::new();
            for _ in 0..3 {
                // Separate clients, separate pools: like three processes.
                nodes.push(
                    LockClient::builder()
                        .url(url.as_str())
                        .key_prefix("redlock-demo:")
                        .build()
                        .await?,
                );
            }
            let shown = format!("{:?}", nodes[0]);
            (nodes, format!("Redis ({shown})"))
        }
        Err(_) => {
            let client = LockClient::in_memory();
            (
                vec![client.clone(), client.clone(), client],
                "the in-memory backend (set REDIS_URL=redis://host:port to use Redis)".to_owned(),
            )
        }
    };
    println!("redlock demo using {backend}");
    let t0 = Instant::now();
    let stamp = move || format!("{:>5} ms", t0.elapsed().as_millis());

    println!("\n1. Three nodes place orders: two for order 42 (they serialise), one for order 7");
    let mut tasks = Vec::new();
    for (node, order) in [(1, "42"), (2, "42"), (3, "7")] {
        let client = nodes[node - 1].clone();
        tasks.push(tokio::spawn(async move {
            let guard = client
                .lock(format!("order:{order}"))
                .ttl(Duration::from_secs(10))
                .wait(Duration::from_secs(5))
                .acquire()
                .await?;
            println!(
                "   {} node {node} holds order:{order} (fencing token {})",
                stamp(),
                guard.fencing_token()
            );
            tokio::time::sleep(Duration::from_millis(300)).await; // "place the order"
            println!("   {} node {node} releases order:{order}", stamp());
            guard.release().await
        }));
    }
    for task in tasks {
        task.await.expect("order task")?;
    }

    println!("\n2. The watchdog renews a 600 ms lease while a 1.5 s job runs");
    let guard = nodes[0]
        .lock("report:nightly")
        .ttl(Duration::from_millis(600))
        .acquire()
        .await?;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let busy = nodes[1]
        .lock("report:nightly")
        .try_acquire()
        .await?
        .is_none();
    println!(
        "   {} after 1.5 s: still held = {}, other node locked out = {busy}",
        stamp(),
        guard.is_held()
    );
    guard.release().await?;

    println!(
        "\n3. A lease without renewal runs out: the holder is told, a fencing token stops its late write"
    );
    let store = FencedStore::default();
    let stale = nodes[0]
        .lock("account:9")
        .ttl(Duration::from_millis(400))
        .watchdog(false)
        .acquire()
        .await?;
    let reason = stale.lost().await;
    println!("   {} node 1 notices: {reason}", stamp());
    let fresh = nodes[1].lock("account:9").acquire().await?;
    println!(
        "   {} node 2 takes account:9 with fencing token {} (node 1 had {})",
        stamp(),
        fresh.fencing_token(),
        stale.fencing_token()
    );
    println!(
        "   node 2 writes: {}",
        store.write(fresh.fencing_token(), "balance=100")
    );
    println!(
        "   node 1 writes late: {}",
        store.write(stale.fencing_token(), "balance=0")
    );
    match stale.release().await {
        Err(e) => println!("   node 1 releases: refused, {e}"),
        Ok(()) => println!("   node 1 releases: ok (unexpected)"),
    }
    fresh.release().await?;
    println!("\ndone in {:.1} s", t0.elapsed().as_secs_f64());
    Ok(())
}

/// A store that accepts a write only with a fencing token at least as high
/// as the highest it has seen.
#[derive(Default)]
struct FencedStore {
    highest: Arc<Mutex<u64>>,
}

impl FencedStore {
    fn write(&self, token: u64, value: &str) -> String {
        let mut highest = self.highest.lock().unwrap_or_else(|p| p.into_inner());
        if token >= *highest {
            *highest = token;
            format!("accepted {value} (token {token})")
        } else {
            format!("rejected {value}: token {token} < {}", *highest)
        }
    }
}

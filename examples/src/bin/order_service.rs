//! The order service as a standalone server: an annotated service method
//! (`#[distributed_lock]` on `Orders::place_order`, in `src/orders.rs`)
//! behind the idempotency layer, with Prometheus metrics.
//!
//! ```text
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p redlock-examples --bin order_service
//! ```
//!
//! Environment:
//! - `ADDR`: where to listen (default `127.0.0.1:3000`).
//! - `REDIS_URL`: the Redis for locks and idempotency records; or
//!   `REDIS_CLUSTER_URLS=url,url,..` for a Redis Cluster; or
//!   `REDIS_SENTINEL_URLS=url,..` with `REDIS_SENTINEL_MASTER` (default
//!   `mymaster`) for a Sentinel-managed primary (one of the three). None:
//!   this process's memory, which protects one instance only (it says so).
//! - `NODE`: this instance's name, written into the orders it places
//!   (default `node-<pid>`). Run two instances on two ports against one
//!   Redis and they share the locks and the idempotency records.
//! - `RUST_LOG`: log filter (default `info`).
//!
//! Routes:
//! - `POST /orders` with `{"order_id": "A-17", "sku": "book", "qty": 1}`,
//!   an `Idempotency-Key` header (required) and `x-user` (a stand-in for
//!   authentication; `guest` without it). Placing an order takes 300 ms.
//!   - `201 Created` with the order, placed by this request;
//!   - `200 OK` with the order when another request (another key) placed it
//!     before: `place_order` runs holding `order:<user>:<order_id>`, so
//!     the two never both place it;
//!   - the same request again: the first answer, replayed
//!     (`Idempotent-Replayed: true`); sent while the first still runs: `409`
//!     "Request is being processed" with `Retry-After`; the same key with
//!     another body: `422`; no key: `400`.
//! - `GET /metrics`: Prometheus text (`redlock_lock_*` and
//!   `redlock_idempotency_requests_total`; see `redlock_runtime::metrics`).
//! - `GET /healthz`: `ok`.
//!
//! Try it:
//!
//! ```text
//! curl -i localhost:3000/orders -H 'Idempotency-Key: "k-1"' -H 'x-user: ann' \
//!      -H 'content-type: application/json' -d '{"order_id":"A-17","sku":"book","qty":1}'
//! ```
//!
//! Send it twice at once (`&` between two of them) for the `409`, again for
//! the replay, and with another key for the `200`; then `curl
//! localhost:3000/metrics`.

use std::net::SocketAddr;
use std::time::Duration;

use redlock_examples::orders::{OrderStore, Orders, app};
use redlock_examples::store::Store;
use redlock_runtime::LockClient;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let addr: SocketAddr = std::env::var("ADDR")
        .unwrap_or_else(|_| "127.0.0.1:3000".to_owned())
        .parse()
        .map_err(|e| format!("ADDR must be host:port: {e}"))?;
    let node = std::env::var("NODE").unwrap_or_else(|_| format!("node-{}", std::process::id()));
    let metrics = redlock_examples::prometheus::install()?;
    let locks = match Store::from_env()?.builder() {
        Some(builder) => builder.build().await?,
        None => {
            tracing::warn!(
                "REDIS_URL is not set: locks and idempotency records are kept in this process only"
            );
            LockClient::in_memory()
        }
    };
    tracing::info!(store = ?locks, %node, "locks and idempotency records");

    let lock_client = locks.clone();
    let orders = Orders::new(
        node,
        locks,
        OrderStore::default(),
        Duration::from_millis(300),
    );
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(
        "order service listening on http://{}",
        listener.local_addr()?
    );
    axum::serve(listener, app(orders, Some(metrics)))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    // Every request answered: release what is still held, so another
    // node takes over at once rather than after the leases.
    let report = lock_client.shutdown(Duration::from_secs(5)).await;
    tracing::info!(%report, "lock client shut down");
    Ok(())
}

//! A child process serving `POST /orders` behind the idempotency layer, for
//! the crash test: its handler never finishes, so killing the process
//! leaves the key in progress until its lease runs out.
//!
//! Usage: `idempotent_server <redis-url> <lease-ms>`. Prints
//! `LISTENING <addr>` once it serves, and `STARTED` when a handler starts;
//! a handler sleeps (at most 120 s, so a leaked child ends by itself).

use std::io::Write;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use redlock_axum::IdempotencyLayer;
use redlock_runtime::LockClient;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, lease_ms] = args.as_slice() else {
        eprintln!("usage: idempotent_server <redis-url> <lease-ms>");
        std::process::exit(2);
    };
    let lease = Duration::from_millis(lease_ms.parse().unwrap_or_else(|e| {
        eprintln!("bad lease-ms {lease_ms:?}: {e}");
        std::process::exit(2)
    }));
    let locks = LockClient::connect(url.as_str()).await.unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let app = Router::new()
        .route(
            "/orders",
            post(|| async {
                println!("STARTED");
                let _ = std::io::stdout().flush();
                tokio::time::sleep(Duration::from_secs(120)).await;
                "never"
            }),
        )
        .layer(IdempotencyLayer::global(locks).lease(lease));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| {
            eprintln!("bind: {e}");
            std::process::exit(1)
        });
    let addr = listener.local_addr().unwrap_or_else(|e| {
        eprintln!("local_addr: {e}");
        std::process::exit(1)
    });
    println!("LISTENING {addr}");
    let _ = std::io::stdout().flush();
    if let Err(e) = axum::serve(listener, app).await {
        eprintln!("serve: {e}");
        std::process::exit(1);
    }
}

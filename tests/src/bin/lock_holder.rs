//! A child process that takes a lock and holds it until it is killed, for
//! the crash tests.
//!
//! Usage: `lock_holder <redis-url> <key> <ttl-ms> <watchdog: on|off> [fair-wait-ms]`.
//! Several URLs separated by commas make a Redlock client over those nodes.
//! Prints `ACQUIRED <fencing-token>` once it holds the lock, then sleeps
//! (at most 120 s, so a leaked child ends by itself). With `fair-wait-ms`,
//! it queues for the lock in fair mode, waiting up to that long.

use std::time::Duration;

use redlock_runtime::LockClient;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (url, key, ttl_ms, watchdog, fair_wait) = match args.as_slice() {
        [_, url, key, ttl_ms, watchdog] => (url, key, ttl_ms, watchdog, None),
        [_, url, key, ttl_ms, watchdog, wait] => (url, key, ttl_ms, watchdog, Some(wait)),
        _ => {
            eprintln!("usage: lock_holder <redis-url> <key> <ttl-ms> <on|off> [fair-wait-ms]");
            std::process::exit(2);
        }
    };
    let ttl = Duration::from_millis(ttl_ms.parse().unwrap_or_else(|e| {
        eprintln!("bad ttl-ms {ttl_ms:?}: {e}");
        std::process::exit(2)
    }));
    let client = if url.contains(',') {
        LockClient::redlock(url.split(',')).await
    } else {
        LockClient::connect(url.as_str()).await
    };
    let client = client.unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let mut request = client.lock(key.as_str()).ttl(ttl).renew(watchdog == "on");
    if let Some(wait) = fair_wait {
        let wait = Duration::from_millis(wait.parse().unwrap_or_else(|e| {
            eprintln!("bad fair-wait-ms {wait:?}: {e}");
            std::process::exit(2)
        }));
        request = request.fair().wait(wait);
    }
    let guard = request.acquire().await.unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    println!(
        "ACQUIRED {}",
        guard.fencing_token().await.expect("fencing token")
    );
    tokio::time::sleep(Duration::from_secs(120)).await;
    drop(guard);
}

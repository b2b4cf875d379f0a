//! A child process that uses a synchronizer, for the crash tests of the
//! read/write lock, the semaphore and the latch.
//!
//! Usage:
//! - `sync_worker <url> read <key> <ttl-ms>`: takes the read lock of `key`,
//!   prints `READY`, then sleeps (at most 120 s) holding it;
//! - `sync_worker <url> permits <key> <limit> <n> <ttl-ms>`: takes `n`
//!   permits of the semaphore `key` of `limit`, prints `READY`, sleeps;
//! - `sync_worker <url> count-down <key> <times>`: counts the latch `key`
//!   down `times` times, prints `DONE <count left>` and exits.
//!
//! Several URLs separated by commas make a Redis Cluster client.

use std::time::Duration;

use redlock_runtime::LockClient;

fn number(text: &str, what: &str) -> u64 {
    text.parse().unwrap_or_else(|e| {
        eprintln!("bad {what} {text:?}: {e}");
        std::process::exit(2)
    })
}

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("{e}");
    std::process::exit(1)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((url, rest)) = args.split_first() else {
        eprintln!("usage: sync_worker <url> read|permits|count-down ...");
        std::process::exit(2);
    };
    let client = if url.contains(',') {
        LockClient::cluster(url.split(',')).await
    } else {
        LockClient::connect(url.as_str()).await
    }
    .unwrap_or_else(|e| fail(e));
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    match rest.as_slice() {
        ["read", key, ttl] => {
            let ttl = Duration::from_millis(number(ttl, "ttl-ms"));
            let guard = client
                .rw_lock(*key)
                .read()
                .ttl(ttl)
                .acquire()
                .await
                .unwrap_or_else(|e| fail(e));
            println!("READY");
            tokio::time::sleep(Duration::from_secs(120)).await;
            drop(guard);
        }
        ["permits", key, limit, n, ttl] => {
            let limit = u32::try_from(number(limit, "limit")).unwrap_or_else(|e| fail(e));
            let n = u32::try_from(number(n, "n")).unwrap_or_else(|e| fail(e));
            let ttl = Duration::from_millis(number(ttl, "ttl-ms"));
            let permit = client
                .semaphore(*key, limit)
                .permits(n)
                .ttl(ttl)
                .wait(Duration::from_secs(10))
                .acquire()
                .await
                .unwrap_or_else(|e| fail(e));
            println!("READY");
            tokio::time::sleep(Duration::from_secs(120)).await;
            drop(permit);
        }
        ["count-down", key, times] => {
            let latch = client.latch(*key);
            let mut left = 0;
            for _ in 0..number(times, "times") {
                left = latch.count_down().await.unwrap_or_else(|e| fail(e));
            }
            println!("DONE {left}");
        }
        _ => {
            eprintln!("usage: sync_worker <url> read|permits|count-down ...");
            std::process::exit(2);
        }
    }
}

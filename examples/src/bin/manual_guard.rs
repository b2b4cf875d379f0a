//! The plain lock API, without the attribute: a [`LockGuard`] by hand.
//!
//! ```text
//! cargo run -p redlock-examples --bin manual_guard                                   # in-memory
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p redlock-examples --bin manual_guard  # real Redis
//! ```
//!
//! It takes the lock `invoice:7` (under the key prefix `redlock-example:`,
//! so in Redis it is `redlock-example:{invoice:7}`), then in six short steps:
//!
//! 1. acquires it with a ttl and a wait, and prints the guard's key, owner
//!    token and fencing token;
//! 2. extends the lease by hand with [`LockGuard::extend`];
//! 3. shows a second client's `try_acquire` answering `None` (busy) while
//!    the first holds the lock;
//! 4. releases it, after which the second client gets it, with a larger
//!    fencing token;
//! 5. runs a future holding the lock with the scoped forms `run` (waits)
//!    and `try_run` (skips when busy);
//! 6. prints what a [`LockError`] says: a `WaitTimeout` after a short wait,
//!    and the `Busy` error of an `acquire` with no wait.
//!
//! It finishes in under a second, exits 0, and prints the following
//! (in-memory). On Redis the first line is `manual_guard: using Redis at
//! redis://127.0.0.1:6379` (a password shown as `***`), and the fencing
//! tokens go on increasing from one run to the next: on Redis each is at
//! least Redis's clock in microseconds (`1795377063170903`), so they are
//! large and not consecutive, and never go back, even after a restart.
//!
//! ```text
//! manual_guard: using the in-memory backend (REDIS_URL is not set; set REDIS_URL=redis://host:port to use Redis)
//!
//! 1. client A acquires with ttl 2s, wait 1s
//!    key            invoice:7
//!    holder         web-3:4121 (LockClient::inspect; the owner token stays secret)
//!    fencing token  1
//!    lease left     2.00 s
//! 2. A extends the lease to 10 s: lease left 10.00 s, still held = true
//! 3. client B try_acquire while A holds it: None (busy)
//! 4. A releases; B try_acquire again: got it, fencing token 2 (A had 1)
//!    B releases
//! 5. run: the body ran holding invoice:7 with fencing token 3, and returned "invoice 7 sent"
//!    try_run while A holds the lock: None (busy, the body did not run)
//! 6. B acquire with wait 200ms while A holds it:
//!    error: gave up on lock `invoice:7` after waiting 200ms: another owner held it at every attempt (when the wait ended: web-3:4121, for 0.2s, lease ends in 1.8s); allow a longer `.wait(..)` or shorten the other holder's critical section
//!    is_busy() = true, is_transient() = false, key() = Some("invoice:7")
//!    B acquire with no wait:
//!    error: lock `invoice:7` is held by another owner (web-3:4121, for 0.2s, lease ends in 1.8s); try again later, or allow waiting with `.wait(..)`
//!
//! done in 0.2 s
//! ```
//!
//! When something does not go as shown (Redis unreachable, another process
//! holding `invoice:7`), it says so on standard error and exits 1.

use std::error::Error;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use redlock_runtime::{LockClient, LockError, LockGuard, current_lock};

const KEY: &str = "invoice:7";
const PREFIX: &str = "redlock-example:";

type Result<T, E = Box<dyn Error>> = std::result::Result<T, E>;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("manual_guard: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Two clients: A and B. On Redis they are separate clients with separate
/// pools, as two processes would have; in memory they share the store.
async fn clients() -> Result<(LockClient, LockClient)> {
    match std::env::var("REDIS_URL") {
        Ok(url) => {
            let connect = || {
                LockClient::builder()
                    .url(url.as_str())
                    .key_prefix(PREFIX)
                    .build()
            };
            let a = connect().await?;
            let b = connect().await?;
            println!(
                "manual_guard: using Redis at {}",
                redlock_runtime::redact_url(&url)
            );
            Ok((a, b))
        }
        Err(_) => {
            println!(
                "manual_guard: using the in-memory backend (REDIS_URL is not set; set \
                 REDIS_URL=redis://host:port to use Redis)"
            );
            let a = LockClient::builder()
                .key_prefix(PREFIX)
                .in_memory()
                .build_unchecked()?;
            Ok((a.clone(), a))
        }
    }
}

async fn run() -> Result<()> {
    let (a, b) = clients().await?;
    let started = Instant::now();

    println!("\n1. client A acquires with ttl 2s, wait 1s");
    let guard = a
        .lock(KEY)
        .ttl(Duration::from_secs(2)) // the lease, if this process dies
        .wait(Duration::from_secs(1)) // how long to wait for another holder
        .acquire()
        .await?;
    println!("   key            {}", guard.key());
    let holder = a
        .inspect(KEY)
        .await?
        .holder
        .ok_or("inspect found no holder")?;
    println!(
        "   holder         {} (LockClient::inspect; the owner token stays secret)",
        holder.client_name.as_deref().unwrap_or("an unnamed client")
    );
    println!("   fencing token  {}", guard.fencing_token().await?);
    println!("   lease left     {:.2} s", guard.remaining().as_secs_f64());
    let first_token = guard.fencing_token().await?;

    guard.extend(Duration::from_secs(10)).await?;
    println!(
        "2. A extends the lease to 10 s: lease left {:.2} s, still held = {}",
        guard.remaining().as_secs_f64(),
        guard.is_held()
    );

    let attempt = b.lock(KEY).try_acquire().await?;
    println!(
        "3. client B try_acquire while A holds it: {}",
        describe(attempt.as_ref()).await?
    );
    if attempt.is_some() {
        return Err("B got the lock while A held it".into());
    }

    guard.release().await?;
    let Some(second) = b.lock(KEY).try_acquire().await? else {
        return Err(format!(
            "B could not take {KEY} after A released it: another process holds it"
        )
        .into());
    };
    println!(
        "4. A releases; B try_acquire again: got it, fencing token {} (A had {first_token})",
        second.fencing_token().await?
    );
    if second.fencing_token().await? <= first_token {
        return Err("the fencing token did not increase".into());
    }
    second.release().await?;
    println!("   B releases");

    // The scoped form: acquire, run the future, release (also on error,
    // panic or cancellation). Inside, `current_lock()` describes the lock.
    let (fence, sent) = a
        .lock(KEY)
        .ttl(Duration::from_secs(2))
        .wait(Duration::from_secs(1))
        .run(async {
            let held = current_lock().ok_or("run gave its body no current_lock()")?;
            // Issued now, on first ask: one round trip.
            let fence = held.fencing_token().await?;
            Ok::<_, Box<dyn Error>>((fence, "invoice 7 sent".to_owned()))
        })
        .await??;
    println!(
        "5. run: the body ran holding {KEY} with fencing token {fence}, and returned {sent:?}"
    );
    let holder = a.lock(KEY).ttl(Duration::from_secs(2)).acquire().await?;
    let skipped = b.lock(KEY).try_run(async { "should not run" }).await?;
    match skipped {
        None => println!("   try_run while A holds the lock: None (busy, the body did not run)"),
        Some(_) => return Err("try_run ran its body while A held the lock".into()),
    }

    println!("6. B acquire with wait 200ms while A holds it:");
    let short_wait = b.lock(KEY).wait(Duration::from_millis(200)).acquire().await;
    let e = expect_error(short_wait).await?;
    println!("   error: {e}");
    println!(
        "   is_busy() = {}, is_transient() = {}, key() = {:?}",
        e.is_busy(),
        e.is_transient(),
        e.key()
    );
    if !matches!(e, LockError::WaitTimeout { .. }) {
        return Err(format!("expected a WaitTimeout, got: {e}").into());
    }
    println!("   B acquire with no wait:");
    let e = expect_error(b.lock(KEY).acquire().await).await?;
    println!("   error: {e}");
    if !matches!(e, LockError::Busy { .. }) {
        return Err(format!("expected Busy, got: {e}").into());
    }
    holder.release().await?;

    println!("\ndone in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

async fn describe(attempt: Option<&LockGuard>) -> Result<String> {
    match attempt {
        None => Ok("None (busy)".to_owned()),
        Some(guard) => Ok(format!(
            "Some(fencing token {})",
            guard.fencing_token().await?
        )),
    }
}

/// The error of an acquire that was meant to fail.
async fn expect_error(result: Result<LockGuard, LockError>) -> Result<LockError> {
    match result {
        Err(e) => Ok(e),
        Ok(guard) => Err(format!(
            "the acquire succeeded (fencing token {}) while another client held the lock",
            guard.fencing_token().await?
        )
        .into()),
    }
}

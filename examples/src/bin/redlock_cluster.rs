//! Redlock: one lock over three independent Redis nodes, with fencing
//! tokens checked by the store that is written to.
//!
//! ```text
//! cargo run -p redlock-examples --bin redlock_cluster -- \
//!     redis://10.0.0.1:6379 redis://10.0.0.2:6379 redis://10.0.0.3:6379
//! REDIS_URLS=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379 \
//!     cargo run -p redlock-examples --bin redlock_cluster
//! ```
//!
//! It takes the URLs of three Redis nodes, as arguments or comma-separated
//! in `REDIS_URLS` (the arguments win), and starts none itself. Three
//! throwaway nodes on your machine (no persistence):
//!
//! ```text
//! for port in 7001 7002 7003; do
//!     redis-server --port $port --save '' --appendonly no --daemonize yes
//! done
//! cargo run -p redlock-examples --bin redlock_cluster -- \
//!     redis://127.0.0.1:7001 redis://127.0.0.1:7002 redis://127.0.0.1:7003
//! for port in 7001 7002 7003; do redis-cli -p $port shutdown nosave; done
//! ```
//!
//! Two clients, A and B (as two processes would have), lock `account:42`
//! through [`LockClient::redlock`] and write to a fenced store: an
//! in-process stand-in for a database that accepts a write only when its
//! fencing token is at least the highest it has seen (a conditional
//! `UPDATE .. WHERE fence <= $token`), and records the writes it rejects.
//! It shows:
//!
//! 1. A and B taking turns: each write carries the holder's token, and each
//!    is accepted; tokens increase with every acquisition.
//! 2. A holder whose lease ran out (`.renew(false)` and a 500 ms ttl, as
//!    if its process had paused): it learns of it through
//!    [`LockGuard::lost`], B takes the lock with a larger token, and A's
//!    late write is rejected by the store.
//!
//! It takes about half a second, exits 0, and prints (the tokens are
//! at least the nodes' clocks in microseconds, so they are large, grow from
//! run to run and are never consecutive):
//!
//! ```text
//! redlock_cluster: locking over 3 nodes
//!    node 1: redis://127.0.0.1:7001 answers
//!    node 2: redis://127.0.0.1:7002 answers
//!    node 3: redis://127.0.0.1:7003 answers
//! clients A and B lock over 3 nodes: a lock is held while 2 of them grant it
//!
//! 1. A and B take turns on account:42; each write carries the holder's fencing token
//!    A holds account:42 with fencing token 1795378042831203, writes "balance=100 by A": accepted
//!    B holds account:42 with fencing token 1795378042837581, writes "balance=110 by B": accepted
//!    A holds account:42 with fencing token 1795378042839386, writes "balance=120 by A": accepted
//!    B holds account:42 with fencing token 1795378042843108, writes "balance=130 by B": accepted
//!
//! 2. A takes the lock with a 500 ms lease and no watchdog, then stalls
//!    A holds account:42 with fencing token 1795378043052635
//!    A learns after 0.49 s that its lock is gone: the lease ran out without renewal (the watchdog was off)
//!    B holds account:42 with fencing token 1795378043755787, writes "balance=140 by B": accepted
//!    A writes late anyway (as a process paused between its check and its write would)
//!    A writes "balance=0 by A" with fencing token 1795378043052635: rejected, token 1795378043052635 < 1795378043755787, the highest seen
//!    A releases: lock `account:42` was lost: the lock no longer holds this owner's token (the lease expired or the key was deleted); work done under it may have overlapped with another holder, so guard writes with the fencing token
//!
//! fencing tokens in order: 1795378042831203 1795378042837581 1795378042839386 1795378042843108 1795378043052635 1795378043755787
//! store: 5 writes accepted, 1 rejected (token 1795378043052635 < 1795378043755787); value "balance=140 by B"
//! done in 0.5 s
//! ```
//!
//! One node of three may be down: the lock works on the other two. Stop
//! one (`redis-cli -p 7003 shutdown nosave`) and run it again: its line says
//! `does not answer`, and the rest goes as above, only slower (each
//! client's start waits a few seconds for the missing node, and each
//! release a fraction of a second).
//!
//! Without three URLs it prints its usage and exits 2. On failure (no
//! majority of nodes reachable, a step that does not go as shown) it says
//! why on standard error and exits 1.

use std::error::Error;
use std::fmt;
use std::process::ExitCode;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use redlock_runtime::bb8_redis::redis;
use redlock_runtime::{LockClient, LockGuard};

const KEY: &str = "account:42";
const PREFIX: &str = "redlock-example:";
const USAGE: &str = "\
usage: redlock_cluster REDIS_URL REDIS_URL REDIS_URL
   or: REDIS_URLS=REDIS_URL,REDIS_URL,REDIS_URL redlock_cluster

The URLs of three independent Redis nodes (redis://host:port); it starts none itself.";
/// How long each node has to answer the PING that reports it at the start.
const PING_TIMEOUT: Duration = Duration::from_secs(1);

type Result<T, E = Box<dyn Error>> = std::result::Result<T, E>;

#[tokio::main]
async fn main() -> ExitCode {
    let urls = match node_urls() {
        Ok(urls) => urls,
        Err(message) => {
            eprintln!("redlock_cluster: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&urls).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("redlock_cluster: error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(urls: &[String]) -> Result<()> {
    let started = Instant::now();
    let n = urls.len();
    let majority = n / 2 + 1;
    println!("redlock_cluster: locking over {n} nodes");
    for (i, url) in urls.iter().enumerate() {
        let state = match ping(url).await {
            Ok(()) => "answers".to_owned(),
            Err(e) => format!("does not answer ({e})"),
        };
        println!(
            "   node {}: {} {state}",
            i + 1,
            redlock_runtime::redact_url(url)
        );
    }

    let connect = || {
        LockClient::builder()
            .redlock(urls.iter().map(String::as_str))
            .key_prefix(PREFIX)
            .build()
    };
    let a = connect().await?;
    let b = connect().await?;
    println!(
        "clients A and B lock over {n} nodes: a lock is held while {majority} of them grant it"
    );

    let store = FencedStore::default();
    let mut tokens = Vec::new();
    let mut balance = 100;

    println!("\n1. A and B take turns on {KEY}; each write carries the holder's fencing token");
    for (name, client) in [("A", &a), ("B", &b), ("A", &a), ("B", &b)] {
        let guard = take(client, &mut tokens).await?;
        write(&store, name, guard.fencing_token().await?, balance)?;
        balance += 10;
        guard.release().await?;
    }

    println!("\n2. A takes the lock with a 500 ms lease and no watchdog, then stalls");
    let stale = a
        .lock(KEY)
        .ttl(Duration::from_millis(500))
        .renew(false)
        .wait(Duration::from_secs(2))
        .acquire()
        .await?;
    tokens.push(stale.fencing_token().await?);
    println!(
        "   A holds {KEY} with fencing token {}",
        stale.fencing_token().await?
    );
    let stalled = Instant::now();
    let reason = tokio::time::timeout(Duration::from_secs(5), stale.lost())
        .await
        .map_err(|_| "A's lock was not reported lost 5 s into a 500 ms lease")?;
    println!(
        "   A learns after {:.2} s that its lock is gone: {reason}",
        stalled.elapsed().as_secs_f64()
    );
    let fresh = take(&b, &mut tokens).await?;
    write(&store, "B", fresh.fencing_token().await?, balance)?;
    println!("   A writes late anyway (as a process paused between its check and its write would)");
    match write(&store, "A", stale.fencing_token().await?, 0) {
        Err(Rejected { .. }) => {}
        Ok(()) => return Err("the store accepted the late write of a lost lock".into()),
    }
    match stale.release().await {
        Err(e) if e.is_lost() => println!("   A releases: {e}"),
        Err(e) => return Err(e.into()),
        Ok(()) => return Err("A's release succeeded although its lease had run out".into()),
    }
    fresh.release().await?;

    let shown: Vec<String> = tokens.iter().map(u64::to_string).collect();
    println!("\nfencing tokens in order: {}", shown.join(" "));
    if tokens.windows(2).any(|w| w[0] >= w[1]) {
        return Err("the fencing tokens did not strictly increase".into());
    }
    println!("store: {}", store.summary());
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The nodes' URLs: the arguments, or else `REDIS_URLS` split at commas.
/// Exactly three.
fn node_urls() -> Result<Vec<String>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        std::process::exit(0);
    }
    let (urls, from) = if args.is_empty() {
        let list = std::env::var("REDIS_URLS").unwrap_or_default();
        let urls = list
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
            .collect();
        (urls, "in REDIS_URLS")
    } else {
        (args, "as arguments")
    };
    match urls.len() {
        3 => Ok(urls),
        0 => Err("no Redis nodes given".to_owned()),
        found => Err(format!("three Redis URLs needed, {found} given {from}")),
    }
}

/// Whether the node at `url` answers PING within [`PING_TIMEOUT`].
async fn ping(url: &str) -> Result<(), String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let ping = async {
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await
    };
    match tokio::time::timeout(PING_TIMEOUT, ping).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {PING_TIMEOUT:?}")),
    }
}

/// Acquires the lock and records its fencing token.
async fn take(client: &LockClient, tokens: &mut Vec<u64>) -> Result<LockGuard> {
    let guard = client
        .lock(KEY)
        .ttl(Duration::from_secs(5))
        .wait(Duration::from_secs(2))
        .acquire()
        .await?;
    tokens.push(guard.fencing_token().await?);
    Ok(guard)
}

/// Writes `balance` to the store under `guard`'s token, and prints the
/// outcome; the rejection when the store refuses it.
fn write(store: &FencedStore, name: &str, token: u64, balance: u32) -> Result<(), Rejected> {
    let value = format!("balance={balance} by {name}");
    match store.write(token, &value) {
        Ok(()) => {
            println!(
                "   {name} holds {KEY} with fencing token {token}, writes {value:?}: accepted"
            );
            Ok(())
        }
        Err(rejected) => {
            println!("   {name} writes {value:?} with fencing token {token}: rejected, {rejected}");
            Err(rejected)
        }
    }
}

/// A store that accepts a write only with a fencing token at least as high
/// as the highest it has seen (equal: the same holder writing again).
#[derive(Debug, Default)]
struct FencedStore {
    state: Mutex<StoreState>,
}

#[derive(Debug, Default)]
struct StoreState {
    highest: u64,
    value: String,
    accepted: usize,
    rejected: Vec<Rejected>,
}

/// A write the store refused.
#[derive(Debug, Clone, Copy)]
struct Rejected {
    token: u64,
    highest: u64,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "token {} < {}, the highest seen",
            self.token, self.highest
        )
    }
}

impl Error for Rejected {}

impl FencedStore {
    fn write(&self, token: u64, value: &str) -> Result<(), Rejected> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if token < state.highest {
            let rejected = Rejected {
                token,
                highest: state.highest,
            };
            state.rejected.push(rejected);
            return Err(rejected);
        }
        state.highest = token;
        state.value = value.to_owned();
        state.accepted += 1;
        Ok(())
    }

    fn summary(&self) -> String {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let rejected: Vec<String> = state
            .rejected
            .iter()
            .map(|r| format!("token {} < {}", r.token, r.highest))
            .collect();
        format!(
            "{} writes accepted, {} rejected ({}); value {:?}",
            state.accepted,
            state.rejected.len(),
            rejected.join(", "),
            state.value
        )
    }
}

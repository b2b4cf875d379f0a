//! Redlock: one lock over three independent Redis nodes, with fencing
//! tokens checked by the store that is written to.
//!
//! ```text
//! cargo run -p redlock-examples --bin redlock_cluster        # starts 3 redis-server itself
//! REDIS_URLS=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379 \
//!     cargo run -p redlock-examples --bin redlock_cluster    # your 3 nodes
//! ```
//!
//! Without `REDIS_URLS` it starts three throwaway `redis-server` processes
//! on free loopback ports (no persistence), and stops them when it exits,
//! also on an error. `redis-server` must then be on `PATH`
//! (`apt-get install redis-server`, `brew install redis`).
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
//! 2. One node killed (only for nodes it started itself): the lock still
//!    works with 2 of 3, and the tokens still increase.
//! 3. A holder whose lease ran out (`.renew(false)` and a 500 ms ttl, as
//!    if its process had paused): it learns of it through
//!    [`LockGuard::lost`], B takes the lock with a larger token, and A's
//!    late write is rejected by the store.
//!
//! It takes about a second, exits 0, and prints (ports vary; on nodes of
//! your own, step 2 is skipped; the tokens are at least the nodes' clocks
//! in microseconds, so they are large, grow from run to run and are never
//! consecutive):
//!
//! ```text
//! redlock_cluster: REDIS_URLS is not set: starting 3 redis-server nodes
//!    node 1: redis://127.0.0.1:35535
//!    node 2: redis://127.0.0.1:43537
//!    node 3: redis://127.0.0.1:42657
//! clients A and B lock over 3 nodes: a lock is held while 2 of them grant it
//!
//! 1. A and B take turns on account:42; each write carries the holder's fencing token
//!    A holds account:42 with fencing token 1795378042831203, writes "balance=100 by A": accepted
//!    B holds account:42 with fencing token 1795378042837581, writes "balance=110 by B": accepted
//!    A holds account:42 with fencing token 1795378042839386, writes "balance=120 by A": accepted
//!    B holds account:42 with fencing token 1795378042843108, writes "balance=130 by B": accepted
//!
//! 2. node 3 (redis://127.0.0.1:42657) killed: 2 of 3 nodes left
//!    A holds account:42 with fencing token 1795378042850290, writes "balance=140 by A": accepted
//!
//! 3. A takes the lock with a 500 ms lease and no watchdog, then stalls
//!    A holds account:42 with fencing token 1795378043052635
//!    A learns after 0.49 s that its lock is gone: the lease ran out without renewal (the watchdog was off)
//!    B holds account:42 with fencing token 1795378043755787, writes "balance=150 by B": accepted
//!    A writes late anyway (as a process paused between its check and its write would)
//!    A writes "balance=0 by A" with fencing token 1795378043052635: rejected, token 1795378043052635 < 1795378043755787, the highest seen
//!    A releases: lock `account:42` was lost: the lock no longer holds this owner's token (the lease expired or the key was deleted); work done under it may have overlapped with another holder, so guard writes with the fencing token
//!
//! fencing tokens in order: 1795378042831203 1795378042837581 1795378042839386 1795378042843108 1795378042850290 1795378043052635 1795378043755787
//! store: 6 writes accepted, 1 rejected (token 1795378043052635 < 1795378043755787); value "balance=150 by B"
//! done in 1.1 s; stopping the nodes it started
//! ```
//!
//! With `REDIS_URLS`, one node of three may be down: the lock works on the
//! other two (each client's start then waits out the 2 s connection
//! timeout for it, and each release the 100 ms node timeout).
//!
//! On failure (no `redis-server`, no majority of nodes reachable, a step
//! that does not go as shown) it says why on standard error and exits 1.

use std::error::Error;
use std::fmt;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use redlock_runtime::bb8_redis::redis;
use redlock_runtime::{LockClient, LockGuard};

const KEY: &str = "account:42";
const PREFIX: &str = "redlock-example:";
const NOT_FOUND: &str = "redis-server not found on PATH: install it (apt-get install \
                         redis-server / brew install redis) or set REDIS_URLS";
/// How long one started `redis-server` has to answer PING.
const READY_TIMEOUT: Duration = Duration::from_secs(5);

type Result<T, E = Box<dyn Error>> = std::result::Result<T, E>;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("redlock_cluster: error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<()> {
    // Dropped at the end of `run`, on success or error: stops the servers.
    let mut nodes = Nodes::from_env().await?;
    let started = Instant::now();
    let n = nodes.urls.len();
    let majority = n / 2 + 1;

    let connect = || {
        LockClient::builder()
            .redlock(nodes.urls.iter().map(String::as_str))
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
        write(&store, name, &guard, balance)?;
        balance += 10;
        guard.release().await?;
    }

    if nodes.servers.is_empty() {
        println!(
            "\n2. (skipped: the nodes are yours, from REDIS_URLS, so no node is killed; unset \
             REDIS_URLS to see the lock survive a dead node)"
        );
    } else {
        let killed = nodes.kill_last()?;
        println!(
            "\n2. node {n} ({killed}) killed: {} of {n} nodes left",
            n - 1
        );
        let guard = take(&a, &mut tokens).await?;
        write(&store, "A", &guard, balance)?;
        balance += 10;
        guard.release().await?;
    }

    println!("\n3. A takes the lock with a 500 ms lease and no watchdog, then stalls");
    let stale = a
        .lock(KEY)
        .ttl(Duration::from_millis(500))
        .renew(false)
        .wait(Duration::from_secs(2))
        .acquire()
        .await?;
    tokens.push(stale.fencing_token());
    println!(
        "   A holds {KEY} with fencing token {}",
        stale.fencing_token()
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
    write(&store, "B", &fresh, balance)?;
    println!("   A writes late anyway (as a process paused between its check and its write would)");
    match write(&store, "A", &stale, 0) {
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
    let stopping = if nodes.servers.is_empty() {
        ""
    } else {
        "; stopping the nodes it started"
    };
    println!("done in {:.1} s{stopping}", started.elapsed().as_secs_f64());
    Ok(())
}

/// Acquires the lock and records its fencing token.
async fn take(client: &LockClient, tokens: &mut Vec<u64>) -> Result<LockGuard> {
    let guard = client
        .lock(KEY)
        .ttl(Duration::from_secs(5))
        .wait(Duration::from_secs(2))
        .acquire()
        .await?;
    tokens.push(guard.fencing_token());
    Ok(guard)
}

/// Writes `balance` to the store under `guard`'s token, and prints the
/// outcome; the rejection when the store refuses it.
fn write(store: &FencedStore, name: &str, guard: &LockGuard, balance: u32) -> Result<(), Rejected> {
    let value = format!("balance={balance} by {name}");
    let token = guard.fencing_token();
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

/// The Redlock nodes: from `REDIS_URLS`, or servers started here.
struct Nodes {
    urls: Vec<String>,
    /// The servers this process started (empty with `REDIS_URLS`); each is
    /// killed when dropped.
    servers: Vec<Server>,
}

impl Nodes {
    async fn from_env() -> Result<Nodes> {
        if let Ok(list) = std::env::var("REDIS_URLS") {
            let urls: Vec<String> = list
                .split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .map(str::to_owned)
                .collect();
            if urls.len() != 3 {
                return Err(format!(
                    "REDIS_URLS must list three Redis URLs separated by commas (found {}); \
                     unset it to start three local redis-server nodes",
                    urls.len()
                )
                .into());
            }
            println!("redlock_cluster: using the 3 nodes in REDIS_URLS");
            for (i, url) in urls.iter().enumerate() {
                println!(
                    "   node {}: {}",
                    i + 1,
                    redlock_runtime::__private::redact_url(url)
                );
            }
            return Ok(Nodes {
                urls,
                servers: Vec::new(),
            });
        }
        let binary = find_on_path("redis-server").ok_or(NOT_FOUND)?;
        println!("redlock_cluster: REDIS_URLS is not set: starting 3 redis-server nodes");
        let mut nodes = Nodes {
            urls: Vec::new(),
            servers: Vec::new(),
        };
        for i in 1..=3 {
            // On an error, `nodes` is dropped and the servers started so far stopped.
            let server = Server::start(&binary).await?;
            println!("   node {i}: {}", server.url);
            nodes.urls.push(server.url.clone());
            nodes.servers.push(server);
        }
        Ok(nodes)
    }

    /// Kills the last server; its URL.
    fn kill_last(&mut self) -> Result<String> {
        let server = self.servers.last_mut().ok_or("no server of ours to kill")?;
        server.kill()?;
        Ok(server.url.clone())
    }
}

/// A `redis-server` child process on a loopback port; killed on drop.
struct Server {
    url: String,
    child: Child,
}

impl Server {
    /// Starts `redis-server` on a free port and waits (at most
    /// [`READY_TIMEOUT`]) until it answers PING. A port taken between
    /// picking it and the server binding it makes the server exit: then it
    /// tries again on another.
    async fn start(binary: &Path) -> Result<Server> {
        let mut failures = Vec::new();
        for _ in 0..3 {
            // Bind port 0 to have the OS pick a free port, then free it for the server.
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
                .local_addr()?
                .port();
            let child = Command::new(binary)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("could not run {}: {e}", binary.display()))?;
            let mut server = Server {
                url: format!("redis://127.0.0.1:{port}"),
                child,
            };
            match server.wait_ready().await {
                Ok(()) => return Ok(server),
                Err(e) => failures.push(format!("port {port}: {e}")),
            }
        }
        Err(format!(
            "redis-server did not start ({}); try `{} --port 6390` by hand to see why",
            failures.join("; "),
            binary.display()
        )
        .into())
    }

    async fn wait_ready(&mut self) -> Result<(), String> {
        let client = redis::Client::open(self.url.as_str()).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Err(format!("it exited at once ({status})"));
            }
            let ping = async {
                let mut conn = client.get_multiplexed_async_connection().await?;
                redis::cmd("PING").query_async::<String>(&mut conn).await
            };
            if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(200), ping).await {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("no answer to PING within {READY_TIMEOUT:?}"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// SIGKILL, then reap the process.
    fn kill(&mut self) -> Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Errors here mean it already exited (and was reaped).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

//! Correct distributed locks on Redis for tokio.
//!
//! ```no_run
//! use std::time::Duration;
//! use redlock_runtime::{LockClient, LockError};
//!
//! # async fn place_order(_fence: u64) {}
//! #[tokio::main]
//! async fn main() -> Result<(), LockError> {
//!     let locks = LockClient::connect("redis://127.0.0.1:6379").await?;
//!
//!     let guard = locks
//!         .lock("order:42:A-17")
//!         .ttl(Duration::from_secs(15)) // lease if this process dies
//!         .wait(Duration::from_secs(5)) // how long to wait for another holder
//!         .acquire()
//!         .await?;
//!
//!     // Renewed every ttl/3 by a watchdog while `guard` lives. The fencing
//!     // token is issued on first ask (one round trip; `.fenced()` issues
//!     // it with the acquire instead).
//!     place_order(guard.fencing_token().await?).await;
//!
//!     guard.release().await?; // or drop it: released from a spawned task
//!     Ok(())
//! }
//! ```
//!
//! # How a lock works
//!
//! - **Acquire** is one round trip: `SET key token NX PX ttl`, the command
//!   rslock sends; the key's fencing token is issued from a counter kept
//!   beside it under the same `{hash tag}` on first ask, or by an acquire
//!   script that takes the lock and issues it in one step (see "Fencing
//!   tokens" below). The owner token is `~uuid.since.name`: a random UUID
//!   v4 (the secret), the acquire time and the client name (see "Who holds
//!   a lock").
//! - **Cancelling an acquire** (dropping its future at any `.await`, or a
//!   caller's timeout) leaves nothing held: an attempt that may have taken
//!   the lock (on its way, or its answer lost) is given back by a release
//!   sent on the same connection as the attempt, so Redis runs it after the
//!   attempt however late that arrives, and retried until the lease would
//!   have ended anyway. Another owner gets the key within about one command
//!   timeout of the give-up once Redis answers (a paused Redis included);
//!   the same holds per node under Redlock, and after too few `WAIT`
//!   acknowledgements.
//! - **Release** and **extend** are Lua compare-then-act scripts: they act only
//!   while the key still holds this owner's token, so a lock that expired and
//!   passed to someone else is never deleted or extended by its old owner.
//! - **A lost answer is not a lost lock.** A release whose answer does not
//!   come back (the connection dies after the release was sent, a cluster
//!   master fails over) is sent again, and the repeat finds the key gone
//!   when the first one ran. So the end of a lease (a release, a dropped
//!   guard, the end of a [`LockRequest::hold_at_least`], a permit, a
//!   read/write or fair lock, each lock of a multi-lock) reads a "not the
//!   owner" answer as a loss only when nothing was sent again after a send
//!   whose outcome is unknown, or when the lease had already run out (or
//!   been found lost) as this process knows it at the moment the release
//!   went out. The argument: what a release reports is whether the lock
//!   was held through the work done under it, which ended when the release
//!   was sent. Until the lease's deadline (when the last confirmed
//!   renewal was sent, plus the ttl less the clock-drift margin) Redis
//!   cannot have expired the lease, so a release sent before it ends a
//!   lock held throughout, whether the first send deleted the key or the
//!   lease ran out while the answer was on its way. Assumed: Redis keeps
//!   what it acknowledged (a restart that loses data, an unreplicated
//!   failover or an operator's `DEL` during those milliseconds are not seen
//!   by a repeat, as they are not seen by the watchdog until its next
//!   renewal). An idempotency record's completion needs more than that (it
//!   says whether the result was stored), and the record itself is its
//!   evidence: the completed record names the owner that completed it, so
//!   a repeat answers as the first did. `tests/last_reply.rs` loses the
//!   answer of every kind of end, then cuts the connection, on one Redis
//!   and on a Cluster.
//! - **Waiting** is woken by the release itself: a waiter subscribes to a
//!   channel named like the key (one subscriber connection per client), then
//!   asks again with an attempt that, finding the lock busy, marks it as
//!   waited for in the same step (one byte appended to its value); the
//!   release of a marked lock publishes on that channel and wakes the
//!   waiter at once. A release that finds no mark publishes nothing, so a
//!   lock no one waits for is released with the `GET` and `DEL` of a bare
//!   compare-and-delete. No wake-up is missed: either the marking attempt
//!   runs before the release (which then publishes to the subscribed
//!   waiter) or after it (and finds the lock free, or marks its next
//!   holder); `redis_wakeups.rs` races the two on one Redis, Cluster and
//!   Sentinel. A mark lost with its write (a failover before it
//!   replicated, a restart from an older snapshot) costs the waiter only
//!   its push: it polls, as below. A holder running an older version of
//!   this crate is never marked (see `owner.rs`), and always publishes.
//!   Polling with exponential backoff and
//!   full jitter ([`RetryPolicy`]), each sleep cut to the holder's remaining
//!   lease and to the wait left, stays as the fallback, so a missed message
//!   (or a lease that ran out) never strands a waiter.
//! - **Fair mode** ([`LockRequest::fair`]) serves waiters in arrival order
//!   through a queue kept in Redis; the default is first-come-after-release,
//!   which needs no queue. A fair release hands the lock to the first waiter
//!   in the same script and tells it so (a grant, on the lock's channel,
//!   naming the waiter by the SHA-1 of its owner token: whoever may
//!   subscribe learns no token): the waiter holds the
//!   lock without another round trip, and the watchdog extends the lease
//!   it was handed (what was left of its place in the line) to its ttl.
//!   Fencing tokens stay in the order of tenure: the grant issues the next
//!   one from the key's counter while no one else holds the lock. A waiter
//!   that does not read grants (one of an earlier version of this crate,
//!   one that polls) finds the lock its own at its next ask;
//!   `tests/fair.rs` checks the saved round trip, that case, and grants to
//!   waiters that left.
//! - **The watchdog**, one task per client, renews every held lock at least
//!   every `ttl / 3`, batching all locks due together into one pipelined
//!   round trip, and never after the lock's release was sent. When a renewal
//!   finds the token gone, or cannot reach Redis before the lease would have
//!   run out, [`LockGuard::lost`] completes and [`LockGuard::is_held`] turns
//!   false.
//! - **Scoped execution** ([`LockRequest::run`], [`LockRequest::try_run`])
//!   runs a future holding the lock, gives it [`current_lock`], stops it when
//!   the lock is lost ([`OnLost`]), and is reentrant per task: a nested scope
//!   on the same key through the same client costs no round trip.
//! - **Scheduler holds** ([`LockRequest::hold_at_least`]) keep other nodes
//!   out for a minimum time measured on Redis's clock.
//! - **Fencing tokens** ([`LockGuard::fencing_token`]) strictly increase with
//!   each acquisition of a key, across restarts and snapshot restores (see
//!   "Fencing tokens"). Pass the token to the store you write to, and have
//!   it reject lower tokens.
//! - **Dropping** a guard releases the lock from a spawned task; `drop` never
//!   blocks and never panics, even outside a runtime (then the lease runs out).
//!
//! # The attribute
//!
//! With the default `macros` feature (`mode = "read"`/`"write"` for a
//! read/write lock, `keys = [..]` for a multi-lock, and
//! [`macro@distributed_semaphore`] for a permit of a semaphore), [`macro@distributed_lock`] turns an
//! `async fn` into one whose body runs under [`LockRequest::run`] (or
//! [`try_run`](LockRequest::try_run) with `on_busy = "skip"`), the lock
//! named after its arguments:
//!
//! ```no_run
//! use redlock_runtime::{LockClient, LockError, distributed_lock};
//!
//! #[distributed_lock(key = "order:<user_id>:<order_id>", ttl = "15s", wait = "5s")]
//! async fn place_order(user_id: u64, order_id: &str) -> Result<(), LockError> {
//!     Ok(()) // runs holding `order:42:A-17`
//! }
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), LockError> {
//! // Functions without `client = ..` use the installed client.
//! redlock_runtime::install(LockClient::connect("redis://127.0.0.1:6379").await?);
//! place_order(42, "A-17").await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Read/write locks, semaphores, latches and multi-locks
//!
//! The family Redisson users know, each built like the lock (holders hold
//! leases on Redis's clock, renewed by the batched watchdog; cancel-safe
//! acquires; scripts safe to send twice; every key expires once nobody
//! holds it, fencing counters after their retention):
//!
//! - [`LockClient::rw_lock`]: a [`RwLock`] whose `read()` and `write()`
//!   requests take every option of a lock. Many readers or one writer;
//!   each reader holds its own lease (a dead reader frees its share within
//!   its ttl); a waiting writer keeps new readers out (no writer
//!   starvation); a write inside a read scope of the same task fails at
//!   once with [`LockError::Upgrade`], and a write guard can
//!   [`downgrade`](LockGuard::downgrade) atomically. Write holds are
//!   fenced. It does not survive what a lock does not: a restart without
//!   persistence forgets readers and writer (their `lost()` fires).
//! - [`LockClient::semaphore`]: a [`Semaphore`] of leased [`Permit`]s. A
//!   dead holder's permits come back within its ttl; a release sent twice
//!   changes nothing; freeing k permits wakes every waiter. All callers
//!   must pass the same limit (it is not stored). A restart without
//!   persistence forgets the permits held.
//! - [`LockClient::latch`]: a countdown [`Latch`]. A wait that starts
//!   before the set-up waits for it; zero wakes every waiter by a push and
//!   stays open until the ttl; a ttl ending with counts left is
//!   [`LockError::Latch`]; a count-down re-sent with its request id counts
//!   once. A restart without persistence loses the latch (waiters get
//!   `LockError::Latch { expired: true, .. }`).
//! - [`LockClient::multi_lock`]: a [`MultiLock`] of plain locks, one
//!   [`MultiLockGuard`] with a fencing token per key. Keys sharing a hash
//!   tag are taken in one script (all or none); the others in one global
//!   order, so opposite orders never deadlock; a failed or cancelled
//!   acquire gives back every lock it took.
//!
//! | primitive | one Redis, with or without replicas | Redis Cluster | Sentinel | Redlock | memory |
//! |---|---|---|---|---|---|
//! | [`lock`](LockClient::lock) | yes | yes | yes | yes | yes |
//! | [`rw_lock`](LockClient::rw_lock), [`semaphore`](LockClient::semaphore), [`latch`](LockClient::latch) | yes | yes (one slot each) | yes | refused with [`ConfigError::Unsupported`]: their state lives in one store | yes |
//! | [`multi_lock`](LockClient::multi_lock) | yes | yes (one script per slot's group) | yes | yes, each key by quorum | yes |
//!
//! The guide (`docs/guide.md`) has a section on each, with examples.
//!
//! # Which mode do I need
//!
//! | mode | build it with | survives | does not survive |
//! |---|---|---|---|
//! | one Redis | [`LockClient::connect`] | holder crashes (the lease ends), network blips shorter than the lease, Redis restarts with `appendonly yes` + `appendfsync always`; `LOADING`, `BUSY` and similar refusals (retried within the wait) | Redis down (no lock can be taken: requests fail with a typed error, never "busy"); a restart without persistence, or from an RDB snapshot, while a lock is held (the lock is forgotten; fencing tokens still increase) |
//! | a primary with replicas | [`LockClientBuilder::replicas`]`(n, timeout)` | all of the above, and a failover to a replica: every acquire and renewal waits until `n` replicas have it, else the lock is not held (an unacknowledged acquire is given back). The write and its `WAIT` go in one pipeline, on connections of their own, so `WAIT` costs no extra round trip and never delays a release | losing the primary and all `n` acknowledging replicas at once; Redis's asynchronous replication is made synchronous only for lock writes |
//! | Redlock, 3 or 5 independent masters | [`LockClient::redlock`] / [`LockClientBuilder::redlock`] | any minority of nodes down, hung (paused) or cut off; a holder cut off from the majority learns it lost the lock (its validity ends) before anyone else can take it | a majority down (requests fail with [`LockError::Quorum`], saying which nodes failed); nodes that restart without persistence, unless [`restart_delay`](LockClientBuilder::restart_delay) is set to the longest ttl |
//! | Redis Cluster | [`LockClient::cluster`] / [`LockClientBuilder::cluster`] | as one Redis, per master: each lock lives on the master of its key's slot, so locks on other masters are untouched by one master's trouble; slot migrations (`MOVED`, `ASK`, `TRYAGAIN` are followed within each call's limit); with [`replicas`](LockClientBuilder::replicas)`(n, ..)`, the failover of a master (`WAIT` on that master, in the same pipeline as the write) | without `replicas`, a master's crash can lose its newest locks (asynchronous replication: 1 of 20 in our kill test, see below); a majority of masters down (`CLUSTERDOWN`, a typed transient error, never "busy") |
//! | Redis Sentinel | [`LockClient::sentinel`] / [`LockClientBuilder::sentinel`] | as a primary with replicas when used with `replicas(n, ..)`: the primary's crash or a forced failover; the client follows `+switch-master` and re-asks the Sentinels when the primary stops answering, within a call's limit plus one Sentinel round trip | without `replicas`, a crash can lose the newest locks, as on a cluster; all Sentinels down while the primary changes |
//!
//! In every mode, a holder that stops for longer than its lease (a GC or VM
//! pause, SIGSTOP) cannot know it lost the lock until it runs again, and
//! may write once more. Only the store it writes to can refuse that write:
//! pass [`LockGuard::fencing_token`] with each write and have the store
//! reject a token lower than the highest it has seen (a conditional
//! `UPDATE .. WHERE fence <= $token`, a compare-and-set).
//!
//! **Restarted nodes.** A node that restarts forgets the locks it granted
//! since its data was last on disk: together with one other node it can
//! hand a second owner a majority while the first still holds the lock on
//! the rest. Two mitigations:
//! - persistence that loses no acknowledged write: `appendonly yes` with
//!   `appendfsync always`. Nothing else is safe without a delay:
//!   `appendfsync everysec` can lose the last second of grants, an RDB
//!   snapshot everything since it was taken;
//! - [`LockClientBuilder::restart_delay`] set to the longest ttl in use: a
//!   node grants nothing until that long after it started. Each connection
//!   learns when its node started (`INFO server` uptime, subtracted from
//!   `TIME`) as it opens; a restart closes every connection, so what a
//!   connection learned holds for its life. Nothing in the dataset is used,
//!   so an RDB snapshot or an AOF cannot bring back a marker that makes a
//!   restarted node look old. A node started less than the delay ago also
//!   waits it out once (the client cannot tell a first start from a
//!   restart). Nodes must allow `INFO`; one that does not counts as failed.
//!
//! **Timing.** A Redlock acquire sends to every node at once and returns as
//! soon as a majority granted, so a hung node costs nothing and a slow one
//! at most the per-node timeout ([`LockClientBuilder::node_timeout`],
//! 100 ms, and at most a tenth of the ttl). The lock is held only while its
//! validity lasts: `ttl - time to acquire - (ttl / 100 + 2 ms)` for clock
//! drift between the nodes. [`LockRequest::fair`] is not available with
//! Redlock, and waiters poll instead of being woken by the release.
//!
//! **Cost.** One Redis and Sentinel: one round trip per acquire and release
//! (plus `WAIT`'s replica round trip with `replicas`). Redis Cluster: the
//! same per lock, on the lock's master only, so throughput grows with the
//! masters: with keys spread over the slots, `N` masters on cores of their
//! own serve about `N` times the per-master figure (one Redis served 40k
//! acquire+release pairs/s from one client at concurrency 32 in `lockbench`
//! on a 2-core machine). On that machine, where 3 masters share the 2 cores
//! with the client, the cluster measured 0.70 of one Redis, and the same
//! raw commands through redis-rs 0.73: the cores' limit, not routing
//! (`cargo bench -p redlock-benches --bench lockbench -- --only cluster`).
//! Redlock: a round trip to every node, in parallel.
//!
//! # Redis Cluster and Sentinel
//!
//! **Cluster.** The lock, its fencing counter, its fair line and its
//! wake-up channel share the key's `{hash tag}`
//! (`<prefix>{<key>}`, `<prefix>{<key>}:fence`, ..), so one slot holds them
//! all, and every script gets every key it touches in `KEYS` and names its
//! commands literally (a unit test checks each script's text), so neither a
//! cluster nor a proxy rejects one. A key whose hash tag would be empty (it
//! starts with `}`) is refused with [`LockError::InvalidKey`].
//!
//! The client keeps one bb8-redis pool per master, the same lanes as for
//! one Redis, and routes each call to its slot's master itself, from the
//! cluster's own `CLUSTER SLOTS` map. We chose that over redis-rs's
//! `ClusterConnection` for the lock commands because its defaults are wrong
//! for locks and are not per call: it retries `TRYAGAIN` and `CLUSTERDOWN`
//! in a task of its own (16 times, waiting a second or more), re-sends after
//! a dropped connection, possibly after the caller's deadline and after its
//! give-back, and multiplexes one connection per node, so `WAIT` there would
//! stall every other command (redisson#4305). Here every call runs under the
//! client's command timeout and the request's wait: `MOVED` updates the map
//! and the call follows it, `ASK` is followed with `ASKING` in the same
//! write, `TRYAGAIN` is retried after 10 ms, and a connection error or
//! `CLUSTERDOWN` re-reads the map and, if another master serves the slot,
//! sends there; otherwise the error is returned, typed and transient. A
//! call still redirected when its time runs out (a migration half set up
//! bounces it between source and destination) ends in
//! [`LockError::Redirected`], transient too: a waiting acquire keeps
//! waiting. Every
//! script is safe to send twice (owner-checked; an acquire repeated with its
//! own token finds the lock its own). redis-rs's cluster connection (the
//! `cluster-async` feature) does one job here: the wake-up subscriber's
//! `SSUBSCRIBE`, which it routes by slot and moves with slots.
//!
//! Releases publish with `SPUBLISH` (sharded pub/sub, Redis 7): the message
//! stays on the lock's shard, where `PUBLISH` would go to every node. A
//! node that loses a slot drops its channels (an unsolicited
//! `SUNSUBSCRIBE`), and the client subscribes again where the slot went.
//! On a cluster older than Redis 7 the release skips the publish (it is a
//! `pcall`) and waiters poll at the retry policy's pace. The watchdog sends
//! one pipeline per master per period (each command on one slot; `WAIT` at
//! its end with replicas); a renewal its master answers with a redirection
//! is sent again on its own.
//!
//! With [`replicas`](LockClientBuilder::replicas)`(n, ..)`, a master left
//! with fewer than `n` replicas after a failover cannot acknowledge
//! renewals: its locks are lost when their lease ends unless a replica
//! (the old master coming back, say) joins in time. Keep `n + 1` replicas
//! per master when a failover must not cost the locks.
//!
//! **Measured** here (`cargo test -p redlock-runtime --test cluster
//! --test sentinel -- --nocapture`, 3 masters and 3 replicas on one
//! machine): a killed master's replica took over in about 2.5 s, and a lock
//! acknowledged with `replicas(1, ..)` was held and renewed through it; 20
//! kills of a master right after an acquire without `WAIT` lost 1 lock;
//! through Sentinel, 20 crashes of the primary right after an acquire lost
//! none (one run of the Sentinel suite's crash test with its count raised
//! from 10 to 20; asynchronous replication usually keeps up on one
//! machine: the figure is not a promise). With `replicas(1, ..)` the lock was held
//! through the crash of the primary and renewed on the promoted replica.
//! A waiter with a 2 s backoff got a released lock within 1 ms on each
//! master, and within 1 ms after its slot had moved to another master.
//!
//! **Sentinel.** The primary is one Redis to the client; the Sentinels say
//! which. The primary is reached with the first Sentinel URL's password and
//! TLS settings. During a failover the old primary may take writes until
//! the Sentinels make it a replica, and such writes are then lost: without
//! [`replicas`](LockClientBuilder::replicas), a lock taken in that window
//! can vanish; with `replicas(n, ..)` it is not counted, as the old primary
//! has no replicas left to acknowledge it.
//!
//! # Connecting
//!
//! - **A URL** ([`LockClient::connect`], [`LockClientBuilder::url`]): the
//!   client opens what it needs: a few multiplexed connections
//!   ([`pool_size`](LockClientBuilder::pool_size)), a subscriber that wakes
//!   waiters when a lock is released, and with replicas a second set for
//!   `WAIT`. Prefer it.
//! - **Your bb8 pool** ([`LockClient::from_pool`]) or **your redis-rs
//!   `ConnectionManager`** ([`LockClient::from_connection_manager`]): for a
//!   service that already has one and wants no more connections. Waiters
//!   poll (the retry policy's pace) instead of being woken; a
//!   `ConnectionManager` is one connection, so
//!   [`replicas`](LockClientBuilder::replicas) is refused with it (`WAIT`
//!   would hold up every command behind it).
//! - **TLS**: `rediss://` URLs with the `tls` feature (rustls). The
//!   system's root certificates are trusted, or only the CA given with
//!   [`LockClientBuilder::tls_certificates`], which also takes a client
//!   certificate for mutual TLS. It applies to every node of a Redlock
//!   client. Cluster nodes and a Sentinel's primary are reached with the
//!   TLS settings of the URLs given (this path is not yet tested against a
//!   TLS cluster).
//!
//! When no connection can be made, the error says why, as a
//! [`ConnectFailure`]: [`LockError::Connect`] from `connect`/`build`,
//! [`LockError::Connection`] from an operation, alike on every topology. A
//! refused connection, an unreachable host and a connect timeout are
//! transient (retried within the wait); a wrong password and a TLS failure
//! (a `rediss://` URL to a plain-text port among them, once its handshake
//! has timed out) are permanent and fail at once, without waiting out the
//! connection timeout or the wait.
//!
//! ```no_run
//! # async fn demo() -> Result<(), redlock_runtime::LockError> {
//! use redlock_runtime::{ConnectFailure, LockClient, LockError, TlsCertificates};
//!
//! let ca = std::fs::read("/etc/redis/tls/ca.crt").expect("the CA certificate");
//! let built = LockClient::builder()
//!     .url("rediss://:secret@redis.internal:6380")
//!     .tls_certificates(TlsCertificates::new().root_ca_pem(ca))
//!     .build()
//!     .await;
//! match built {
//!     Ok(locks) => drop(locks),
//!     Err(LockError::Connect { failure: ConnectFailure::Auth, .. }) => {
//!         eprintln!("wrong Redis password: fix the configuration");
//!     }
//!     Err(e) => return Err(e),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Fencing tokens
//!
//! **When.** On one Redis, Sentinel's primary or a cluster's master, an
//! acquire is by default a plain `SET key token NX PX ttl`, the command
//! rslock sends, and the token is issued the first time the holder asks
//! for it ([`LockGuard::fencing_token`]): one script checks that the key
//! still holds this owner's token and issues the next token, in one step.
//! A lock that never needs a token costs nothing for it. A
//! [`fenced`](LockRequest::fenced) request (or a client built with
//! [`fenced(true)`](LockClientBuilder::fenced)), fair mode, a minimum hold,
//! `.replicas(..)`, Redlock, a read/write lock's writer, a hash-tag group of
//! a multi-lock and an idempotency record issue it in the acquire script
//! instead, atomically with taking the lock; so does any attempt after one
//! whose answer was lost (the script finds its own token and keeps it). A
//! fair release that hands the lock to the next waiter issues that
//! waiter's token in the same script, as it sets the key to the waiter's
//! owner token: the start of the waiter's tenure.
//!
//! **Why a token issued late is as good.** Tenures of one key do not
//! overlap: each begins with the key set to its owner's token and ends
//! when the key is deleted or expires. A token issued on first ask is
//! issued by a script that, in the same atomic step, finds the key holding
//! the asker's token: inside the asker's tenure. So tokens are issued in
//! the order of the tenures they belong to, and the rule below (each one
//! larger than every one before it on that node) gives every later tenure
//! a larger token. A holder that lost its lock before asking gets
//! [`LockError::Lost`], never a token; one that asked before it lost the
//! lock has a token smaller than any later holder's, and a fenced store
//! refuses its late writes.
//!
//! **How.** Wherever it is issued, `token = max(counter + 1, now)`, where
//! `now` is the node's `TIME` in microseconds; the counter is then set to
//! the token and kept for the fencing retention
//! ([`LockClientBuilder::fencing_retention`], a day) after the acquire.
//! Tokens are therefore large (about 1.8 × 10^15 in 2026) and not
//! consecutive; only their order means anything.
//!
//! **Batches.** On one Redis and Sentinel's primary, the calls of locks
//! that have a fencing token (fenced acquires, and their releases) that
//! many tasks of one client send at once go out as batches, one script
//! call each ([`LockClientBuilder::coalesce`]): a call goes out alone while
//! the connection is idle, and waits for the next batch only when two are
//! on their way. A batch runs each call through the very step its own
//! script runs, so each remains one atomic step of its own lock, and reads
//! `now` once for all its acquires. That reading is taken inside the
//! batch, after every token issued before the batch began, so the argument
//! below holds for it as for a reading of its own; two acquires of one key
//! in one batch share its counter, so the second is larger. Measured with
//! lockbench at concurrency 32, a fenced lock then costs the client and
//! Redis together about a fifth less CPU.
//!
//! **One node.** Let `T1` be issued before `T2`. If the counter survived,
//! `T2 ≥ T1 + 1`. If it was lost (a restart without persistence, its
//! retention ran out) or rolled back (a restart from an RDB snapshot), `T2 ≥
//! now(T2)`, and `T1` was either `now(T1)` (so `T2 > T1` as the clock
//! advanced) or a counter ahead of the clock by its lead: at most the
//! tokens issued within one microsecond, or on Redlock a value raised from
//! another node's clock (the skew). A counter is lost or expires well after
//! that lead has passed (a restart takes milliseconds, the retention is at
//! least a second), so `T2 > T1` again.
//!
//! **A quorum.** Each granting node issues a token as above and the client
//! takes the largest of a majority, `T`: one round trip. The release, sent
//! to every node, raises each node's counter to at least `T`. A node grants
//! the next holder only once the previous lock is gone there: it was
//! released (the counter is now at least `T`, so its token is larger), or
//! its lease ran out (a ttl after its last grant or renewal, by which time
//! the node's clock is past `T` as long as the skew between the nodes and
//! the counter's lead stay below the ttl), or the node restarted (with a
//! restart delay it grants only that much later, its clock past `T` as long
//! as the skew stays below the delay). The next holder's majority shares a
//! node with the previous one's, so its token, the largest of its majority,
//! is above `T`.
//!
//! **Assumptions**, exactly: (1) no node's clock steps backwards (NTP slews
//! without steps; a step back by `d` can repeat tokens issued within `d`
//! before a counter is lost); (2) with Redlock, the clock skew between
//! nodes is below the shortest ttl, below the restart delay and below the
//! fencing retention, and a node that loses its data takes longer than the
//! skew to come back when no restart delay is set. The tests that check
//! this, in this crate's `tests/`: `faults.rs`
//! (`fencing_tokens_increase_across_a_restart_without_persistence`,
//! `.._across_an_rdb_rollback`, `.._when_a_redlock_majority_lost_its_data`,
//! `a_node_restored_from_a_snapshot_grants_nothing_during_its_restart_delay`,
//! `a_token_from_a_node_whose_clock_runs_ahead_is_spread_by_the_release`),
//! `redlock.rs` (`fencing_tokens_keep_increasing_as_majorities_change`),
//! `coalesce.rs` (batched acquires of one key keep their order and
//! exclusion; a batched acquire cut short at any point is given back), and
//! `soak.rs`, whose fenced stores count a repeated token as a stale write
//! accepted (`soak_one_redis_with_coalesced_fenced_calls` with batches).
//!
//! # Who holds a lock
//!
//! Every lock is written with its holder's
//! [`client_name`](LockClientBuilder::client_name) (by default the host
//! name and process id) and the time it was taken (the attempt that took
//! it, not the start of a wait; in fair mode, the time its holder joined
//! the line), beside the owner token and at no extra round trip. [`LockClient::inspect`] reads them back,
//! with the lease left, the last fencing token issued and, in fair mode,
//! the waiters in line; the readers, writer and permit holders of the
//! read/write lock and semaphore of the same name too. A
//! [`LockError::Busy`] or [`LockError::WaitTimeout`] names the holder the
//! same way (a wait's error, the holder when the wait ended: the lock may
//! have changed hands during it), so the log line of a skipped job says
//! who had it:
//!
//! ```text
//! lock `job:invoices` is held by another owner (billing-7:4121, for 12.4s, lease ends in 17.6s); ...
//! ```
//!
//! Owner tokens are never shown: whoever has one can release the lock.
//!
//! # Keys in Redis
//!
//! Redis 6.2 or newer (the scripts use `SET .. GET`);
//! [`LockClientBuilder::build`] refuses an older server with
//! [`ConfigError::ServerTooOld`].
//!
//! A lock named `order:42` with the default prefix lives at `lock:{order:42}`
//! and its fencing counter at `lock:{order:42}:fence`. The lock's value is
//! its owner token, `~uuid.since.name`, followed by the byte 31 once a
//! waiter marked it (the release then publishes on the channel
//! `lock:{order:42}`, `SPUBLISH` on a cluster). A read/write lock
//! named `product:7` lives at `lock:{product:7}:rw` (the writer), with
//! `:rw:fence`, `:rw:readers` and `:rw:writers` (waiting writers) beside
//! it; a semaphore at `lock:{jobs}:sem` (holders' leases) and
//! `lock:{jobs}:sem:permits`; a latch at `lock:{batch:9}:latch` and
//! `lock:{batch:9}:latch:ids`. Each shares its `{hash tag}`, so one
//! cluster slot holds it, and each expires with its last lease. The counter expires a
//! fencing retention after the last acquire (a day by default): a service
//! that locks per order id leaves no key behind a day after each order.
//!
//! Redis must not evict these keys: with a `maxmemory` limit, use
//! `maxmemory-policy noeviction` (lock keys have an expiry, so `volatile-*`
//! policies evict them too). [`LockClientBuilder::build`] warns when it
//! finds another policy, or refuses with
//! [`require_noeviction`](LockClientBuilder::require_noeviction).
//!
//! # Without Redis
//!
//! [`LockClient::in_memory`] gives the same semantics inside one process: for
//! single-instance services and for your own unit tests.
//!
//! # Idempotency records
//!
//! [`records`] is the store under `redlock-axum`'s idempotency layer:
//! claim a record by key (one wins; duplicates are told it is in progress,
//! or get the stored result once it completed), with a lease the watchdog
//! renews and a fencing token, on every store a lock runs on. Build your
//! own layer on it (a message consumer, a job runner).
//!
//! # Test hooks
//!
//! The `test-util` feature adds the `test_util` module: hooks for suites and
//! benchmarks (an owner token, renewal counters, script texts). Not for a
//! service, and not covered by semver.
//!
//! # Logs, spans and metrics
//!
//! `tracing` events (target `redlock`) for acquire, wait, renew, lost and
//! release carry the key and fencing token, never the owner token; the Redis
//! URL is only ever shown with its password redacted. They sit in spans:
//!
//! | span | level | fields | lasts |
//! |---|---|---|---|
//! | `redlock.acquire` | debug | `key`, `wait_ms`, `fencing_token` (once taken) | one acquire, waiting included; it ends when the wait does |
//! | `redlock.hold` | info | `key`, `fencing_token` | from the acquire to the end of the lock, beside `redlock.acquire` under the caller's span (it *follows from* the acquire); [`LockRequest::run`] (and so `#[distributed_lock]`) runs its body in it, [`LockGuard::span`] gives it for the plain API |
//! | `redlock.release` | debug | `key`, `fencing_token` | one release (inside `redlock.hold`) |
//!
//! so every event logged while a lock is held, yours included, says which
//! lock and which token. With the `metrics` feature the runtime also counts
//! acquisitions, busy answers, wait timeouts, errors, losses, failed
//! renewals and releases, and records wait and hold times, through the
//! `metrics` facade: [`metrics`] lists each with its labels.

#![cfg_attr(docsrs, feature(doc_cfg))]

// The modules, from the facade down; each imports only modules below it:
// client -> request -> acquire -> guard -> core -> watchdog -> lock -> backend.
mod acquire;
mod backend;
mod backoff;
mod builder;
mod client;
mod connect_failure;
mod constructors;
mod core;
mod error;
mod force;
mod giveback;
mod guard;
mod inspect;
mod install;
mod latch;
mod lock;
mod loss;
pub mod metrics;
mod multi;
mod owner;
pub mod records;
mod request;
mod rwlock;
mod scope;
mod scripts;
mod semaphore;
mod target;
mod telemetry;
mod tls;
mod util;
mod wakeups;
mod watchdog;

pub use backend::Mode;
pub use backoff::RetryPolicy;
pub use builder::LockClientBuilder;
pub use client::LockClient;
pub use error::{
    ConfigError, ConnectFailure, LockError, LostReason, NodeFailure, Operation, QuorumDetail,
};
pub use force::ForceReleased;
pub use guard::LockGuard;
pub use inspect::{Holder, LockInfo};
pub use install::{install, installed, require_installed};
pub use latch::Latch;
pub use lock::Lost;
pub use multi::{MultiLock, MultiLockGuard};
pub use request::LockRequest;
pub use rwlock::RwLock;
pub use scope::{CurrentLock, OnLost, current_lock};
pub use semaphore::{Permit, Semaphore};
pub use tls::TlsCertificates;
pub use util::{MAX_KEY_LEN, redact_url};

#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use redlock_macros::{distributed_lock, distributed_semaphore};

/// The `bb8-redis` crate (and through it `bb8` and `redis`) this crate is
/// built on: build a pool for [`LockClientBuilder::pool`] with the very
/// versions it takes.
pub use bb8_redis;

/// The `bb8-redis` pool that [`LockClient::from_pool`] and
/// [`LockClientBuilder::pool`] take (build it with [`bb8_redis`]'s
/// re-exported `bb8`).
pub type RedisPool = bb8_redis::bb8::Pool<bb8_redis::RedisConnectionManager>;

#[cfg(feature = "test-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
pub mod test_util;

// Not public API: used by the code `#[distributed_lock]` generates.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

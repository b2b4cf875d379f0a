//! Test harness for redlock: real `redis-server` processes and a fault-injecting
//! TCP proxy, for end-to-end tests.
//!
//! - [`RedisServer`] starts its own `redis-server` on a free loopback port, with no
//!   persistence and a temporary directory, and kills it on drop. It can be killed,
//!   restarted on the same port (empty), and paused/resumed (SIGSTOP/SIGCONT).
//! - [`FaultProxy`] sits between a client and a server and injects latency, a black
//!   hole (partition), cut connections, or refused connections.
//! - [`Backend`] runs one scenario on every lock backend (memory, one Redis,
//!   Redlock): the cases of an `rstest` case list.
//! - [`http`] is a small HTTP/1.1 client (and [`http::serve`] for an axum app on a
//!   loopback port), for the idempotency layer's end-to-end tests.
//! - [`LockHolder`] is a lock held by another process (the `lock_holder` binary).
//! - [`RedisCluster`] is a Redis Cluster of [`RedisServer`]s joined with `redis-cli
//!   --cluster create`, whose slots can be moved live ([`RedisCluster::migrate_slot`],
//!   or half-way with [`RedisCluster::begin_migration`]) and whose replicas can take
//!   over ([`RedisCluster::failover`]). It needs `redis-cli` too (`apt-get install
//!   redis-tools`).
//! - [`SentinelSet`] is a primary, its replicas and three Sentinels, with forced
//!   ([`SentinelSet::failover`]) and crash ([`SentinelSet::kill_primary`]) failovers;
//!   [`LoneSentinel`] is one Sentinel monitoring nothing, to connect to at once.
//!
//! The suites live beside the crates they test (`redlock-runtime/tests/`,
//! `redlock-axum/tests/`, with this crate as a dev-dependency); this crate's own
//! `tests/` keeps the harness's self-tests and the suites that run its child-process
//! binaries (`env!("CARGO_BIN_EXE_..")` exists only in the crate that owns them).
//!
//! `redis-server` must be installed (`apt-get install redis-server`, `brew install
//! redis`); set `REDLOCK_REDIS_SERVER` to use another binary. Without it,
//! [`RedisServer::start`] panics with a message saying so.
//!
//! Waits inside the harness are bounded, and failures panic with a message saying what
//! went wrong: in a test that is the useful way to fail.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use redlock_tests::{FaultProxy, RedisServer};
//!
//! #[tokio::main]
//! async fn main() {
//!     let mut redis = RedisServer::start().await;
//!     let proxy = FaultProxy::start(redis.addr()).await;
//!     // Connect the client under test to `proxy.url()` (or to `redis.url()` directly).
//!
//!     proxy.set_latency(Duration::from_millis(50)); // slow network
//!     proxy.blackhole(true); // partition: requests get no answer...
//!     proxy.blackhole(false); // ...until it heals
//!     proxy.cut_all(); // drop every connection
//!
//!     redis.pause(); // hung server
//!     redis.resume();
//!     redis.kill().await; // crashed server: connections refused
//!     redis.restart().await; // back on the same port, with no data
//! }
//! ```

mod admin;
mod backend;
mod cluster;
mod fair;
mod fenced;
mod holder;
pub mod http;
mod logs;
mod prometheus;
mod proxy;
mod raw;
mod redis_server;
mod sentinel;
mod server;
mod tls;
mod worker;

pub use backend::{Backend, REDLOCK_NODES, REPLICA_TIMEOUT, Started};
pub use cluster::{CLUSTER_SLOTS, RedisCluster, SlotMigration};
pub use fair::{fair_waiter, wait_for_fair_waiters};
pub use fenced::FencedStore;
pub use holder::LockHolder;
pub use logs::LogCapture;
pub use prometheus::series_value;
pub use proxy::FaultProxy;
pub use raw::{key_exists, raw_connection, require_password, start_replica};
pub use redis_server::RedisServer;
pub use sentinel::{LoneSentinel, MASTER_NAME, SentinelSet};
pub use server::{
    REDIS_SERVER_ENV, Server, VALKEY_SERVER_ENV, find_redis_server, redis_server_binary,
    valkey_server_binary,
};
pub use tls::{ClientAuth, Pem, TestCa, TlsRedis};
pub use worker::SyncWorker;

/// The guide's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guide.md")]
pub struct GuideDoctests;

/// The README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

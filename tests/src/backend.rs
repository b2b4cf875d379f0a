//! One scenario, every backend: the cases of a case list.

use std::future::Future;
use std::time::Duration;

use redlock_runtime::{LockClient, LockClientBuilder};

use crate::{MASTER_NAME, RedisCluster, RedisServer, SentinelSet, Server, start_replica};

/// How long a [`Backend::Replicas`] client waits for its replica's
/// acknowledgement (`.replicas(1, ..)`). A replica that follows answers in
/// microseconds, so a scenario never waits this long; the margin is for a
/// loaded 2-core machine, which no scenario on these cases is about.
pub const REPLICA_TIMEOUT: Duration = Duration::from_secs(2);

/// How many nodes a [`Backend::Redlock`] case starts.
pub const REDLOCK_NODES: usize = 3;

/// A lock backend a scenario runs on: one case of an `rstest` case list,
/// so a new backend is a new case, not a new file.
///
/// ```no_run
/// use std::time::Duration;
/// use redlock_tests::Backend;
///
/// // In a suite: #[rstest] #[case::memory(Backend::Memory)]
/// // #[case::redis(Backend::Redis)] fn scenario(#[case] backend: Backend)
/// fn scenario(backend: Backend) {
///     backend.run(|b| async move {
///         let locks = b.client().await;
///         let guard = locks.lock("k").acquire().await.expect("free");
///         assert!(locks.lock("k").try_acquire().await.expect("ok").is_none());
///         guard.release().await.expect("release");
///     });
/// }
///
/// scenario(Backend::Memory);
/// scenario(Backend::Redis);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// [`LockClient::in_memory`]; under [`Backend::run`], on tokio's paused
    /// clock, so its times are exact.
    Memory,
    /// One `redis-server`.
    Redis,
    /// Redlock over [`REDLOCK_NODES`] independent `redis-server`s.
    Redlock,
    /// One `redis-server` through a redis-rs `ConnectionManager`
    /// ([`LockClient::from_connection_manager`]): no wake-up subscriber,
    /// waiters poll.
    Manager,
    /// A Redis Cluster of 3 masters (no replicas), through
    /// [`LockClient::cluster`].
    Cluster,
    /// A primary, one replica and three Sentinels, through
    /// [`LockClient::sentinel`].
    Sentinel,
    /// [`Backend::Redis`] on one `valkey-server` (see [`Server::Valkey`]).
    Valkey,
    /// [`Backend::Redlock`] over `valkey-server`s.
    ValkeyRedlock,
    /// [`Backend::Cluster`] of `valkey-server`s.
    ValkeyCluster,
    /// [`Backend::Sentinel`] of `valkey-server`s (Valkey's own Sentinels).
    ValkeySentinel,
    /// [`Backend::Manager`] on one `valkey-server`.
    ValkeyManager,
    /// A primary `redis-server` and one replica, through a client whose
    /// writes the replica must acknowledge (`.replicas(1,`
    /// [`REPLICA_TIMEOUT`]`)`: acquires and renewals followed by `WAIT`).
    Replicas,
    /// [`Backend::Replicas`] of `valkey-server`s.
    ValkeyReplicas,
}

impl Backend {
    /// The case's name, for assertion messages.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::Redis => "redis",
            Backend::Redlock => "redlock",
            Backend::Manager => "manager",
            Backend::Cluster => "cluster",
            Backend::Sentinel => "sentinel",
            Backend::Valkey => "valkey",
            Backend::ValkeyRedlock => "valkey redlock",
            Backend::ValkeyCluster => "valkey cluster",
            Backend::ValkeySentinel => "valkey sentinel",
            Backend::ValkeyManager => "valkey manager",
            Backend::Replicas => "replicas",
            Backend::ValkeyReplicas => "valkey replicas",
        }
    }

    /// The program its servers run (Redis for [`Backend::Memory`], which
    /// has none).
    pub fn server(self) -> Server {
        match self {
            Backend::Valkey
            | Backend::ValkeyRedlock
            | Backend::ValkeyCluster
            | Backend::ValkeySentinel
            | Backend::ValkeyManager
            | Backend::ValkeyReplicas => Server::Valkey,
            _ => Server::Redis,
        }
    }

    /// The topology, whatever the program: [`Backend::Valkey`] is
    /// [`Backend::Redis`], [`Backend::ValkeyCluster`] is
    /// [`Backend::Cluster`], and so on.
    pub fn topology(self) -> Backend {
        match self {
            Backend::Valkey => Backend::Redis,
            Backend::ValkeyRedlock => Backend::Redlock,
            Backend::ValkeyCluster => Backend::Cluster,
            Backend::ValkeySentinel => Backend::Sentinel,
            Backend::ValkeyManager => Backend::Manager,
            Backend::ValkeyReplicas => Backend::Replicas,
            other => other,
        }
    }

    /// Runs `test` on a runtime of its own, with this backend started:
    /// [`Backend::Memory`] on a current-thread runtime with a paused clock
    /// (time passes only when every task waits, so durations are exact),
    /// the Redis backends on two worker threads and the real clock. The
    /// servers stop when `test` returns or panics.
    ///
    /// # Panics
    /// When the runtime cannot be built, a server does not start, or
    /// `test` panics.
    pub fn run<F, Fut>(self, test: F)
    where
        F: FnOnce(Started) -> Fut,
        Fut: Future<Output = ()>,
    {
        let paused = self == Backend::Memory;
        self.run_on(paused, test);
    }

    /// Like [`Backend::run`], but every backend on two worker threads and
    /// the real clock: for scenarios about tasks running in parallel.
    ///
    /// # Panics
    /// As [`Backend::run`].
    pub fn run_threaded<F, Fut>(self, test: F)
    where
        F: FnOnce(Started) -> Fut,
        Fut: Future<Output = ()>,
    {
        self.run_on(false, test);
    }

    fn run_on<F, Fut>(self, paused: bool, test: F)
    where
        F: FnOnce(Started) -> Fut,
        Fut: Future<Output = ()>,
    {
        let runtime = if paused {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
        }
        .expect("a tokio runtime");
        runtime.block_on(async move {
            let started = self.start_with(paused).await;
            test(started).await;
        });
    }

    /// Starts this backend in the current runtime (whose clock must not be
    /// paused when the backend has servers): for a case inside a
    /// `#[tokio::test]`.
    ///
    /// # Panics
    /// When a server does not start.
    pub async fn start(self) -> Started {
        self.start_with(false).await
    }

    async fn start_with(self, paused: bool) -> Started {
        let server = self.server();
        let nodes = match self.topology() {
            Backend::Redis | Backend::Manager => 1,
            Backend::Redlock => REDLOCK_NODES,
            _ => 0,
        };
        let cluster = match self.topology() {
            Backend::Cluster => Some(RedisCluster::start_on(server, 3, 0, &[]).await),
            _ => None,
        };
        let sentinel = match self.topology() {
            Backend::Sentinel => Some(SentinelSet::start_on(server, 1).await),
            _ => None,
        };
        let mut servers = Vec::with_capacity(nodes);
        for _ in 0..nodes {
            servers.push(RedisServer::start_on(server, &[]).await);
        }
        if self.topology() == Backend::Replicas {
            let primary = RedisServer::start_on(server, &[]).await;
            let replica = start_replica(&primary).await;
            servers.extend([primary, replica]);
        }
        Started {
            backend: self,
            servers,
            cluster,
            sentinel,
            memory: (self == Backend::Memory).then(LockClient::in_memory),
            paused,
        }
    }
}

/// A started [`Backend`]: its servers (if any) run until it is dropped.
#[derive(Debug)]
pub struct Started {
    backend: Backend,
    servers: Vec<RedisServer>,
    cluster: Option<RedisCluster>,
    sentinel: Option<SentinelSet>,
    /// The one in-memory store every client of a memory case shares.
    memory: Option<LockClient>,
    paused: bool,
}

impl Started {
    /// Which topology this is, whatever program its servers run: a Valkey
    /// case answers as its Redis twin ([`Backend::topology`]), so a
    /// scenario's topology checks hold for both (see [`Started::server`]).
    pub fn backend(&self) -> Backend {
        self.backend.topology()
    }

    /// The program this case's servers run.
    pub fn server(&self) -> Server {
        self.backend.server()
    }

    /// The case's name, for assertion messages.
    pub fn name(&self) -> &'static str {
        self.backend.name()
    }

    /// A new client of this backend, with default settings: another "node"
    /// of the service (its own connections). Memory clients all share one
    /// store, as nodes share a Redis.
    ///
    /// # Panics
    /// When the servers do not answer.
    pub async fn client(&self) -> LockClient {
        match self.backend.topology() {
            Backend::Memory => self.memory.clone().expect("a memory case has a store"),
            Backend::Redis => LockClient::connect(self.servers[0].url())
                .await
                .expect("connect to the test Redis"),
            Backend::Replicas => self
                .builder()
                .build()
                .await
                .expect("a client whose writes the replica acknowledges"),
            Backend::Redlock => LockClient::redlock(self.urls())
                .await
                .expect("connect to the test Redlock nodes"),
            Backend::Manager => {
                let client = redis::Client::open(self.servers[0].url()).expect("a valid URL");
                let manager = redis::aio::ConnectionManager::new(client)
                    .await
                    .expect("a ConnectionManager to the test Redis");
                LockClient::from_connection_manager(manager)
            }
            Backend::Cluster => LockClient::cluster(self.urls())
                .await
                .expect("connect to the test cluster"),
            Backend::Sentinel => {
                let set = self
                    .sentinel
                    .as_ref()
                    .expect("a sentinel case has Sentinels");
                LockClient::sentinel(set.sentinel_urls(), MASTER_NAME)
                    .await
                    .expect("connect through the test Sentinels")
            }
            other => unreachable!("{other:?} is a topology"),
        }
    }

    /// A builder of a new client of this backend, for a scenario that sets
    /// what [`Started::client`] leaves at its default (a retry policy, a
    /// client name).
    ///
    /// # Panics
    /// For [`Backend::Memory`] (its clients share one store: use
    /// [`Started::client`]) and [`Backend::Manager`] (built from a
    /// connection manager: use [`LockClient::from_connection_manager`]).
    pub fn builder(&self) -> LockClientBuilder {
        match self.backend.topology() {
            Backend::Redis => LockClient::builder().url(self.servers[0].url()),
            Backend::Replicas => LockClient::builder()
                .url(self.servers[0].url())
                .replicas(1, REPLICA_TIMEOUT),
            Backend::Redlock => LockClient::builder().redlock(self.urls()),
            Backend::Cluster => LockClient::builder().cluster(self.urls()),
            Backend::Sentinel => {
                let set = self
                    .sentinel
                    .as_ref()
                    .expect("a sentinel case has Sentinels");
                LockClient::builder().sentinel(set.sentinel_urls(), MASTER_NAME)
            }
            _ => panic!(
                "Started::builder is for the cases built from URLs, not {}",
                self.name()
            ),
        }
    }

    /// The cluster of a [`Backend::Cluster`] case.
    pub fn cluster(&self) -> Option<&RedisCluster> {
        self.cluster.as_ref()
    }

    /// The servers of this case: none for memory, one for Redis (and a
    /// `ConnectionManager`), every node for Redlock and Cluster, the data
    /// nodes (primary first) for Sentinel and Replicas.
    pub fn servers(&self) -> &[RedisServer] {
        match (&self.cluster, &self.sentinel) {
            (Some(cluster), _) => cluster.nodes(),
            (_, Some(set)) => set.nodes(),
            _ => &self.servers,
        }
    }

    /// The Sentinels of a [`Backend::Sentinel`] case.
    pub fn sentinel(&self) -> Option<&SentinelSet> {
        self.sentinel.as_ref()
    }

    /// The URLs of [`Started::servers`].
    pub fn urls(&self) -> Vec<String> {
        self.servers().iter().map(RedisServer::url).collect()
    }

    /// How late an event may come in a timing assertion: nothing on the
    /// paused clock (it fires exactly when due), 100 ms on the real clock
    /// (round trips and scheduling on a loaded machine).
    pub fn slack(&self) -> Duration {
        if self.paused {
            Duration::ZERO
        } else {
            Duration::from_millis(100)
        }
    }
}

//! The connections to one Redis server: lanes of multiplexed connections.
//!
//! Connections from `bb8-redis` are multiplexed: one connection carries many
//! commands at once, and a handle to it can be cloned. A [`Lane`] therefore
//! does not check a connection out per command (which would cost a PING per
//! command and cap concurrency at the pool size): it keeps a few handles
//! ("slots") and spreads commands over them.
//!
//! - **One owner, one connection.** Every command for one owner token goes
//!   to the same slot (chosen by a hash of the token), so Redis runs them in
//!   the order they were sent. A release sent after an acquire whose answer
//!   never came (a timeout, a dropped future) therefore lands after that
//!   acquire, however late it arrives: the give-back cannot be overtaken by
//!   the command it gives back. Commands without an owner (renewal batches)
//!   go round robin.
//! - **A slot is emptied only when its connection is dead** (closed, reset,
//!   refused), never because an answer was slow: a slow or paused server
//!   keeps its connections, so a give-back needs no new connection (and no
//!   PING through the pool's check-out test) to be sent.
//! - **Two lanes with replicas.** `WAIT` blocks the connection it is sent
//!   on, so the writes that need it (acquire, renewal) use lanes of their
//!   own connections; releases and queue exits never wait behind a `WAIT`.
//! - **Boot time.** Where a restart delay applies, each new connection
//!   learns when its server started (`INFO server` uptime and `TIME`), on
//!   the server's clock. A restart closes every connection, so what a
//!   connection learned holds for its whole life, and nothing a snapshot
//!   restores can fake it.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::future::Future;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bb8::{ErrorSink, Pool, PooledConnection, RunError};
use bb8_redis::RedisConnectionManager;
use futures_util::future::Either;
use redis::RedisFuture;
use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use tokio::sync::Notify;

use super::super::OpError;
use super::super::probe::PlainTextProbe;
use super::super::traced;
use super::bounded::Bounded;
use super::commands::{self, Commands};
use crate::error::ConnectFailure;

/// Remembers the pool's last connection error, classified, which bb8
/// otherwise hides behind a bare "timed out"; and wakes the commands waiting
/// for a connection when the error is one no retry can fix (a wrong
/// password, a TLS failure), so that they fail at once.
///
/// A `rediss://` server whose connect times out is probed for a plain-text
/// port (see [`PlainTextProbe`]): one that answers plain text is a TLS
/// failure, and so is every timeout after it until a connection is made.
#[derive(Debug, Clone, Default)]
pub(crate) struct LastError(Arc<Seen>);

#[derive(Debug, Default)]
struct Seen {
    last: Mutex<Option<Failure>>,
    permanent: Notify,
    /// Set for a server reached over TLS.
    tls: Option<PlainTextProbe>,
}

/// One connection failure, as seen.
#[derive(Debug, Clone)]
struct Failure {
    failure: ConnectFailure,
    detail: String,
    at: Instant,
}

impl Failure {
    fn into_error(self) -> OpError {
        OpError::Connect {
            failure: self.failure,
            detail: self.detail,
        }
    }
}

impl LastError {
    /// For the connections to `client`'s server: a `rediss://` one gets a
    /// plain-text probe.
    pub(crate) fn of(client: &redis::Client) -> Self {
        Self(Arc::new(Seen {
            tls: PlainTextProbe::of(client.get_connection_info()),
            ..Seen::default()
        }))
    }

    fn last(&self) -> MutexGuard<'_, Option<Failure>> {
        self.0.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a failed connection attempt.
    pub(crate) fn record(&self, error: &redis::RedisError) {
        let mut failure = ConnectFailure::of(error);
        let mut detail = error.to_string();
        tracing::debug!(target: "redlock", %error, %failure, "Redis connection attempt failed");
        let mut probe = None;
        if failure == ConnectFailure::Timeout
            && let Some(tls) = &self.0.tls
        {
            match tls.found() {
                // Timed out again on a port found to speak plain text.
                Some(found) => {
                    failure = ConnectFailure::Tls;
                    detail = found;
                }
                None => probe = Some(tls.clone()),
            }
        }
        self.set(failure, detail);
        // After the timeout is recorded, so the probe's finding replaces it.
        if let Some(probe) = probe {
            self.probe(probe);
        }
    }

    /// Records `failure`, and wakes the commands waiting for a connection
    /// when it is one they fail with at once.
    fn set(&self, failure: ConnectFailure, detail: String) {
        *self.last() = Some(Failure {
            failure,
            detail,
            at: Instant::now(),
        });
        if failure.is_permanent()
            || matches!(
                failure,
                ConnectFailure::Refused | ConnectFailure::Unreachable
            )
        {
            self.0.permanent.notify_waiters();
        }
    }

    /// Probes a `rediss://` server that did not answer the TLS handshake,
    /// in the background: a port found to speak plain text is recorded as
    /// a TLS failure, which fails the waiting commands at once.
    fn probe(&self, probe: PlainTextProbe) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let seen = self.clone();
        runtime.spawn(async move {
            if let Some(found) = probe.run().await {
                seen.set(ConnectFailure::Tls, found);
            }
        });
    }

    /// A connection was made: what failed before no longer holds.
    fn clear(&self) {
        self.last().take();
        if let Some(probe) = &self.0.tls {
            probe.forget();
        }
    }

    /// The last failure, if seen since `since`.
    fn since(&self, since: Instant) -> Option<Failure> {
        self.last().clone().filter(|f| f.at >= since)
    }

    /// Resolves with the first permanent failure seen since `since` (at
    /// once if there is one already); never resolves otherwise. With
    /// `refusals`, a refused or unreachable server counts as permanent too.
    async fn permanent(&self, since: Instant, refusals: bool) -> OpError {
        let fatal = |f: &Failure| {
            f.failure.is_permanent()
                || (refusals
                    && matches!(
                        f.failure,
                        ConnectFailure::Refused | ConnectFailure::Unreachable
                    ))
        };
        loop {
            let notified = self.0.permanent.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(f) = self.since(since).filter(fatal) {
                return f.into_error();
            }
            notified.await;
        }
    }
}

impl ErrorSink<redis::RedisError> for LastError {
    fn sink(&self, error: redis::RedisError) {
        self.record(&error);
    }

    fn boxed_clone(&self) -> Box<dyn ErrorSink<redis::RedisError>> {
        Box::new(self.clone())
    }
}

/// Where a lane's connections come from.
pub(crate) enum Source {
    /// Check a connection out, keep a clone of its handle, return it at
    /// once: the pool stays shareable.
    Shared(Pool<RedisConnectionManager>),
    /// Keep the checked-out connection for this lane alone, for as long as
    /// it lives: a `WAIT` lane over a pool the user shares with others.
    Exclusive(Pool<RedisConnectionManager>),
    /// The user's redis-rs `ConnectionManager`: one multiplexed connection
    /// that reconnects by itself; every slot holds a clone of it.
    Manager(ConnectionManager),
}

impl Source {
    pub(crate) fn pool(&self) -> Option<&Pool<RedisConnectionManager>> {
        match self {
            Self::Shared(pool) | Self::Exclusive(pool) => Some(pool),
            Self::Manager(_) => None,
        }
    }
}

/// A connection as commands use it: a pooled multiplexed connection or the
/// user's `ConnectionManager`, both cheap handles to one connection; or one
/// of them following a Redis Cluster `ASK` redirect.
#[derive(Clone)]
pub(crate) enum Conn {
    Multiplexed(MultiplexedConnection),
    Manager(ConnectionManager),
    /// A multiplexed handle whose sends end by a deadline (see [`bounded`](super::bounded)).
    Bounded(Bounded),
    /// Sends `ASKING` just before each command, in the same write, so the
    /// node importing a slot serves it (`ASKING` holds for the next
    /// command only, which nothing else on the multiplexed connection can
    /// come between).
    Asking(Box<Conn>),
}

tokio::task_local! {
    /// Set around a call that follows an `ASK` redirect: the lanes hand out
    /// [`Conn::Asking`] connections inside it (see `store/cluster/`).
    pub(crate) static ASKING: ();
}

/// Whether the current call follows an `ASK` redirect.
pub(crate) fn asking() -> bool {
    ASKING.try_with(|()| ()).is_ok()
}

impl Conn {
    /// This connection, sending `ASKING` before each command.
    pub(crate) fn asking(self) -> Self {
        match self {
            asking @ Self::Asking(_) => asking,
            conn => Self::Asking(Box::new(conn)),
        }
    }
}

/// `pipeline`'s commands from `offset`, `count` of them, each after an
/// `ASKING`.
fn with_asking(pipeline: &redis::Pipeline, offset: usize, count: usize) -> redis::Pipeline {
    let mut asking = redis::pipe();
    for cmd in pipeline.cmd_iter().skip(offset).take(count) {
        asking.cmd("ASKING").add_command(cmd.clone());
    }
    asking
}

impl Conn {
    /// Sends `cmd`, unspanned (the span is [`ConnectionLike`]'s).
    fn send<'a>(&'a mut self, cmd: &'a redis::Cmd) -> RedisFuture<'a, redis::Value> {
        match self {
            Self::Multiplexed(c) => c.req_packed_command(cmd),
            Self::Manager(c) => c.req_packed_command(cmd),
            Self::Bounded(c) => c.send(cmd),
            Self::Asking(c) => Box::pin(async move {
                let mut pipe = redis::pipe();
                pipe.cmd("ASKING").add_command(cmd.clone());
                let mut replies = c.send_all(&pipe, 0, 2).await?;
                replies
                    .pop()
                    .ok_or_else(|| {
                        redis::RedisError::from((redis::ErrorKind::Parse, "no reply after ASKING"))
                    })?
                    .extract_error()
            }),
        }
    }

    /// Sends `count` of `pipeline`'s commands from `offset`, unspanned.
    fn send_all<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Self::Multiplexed(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Manager(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Bounded(c) => c.send_all(pipeline, offset, count),
            Self::Asking(c) => Box::pin(async move {
                let asking = with_asking(pipeline, offset, count);
                let replies = c.send_all(&asking, 0, asking.len()).await?;
                // Every other reply is an `ASKING`'s `OK`.
                Ok(replies.into_iter().skip(1).step_by(2).collect())
            }),
        }
    }
}

/// Every call on a lock connection, in its Redis call span (see
/// `traced.rs`; an `ASKING` sent before a command is not a call of its
/// own).
impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> RedisFuture<'a, redis::Value> {
        traced::command(cmd, self.send(cmd))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        traced::pipeline(
            pipeline,
            offset,
            count,
            self.send_all(pipeline, offset, count),
        )
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Multiplexed(c) => c.get_db(),
            Self::Manager(c) => c.get_db(),
            Self::Bounded(c) => c.get_db(),
            Self::Asking(c) => c.get_db(),
        }
    }
}

/// What a connection learned about its server when it was made, shared
/// by the connection's handles.
#[derive(Debug, Default)]
pub(crate) struct Learned {
    /// When the server started, on its own clock (ms): set where the lane
    /// learns boot times.
    boot_ms: Option<u64>,
    /// What the server can do without a script (see [`commands`](super::commands)).
    commands: Commands,
}

/// A connection handle as a command gets it.
#[derive(Clone)]
pub(crate) struct Link {
    pub(crate) conn: Conn,
    /// What the connection learned about its server.
    learned: Arc<Learned>,
    /// Tells this connection apart from a later one in the same slot.
    id: u64,
    /// An exclusive lane's check-out, returned to the pool with the last
    /// handle.
    _held: Option<Arc<PooledConnection<'static, RedisConnectionManager>>>,
}

impl Link {
    /// When the server started, on its own clock (ms): set where the lane
    /// learns boot times.
    pub(crate) fn boot_ms(&self) -> Option<u64> {
        self.learned.boot_ms
    }

    /// What the server can do without a script, as this connection
    /// learned it (see [`commands`](super::commands)).
    pub(crate) fn commands(&self) -> &Commands {
        &self.learned.commands
    }

    /// Tells this connection apart from a later one in the same slot.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// This link with every send ending by `deadline` (see [`bounded`](super::bounded));
    /// itself, unchanged, as `Err` when its handle cannot be bounded so (a
    /// `ConnectionManager`).
    pub(crate) fn bounded(self, deadline: tokio::time::Instant) -> Result<Self, Self> {
        match self.conn {
            Conn::Multiplexed(conn) => Ok(Self {
                conn: Conn::Bounded(Bounded::new(conn, deadline)),
                ..self
            }),
            conn => Err(Self { conn, ..self }),
        }
    }

    /// This link, following an `ASK` redirect (see [`Conn::Asking`]).
    pub(crate) fn asking(self) -> Self {
        Self {
            conn: self.conn.asking(),
            ..self
        }
    }
}

/// Connection ids, unique in the process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A set of connection slots to one server.
pub(crate) struct Lane {
    source: Source,
    slots: Box<[Mutex<Option<Link>>]>,
    next: AtomicUsize,
    hasher: RandomState,
    last_error: LastError,
    /// Whether new connections learn their server's boot time.
    learn_boot: bool,
    /// Whether new connections learn what their server can do without a
    /// script (see [`commands`]).
    probe_commands: bool,
    /// Whether a refused connection fails the waiting commands at once
    /// (a cluster node: the cluster may have another master for the slot).
    fail_fast: bool,
}

impl fmt::Debug for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lane")
            .field("pool", &self.source.pool().map(Pool::state))
            .field("slots", &self.slots.len())
            .finish_non_exhaustive()
    }
}

impl Lane {
    /// A lane over `source`: one slot per connection of a shared pool;
    /// half of them for an exclusive lane, which keeps its connections
    /// checked out of a pool others use too.
    pub(crate) fn new(source: Source, last_error: LastError) -> Self {
        let size = |pool: &Pool<RedisConnectionManager>| {
            usize::try_from(pool.config().max_size).unwrap_or(1)
        };
        let slots = match &source {
            Source::Shared(pool) => size(pool),
            Source::Exclusive(pool) => size(pool).div_ceil(2),
            // One connection: clones of it in every slot would only add
            // locks.
            Source::Manager(_) => 1,
        };
        Self {
            source,
            slots: (0..slots.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            hasher: RandomState::new(),
            last_error,
            learn_boot: false,
            probe_commands: true,
            fail_fast: false,
        }
    }

    /// New connections learn their server's boot time (see the module docs).
    pub(crate) fn learning_boot_time(mut self) -> Self {
        self.learn_boot = true;
        self
    }

    /// Whether new connections learn what their server can do without a
    /// script (see [`commands`]); on unless turned off here.
    pub(crate) fn probing_commands(mut self, on: bool) -> Self {
        self.probe_commands = on;
        self
    }

    /// A refused or unreachable server fails the commands waiting for a
    /// connection at once, instead of after the connection timeout.
    pub(crate) fn failing_fast(mut self) -> Self {
        self.fail_fast = true;
        self
    }

    pub(crate) fn pool(&self) -> Option<&Pool<RedisConnectionManager>> {
        self.source.pool()
    }

    /// Where the connection failures that still count begin: one
    /// connection timeout before `now` (now itself without a pool).
    fn recent(&self, now: Instant) -> Instant {
        self.source
            .pool()
            .and_then(|p| now.checked_sub(p.config().connection_timeout))
            .unwrap_or(now)
    }

    /// The last connection failure and its detail, when it is one no
    /// retry fixes (a wrong password, a TLS failure) and was seen within
    /// the last connection timeout, with no connection made since.
    pub(crate) fn permanent_failure(&self) -> Option<(ConnectFailure, String)> {
        self.last_error
            .since(self.recent(Instant::now()))
            .filter(|f| f.failure.is_permanent())
            .map(|f| (f.failure, f.detail))
    }

    /// Why no connection came within `limit` (from `since`): the last
    /// connection failure seen meanwhile; else, when the pool has
    /// connections, a slow answer (checking one out sends a `PING`); else a
    /// connect timeout.
    pub(crate) fn no_connection(&self, since: Instant, limit: Duration) -> OpError {
        if let Some(f) = self.last_error.since(since) {
            return f.into_error();
        }
        match self.source.pool() {
            Some(pool) if pool.state().connections == 0 => OpError::Connect {
                failure: ConnectFailure::Timeout,
                detail: format!("no connection within {limit:?}"),
            },
            _ => OpError::Timeout(limit),
        }
    }

    /// How many connection slots it has.
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// The slot of `owner`'s commands, or the next one round robin.
    pub(crate) fn slot_of(&self, owner: Option<&str>) -> usize {
        let n = self.slots.len();
        if n == 1 {
            return 0;
        }
        match owner {
            Some(token) => usize::try_from(self.hasher.hash_one(token) % n as u64).unwrap_or(0),
            None => self.next.fetch_add(1, Ordering::Relaxed) % n,
        }
    }

    fn slot(&self, i: usize) -> MutexGuard<'_, Option<Link>> {
        self.slots[i].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Slot `i`'s connection, if it has one.
    pub(crate) fn cached(&self, i: usize) -> Option<Link> {
        self.slot(i).clone()
    }

    /// Slot `i`'s connection (and whether it was there already), filling the
    /// slot when it is empty.
    ///
    /// Not an `async fn`: the connect's state (a pool check-out, the
    /// boot-time and command probes: near a kilobyte) is boxed, so the
    /// future of every command, which nearly always finds its link cached,
    /// neither holds nor moves it.
    pub(crate) fn link(
        &self,
        i: usize,
    ) -> impl Future<Output = Result<(Link, bool), OpError>> + Send + '_ {
        match self.slot(i).as_ref() {
            Some(link) => Either::Left(std::future::ready(Ok((link.clone(), true)))),
            None => Either::Right(Box::pin(self.connect(i))),
        }
    }

    /// Fills slot `i` with a new connection (see [`link`](Self::link)).
    async fn connect(&self, i: usize) -> Result<(Link, bool), OpError> {
        // A failure seen in the last connection timeout still counts: a
        // wrong password fails the next command at once, not after the
        // timeout.
        let recent = self.recent(Instant::now());
        let timed_out = |timeout| match self.last_error.since(recent) {
            Some(f) => f.into_error(),
            None => OpError::Pool {
                timeout,
                last_error: None,
            },
        };
        let connect = async {
            Ok::<_, OpError>(match &self.source {
                Source::Shared(pool) => {
                    let pooled = pool.get().await.map_err(|e| match e {
                        RunError::User(e) => OpError::Redis(e),
                        RunError::TimedOut => timed_out(pool.config().connection_timeout),
                    })?;
                    (Conn::Multiplexed(ours(&pooled)), None)
                }
                Source::Exclusive(pool) => {
                    let pooled = pool.get_owned().await.map_err(|e| match e {
                        RunError::User(e) => OpError::Redis(e),
                        RunError::TimedOut => timed_out(pool.config().connection_timeout),
                    })?;
                    (Conn::Multiplexed(ours(&pooled)), Some(Arc::new(pooled)))
                }
                Source::Manager(manager) => (Conn::Manager(manager.clone()), None),
            })
        };
        let (conn, held) = tokio::select! {
            biased;
            got = connect => got?,
            failed = self.last_error.permanent(recent, self.fail_fast) => return Err(failed),
        };
        self.last_error.clear();
        let boot_ms = if self.learn_boot {
            Some(boot_time(conn.clone()).await?)
        } else {
            None
        };
        let commands = if self.probe_commands {
            // Bounded like the connect itself (the user's manager's own
            // connect is not ours to bound: a second).
            let limit = self
                .source
                .pool()
                .map_or(Duration::from_secs(1), |p| p.config().connection_timeout);
            commands::probe(conn.clone(), limit).await
        } else {
            Commands::none()
        };
        let link = Link {
            conn,
            learned: Arc::new(Learned { boot_ms, commands }),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            _held: held,
        };
        let mut slot = self.slot(i);
        // Another command may have filled the slot meanwhile: use its link.
        let link = slot.get_or_insert(link).clone();
        Ok((link, false))
    }

    /// Empties slot `i` if it still holds the connection whose [`Link::id`]
    /// is `id` (found dead).
    pub(crate) fn forget(&self, i: usize, id: u64) {
        let mut slot = self.slot(i);
        if slot.as_ref().is_some_and(|l| l.id == id) {
            slot.take();
        }
    }
}

/// redis-rs's own response timeout on the handles we keep: far enough that
/// it never fires first. Every call is bounded by our limit instead (see
/// `RedisBackend::run`), which may be longer than redis-rs's default of
/// 500 ms: a `command_timeout` of seconds, a `WAIT` for replicas.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// A handle of the pooled connection `pooled` for our commands (see
/// [`RESPONSE_TIMEOUT`]); the pool's own handle keeps redis-rs's default.
fn ours(pooled: &MultiplexedConnection) -> MultiplexedConnection {
    let mut conn = pooled.clone();
    conn.set_response_timeout(RESPONSE_TIMEOUT);
    conn
}

/// When the server on `conn` started, on its own clock (ms): `TIME` less
/// its uptime, plus a second, so the estimate is never earlier than the
/// real start.
async fn boot_time(mut conn: Conn) -> Result<u64, OpError> {
    let (info, time): (String, (u64, u64)) = redis::pipe()
        .cmd("INFO")
        .arg("server")
        .cmd("TIME")
        .query_async(&mut conn)
        .await
        .map_err(OpError::Redis)?;
    let uptime_s = info
        .lines()
        .find_map(|line| line.strip_prefix("uptime_in_seconds:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or_else(|| {
            OpError::Redis(redis::RedisError::from((
                redis::ErrorKind::Parse,
                "cannot tell when this node started (`INFO server` gave no uptime_in_seconds), \
                 which a restart delay needs",
            )))
        })?;
    let now_ms = time.0 * 1000 + time.1 / 1000;
    // Redis counts uptime between two whole-second timestamps, so it may
    // say 1 s a millisecond after the start: the uptime is at most a second
    // more than the time since the start. One second added back makes the
    // estimate never earlier than the start, so the delay never ends early
    // (it may end up to about 2 s late).
    Ok(now_ms.saturating_sub(uptime_s * 1000) + 1000)
}

//! A speed trick: a call made of nothing but commands is bounded by the
//! driver's own response timeout, set before each send to what is left of
//! the call's time limit, instead of by a timer of its own.
//!
//! redis-rs already sends every command of a multiplexed handle under a
//! `tokio::time::timeout` of the handle's response timeout (ours is set a
//! day out: see `conn::RESPONSE_TIMEOUT`). A call bounded by a timer of its
//! own (as [`RedisBackend::run`] bounds any call) therefore registers and
//! clears two timers per command, and reads the clock for both. Here the
//! handle the call sends on carries the call's deadline instead ([`Bounded`]),
//! and each send sets the driver's timeout to what is left of it.
//!
//! **The bound is the same.** [`RedisBackend::run_commands`] takes only
//! calls whose every await is a send through [`Conn`] (a command, a
//! pipeline, a script load): no batch to wait for, no pool, no sleep.
//! Each send is bounded by the time left when it starts, so the call ends
//! by its deadline; a send with no time left fails at once, as timed out.
//! Either way the caller gets `OpError::Timeout(limit)`, as from the timer.
//! What cannot be bounded so goes under the timer, as before: a call whose
//! connection must be made first, one on a `ConnectionManager` (its
//! response timeout is fixed when it is made), and the one re-send on a new
//! connection after the cached one was found dead.
//!
//! Measured (lockbench, Valkey 9.1.2, a plain pair at concurrency 32,
//! `--only uncontended --uncontended-impls ours,raw_conditional`, three
//! alternated runs each with and without the call's own timer): ours over
//! raw_conditional in client CPU per pair 1.21-1.24 with it, 1.16-1.18
//! without: about 4 % of the client's CPU per lock.

use std::future::Future;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};
use tokio::time::Instant;

/// A multiplexed handle whose sends all end by `deadline` (see the module
/// docs).
#[derive(Clone)]
pub(crate) struct Bounded {
    conn: MultiplexedConnection,
    deadline: Instant,
}

impl Bounded {
    pub(super) fn new(conn: MultiplexedConnection, deadline: Instant) -> Self {
        Self { conn, deadline }
    }

    /// The handle, its driver timeout set to the time left; `None` when
    /// none is.
    fn with_time_left(&mut self) -> Option<&mut MultiplexedConnection> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        self.conn.set_response_timeout(left);
        Some(&mut self.conn)
    }

    pub(super) fn send<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self.with_time_left() {
            Some(conn) => conn.req_packed_command(cmd),
            None => Box::pin(out_of_time()),
        }
    }

    pub(super) fn send_all<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self.with_time_left() {
            Some(conn) => conn.req_packed_commands(pipeline, offset, count),
            None => Box::pin(out_of_time()),
        }
    }

    pub(super) fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}

/// A send that found no time left: timed out, as the driver's timeout
/// would have said (nothing was sent).
fn out_of_time<T: Send>() -> impl Future<Output = Result<T, RedisError>> + Send {
    std::future::ready(Err(RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "the call's time limit ran out before this command was sent",
    ))))
}

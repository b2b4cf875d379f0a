//! Coalescing: the calls of fenced locks that many tasks send at once on
//! one connection go out together, as one script call.
//!
//! A fenced acquire is the most expensive lock call: a script that reads
//! Redis's clock and writes two keys. Under load, much of its cost is the
//! fixed price of each call: on Redis, reading, parsing and starting one
//! `EVALSHA` and its `TIME`; in the client, encoding it, matching its
//! answer and waking its caller. A [`Coalescer`] (one per connection slot)
//! lets a call go out alone, exactly as it would without it, while fewer
//! than [`MAX_IN_FLIGHT`] of its calls are unanswered: a lone caller waits
//! for nobody. Beyond that, calls queue, and the next answer sends the
//! whole queue (up to [`MAX_BATCH`]) as one `EVALSHA` of
//! [`scripts::BATCH`](crate::scripts::BATCH), which runs each call through
//! the very step its own script runs; each answer reads back as that
//! script's (an acquire's comes as one number, see `call.rs`).
//! Measured with lockbench at concurrency 32 (fenced acquire and
//! release pairs, about 12 calls per batch): 27 to 28 µs of CPU per pair
//! (client and Redis) instead of 34 to 35.
//!
//! Only the calls of locks with a fencing token are coalesced: the fenced
//! acquire, and the release of a lock that has a token. A plain lock's
//! `SET NX` and release are each one cheap command, which a batch script
//! (whose every `redis.call` costs about as much as a command of its own)
//! made slower, not faster, in the same measurements.
//!
//! What it does not reach: a fenced pair stays near 0.7 of rslock's plain
//! pair at concurrency 32 (lockbench on 2 cores, 0.62 to 0.81 across runs).
//! What holds it there, measured alternating builds (two or three runs
//! each):
//!
//! - **Redis's time.** A batched fenced pair costs Redis 19 to 25 µs of CPU
//!   against 11.5 to 14.5 for the plain pair: four `redis.call`s (take the
//!   lock, issue the token, read and delete to release), each about 2 µs
//!   inside a script beyond its own command, and, with locks per order id,
//!   a new counter key per lock (0.6 to 5.3 µs in five runs: lockbench's
//!   `lua_fence` against `lua_fence_node_counter`). Redis 7.0 has no
//!   compare-and-delete or conditional write that would fold two of the
//!   four into one.
//! - **The batches' own wait.** Each call waits for the batch ahead of it,
//!   and a batch is answered only when its last call has run. A scratch
//!   build whose batched acquire issued no token at all (not correct: it
//!   only measures the rest) reached 0.73 to 0.80 of rslock, against 0.67
//!   to 0.72 with the token.
//! - **What did not help.** Smaller batches with more of them in flight (8
//!   calls × 4, 12 × 4, 6 × 6, 4 × 8) cost Redis more per pair and were no
//!   faster (0.53 to 0.78, against 0.71). Releases sent alone instead of in
//!   the batches cost Redis more (22.7 to 26.1 µs per pair, against 19.1 to
//!   25.0) and were slower (0.64 to 0.67, against 0.67 to 0.74).
//!
//! What it must not change, and how it does not:
//!
//! - **Each call is still one atomic step of its own lock.** A batch runs
//!   its calls one after another in one script: nothing runs between two
//!   steps of a lock that would not have run between them anyway. Fencing
//!   tokens are issued per key as before (see `design`, "Fencing
//!   tokens"); the batch reads Redis's clock once for all its acquires.
//! - **A caller that leaves loses nothing and leaks nothing.** The batch is
//!   sent by a task of its own, so a caller that is cancelled or times out
//!   never cuts a batch that carries other callers' calls. A call still
//!   queued when its caller leaves is never sent. An acquire already sent
//!   may take a lock for nobody: the give-back of that acquire (see
//!   `giveback.rs`) first waits, through [`Coalescer::settled`], until the
//!   batch that carries it is answered or failed, so the release always
//!   lands after the acquire it gives back.
//! - **Errors stay per call.** One call's error (a key holding another
//!   type) is that call's answer; a batch that fails as a whole (a dead
//!   connection, no answer in time) fails each of its calls with that
//!   error, which each caller handles as if its own call had failed so
//!   (a dead connection is retried on a new one, an acquire whose outcome
//!   is unknown is given back). A server or proxy that refuses a script
//!   over keys of several slots (`CROSSSLOT`) turns coalescing off for the
//!   client, and that batch's calls are sent alone.
//! - **Per-owner order.** Every call of one owner token goes to the same
//!   slot, as before. A call goes out alone only while nothing is queued,
//!   so a queued call is never overtaken by a later one of the same slot
//!   going out alone; an owner's acquire and its release never overlap
//!   (the release follows the acquire's answer), except for the give-back
//!   above.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Cmd, RedisError, RedisResult, Value};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::conn::{Conn, Link};
use super::{On, RedisBackend};
use crate::scripts::{self, Publish};
use crate::store::OpError;

mod call;
pub(crate) use call::Call;
use call::{refuses_several_slots, send, timed_out, top_level, widen_acquire};

/// Calls of one slot that may be unanswered before more calls queue: the
/// calls sent alone and the batches in flight. Two keep a pair of tasks
/// from waiting on each other, and leave the rest of the load to batches.
pub(crate) const MAX_IN_FLIGHT: usize = 2;

/// The most calls in one batch (about 0.3 ms of Redis's time).
pub(crate) const MAX_BATCH: usize = 128;

/// The calls of one connection slot (see the module docs).
pub(crate) struct Coalescer {
    state: Mutex<State>,
    retention_ms: u64,
    /// Shared by every slot of the client: off after a `CROSSSLOT`.
    on: Arc<AtomicBool>,
    /// Batches sent, and the calls in them (tests, benchmarks).
    batches: AtomicU64,
    batched: AtomicU64,
}

#[derive(Default)]
struct State {
    /// Calls sent alone and batches sent, not yet answered.
    in_flight: usize,
    queue: VecDeque<Queued>,
    /// The acquires queued or in a batch not yet answered, by owner token:
    /// what a give-back must wait for.
    acquiring: HashMap<String, Vec<Arc<Ticket>>>,
}

/// A call waiting for the next batch.
struct Queued {
    call: Call<String>,
    link: Link,
    /// When its caller stops waiting: the batch waits up to the latest.
    deadline: Instant,
    ticket: Arc<Ticket>,
}

/// A queued call's answer, and its stage.
struct Ticket {
    stage: Mutex<Stage>,
    settled: Notify,
}

enum Stage {
    Queued,
    /// The caller left before it was sent: it never will be.
    Abandoned,
    Sent,
    /// The answer (taken by the caller, if it is still there).
    Answered(Option<RedisResult<Value>>),
}

impl Ticket {
    fn stage(&self) -> MutexGuard<'_, Stage> {
        self.stage.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn answer(&self, answer: RedisResult<Value>) {
        *self.stage() = Stage::Answered(Some(answer));
        self.settled.notify_waiters();
    }

    /// Completes once the call was answered, failed, or will never be
    /// sent.
    async fn settled(&self) {
        loop {
            let notified = self.settled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if matches!(*self.stage(), Stage::Abandoned | Stage::Answered(_)) {
                return;
            }
            notified.await;
        }
    }
}

/// A caller waiting for its queued call's answer: leaving marks a call
/// not yet sent abandoned, so it never is.
struct Waiting(Arc<Ticket>);

impl Waiting {
    async fn answer(self) -> RedisResult<Value> {
        loop {
            let notified = self.0.settled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Stage::Answered(answer) = &mut *self.0.stage() {
                return answer.take().unwrap_or_else(|| Err(timed_out()));
            }
            notified.await;
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut stage = self.0.stage();
        if matches!(*stage, Stage::Queued) {
            *stage = Stage::Abandoned;
            drop(stage);
            self.0.settled.notify_waiters();
        }
    }
}

/// A call sent alone, counted in flight until it is answered or dropped;
/// then the queue, if anything waits in it, goes out as a batch.
struct Alone(Arc<Coalescer>);

impl Drop for Alone {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.in_flight -= 1;
        self.0.batch_if_room(state);
    }
}

impl std::fmt::Debug for Coalescer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("Coalescer")
            .field("in_flight", &state.in_flight)
            .field("queued", &state.queue.len())
            .field("on", &self.on.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Coalescer {
    pub(crate) fn new(retention_ms: u64, on: Arc<AtomicBool>) -> Self {
        Self {
            state: Mutex::new(State::default()),
            retention_ms,
            on,
            batches: AtomicU64::new(0),
            batched: AtomicU64::new(0),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(feature = "test-util")]
    /// Batches sent so far, and the calls they carried.
    pub(crate) fn sent(&self) -> (u64, u64) {
        (
            self.batches.load(Ordering::Relaxed),
            self.batched.load(Ordering::Relaxed),
        )
    }

    /// Sends `call` on `link`, alone or in a batch (see the module docs),
    /// giving up after `limit`; its answer as its own script would give it.
    pub(crate) async fn call(
        self: &Arc<Self>,
        link: Link,
        limit: Duration,
        call: Call<&str>,
    ) -> RedisResult<Value> {
        let ticket = {
            let mut state = self.state();
            // Alone while there is room, nothing queued, and no earlier
            // acquire of this owner is waiting for a batch or in one (it
            // must land first).
            let alone = !self.on.load(Ordering::Relaxed)
                || matches!(call, Call::SetNx { .. })
                || (state.in_flight < MAX_IN_FLIGHT
                    && state.queue.is_empty()
                    && !state.acquiring.contains_key(call.token()));
            if alone {
                state.in_flight += 1;
                None
            } else {
                let ticket = Arc::new(Ticket {
                    stage: Mutex::new(Stage::Queued),
                    settled: Notify::new(),
                });
                let call = call.to_owned();
                if call.is_acquire() {
                    state
                        .acquiring
                        .entry(call.token().to_owned())
                        .or_default()
                        .push(Arc::clone(&ticket));
                }
                state.queue.push_back(Queued {
                    call,
                    link: link.clone(),
                    deadline: Instant::now() + limit,
                    ticket: Arc::clone(&ticket),
                });
                self.batch_if_room(state);
                Some(ticket)
            }
        };
        match ticket {
            None => {
                let _alone = Alone(Arc::clone(self));
                Self::alone(link, call, self.retention_ms, Publish::Plain).await
            }
            Some(ticket) => Waiting(ticket).answer().await,
        }
    }

    /// Sends `call` alone on `link`, as a client that coalesces nothing
    /// does (a cluster node publishes with `publish`).
    pub(crate) async fn alone(
        link: Link,
        call: Call<&str>,
        retention_ms: u64,
        publish: Publish,
    ) -> RedisResult<Value> {
        let (cmd, script) = call.alone(retention_ms, publish);
        let mut conn = link.conn;
        send(&mut conn, &cmd, script).await
    }

    /// Completes once no acquire of `token` is queued or in a batch
    /// without an answer: a give-back sent after this lands after them.
    pub(crate) async fn settled(&self, token: &str) {
        let tickets = self.state().acquiring.get(token).cloned();
        for ticket in tickets.into_iter().flatten() {
            ticket.settled().await;
        }
    }

    /// While fewer than [`MAX_IN_FLIGHT`] calls and batches are in flight,
    /// sends the next batch from the queue, by a task of its own.
    fn batch_if_room(self: &Arc<Self>, mut state: MutexGuard<'_, State>) {
        if state.in_flight >= MAX_IN_FLIGHT {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime to send them on (it is shutting down): fail them.
            while let Some(q) = state.queue.pop_front() {
                state.forget(&q);
                q.ticket.answer(Err(timed_out()));
            }
            return;
        };
        let batch = state.next_batch();
        if batch.is_empty() {
            return;
        }
        state.in_flight += 1;
        drop(state);
        runtime.spawn(Arc::clone(self).flush(batch));
    }

    /// Sends `batch`, then the next ones from the queue until none is left
    /// to send.
    ///
    /// After each answer it yields once before taking the next batch: the
    /// callers it has just answered run first, and most of them send their
    /// next call at once (the release after an acquire, the next acquire
    /// after a release). Those calls queue behind this batch's slot, still
    /// counted in flight, and leave together in the next batch, instead of
    /// the first going out alone and the rest waiting for it. Measured with
    /// lockbench at concurrency 32 (fenced pairs): about 16 calls per batch
    /// instead of 12.5, and 8 to 15 % more pairs per second.
    async fn flush(self: Arc<Self>, mut batch: Vec<Queued>) {
        loop {
            self.send_batch(&batch).await;
            {
                let mut state = self.state();
                for q in &batch {
                    state.forget(q);
                }
            }
            tokio::task::yield_now().await;
            let mut state = self.state();
            batch = state.next_batch();
            if batch.is_empty() {
                state.in_flight -= 1;
                // A call held back for an acquire of its owner in the batch
                // just answered may be sendable now.
                self.batch_if_room(state);
                return;
            }
        }
    }

    /// Sends `batch` (as one script call, or a single call alone) and
    /// answers each of its calls.
    async fn send_batch(&self, batch: &[Queued]) {
        let Some(first) = batch.first() else { return };
        let deadline = batch
            .iter()
            .map(|q| q.deadline)
            .max()
            .unwrap_or(first.deadline);
        let mut conn = first.link.conn.clone();
        let answers = if let [only] = batch {
            let (cmd, script) = only.call.alone(self.retention_ms, Publish::Plain);
            let sent = tokio::time::timeout_at(deadline, send(&mut conn, &cmd, script)).await;
            vec![sent.unwrap_or_else(|_| Err(timed_out()))]
        } else {
            self.batches.fetch_add(1, Ordering::Relaxed);
            self.batched
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            let cmd = self.batch_command(batch);
            let script = scripts::BATCH.on(Publish::Plain);
            let sent = tokio::time::timeout_at(deadline, send(&mut conn, &cmd, Some(script))).await;
            match sent {
                Ok(Ok(Value::Array(values))) if values.len() == batch.len() => values
                    .into_iter()
                    .zip(batch)
                    .map(|(v, q)| {
                        let answer = top_level(Ok(v))?;
                        Ok(if q.call.is_acquire() {
                            widen_acquire(answer)
                        } else {
                            answer
                        })
                    })
                    .collect(),
                Ok(Ok(other)) => {
                    let e = RedisError::from((
                        redis::ErrorKind::Parse,
                        "unexpected answer to a batch of lock calls",
                        format!("{other:?}"),
                    ));
                    vec![Err(e); batch.len()]
                }
                Ok(Err(e)) if refuses_several_slots(&e) => {
                    tracing::warn!(target: "redlock", error = %e, "Redis refused a batch of lock calls over several slots; sending each call alone from now on");
                    self.on.store(false, Ordering::Relaxed);
                    self.each_alone(&mut conn, batch, deadline).await
                }
                Ok(Err(e)) => vec![Err(e); batch.len()],
                Err(_) => vec![Err(timed_out()); batch.len()],
            }
        };
        for (q, answer) in batch.iter().zip(answers) {
            q.ticket.answer(answer);
        }
    }

    /// Each call of `batch` alone, in one pipeline (one round trip), after
    /// loading the scripts they use.
    async fn each_alone(
        &self,
        conn: &mut Conn,
        batch: &[Queued],
        deadline: Instant,
    ) -> Vec<RedisResult<Value>> {
        let mut pipe = redis::pipe();
        let mut loads = 0;
        for script in [&scripts::ACQUIRE, &scripts::RELEASE] {
            pipe.cmd("SCRIPT")
                .arg("LOAD")
                .arg(script.text(Publish::Plain));
            loads += 1;
        }
        for q in batch {
            pipe.add_command(q.call.alone(self.retention_ms, Publish::Plain).0);
        }
        let count = loads + batch.len();
        let sent =
            tokio::time::timeout_at(deadline, conn.req_packed_commands(&pipe, 0, count)).await;
        match sent {
            Ok(Ok(values)) if values.len() == count => values
                .into_iter()
                .skip(loads)
                .map(|v| top_level(Ok(v)))
                .collect(),
            Ok(Ok(_)) => vec![
                Err(RedisError::from((
                    redis::ErrorKind::Parse,
                    "unexpected answer to a pipeline of lock calls",
                )));
                batch.len()
            ],
            Ok(Err(e)) => vec![Err(e); batch.len()],
            Err(_) => vec![Err(timed_out()); batch.len()],
        }
    }

    /// `EVALSHA` of [`scripts::BATCH`] over `batch`'s calls.
    fn batch_command(&self, batch: &[Queued]) -> Cmd {
        let script = scripts::BATCH.on(Publish::Plain);
        let keys: usize = batch
            .iter()
            .map(|q| 2 + usize::from(q.call.is_acquire()))
            .sum();
        let mut cmd = Cmd::with_capacity(4 + keys + 3 * batch.len(), 128 * batch.len());
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys);
        for q in batch {
            match &q.call {
                Call::Acquire {
                    lock,
                    fence,
                    waited,
                    ..
                } => cmd.arg(lock).arg(fence).arg(waited),
                Call::Release { lock, waited, .. } => cmd.arg(lock).arg(waited),
                // Never queued (see `call`).
                Call::SetNx { .. } => continue,
            };
        }
        cmd.arg(self.retention_ms);
        for q in batch {
            match &q.call {
                Call::Acquire { token, ttl_ms, .. } => cmd.arg("f").arg(token).arg(*ttl_ms),
                Call::Release { token, .. } => cmd.arg("r").arg(token),
                // Never queued (see `call`).
                Call::SetNx { .. } => continue,
            };
        }
        cmd
    }
}

impl State {
    /// Takes the next batch off the queue, in order: the calls whose
    /// callers left are dropped (they are never sent), and a call of an
    /// owner that has an acquire in a batch in flight is left for a later
    /// batch (batches in flight may reach Redis in any order; one owner's
    /// calls must not). Empty when nothing can be sent now.
    fn next_batch(&mut self) -> Vec<Queued> {
        let mut batch: Vec<Queued> = Vec::new();
        let mut kept = VecDeque::new();
        while let Some(q) = self.queue.pop_front() {
            if batch.len() >= MAX_BATCH {
                kept.push_back(q);
                continue;
            }
            // One connection per batch: a call queued on another (a
            // reconnection in between) waits for a later batch.
            let other_link = batch.first().is_some_and(|f| f.link.id() != q.link.id());
            let held_back = other_link || self.in_a_batch(q.call.token());
            // Checked and marked under one lock: a caller that leaves
            // either finds its call sent (and its give-back waits for the
            // answer) or never sent.
            let mut stage = q.ticket.stage();
            if matches!(*stage, Stage::Abandoned) {
                drop(stage);
                self.forget(&q);
                continue;
            }
            if held_back {
                drop(stage);
                kept.push_back(q);
                continue;
            }
            *stage = Stage::Sent;
            drop(stage);
            batch.push(q);
        }
        self.queue = kept;
        batch
    }

    /// Whether an acquire of `token` is in a batch in flight.
    fn in_a_batch(&self, token: &str) -> bool {
        self.acquiring
            .get(token)
            .is_some_and(|tickets| tickets.iter().any(|t| matches!(*t.stage(), Stage::Sent)))
    }

    /// `q` is answered or dropped: no give-back waits for it any more.
    fn forget(&mut self, q: &Queued) {
        if !q.call.is_acquire() {
            return;
        }
        let token = q.call.token();
        if let Some(tickets) = self.acquiring.get_mut(token) {
            tickets.retain(|t| !Arc::ptr_eq(t, &q.ticket));
            if tickets.is_empty() {
                self.acquiring.remove(token);
            }
        }
    }
}

impl RedisBackend {
    #[cfg(feature = "test-util")]
    /// Batches of coalesced calls sent, and the calls in them.
    pub(crate) fn coalesced_batches(&self) -> (u64, u64) {
        self.coalescers
            .iter()
            .map(|c| c.sent())
            .fold((0, 0), |(b, c), (b2, c2)| (b + b2, c + c2))
    }

    /// The coalescer of `owner`'s connection slot on lane `on`, if calls
    /// there are coalesced.
    pub(crate) fn coalescer(&self, on: On, owner: &str) -> Option<&Arc<Coalescer>> {
        if on == On::Waiting && self.waiting.is_some() {
            return None;
        }
        self.coalescers.get(self.plain.slot_of(Some(owner)))
    }

    /// One call on `owner`'s connection of lane `on`; with `coalesce`,
    /// coalesced with others where that is on (see [`coalesce`]); its
    /// answer as its own script gives it.
    ///
    /// [`coalesce`]: self
    pub(crate) async fn one_step<'a>(
        &self,
        on: On,
        owner: &str,
        limit: Duration,
        coalesce: bool,
        call: impl Fn() -> Call<&'a str>,
    ) -> Result<Value, OpError> {
        let coalescer = self.coalescer(on, owner).filter(|_| coalesce);
        let (retention, publish) = (self.fence_retention_ms, self.publish);
        self.run(on, Some(owner), limit, |link| {
            let call = call();
            async move {
                match coalescer {
                    Some(c) => c.call(link, limit, call).await,
                    None => Coalescer::alone(link, call, retention, publish).await,
                }
            }
        })
        .await
    }
}

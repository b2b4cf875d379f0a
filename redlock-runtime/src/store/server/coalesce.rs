//! Coalescing: the script calls that many tasks send at once on one
//! connection go out together, as one script call.
//!
//! Under load, much of a script call's cost is its fixed price: on Redis,
//! reading, parsing and starting one `EVALSHA` (and its `TIME`); in the
//! client, encoding it, matching its answer and waking its caller. A
//! [`Coalescer`] (one per connection slot) lets a call go out alone,
//! exactly as it would without it, while fewer than [`MAX_IN_FLIGHT`] of
//! its calls are unanswered: a lone caller waits for nobody. Beyond that,
//! calls queue, and the next answer sends the queue (up to [`MAX_BATCH`]
//! calls of one batch script) as one `EVALSHA` of that script.
//!
//! Nothing here knows a primitive. A call is a [`Step`]: a primitive that
//! declares a batch step (a batch script that runs each call through the
//! very step its own script runs) lets its calls join batches, says how
//! each goes out alone, what it adds to a batch, and how its answer in a
//! batch reads back as its own script's. The one primitive that declares
//! one today is the lock, for its fenced calls
//! (`primitive/lock/call.rs`, `batch.lua`).
//!
//! What it buys, measured with lockbench at concurrency 32 (fenced acquire
//! and release pairs, about 17 calls per batch; `--coalesce off` sends
//! every call alone), two alternated runs each on Redis 7.0, 2 cores,
//! 2026-11-29: Redis's CPU per pair 8.9 to 10.0 µs instead of 12.7 to
//! 12.9 (the figure that matters on a Redis many services share), and
//! 0.50 to 0.51 of rslock's pairs per second instead of 0.47 to 0.49; it
//! costs the client 13.1 to 14.3 µs per pair instead of 9.4 to 9.8, so the
//! two together spend about what they spend without it. (On the machine
//! of 2026-11-25 the totals were 27 to 28 µs per pair against 34 to 35.)
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
//!   steps of a lock that would not have run between them anyway. (The
//!   lock's batch issues fencing tokens per key as before, see `design`,
//!   "Fencing tokens", reading Redis's clock once for all its acquires.)
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
//!   client, and that batch's calls are sent alone. A batch holds the
//!   calls of one batch script only, and its leading arguments come from
//!   its first call (a primitive's calls from one client share them).
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
use redis::{Cmd, RedisError, RedisResult, Script, Value};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::conn::{Conn, Link};
use super::{On, RedisBackend};
use crate::scripts::{Lua, Publish};
use crate::store::OpError;

mod send;
use send::{refuses_several_slots, send, timed_out, top_level};

/// One call a coalescer sends, alone or in a batch: what a primitive
/// that declares a batch step implements for its calls.
pub(crate) trait Step {
    /// The owner token whose calls keep their order (see the module docs).
    fn owner(&self) -> &str;

    /// Whether it may take something for its owner (an acquire): a
    /// give-back of that owner waits for its answer ([`Coalescer::settled`]).
    fn takes(&self) -> bool;

    /// The command that sends it alone, publishing with `publish`, and its
    /// script (loaded after `NOSCRIPT`, in the variant of `publish`).
    fn alone(&self, publish: Publish) -> (Cmd, Option<&'static Lua>);

    /// The batch script it may join; `None` for a call that always goes
    /// alone.
    fn batch(&self) -> Option<&'static Lua>;

    /// How many keys it adds to a batch's `KEYS`.
    fn batch_keys(&self) -> usize;

    /// Adds its keys to a batch's `KEYS`.
    fn push_keys(&self, cmd: &mut Cmd);

    /// Adds the batch's leading arguments, those of every call of the
    /// batch (taken from its first call).
    fn push_head(&self, cmd: &mut Cmd);

    /// Adds its own arguments to a batch's `ARGV`.
    fn push_args(&self, cmd: &mut Cmd);

    /// Its answer taken out of a batch's, as its own script gives it.
    fn read_back(&self, answer: Value) -> Value;

    /// A copy that owns what it holds, to queue for a batch.
    fn queued(&self) -> Box<dyn Step + Send + Sync>;
}

/// Calls of one slot that may be unanswered before more calls queue: the
/// calls sent alone and the batches in flight. Two keep a pair of tasks
/// from waiting on each other, and leave the rest of the load to batches.
pub(crate) const MAX_IN_FLIGHT: usize = 2;

/// The most calls in one batch (about 0.3 ms of Redis's time).
pub(crate) const MAX_BATCH: usize = 128;

/// The calls of one connection slot (see the module docs).
pub(crate) struct Coalescer {
    state: Mutex<State>,
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
    call: Box<dyn Step + Send + Sync>,
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
    pub(crate) fn new(on: Arc<AtomicBool>) -> Self {
        Self {
            state: Mutex::new(State::default()),
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
        call: impl Step,
    ) -> RedisResult<Value> {
        let ticket = {
            let mut state = self.state();
            // Alone while there is room, nothing queued, and no earlier
            // acquire of this owner is waiting for a batch or in one (it
            // must land first).
            let alone = !self.on.load(Ordering::Relaxed)
                || call.batch().is_none()
                || (state.in_flight < MAX_IN_FLIGHT
                    && state.queue.is_empty()
                    && !state.acquiring.contains_key(call.owner()));
            if alone {
                state.in_flight += 1;
                None
            } else {
                let ticket = Arc::new(Ticket {
                    stage: Mutex::new(Stage::Queued),
                    settled: Notify::new(),
                });
                let call = call.queued();
                if call.takes() {
                    state
                        .acquiring
                        .entry(call.owner().to_owned())
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
                Self::alone(link, &call, Publish::Plain).await
            }
            Some(ticket) => Waiting(ticket).answer().await,
        }
    }

    /// Sends `call` alone on `link`, as a client that coalesces nothing
    /// does (a cluster node publishes with `publish`).
    pub(crate) async fn alone(
        link: Link,
        call: &impl Step,
        publish: Publish,
    ) -> RedisResult<Value> {
        let (cmd, script) = call.alone(publish);
        let mut conn = link.conn;
        send(&mut conn, &cmd, script.map(|s| s.on(publish))).await
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
            let (cmd, script) = only.call.alone(Publish::Plain);
            let script = script.map(|s| s.on(Publish::Plain));
            let sent = tokio::time::timeout_at(deadline, send(&mut conn, &cmd, script)).await;
            vec![sent.unwrap_or_else(|_| Err(timed_out()))]
        } else if let Some((cmd, script)) = batch_command(batch) {
            self.batches.fetch_add(1, Ordering::Relaxed);
            self.batched
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            let sent = tokio::time::timeout_at(deadline, send(&mut conn, &cmd, Some(script))).await;
            match sent {
                Ok(Ok(Value::Array(values))) if values.len() == batch.len() => values
                    .into_iter()
                    .zip(batch)
                    .map(|(v, q)| Ok(q.call.read_back(top_level(Ok(v))?)))
                    .collect(),
                Ok(Ok(other)) => {
                    let e = RedisError::from((
                        redis::ErrorKind::Parse,
                        "unexpected answer to a batch of calls",
                        format!("{other:?}"),
                    ));
                    vec![Err(e); batch.len()]
                }
                Ok(Err(e)) if refuses_several_slots(&e) => {
                    tracing::warn!(target: "redlock", error = %e, "Redis refused a batch of calls over several slots; sending each call alone from now on");
                    self.on.store(false, Ordering::Relaxed);
                    self.each_alone(&mut conn, batch, deadline).await
                }
                Ok(Err(e)) => vec![Err(e); batch.len()],
                Err(_) => vec![Err(timed_out()); batch.len()],
            }
        } else {
            // Calls that join no batch script are never queued (see
            // `call`); were any, each would go alone.
            self.each_alone(&mut conn, batch, deadline).await
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
        let alone: Vec<_> = batch.iter().map(|q| q.call.alone(Publish::Plain)).collect();
        let mut scripts: Vec<&Lua> = Vec::new();
        for script in alone.iter().filter_map(|(_, script)| *script) {
            if !scripts.iter().any(|s| std::ptr::eq(*s, script)) {
                scripts.push(script);
            }
        }
        let mut pipe = redis::pipe();
        for script in &scripts {
            pipe.cmd("SCRIPT")
                .arg("LOAD")
                .arg(script.text(Publish::Plain));
        }
        let loads = scripts.len();
        for (cmd, _) in alone {
            pipe.add_command(cmd);
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
                    "unexpected answer to a pipeline of calls",
                )));
                batch.len()
            ],
            Ok(Err(e)) => vec![Err(e); batch.len()],
            Err(_) => vec![Err(timed_out()); batch.len()],
        }
    }
}

/// `EVALSHA` of the batch script of `batch`'s calls (each of which joins
/// the same one), and that script.
fn batch_command(batch: &[Queued]) -> Option<(Cmd, &'static Script)> {
    batch_of(batch.iter().map(|q| &*q.call))
}

/// `EVALSHA` of the batch script that `calls` join: `KEYS` each call's
/// keys in order; `ARGV` the batch's leading arguments (the first call's),
/// then each call's own. `None` for no calls, or calls that join none.
fn batch_of<'a>(
    calls: impl Iterator<Item = &'a (dyn Step + Send + Sync)> + Clone,
) -> Option<(Cmd, &'static Script)> {
    let first = calls.clone().next()?;
    let script = first.batch()?.on(Publish::Plain);
    let (count, keys) = calls
        .clone()
        .fold((0, 0), |(n, k), call| (n + 1, k + call.batch_keys()));
    let mut cmd = Cmd::with_capacity(4 + keys + 3 * count, 128 * count);
    cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys);
    for call in calls.clone() {
        call.push_keys(&mut cmd);
    }
    first.push_head(&mut cmd);
    for call in calls {
        call.push_args(&mut cmd);
    }
    Some((cmd, script))
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
            // One connection and one batch script per batch: a call queued
            // on another (a reconnection in between), or for another
            // script, waits for a later batch.
            let other = batch.first().is_some_and(|f| {
                f.link.id() != q.link.id() || !same_batch(f.call.batch(), q.call.batch())
            });
            let held_back = other || self.in_a_batch(q.call.owner());
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
        if !q.call.takes() {
            return;
        }
        let token = q.call.owner();
        if let Some(tickets) = self.acquiring.get_mut(token) {
            tickets.retain(|t| !Arc::ptr_eq(t, &q.ticket));
            if tickets.is_empty() {
                self.acquiring.remove(token);
            }
        }
    }
}

/// Whether two calls join the same batch script.
fn same_batch(a: Option<&'static Lua>, b: Option<&'static Lua>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => std::ptr::eq(a, b),
        _ => false,
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
    pub(crate) async fn one_step<C: Step>(
        &self,
        on: On,
        owner: &str,
        limit: Duration,
        coalesce: bool,
        call: impl Fn() -> C,
    ) -> Result<Value, OpError> {
        let publish = self.publish;
        match self.coalescer(on, owner).filter(|_| coalesce) {
            // Boxed: a call that may join a batch has the larger state (its
            // ticket, the batch's wait); the calls that always go alone (a
            // plain lock's) do not carry it.
            Some(c) => {
                let coalesced = self.run(on, Some(owner), limit, |link| {
                    let call = call();
                    async move { c.call(link, limit, call).await }
                });
                Box::pin(coalesced).await
            }
            // Only its commands: bounded without a timer of its own.
            None => {
                self.run_commands(on, Some(owner), limit, |link| {
                    let call = call();
                    async move { Coalescer::alone(link, &call, publish).await }
                })
                .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy primitive's call: one key, one argument, joining `TOY`.
    struct Toy(&'static str, &'static str);

    static TOY: Lua = Lua::new("primitive/toy/batch.lua", &[], "return ARGV");

    impl Step for Toy {
        fn owner(&self) -> &str {
            self.1
        }
        fn takes(&self) -> bool {
            false
        }
        fn alone(&self, _: Publish) -> (Cmd, Option<&'static Lua>) {
            (redis::cmd("GET").arg(self.0).clone(), None)
        }
        fn batch(&self) -> Option<&'static Lua> {
            Some(&TOY)
        }
        fn batch_keys(&self) -> usize {
            1
        }
        fn push_keys(&self, cmd: &mut Cmd) {
            cmd.arg(self.0);
        }
        fn push_head(&self, cmd: &mut Cmd) {
            cmd.arg("head");
        }
        fn push_args(&self, cmd: &mut Cmd) {
            cmd.arg(self.1);
        }
        fn read_back(&self, answer: Value) -> Value {
            answer
        }
        fn queued(&self) -> Box<dyn Step + Send + Sync> {
            Box::new(Toy(self.0, self.1))
        }
    }

    fn args(cmd: &Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => "<not a plain argument>".to_owned(),
            })
            .collect()
    }

    /// Any primitive's batch step: its calls' keys in order, the head
    /// once, then each call's arguments; the script is its own.
    #[test]
    fn a_batch_is_built_from_what_each_call_declares() {
        let calls: Vec<Box<dyn Step + Send + Sync>> =
            vec![Toy("k1", "a").queued(), Toy("k2", "b").queued()];
        let (cmd, script) = batch_of(calls.iter().map(|c| &**c)).expect("a batch");
        let sha = TOY.on(Publish::Plain).get_hash().to_owned();
        assert_eq!(script.get_hash(), sha);
        assert_eq!(
            args(&cmd),
            ["EVALSHA", &sha, "2", "k1", "k2", "head", "a", "b"]
        );
        assert!(batch_of(std::iter::empty()).is_none());
    }

    /// Calls of two batch scripts never share a batch.
    #[test]
    fn calls_join_a_batch_of_their_own_script_only() {
        static OTHER: Lua = Lua::new("primitive/toy/other.lua", &[], "return 1");
        assert!(same_batch(Some(&TOY), Some(&TOY)));
        assert!(!same_batch(Some(&TOY), Some(&OTHER)));
        assert!(!same_batch(None, Some(&TOY)));
        assert!(!same_batch(None, None));
    }
}

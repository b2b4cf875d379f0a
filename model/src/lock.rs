//! A lock on one Redis (with an optional replica).
//!
//! What a node does is what the in-memory twin of the scripts
//! (`lock/acquire.lua`, `lock/extend.lua`, `lock/release.lua`,
//! `shared/fence.lua`) does: each node is a [`LockNode`], whose steps are
//! the twin's; the differential suite (`redlock-runtime/tests/differential.rs`)
//! checks the scripts against the twin step by step.
//!
//! # What is modelled
//! - **Time** is one global clock in ticks ([`Action::Tick`]), which is
//!   also every node's clock. A client judges its lease by its own clock,
//!   which may run slow by up to [`Config::drift`] ticks over one lease (a
//!   choice made at each acquire and renewal): it believes it holds the
//!   lock until `granted + ttl - margin + lag`, `lag` in `0..=drift`.
//! - **Clients** acquire (`SET NX PX`, the token issued with it as
//!   `fenced()` does), renew while they believe they hold, release
//!   (compare-and-delete, sent as a message that can be delayed or lost),
//!   and write to a **fenced store** in two steps: they check that they
//!   still hold the lock, then (after any pause) the write reaches the
//!   store, which accepts a token at or above the largest it accepted. An
//!   acquire's answer can be lost: the client then gives back (a release
//!   with its token), as `giveback.rs` does.
//! - **Nodes**: a primary, and optionally a replica that copies it
//!   asynchronously ([`Action::Replicate`]), or before the acquire is
//!   answered where the client waits for it (`WAIT`, [`Config::replica`]). The
//!   primary can fail over to the replica, and can restart empty (no
//!   persistence) or from its last snapshot ([`Action::Save`], an RDB
//!   `SAVE` at any step; the restart drops the keys expired since, as
//!   Redis does on load), either at once or after the restart delay the
//!   docs require (it answers nothing for one ttl).
//! - **Messages** (releases) can be delayed, lost ([`Config::losses`]) and
//!   delivered twice ([`Config::duplicates`]).
//! - **Fencing tokens** are `max(counter + 1, clock)` (the clock floor of
//!   `shared/fence.lua`, as the twin computes it; its clock moves
//!   [`CLOCK_PER_TICK`] microseconds per tick), so a counter lost in a
//!   restart or a failover starts over above every token issued before. A
//!   restart or failover takes at least one tick: the clock moves on across
//!   it.
//!
//! # Properties
//! - [`MUTUAL_EXCLUSION`]: no two clients believe at once that they hold
//!   the lock. Needs the drift within the margin, a restart (empty or from
//!   a snapshot) only after the restart delay, and `WAIT` before a
//!   failover counts: each broken assumption has its counterexample (see
//!   the tests).
//! - [`WRITES_IN_ORDER`] (property (a) of issue 35): the fenced store never
//!   accepts a write of a holder after one of a later holder; this holds
//!   even where mutual exclusion does not (an empty restart without the
//!   delay, a failover without `WAIT`): what fencing is for.
//! - [`TOKENS_INCREASE`] (b): every token issued is larger than every
//!   token issued before, across restarts (a snapshot brings back an older
//!   counter) and failovers.
//! - [`OWN_KEY_ONLY`] (c): a release never deletes another owner's lock.
//!
//! [`Config::broken`] turns one safety mechanism off at a time; the tests
//! (`tests/lock.rs`) check that each then has a counterexample, so the
//! checker is shown to bite.

use std::fmt;

#[cfg(doc)]
use redlock_runtime::test_util::twin::CLOCK_PER_TICK;
use redlock_runtime::test_util::twin::LockNode;
use stateright::{Model, Property};

pub use crate::Token;

/// [`Property`] names.
pub const MUTUAL_EXCLUSION: &str = "no two clients believe they hold the lock";
/// See the crate docs.
pub const WRITES_IN_ORDER: &str = "the fenced store accepts writes in the order locks were taken";
/// See the crate docs.
pub const TOKENS_INCREASE: &str = "every fencing token is larger than those issued before";
/// See the crate docs.
pub const OWN_KEY_ONLY: &str = "a release deletes only its own lock";
/// A `sometimes` property: the bounds reach a write of a second holder
/// after one of a first (the checks are not vacuous).
pub const TWO_HOLDERS_WROTE: &str = "two holders' writes were accepted";

/// One safety mechanism turned off, to show its property fails without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Broken {
    /// Tokens are the counter + 1 only, without the clock floor: every
    /// node is [`LockNode::without_clock_floor`].
    NoClockFloor,
    /// A release deletes the lock whoever holds it (no token check): it is
    /// sent with the token the key holds.
    NoOwnerCheck,
}

/// How the primary can restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Restart {
    /// It does not.
    Never,
    /// Empty (no persistence), answering at once.
    EmptyAtOnce,
    /// Empty, answering nothing for one ttl after it (the docs' restart
    /// delay).
    EmptyAfterDelay,
    /// From its last snapshot, answering at once.
    SnapshotAtOnce,
    /// From its last snapshot, answering nothing for one ttl after it.
    SnapshotAfterDelay,
}

impl Restart {
    fn restores_a_snapshot(self) -> bool {
        matches!(self, Self::SnapshotAtOnce | Self::SnapshotAfterDelay)
    }

    fn delayed(self) -> bool {
        matches!(self, Self::EmptyAfterDelay | Self::SnapshotAfterDelay)
    }
}

/// The model's bounds and the deployment's settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Clients taking the one lock.
    pub clients: u8,
    /// Acquires each client may make.
    pub acquires: u8,
    /// The lease, in ticks.
    pub ttl: u8,
    /// What a client takes off the ttl for its clock's drift.
    pub margin: u8,
    /// How many ticks slow a client's clock may run over one lease.
    pub drift: u8,
    /// The clock stops here.
    pub max_time: u8,
    /// How the primary can restart.
    pub restart: Restart,
    /// A replica the primary can fail over to: `Some(wait)`, `wait` when
    /// every acquire and renewal is acknowledged by it before it is
    /// answered.
    pub replica: Option<bool>,
    /// Release messages the network may lose.
    pub losses: u8,
    /// Release messages the network may deliver twice.
    pub duplicates: u8,
    /// A mechanism turned off.
    pub broken: Option<Broken>,
}

impl Default for Config {
    /// Two clients, two acquires each, a ttl of 3 ticks, a margin of 1 for
    /// a drift of 1, 7 ticks, no restart, no replica, one lost message,
    /// none delivered twice.
    fn default() -> Self {
        Self {
            clients: 2,
            acquires: 2,
            ttl: 3,
            margin: 1,
            drift: 1,
            max_time: 7,
            restart: Restart::Never,
            replica: None,
            losses: 1,
            duplicates: 0,
            broken: None,
        }
    }
}

/// A client's hold, as it believes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hold {
    /// The owner token.
    token: Token,
    /// The fencing token.
    fence: u64,
    /// It believes it holds the lock before this tick.
    until: u8,
    /// The hold's place in the order of all holds (ghost: the order in
    /// which locks were taken).
    order: u8,
}

/// What a client is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Holds nothing.
    Idle,
    /// Took the lock, as far as it knows.
    Holding(Hold),
    /// Checked that it holds the lock and sent a write: the write reaches
    /// the store at some later step (a pause may come between).
    Writing(Hold),
}

/// A message on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Message {
    /// A release (compare-and-delete) with its token.
    Release(Token),
}

/// The whole system.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    now: u8,
    primary: LockNode,
    /// The primary answers (grants) nothing before this tick: a restart
    /// delay. (A process is down, not its data: the replica and the
    /// snapshot have no such tick.)
    down_until: u8,
    replica: Option<LockNode>,
    clients: Vec<(Phase, u8)>,
    /// Messages on their way (sorted: a multiset).
    network: Vec<Message>,
    /// The fenced store: the largest token accepted, and the hold it came
    /// from.
    store: Option<(u64, u8)>,
    /// Holds taken so far (ghost).
    holds: u8,
    /// The largest token issued so far (ghost).
    issued: u64,
    /// The primary's last snapshot (restarts from a snapshot only).
    snapshot: Option<LockNode>,
    restarted: bool,
    failed_over: bool,
    lost: u8,
    duplicated: u8,
    /// Ghost flags set by a step that breaks a property.
    out_of_order: bool,
    token_reused: bool,
    deleted_other: bool,
    /// Holds whose writes the store accepted, in order (ghost, for the
    /// `sometimes` property).
    writers: u8,
}

/// A step of the system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock moves one tick.
    Tick,
    /// A client sends an acquire; the answer reaches it, its clock running
    /// `lag` ticks slow over the lease, or is lost.
    Acquire {
        /// The client.
        client: u8,
        /// How slow its clock runs over this lease; `None`: the answer is
        /// lost.
        lag: Option<u8>,
    },
    /// A client that believes it holds the lock renews it.
    Renew {
        /// The client.
        client: u8,
        /// How slow its clock runs over the renewed lease.
        lag: u8,
    },
    /// A client that believes it holds the lock sends a write.
    Check(u8),
    /// A client's write reaches the store.
    Write(u8),
    /// A client sends a release.
    Release(u8),
    /// The message at this index reaches the primary.
    Deliver(usize),
    /// The message at this index is lost.
    Lose(usize),
    /// The message at this index is delivered twice: a copy joins it.
    Duplicate(usize),
    /// The replica copies the primary.
    Replicate,
    /// The replica becomes the primary.
    FailOver,
    /// The primary writes its snapshot.
    Save,
    /// The primary restarts, empty or from its snapshot.
    Restart,
}

/// The model: a [`Config`].
#[derive(Debug, Clone)]
pub struct LockModel(pub Config);

impl LockModel {
    /// A node as the deployment starts it.
    fn empty_node(&self) -> LockNode {
        if self.0.broken == Some(Broken::NoClockFloor) {
            LockNode::without_clock_floor()
        } else {
            LockNode::new()
        }
    }

    /// A client's belief ends here for a lease granted at `now`.
    fn until(&self, now: u8, lag: u8) -> u8 {
        crate::presumed_until(now, self.0.ttl, self.0.margin, lag)
    }

    /// What the replica holds after a write acknowledged by `WAIT`.
    fn acknowledge(&self, state: &mut State) {
        if self.0.replica == Some(true)
            && let Some(replica) = &mut state.replica
        {
            replica.clone_from(&state.primary);
        }
    }

    fn issue(state: &mut State, fence: u64) {
        if fence <= state.issued {
            state.token_reused = true;
        }
        state.issued = state.issued.max(fence);
    }
}

impl Model for LockModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 1,
            primary: self.empty_node(),
            down_until: 0,
            replica: self.0.replica.map(|_| self.empty_node()),
            clients: vec![(Phase::Idle, 0); usize::from(self.0.clients)],
            network: Vec::new(),
            store: None,
            holds: 0,
            issued: 0,
            snapshot: (self.0.restart.restores_a_snapshot()).then(|| self.empty_node()),
            restarted: false,
            failed_over: false,
            lost: 0,
            duplicated: 0,
            out_of_order: false,
            token_reused: false,
            deleted_other: false,
            writers: 0,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        let c = &self.0;
        if state.now < c.max_time {
            actions.push(Action::Tick);
        }
        let up = state.down_until <= state.now;
        for (i, &(phase, acquires)) in state.clients.iter().enumerate() {
            let client = u8::try_from(i).unwrap_or(u8::MAX);
            match phase {
                Phase::Idle if acquires < c.acquires && up => {
                    for lag in 0..=c.drift {
                        actions.push(Action::Acquire {
                            client,
                            lag: Some(lag),
                        });
                    }
                    actions.push(Action::Acquire { client, lag: None });
                }
                Phase::Idle => {}
                Phase::Holding(Hold { until, .. }) => {
                    if state.now < until {
                        if up {
                            for lag in 0..=c.drift {
                                actions.push(Action::Renew { client, lag });
                            }
                        }
                        actions.push(Action::Check(client));
                    }
                    actions.push(Action::Release(client));
                }
                Phase::Writing(_) => actions.push(Action::Write(client)),
            }
        }
        for i in 0..state.network.len() {
            if up {
                actions.push(Action::Deliver(i));
            }
            if state.lost < c.losses {
                actions.push(Action::Lose(i));
            }
            if state.duplicated < c.duplicates {
                actions.push(Action::Duplicate(i));
            }
        }
        // A failover or a restart takes time: the clock moves on across
        // it (so not at the clock's last tick).
        let later = state.now < c.max_time;
        if let Some(replica) = &state.replica
            && !state.failed_over
        {
            if *replica != state.primary {
                actions.push(Action::Replicate);
            }
            if later {
                actions.push(Action::FailOver);
            }
        }
        if c.restart != Restart::Never && !state.restarted && later {
            actions.push(Action::Restart);
        }
        if let Some(snapshot) = &state.snapshot
            && !state.restarted
            && *snapshot != state.primary
        {
            actions.push(Action::Save);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        let now = s.now;
        match action {
            Action::Tick => s.now += 1,
            Action::Acquire { client, lag } => {
                let (_, acquires) = s.clients[usize::from(client)];
                let token = Token {
                    client,
                    attempt: acquires,
                };
                s.clients[usize::from(client)].1 += 1;
                let Some(fence) = s.primary.acquire(&token.text(), self.0.ttl, now) else {
                    // Busy: the client stays idle (it would wait).
                    return Some(s);
                };
                Self::issue(&mut s, fence);
                self.acknowledge(&mut s);
                match lag {
                    Some(lag) => {
                        s.holds += 1;
                        s.clients[usize::from(client)].0 = Phase::Holding(Hold {
                            token,
                            fence,
                            until: self.until(now, lag),
                            order: s.holds,
                        });
                    }
                    // The answer was lost: the client gives its token back.
                    None => {
                        s.network.push(Message::Release(token));
                        s.network.sort_unstable();
                    }
                }
            }
            Action::Renew { client, lag } => {
                let Phase::Holding(hold) = s.clients[usize::from(client)].0 else {
                    return None;
                };
                if s.primary.renew(&hold.token.text(), self.0.ttl, now) {
                    self.acknowledge(&mut s);
                    s.clients[usize::from(client)].0 = Phase::Holding(Hold {
                        until: self.until(now, lag),
                        ..hold
                    });
                } else {
                    // Lost: the watchdog reports it, the client stops.
                    s.clients[usize::from(client)].0 = Phase::Idle;
                }
            }
            Action::Check(client) => {
                let Phase::Holding(hold) = s.clients[usize::from(client)].0 else {
                    return None;
                };
                s.clients[usize::from(client)].0 = Phase::Writing(hold);
            }
            Action::Write(client) => {
                let Phase::Writing(hold) = s.clients[usize::from(client)].0 else {
                    return None;
                };
                let accepted = s.store.is_none_or(|(max, _)| hold.fence >= max);
                if accepted {
                    if let Some((_, last_hold)) = s.store {
                        if hold.order < last_hold {
                            s.out_of_order = true;
                        }
                        if hold.order != last_hold {
                            // Counted up to what the `sometimes` property
                            // asks: a ghost that kept counting would make
                            // every write a new state.
                            s.writers = (s.writers + 1).min(2);
                        }
                    } else {
                        s.writers = 1;
                    }
                    s.store = Some((hold.fence, hold.order));
                }
                // Its belief is what it was: checked again before its
                // next write, as a real holder asks its guard.
                s.clients[usize::from(client)].0 = Phase::Holding(hold);
            }
            Action::Release(client) => {
                let Phase::Holding(hold) = s.clients[usize::from(client)].0 else {
                    return None;
                };
                s.clients[usize::from(client)].0 = Phase::Idle;
                s.network.push(Message::Release(hold.token));
                s.network.sort_unstable();
            }
            Action::Deliver(i) => {
                let Message::Release(token) = s.network.remove(i);
                let token = token.text();
                let before = s.primary.holder(now).map(str::to_owned);
                let sent = match s.primary.stored() {
                    Some((stored, _)) if self.0.broken == Some(Broken::NoOwnerCheck) => {
                        stored.to_owned()
                    }
                    _ => token.to_string(),
                };
                s.primary.release(&sent, now);
                // Another owner's lease lasted, and the release ended it.
                if let Some(other) = before
                    && *other != *token
                    && s.primary.holder(now) != Some(other.as_str())
                {
                    s.deleted_other = true;
                }
                self.acknowledge(&mut s);
            }
            Action::Lose(i) => {
                s.network.remove(i);
                s.lost += 1;
            }
            Action::Duplicate(i) => {
                s.network.push(*s.network.get(i)?);
                s.network.sort_unstable();
                s.duplicated += 1;
            }
            Action::Save => {
                s.snapshot = Some(s.primary.clone());
            }
            Action::Replicate => {
                let replica = s.replica.as_mut()?;
                *replica = s.primary.clone();
            }
            Action::FailOver => {
                s.primary = s.replica.take()?;
                s.failed_over = true;
                s.now += 1;
            }
            Action::Restart => {
                s.restarted = true;
                s.now += 1;
                s.primary = match s.snapshot.take() {
                    // Keys expired since the snapshot are dropped on load.
                    Some(mut node) => {
                        node.load(s.now);
                        node
                    }
                    None => s.primary.restarted_empty(),
                };
                if self.0.restart.delayed() {
                    s.down_until = s.now + self.0.ttl;
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(MUTUAL_EXCLUSION, |_, s: &State| {
                s.clients
                    .iter()
                    .filter(|(p, _)| match p {
                        Phase::Holding(hold) | Phase::Writing(hold) => s.now < hold.until,
                        Phase::Idle => false,
                    })
                    .count()
                    <= 1
            }),
            Property::always(WRITES_IN_ORDER, |_, s: &State| !s.out_of_order),
            Property::always(TOKENS_INCREASE, |_, s: &State| !s.token_reused),
            Property::always(OWN_KEY_ONLY, |_, s: &State| !s.deleted_other),
            Property::sometimes(TWO_HOLDERS_WROTE, |_, s: &State| s.writers >= 2),
        ]
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} clients x {} acquires, ttl {}, margin {}, drift {}, {} ticks, restart {:?}, \
             replica {:?}, {} lost messages, {} duplicated, broken {:?}",
            self.clients,
            self.acquires,
            self.ttl,
            self.margin,
            self.drift,
            self.max_time,
            self.restart,
            self.replica,
            self.losses,
            self.duplicates,
            self.broken
        )
    }
}

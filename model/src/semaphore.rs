//! A leased semaphore on one Redis, as its scripts run it
//! (`primitive/semaphore/acquire.lua`, `release.lua`, and
//! `primitive/lease/renew.lua`) under `redlock_runtime::Semaphore`.
//!
//! # What is modelled
//! - **The node** is a [`SemaphoreNode`], the in-memory twin's steps: it
//!   keeps the holders (token -> permits and lease deadline; on Redis a
//!   sorted set and a hash). An acquire first drops every holder whose
//!   lease ran out, with its count; then, unless its token is already a
//!   holder (a re-sent acquire, which only resets its lease), it takes its
//!   permits if the counts leave room under the limit.
//! - **Clients** take their permits (client 0 two, the others one each,
//!   of a limit of two), judge their lease by a clock that may run slow by
//!   up to [`Config::drift`] ticks, less [`Config::margin`], release, or
//!   stop (crash, or pause for as long as they like: they simply take no
//!   step). The watchdog's **renewal** is sent while the lease is believed
//!   held and lands any time later (a slow network, a paused server); the
//!   lease it confirms counts from when it was sent (`HeldLock::sending`),
//!   and a renewal that finds the lease gone ends the hold (the loss is
//!   reported).
//!
//! # Properties
//! - [`WITHIN_LIMIT`]: the permits of the clients that believe they hold
//!   them never exceed the limit; needs the drift within the margin, and
//!   the renewal's check that the lease has not run out (a renewal that
//!   lands after its holder was dropped and still confirms the lease
//!   leaves it believing it holds permits that another took).
//! - [`TAKEN_OVER`] (`sometimes`): a client got permits freed by a lease
//!   that ran out, so the checks are not vacuous.
//!
//! [`Config::broken`] turns the renewal's check off; the tests
//! (`tests/semaphore.rs`) check that it then has a counterexample.

use std::fmt;

use redlock_runtime::test_util::twin::SemaphoreNode;
use stateright::{Model, Property};

/// See the module docs.
pub const WITHIN_LIMIT: &str = "the permits believed held never exceed the limit";
/// See the module docs.
pub const TAKEN_OVER: &str = "permits freed by a lease that ran out were taken";

/// The semaphore's limit: client 0 takes all of it, the others one permit.
pub const LIMIT: u8 = 2;

/// One mechanism turned off, to show its property fails without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Broken {
    /// A renewal confirms the lease whether or not it ran out (and
    /// whether or not the holder is still there): the twin's answer that it
    /// did not is taken as a success.
    RenewAfterExpiry,
}

/// The model's bounds and the deployment's settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Clients taking permits.
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
    /// A mechanism turned off.
    pub broken: Option<Broken>,
}

impl Default for Config {
    /// Three clients, two acquires each, a ttl of 3 ticks, a margin of 1
    /// for a drift of 1, 8 ticks.
    fn default() -> Self {
        Self {
            clients: 3,
            acquires: 2,
            ttl: 3,
            margin: 1,
            drift: 1,
            max_time: 8,
            broken: None,
        }
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} clients x {} acquires, limit {LIMIT}, ttl {}, margin {}, drift {}, {} ticks, \
             broken {:?}",
            self.clients,
            self.acquires,
            self.ttl,
            self.margin,
            self.drift,
            self.max_time,
            self.broken
        )
    }
}

/// What a client is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Client {
    /// Holds nothing.
    Idle,
    /// Holds its permits under the token of its acquire `attempt`,
    /// believing its lease holds before `until`; `renewing` is when a
    /// renewal still on its way was sent.
    Holding {
        /// The acquire, among the client's: its token.
        attempt: u8,
        /// It believes it holds the permits before this tick.
        until: u8,
        /// A renewal on its way, sent at this tick.
        renewing: Option<u8>,
    },
}

/// The whole system.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    now: u8,
    /// The node: the semaphore's holders.
    node: SemaphoreNode,
    /// Each client, and the acquires it made.
    clients: Vec<(Client, u8)>,
    /// Ghost: an acquire took permits that a dropped lease had held.
    taken_over: bool,
}

/// A step of the system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock moves one tick.
    Tick,
    /// A client's acquire runs on the node, its clock running `lag` ticks
    /// slow over the lease if it gets the permits.
    Acquire {
        /// The client.
        client: u8,
        /// How slow its clock runs.
        lag: u8,
    },
    /// A holder's watchdog sends a renewal.
    SendRenewal(u8),
    /// A renewal lands on the node and its answer reaches the client.
    Land {
        /// The client.
        client: u8,
        /// How slow its clock runs over the renewed lease.
        lag: u8,
    },
    /// A holder releases its permits.
    Release(u8),
}

/// The model: a [`Config`].
#[derive(Debug, Clone)]
pub struct SemaphoreModel(pub Config);

impl SemaphoreModel {
    /// The permits client `c` takes.
    fn permits(c: u8) -> u8 {
        if c == 0 { LIMIT } else { 1 }
    }

    /// The owner token of a client's acquire.
    fn token(client: u8, attempt: u8) -> String {
        format!("c{client}.{attempt}")
    }

    fn until(&self, from: u8, lag: u8) -> u8 {
        crate::presumed_until(from, self.0.ttl, self.0.margin, lag)
    }
}

impl Model for SemaphoreModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let c = &self.0;
        vec![State {
            now: 1,
            node: SemaphoreNode::new(u32::from(LIMIT)),
            clients: vec![(Client::Idle, 0); usize::from(c.clients)],
            taken_over: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        let c = &self.0;
        if state.now < c.max_time {
            actions.push(Action::Tick);
        }
        for (i, &(phase, acquires)) in state.clients.iter().enumerate() {
            let client = u8::try_from(i).unwrap_or(u8::MAX);
            match phase {
                Client::Idle if acquires < c.acquires => {
                    for lag in 0..=c.drift {
                        actions.push(Action::Acquire { client, lag });
                    }
                }
                Client::Idle => {}
                Client::Holding {
                    until, renewing, ..
                } => {
                    match renewing {
                        None if state.now < until => actions.push(Action::SendRenewal(client)),
                        None => {}
                        Some(_) => {
                            for lag in 0..=c.drift {
                                actions.push(Action::Land { client, lag });
                            }
                        }
                    }
                    actions.push(Action::Release(client));
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        let now = s.now;
        let ttl = self.0.ttl;
        match action {
            Action::Tick => s.now += 1,
            Action::Acquire { client, lag } => {
                let attempt = s.clients[usize::from(client)].1;
                s.clients[usize::from(client)].1 += 1;
                // Holders whose lease ran out go first, with their counts.
                let dropped = (s.node.holders().iter()).any(|&(_, _, end)| end <= u64::from(now));
                let wanted = u32::from(Self::permits(client));
                if !s
                    .node
                    .acquire(&Self::token(client, attempt), wanted, ttl, now)
                {
                    // Busy: the client tries again later, or not.
                    return Some(s);
                }
                s.taken_over |= dropped;
                s.clients[usize::from(client)].0 = Client::Holding {
                    attempt,
                    until: self.until(now, lag),
                    renewing: None,
                };
            }
            Action::SendRenewal(client) => {
                let Client::Holding { attempt, until, .. } = s.clients[usize::from(client)].0
                else {
                    return None;
                };
                s.clients[usize::from(client)].0 = Client::Holding {
                    attempt,
                    until,
                    renewing: Some(now),
                };
            }
            Action::Land { client, lag } => {
                let Client::Holding {
                    attempt,
                    renewing: Some(sent),
                    ..
                } = s.clients[usize::from(client)].0
                else {
                    return None;
                };
                let live = s.node.renew(&Self::token(client, attempt), ttl, now);
                if live || self.0.broken == Some(Broken::RenewAfterExpiry) {
                    s.clients[usize::from(client)].0 = Client::Holding {
                        attempt,
                        until: self.until(sent, lag),
                        renewing: None,
                    };
                } else {
                    // The lease is gone: the holder is told it lost it.
                    s.clients[usize::from(client)].0 = Client::Idle;
                }
            }
            Action::Release(client) => {
                let Client::Holding { attempt, .. } = s.clients[usize::from(client)].0 else {
                    return None;
                };
                s.node.release(&Self::token(client, attempt), now);
                s.clients[usize::from(client)].0 = Client::Idle;
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(WITHIN_LIMIT, |_, s: &State| {
                let held: u8 = s
                    .clients
                    .iter()
                    .enumerate()
                    .filter(
                        |(_, (c, _))| matches!(c, Client::Holding { until, .. } if s.now < *until),
                    )
                    .map(|(i, _)| Self::permits(u8::try_from(i).unwrap_or(u8::MAX)))
                    .sum();
                held <= LIMIT
            }),
            Property::sometimes(TAKEN_OVER, |_, s: &State| s.taken_over),
        ]
    }
}

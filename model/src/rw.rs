//! A read/write lock on one Redis, as its scripts run it
//! (`primitive/rw/read_acquire.lua`, `write_acquire.lua`,
//! `downgrade.lua`, `read_release.lua`, `write_release.lua`, and
//! `primitive/lease/renew.lua`) under `redlock_runtime::RwLock`.
//!
//! # What is modelled
//! - **The node** is an [`RwNode`], the in-memory twin's steps: it keeps
//!   the writer (its token and when its lease ends) and the readers
//!   (token -> lease deadline). A reader gets in unless a
//!   writer holds the lock (a reader already in, re-sending its acquire,
//!   only resets its lease); a writer gets in when no other writer holds
//!   it and, once the readers whose lease ran out are dropped, no reader
//!   is left. A writer downgrades to a reader in one step if it still
//!   holds the write lock. Renewals reset a lease that has not run out;
//!   releases check the owner.
//! - **Clients** take either side, downgrade a write lock (sent while
//!   they believe they hold it, landing any time later: the read lease
//!   counts from when it was sent), renew (the watchdog, while they
//!   believe they hold), release, or stop (crash, pause: they take no
//!   step). Each judges its lease by a clock that may
//!   run slow by up to [`Config::drift`] ticks, less [`Config::margin`].
//! - **Not modelled**: the waiting writers' set that keeps new readers
//!   out (it decides who gets in first, not whether two can hold): the
//!   writers here never wait in line.
//!
//! # Properties
//! - [`EXCLUSIVE_WRITER`]: while a client believes it holds the write
//!   lock, no other client believes it holds either side; needs the drift
//!   within the margin, and the downgrade's owner check (a writer whose
//!   lease ran out, downgrading without it, deletes the next writer's
//!   lock and reads beside it: a downgrade that lands late).
//! - [`READ_BESIDE_READ`] (`sometimes`): two readers hold at once, and
//!   [`WRITE_AFTER_DOWNGRADE`] (`sometimes`): a write lock was taken after
//!   a downgrade, so the checks are not vacuous.

use std::fmt;

use redlock_runtime::test_util::twin::RwNode;
use stateright::{Model, Property};

pub use crate::Token;

/// See the module docs.
pub const EXCLUSIVE_WRITER: &str = "a writer holds alone";
/// See the module docs.
pub const READ_BESIDE_READ: &str = "two readers held at once";
/// See the module docs.
pub const WRITE_AFTER_DOWNGRADE: &str = "a write lock was taken after a downgrade";

/// One mechanism turned off, to show its property fails without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Broken {
    /// A downgrade does not check that the token still holds the write
    /// lock: it deletes whatever writer holds it and joins the readers
    /// (sent with the token the writer's key holds).
    DowngradeWithoutOwner,
}

/// The model's bounds and the deployment's settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Clients taking the lock.
    pub clients: u8,
    /// Acquires each client may make (either side).
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
    /// for a drift of 1, 6 ticks.
    fn default() -> Self {
        Self {
            clients: 3,
            acquires: 2,
            ttl: 3,
            margin: 1,
            drift: 1,
            max_time: 6,
            broken: None,
        }
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} clients x {} acquires, ttl {}, margin {}, drift {}, {} ticks, broken {:?}",
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

/// The side a client holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The shared side.
    Read,
    /// The exclusive side.
    Write,
}

/// What a client is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Client {
    /// Holds nothing.
    Idle,
    /// Holds `side` under `token`, believing its lease holds before
    /// `until`.
    Holding {
        /// Its owner token.
        token: Token,
        /// The side it holds.
        side: Side,
        /// It believes it holds the lock before this tick.
        until: u8,
        /// A downgrade on its way, sent at this tick.
        downgrading: Option<u8>,
    },
}

/// The whole system.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    now: u8,
    /// The node: the writer and the readers.
    node: RwNode,
    /// Each client, and the acquires it made.
    clients: Vec<(Client, u8)>,
    /// Ghosts: a downgrade happened, and a write lock after it.
    downgraded: bool,
    written_after_downgrade: bool,
}

/// A step of the system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock moves one tick.
    Tick,
    /// A client's acquire of `side` runs on the node, its clock running
    /// `lag` ticks slow over the lease if it gets in.
    Acquire {
        /// The client.
        client: u8,
        /// The side.
        side: Side,
        /// How slow its clock runs.
        lag: u8,
    },
    /// A writer sends a downgrade.
    SendDowngrade(u8),
    /// A downgrade lands on the node and its answer reaches the writer.
    LandDowngrade {
        /// The client.
        client: u8,
        /// How slow its clock runs over the read lease.
        lag: u8,
    },
    /// A holder renews its lease (the watchdog).
    Renew {
        /// The client.
        client: u8,
        /// How slow its clock runs over the renewed lease.
        lag: u8,
    },
    /// A holder releases.
    Release(u8),
}

/// The model: a [`Config`].
#[derive(Debug, Clone)]
pub struct RwModel(pub Config);

impl RwModel {
    fn until(&self, from: u8, lag: u8) -> u8 {
        crate::presumed_until(from, self.0.ttl, self.0.margin, lag)
    }
}

impl Model for RwModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 1,
            node: RwNode::new(),
            clients: vec![(Client::Idle, 0); usize::from(self.0.clients)],
            downgraded: false,
            written_after_downgrade: false,
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
                    for side in [Side::Read, Side::Write] {
                        for lag in 0..=c.drift {
                            actions.push(Action::Acquire { client, side, lag });
                        }
                    }
                }
                Client::Idle => {}
                Client::Holding {
                    side,
                    until,
                    downgrading,
                    ..
                } => {
                    match downgrading {
                        Some(_) => {
                            for lag in 0..=c.drift {
                                actions.push(Action::LandDowngrade { client, lag });
                            }
                        }
                        None if state.now < until => {
                            for lag in 0..=c.drift {
                                actions.push(Action::Renew { client, lag });
                            }
                            if side == Side::Write {
                                actions.push(Action::SendDowngrade(client));
                            }
                        }
                        None => {}
                    }
                    if downgrading.is_none() {
                        actions.push(Action::Release(client));
                    }
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
            Action::Acquire { client, side, lag } => {
                let attempt = s.clients[usize::from(client)].1;
                s.clients[usize::from(client)].1 += 1;
                let token = Token { client, attempt };
                let got = match side {
                    Side::Read => s.node.acquire_read(&token.text(), ttl, now),
                    Side::Write => s.node.acquire_write(&token.text(), ttl, now),
                };
                if !got {
                    // Busy: the client tries again later, or not.
                    return Some(s);
                }
                if side == Side::Write {
                    s.written_after_downgrade |= s.downgraded;
                }
                s.clients[usize::from(client)].0 = Client::Holding {
                    token,
                    side,
                    until: self.until(now, lag),
                    downgrading: None,
                };
            }
            Action::SendDowngrade(client) => {
                let Client::Holding {
                    token, side, until, ..
                } = s.clients[usize::from(client)].0
                else {
                    return None;
                };
                s.clients[usize::from(client)].0 = Client::Holding {
                    token,
                    side,
                    until,
                    downgrading: Some(now),
                };
            }
            Action::LandDowngrade { client, lag } => {
                let Client::Holding {
                    token,
                    downgrading: Some(sent),
                    ..
                } = s.clients[usize::from(client)].0
                else {
                    return None;
                };
                let owner = match s.node.stored_writer() {
                    Some(writer) if self.0.broken == Some(Broken::DowngradeWithoutOwner) => {
                        writer.to_owned()
                    }
                    _ => token.text().to_string(),
                };
                if s.node.downgrade(&owner, ttl, now) {
                    s.downgraded = true;
                    s.clients[usize::from(client)].0 = Client::Holding {
                        token,
                        side: Side::Read,
                        until: self.until(sent, lag),
                        downgrading: None,
                    };
                } else {
                    // No longer the writer: the holder is told it lost it.
                    s.clients[usize::from(client)].0 = Client::Idle;
                }
            }
            Action::Renew { client, lag } => {
                let Client::Holding { token, side, .. } = s.clients[usize::from(client)].0 else {
                    return None;
                };
                let live = match side {
                    Side::Write => s.node.renew_write(&token.text(), ttl, now),
                    Side::Read => s.node.renew_read(&token.text(), ttl, now),
                };
                if live {
                    s.clients[usize::from(client)].0 = Client::Holding {
                        token,
                        side,
                        until: self.until(now, lag),
                        downgrading: None,
                    };
                } else {
                    s.clients[usize::from(client)].0 = Client::Idle;
                }
            }
            Action::Release(client) => {
                let Client::Holding { token, side, .. } = s.clients[usize::from(client)].0 else {
                    return None;
                };
                match side {
                    Side::Write => s.node.release_write(&token.text(), now),
                    Side::Read => s.node.release_read(&token.text(), now),
                };
                s.clients[usize::from(client)].0 = Client::Idle;
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(EXCLUSIVE_WRITER, |_, s: &State| {
                let held = s.clients.iter().filter_map(|(c, _)| match c {
                    Client::Holding { side, until, .. } if s.now < *until => Some(*side),
                    _ => None,
                });
                let (mut readers, mut writers) = (0, 0);
                for side in held {
                    match side {
                        Side::Read => readers += 1,
                        Side::Write => writers += 1,
                    }
                }
                writers == 0 || (writers == 1 && readers == 0)
            }),
            Property::sometimes(READ_BESIDE_READ, |_, s: &State| {
                s.clients
                    .iter()
                    .filter(|(c, _)| {
                        matches!(c, Client::Holding { side: Side::Read, until, .. } if s.now < *until)
                    })
                    .count()
                    >= 2
            }),
            Property::sometimes(WRITE_AFTER_DOWNGRADE, |_, s: &State| {
                s.written_after_downgrade
            }),
        ]
    }
}

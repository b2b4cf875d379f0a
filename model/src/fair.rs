//! A fair lock: waiters in a line, each granted in turn
//! (`primitive/fair/`).
//!
//! # What is modelled
//! - **Time** is one global clock in ticks.
//! - **The node** is the in-memory twin's [`FairNode`] (the memory
//!   store's steps of fair mode, which hands the lock over as the scripts
//!   do since issue 35). It keeps the lock (its holder and expiry) and the line:
//!   waiters' tokens in arrival order, each with a presence deadline
//!   ([`Config::presence`] ticks after its last ask). `fair/acquire.lua`:
//!   the lock is taken when it is free and the asker is first in line (or
//!   no one waits), or already the asker's (a grant it has not seen);
//!   else the asker joins the line or refreshes its presence, after the
//!   waiters whose presence ran out are dropped from the head.
//!   `fair/release.lua` hands the lock to the first live waiter in line
//!   for what is left of its presence (a grant), or deletes it.
//!   `fair/leave.lua`: a waiter that gives up leaves the line, and hands
//!   the lock on if it was granted it.
//! - **Clients** ask once each ([`Config::clients`]); a waiter asks again
//!   before its presence runs out while it is live (the runtime asks every
//!   retry interval, and its presence is three of them plus a command
//!   timeout: the clock cannot move past a live waiter's deadline), and
//!   takes a grant at its next ask. A waiter can give up (and leave the
//!   line) or die (stop asking, leaving nothing). A holder releases, or
//!   crashes and its lease runs out.
//!
//! # Properties (e of issue 35)
//! - [`NO_OVERTAKING`]: no client takes the lock while a live waiter that
//!   joined the line before it still waits.
//! - [`BOUNDED_WAIT`]: a live waiter is granted within `(clients - 1) x
//!   max(ttl, presence)` ticks of joining the line: each client ahead
//!   holds the lock for at most one lease, or blocks the line for at most
//!   one presence when it died. Liveness, bounded: a live waiter is
//!   eventually granted, as long as the holders ahead end their holds (no
//!   renewal is modelled; a holder that renews adds its hold to the wait).
//!   The bound is exact within the default bounds: one tick less has a
//!   counterexample.
//! - [`GRANTED`] (`sometimes`): a release handed the lock to a waiter.
//!
//! [`Broken::FreeLockToAnyone`] (the plain acquire on a fair lock,
//! [`FairNode::acquire_plain`], then the line when the lock is taken) lets
//! a client take a free lock ahead of the line: [`NO_OVERTAKING`] fails.
//! [`Broken::NoPresence`] keeps a waiter's place however long it stays
//! silent (the node is told a presence that outlasts the model's clock,
//! while a live waiter still asks within [`Config::presence`]): a dead
//! waiter at the head blocks the line for good, and [`BOUNDED_WAIT`]
//! fails.

use std::fmt;

use redlock_runtime::test_util::twin::{FairNode, FairWake};
use stateright::{Model, Property};

use crate::{Token, TokenText};

/// [`Property`] names.
pub const NO_OVERTAKING: &str = "no client takes the lock ahead of a live waiter";
/// See the module docs.
pub const BOUNDED_WAIT: &str = "a live waiter is granted within its bound";
/// See the module docs.
pub const GRANTED: &str = "a release handed the lock to a waiter";

/// A mechanism turned off, to show its property fails without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Broken {
    /// The acquire takes a free lock whoever waits in line.
    FreeLockToAnyone,
    /// A waiter's place never runs out: `purge` drops no one.
    NoPresence,
}

/// The model's bounds and the deployment's settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Clients, each asking for the lock once.
    pub clients: u8,
    /// The lease, in ticks.
    pub ttl: u8,
    /// How long a waiter keeps its place without asking again, in ticks.
    pub presence: u8,
    /// The clock stops here.
    pub max_time: u8,
    /// A mechanism turned off.
    pub broken: Option<Broken>,
}

impl Default for Config {
    /// Three clients, a ttl of 2 ticks, a presence of 2, 9 ticks.
    fn default() -> Self {
        Self {
            clients: 3,
            ttl: 2,
            presence: 2,
            max_time: 9,
            broken: None,
        }
    }
}

impl Config {
    /// The longest a live waiter waits (see [`BOUNDED_WAIT`]).
    pub fn wait_bound(&self) -> u8 {
        (self.clients - 1) * self.ttl.max(self.presence)
    }
}

/// What a client is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Has not asked yet.
    Idle,
    /// In line since the tick `since`, its place `place` in the order of
    /// arrival (ghost); `live` while it keeps asking.
    Waiting {
        /// The tick it joined the line.
        since: u8,
        /// Its place in the order of arrival.
        place: u8,
        /// It keeps asking.
        live: bool,
    },
    /// Holds the lock.
    Holding,
    /// Released, crashed, or gave up.
    Done,
}

/// The whole system.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    now: u8,
    /// The node: the lock and its line, the in-memory twin's.
    node: FairNode,
    clients: Vec<Phase>,
    /// Places handed out so far (ghost).
    places: u8,
    /// Ghost flags.
    overtaken: bool,
    granted: bool,
}

/// A step of the system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock moves one tick.
    Tick,
    /// A client asks (`fair/acquire.lua`).
    Ask(u8),
    /// A waiter gives up and leaves the line (`fair/leave.lua`).
    GiveUp(u8),
    /// A waiter stops asking, leaving its place behind.
    Die(u8),
    /// The holder releases (`fair/release.lua`).
    Release(u8),
    /// The holder crashes: its lease runs out.
    Crash(u8),
}

/// The model: a [`Config`].
#[derive(Debug, Clone)]
pub struct FairModel(pub Config);

impl FairModel {
    /// How long a waiter's place lasts: [`Config::presence`], or (broken)
    /// longer than the model's clock runs.
    fn presence(&self) -> u8 {
        match self.0.broken {
            Some(Broken::NoPresence) => NO_PRESENCE,
            _ => self.0.presence,
        }
    }

    /// `client` took the lock at its ask: no live waiter that came before
    /// it may still wait.
    fn took(&self, s: &mut State, client: u8) {
        let mine = match s.clients[usize::from(client)] {
            Phase::Waiting { place, .. } => place,
            _ => u8::MAX,
        };
        let overtaken = s.clients.iter().enumerate().any(|(i, p)| {
            i != usize::from(client)
                && matches!(*p, Phase::Waiting { place, live: true, .. } if place < mine)
        });
        s.overtaken |= overtaken;
        s.clients[usize::from(client)] = Phase::Holding;
    }
}

/// Client `client`'s owner token.
fn token(client: u8) -> TokenText {
    Token { client, attempt: 0 }.text()
}

/// The presence of the broken variant that keeps every place: past the
/// end of any model's clock.
const NO_PRESENCE: u8 = 200;

impl Model for FairModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 1,
            node: FairNode::new(),
            clients: vec![Phase::Idle; usize::from(self.0.clients)],
            places: 0,
            overtaken: false,
            granted: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        let c = &self.0;
        // A live waiter asks again before its presence runs out (in line,
        // or in a grant it has not taken yet): the clock waits for it.
        // A waiter asks again within `presence` of its last ask, also when
        // (broken) the node keeps its place longer: its deadline on the
        // node less that extra.
        let soon = u64::from(state.now) + 1 + u64::from(self.presence().saturating_sub(c.presence));
        let line = state.node.line();
        let deadline_now = state.clients.iter().enumerate().any(|(i, p)| {
            let me = token(u8::try_from(i).unwrap_or(u8::MAX));
            let due = |&(w, until): &(&str, u64)| w == &*me && until <= soon;
            matches!(p, Phase::Waiting { live: true, .. })
                && (line.iter().any(due) || state.node.stored().as_ref().is_some_and(due))
        });
        if state.now < c.max_time && !deadline_now {
            actions.push(Action::Tick);
        }
        for (i, phase) in state.clients.iter().enumerate() {
            let client = u8::try_from(i).unwrap_or(u8::MAX);
            match phase {
                Phase::Idle => actions.push(Action::Ask(client)),
                Phase::Waiting { live: true, .. } => {
                    actions.push(Action::Ask(client));
                    actions.push(Action::GiveUp(client));
                    actions.push(Action::Die(client));
                }
                Phase::Holding => {
                    actions.push(Action::Release(client));
                    actions.push(Action::Crash(client));
                }
                Phase::Waiting { live: false, .. } | Phase::Done => {}
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        let now = s.now;
        let c = &self.0;
        let holds = |s: &State, client: u8| s.node.holder(now) == Some(&*token(client));
        match action {
            Action::Tick => s.now += 1,
            Action::Ask(client) => {
                let me = token(client);
                let granted = holds(&s, client);
                // Broken: the plain acquire takes a free lock; a client
                // that finds it taken waits in line.
                let plain = c.broken == Some(Broken::FreeLockToAnyone)
                    && s.node.acquire_plain(&me, c.ttl, now);
                if plain || s.node.acquire(&me, c.ttl, self.presence(), now) {
                    if granted {
                        // Granted by a release: its own at this ask.
                        s.clients[usize::from(client)] = Phase::Holding;
                    } else {
                        self.took(&mut s, client);
                    }
                } else if s.clients[usize::from(client)] == Phase::Idle {
                    s.clients[usize::from(client)] = Phase::Waiting {
                        since: now,
                        place: s.places,
                        live: true,
                    };
                    s.places += 1;
                }
            }
            Action::GiveUp(client) => {
                let (_, woke) = s.node.leave(&token(client), now);
                s.granted |= matches!(woke, Some(FairWake::Granted(_)));
                s.clients[usize::from(client)] = Phase::Done;
            }
            Action::Die(client) => {
                let Phase::Waiting { since, place, .. } = s.clients[usize::from(client)] else {
                    return None;
                };
                s.clients[usize::from(client)] = Phase::Waiting {
                    since,
                    place,
                    live: false,
                };
            }
            Action::Release(client) => {
                let woke = s.node.release(&token(client), now);
                s.granted |= matches!(woke, Some(FairWake::Granted(_)));
                s.clients[usize::from(client)] = Phase::Done;
            }
            Action::Crash(client) => s.clients[usize::from(client)] = Phase::Done,
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(NO_OVERTAKING, |_, s: &State| !s.overtaken),
            Property::always(BOUNDED_WAIT, |m: &FairModel, s: &State| {
                s.clients.iter().all(|p| match *p {
                    Phase::Waiting {
                        since, live: true, ..
                    } => s.now - since <= m.0.wait_bound(),
                    _ => true,
                })
            }),
            Property::sometimes(GRANTED, |_, s: &State| s.granted),
        ]
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} clients, ttl {}, presence {}, {} ticks, broken {:?}",
            self.clients, self.ttl, self.presence, self.max_time, self.broken
        )
    }
}

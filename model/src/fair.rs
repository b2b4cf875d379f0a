//! A fair lock: waiters in a line, each granted in turn
//! (`primitive/fair/`).
//!
//! # What is modelled
//! - **Time** is one global clock in ticks.
//! - **The node** keeps the lock (its holder and expiry) and the line:
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
//! [`Broken::FreeLockToAnyone`] (the plain acquire on a fair lock) lets a
//! client take a free lock ahead of the line: [`NO_OVERTAKING`] fails.
//! [`Broken::NoPresence`] keeps a waiter's place however long it stays
//! silent: a dead waiter at the head blocks the line for good, and
//! [`BOUNDED_WAIT`] fails.

use std::fmt;

use stateright::{Model, Property};

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
    /// The holder (a client) and when its lease ends.
    lock: Option<(u8, u8)>,
    /// The line: clients in arrival order, each with its presence deadline.
    line: Vec<(u8, u8)>,
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
    /// Drops the waiters at the head whose presence ran out; the first
    /// live one.
    fn purge(&self, s: &mut State) -> Option<u8> {
        while let Some(&(head, until)) = s.line.first() {
            if until > s.now || self.0.broken == Some(Broken::NoPresence) {
                return Some(head);
            }
            s.line.remove(0);
        }
        None
    }

    /// `shared/hand_over.lua`: the lock goes to the first live waiter,
    /// for what is left of its presence, or is deleted.
    fn hand_over(&self, s: &mut State) {
        match self.purge(s) {
            Some(head) => {
                let (_, until) = s.line.remove(0);
                s.lock = Some((head, until));
                s.granted = true;
            }
            None => s.lock = None,
        }
    }

    /// `client` takes the lock: no live waiter that came before it may
    /// still wait.
    fn take(&self, s: &mut State, client: u8) {
        let mine = match s.clients[usize::from(client)] {
            Phase::Waiting { place, .. } => place,
            _ => u8::MAX,
        };
        let overtaken = s.clients.iter().enumerate().any(|(i, p)| {
            i != usize::from(client)
                && matches!(*p, Phase::Waiting { place, live: true, .. } if place < mine)
        });
        s.overtaken |= overtaken;
        s.lock = Some((client, s.now + self.0.ttl));
        s.clients[usize::from(client)] = Phase::Holding;
    }
}

impl Model for FairModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 1,
            lock: None,
            line: Vec::new(),
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
        let deadline_now = state.clients.iter().enumerate().any(|(i, p)| {
            let due = |&(w, until): &(u8, u8)| usize::from(w) == i && until <= state.now + 1;
            matches!(p, Phase::Waiting { live: true, .. })
                && (state.line.iter().any(due) || state.lock.as_ref().is_some_and(due))
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
        let holder = s.lock.filter(|&(_, until)| until > now).map(|(h, _)| h);
        match action {
            Action::Tick => s.now += 1,
            Action::Ask(client) => {
                if holder == Some(client) {
                    // Granted by a release: its own at this ask.
                    s.clients[usize::from(client)] = Phase::Holding;
                    s.lock = Some((client, now + c.ttl));
                    return Some(s);
                }
                let anyone = c.broken == Some(Broken::FreeLockToAnyone);
                let head = s.line.first().map(|&(w, _)| w);
                if holder.is_none() && (anyone || head.is_none() || head == Some(client)) {
                    s.line.retain(|&(w, _)| w != client);
                    self.take(&mut s, client);
                    return Some(s);
                }
                let head = self.purge(&mut s);
                if holder.is_some() || head.is_some_and(|h| h != client) {
                    let until = now + c.presence;
                    match s.line.iter_mut().find(|(w, _)| *w == client) {
                        Some(entry) => entry.1 = until,
                        None => s.line.push((client, until)),
                    }
                    if s.clients[usize::from(client)] == Phase::Idle {
                        s.clients[usize::from(client)] = Phase::Waiting {
                            since: now,
                            place: s.places,
                            live: true,
                        };
                        s.places += 1;
                    }
                } else {
                    s.line.retain(|&(w, _)| w != client);
                    self.take(&mut s, client);
                }
            }
            Action::GiveUp(client) => {
                s.line.retain(|&(w, _)| w != client);
                s.clients[usize::from(client)] = Phase::Done;
                if holder == Some(client) {
                    self.hand_over(&mut s);
                }
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
                s.clients[usize::from(client)] = Phase::Done;
                if holder == Some(client) {
                    self.hand_over(&mut s);
                }
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

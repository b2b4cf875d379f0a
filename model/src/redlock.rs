//! Redlock: one lock over independent masters, held while a majority of
//! them hold it (`store/quorum/`, `backend/quorum.rs`).
//!
//! # What is modelled
//! - **Time** is one global clock in ticks. A client judges its lease by
//!   its own clock, which may run slow by up to [`Config::drift`] ticks
//!   over one lease (as in [`crate::lock`]). Each node has a clock of its
//!   own, in two ways: it may run fast by up to [`Config::node_drift`]
//!   ticks over one lease, so a lock it granted may expire that much early
//!   (chosen at each grant); and node 0's clock reads [`Config::skew`]
//!   ticks ahead of the others' (a fixed offset), which its fencing
//!   tokens' clock floor reads: a token from the node ahead is above what
//!   the others issue for as long, the case the skew bound is about.
//! - **A client's acquire** asks every node in turn, interleaved with
//!   everything else ([`Action::Ask`]): client 0 in node order, the
//!   others in any order. Renaming the nodes turns any two orders into
//!   node order and another, so every relative order of two concurrent
//!   acquires is explored (client 0's acquires all in one order is the
//!   restriction, to keep the states few). Each node runs
//!   `lock/acquire.lua` (`SET NX PX`, and a fencing token from its own
//!   counter, `max(counter + 1, clock)`). Once every node answered
//!   ([`Action::Decide`]), the client holds the lock if a majority granted
//!   while the lease is still valid, `ttl - margin` from the start of the
//!   acquire; its fencing token is the largest its majority issued.
//!   Otherwise it gives back on every node. (The runtime stops listening
//!   once a majority granted; the answers still on their way land before
//!   its release, which waits for them: here, before the decision.)
//! - **A release** goes to every node that is up: it deletes the lock
//!   where it is the client's, and raises every node's counter to the
//!   client's fencing token (`lock/release.lua` with a token to raise),
//!   so that the next majority, which shares a node with this one, issues
//!   a larger one. (No fenced store here: [`crate::lock`] shows what the
//!   store makes of tokens that increase.)
//! - **A node** is the in-memory twin's [`LockNode`]
//!   (`redlock_runtime::test_util::twin`): the memory store's steps for
//!   `acquire.lua` and `release.lua`, which the differential suite checks
//!   against the scripts. Node 0's is built
//!   [`with_clock_ahead`](LockNode::with_clock_ahead) the skew.
//! - **Nodes** restart empty (no persistence), at once or after the
//!   restart delay (granting nothing for one ttl, what
//!   `LockClientBuilder::restart_delay` does), at most once in all.
//! - **A node without scripts** ([`Config::scriptless`]): one whose ACL
//!   refuses the acquire script grants a plain `SET NX` and issues no
//!   token ([`LockNode::acquire_plain`]); a hold with such a grant in its
//!   majority has no token, and its release raises nothing (see
//!   `backend/quorum.rs`, "Without scripts").
//! - **A release** may reach only some nodes
//!   ([`Config::partial_releases`]): the others keep the lock until it
//!   expires, and their counters are not raised.
//!
//! # Properties
//! - [`MUTUAL_EXCLUSION`], as in [`crate::lock`]: needs the restart delay
//!   (a restarted node that grants at once helps a second client to a
//!   majority), and the margin at least the client's drift plus a node's
//!   (a slow client and a fast node each eat into the lease: the margin
//!   must cover both at once).
//! - [`TOKENS_INCREASE`], over the quorum: a hold whose acquire started
//!   after another hold ended (released, or its lease presumed over) has
//!   a larger token, restarts or not; not without the release's raise,
//!   when one node issued more tokens than the others within one tick of
//!   the clock; not when the skew between two nodes reaches the ttl less a
//!   node's drift, where a lease that ran out (nothing raised) leaves a
//!   token from a node whose clock reads ahead above what the next
//!   majority's clocks issue. (Holds that overlap, where mutual exclusion fails, are not
//!   ordered: an acquire that started first may decide last.) With a node
//!   without scripts, over the holds that have a token: the tokenless
//!   holds between them change nothing; not when a hold with a tokenless
//!   grant takes the largest token of its other grants
//!   ([`Broken::TokenFromPart`]) and its release reaches only some nodes:
//!   the next majority may share only the tokenless node with it, and
//!   take its token from a node whose counter was never raised.
//! - [`TWO_HOLDS`] (`sometimes`): the bounds reach a second hold.

use std::fmt;

use stateright::{Model, Property};

pub use crate::Token;
pub use crate::lock::{MUTUAL_EXCLUSION, TOKENS_INCREASE};
use redlock_runtime::test_util::twin::LockNode;

/// A `sometimes` property: the bounds reach a second hold.
pub const TWO_HOLDS: &str = "two acquires held the lock";

/// One safety mechanism turned off, to show its property fails without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Broken {
    /// A release deletes the lock but does not raise the counters.
    NoRaise,
    /// A hold with a tokenless grant in its majority takes the largest
    /// token its other grants issued, where it must have none.
    TokenFromPart,
}

/// How nodes restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Restart {
    /// They do not.
    Never,
    /// One node restarts empty, granting at once.
    AtOnce,
    /// One node restarts empty, granting nothing for one ttl.
    AfterDelay,
}

/// The model's bounds and the deployment's settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The independent masters.
    pub nodes: u8,
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
    /// How many ticks fast a node's clock may run over one lease: a lock
    /// it granted expires up to this much early.
    pub node_drift: u8,
    /// How many ticks ahead of the others' node 0's clock reads (its
    /// fencing tokens' clock floor).
    pub skew: u8,
    /// The clock stops here.
    pub max_time: u8,
    /// How nodes restart.
    pub restart: Restart,
    /// A mechanism turned off.
    pub broken: Option<Broken>,
    /// A node whose ACL refuses the acquire script: it grants plain locks,
    /// without a token.
    pub scriptless: Option<u8>,
    /// A release may reach only some of the nodes (the others unreachable
    /// as it is sent): their locks stay until they expire, their counters
    /// are not raised.
    pub partial_releases: bool,
}

impl Default for Config {
    /// Three nodes, two clients, two acquires each, a ttl of 3 ticks, a
    /// margin of 1 for a client's drift of 1, nodes' clocks true, 5
    /// ticks, no restart.
    fn default() -> Self {
        Self {
            nodes: 3,
            clients: 2,
            acquires: 2,
            ttl: 3,
            margin: 1,
            drift: 1,
            node_drift: 0,
            skew: 0,
            max_time: 5,
            restart: Restart::Never,
            broken: None,
            scriptless: None,
            partial_releases: false,
        }
    }
}

/// A client's hold, as it believes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hold {
    token: Token,
    fence: u64,
    /// It believes it holds the lock before this tick.
    until: u8,
}

/// What a client is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Holds nothing.
    Idle,
    /// Asking the nodes.
    Asking {
        /// The owner token.
        token: Token,
        /// The tick the acquire started: the lease counts from it.
        started: u8,
        /// The nodes asked (a bit each).
        asked: u8,
        /// The nodes that granted (a bit each).
        granted: u8,
        /// The largest token they issued.
        fence: u64,
        /// A node granted without a token: the hold has none.
        tokenless: bool,
        /// The largest token of the holds that had ended when this
        /// acquire started (ghost).
        after: u64,
    },
    /// Holds the lock, as far as it knows.
    Holding(Hold),
}

/// The whole system.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    now: u8,
    /// The masters, each the in-memory twin's lock node (node 0's clock
    /// reading the skew ahead).
    nodes: Vec<LockNode>,
    /// Each node grants nothing before this tick: a restart delay.
    down_until: Vec<u8>,
    clients: Vec<(Phase, u8)>,
    /// The largest token of the holds released so far (ghost).
    released: u64,
    /// Holds taken so far, up to 2 (ghost).
    holds: u8,
    restarted: bool,
    /// A hold got a token not larger than one of a hold that ended
    /// before its acquire started (ghost).
    token_reused: bool,
}

/// A step of the system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock moves one tick.
    Tick,
    /// A client starts an acquire.
    Start(u8),
    /// A client's acquire reaches a node.
    Ask {
        /// The client.
        client: u8,
        /// The node.
        node: u8,
        /// How many ticks early the node's clock, running fast, expires
        /// the lock if it grants it.
        early: u8,
    },
    /// Every node answered: the client holds the lock (its clock running
    /// `lag` ticks slow over the lease) or gives back.
    Decide {
        /// The client.
        client: u8,
        /// How slow its clock runs over this lease.
        lag: u8,
    },
    /// A client releases on the nodes of `reached` (a bit each) that are
    /// up: every node, unless [`Config::partial_releases`].
    Release {
        /// The client.
        client: u8,
        /// The nodes the release reaches.
        reached: u8,
    },
    /// A node restarts empty.
    Restart(u8),
}

/// The model: a [`Config`].
#[derive(Debug, Clone)]
pub struct RedlockModel(pub Config);

impl RedlockModel {
    fn all(&self) -> u8 {
        u8::try_from((1u16 << self.0.nodes) - 1).unwrap_or(u8::MAX)
    }

    /// The release of `token` on the nodes of `reached` that are up,
    /// raising their counters to `fence` (0: nothing to raise).
    fn release(&self, s: &mut State, token: Token, fence: u64, reached: u8) {
        let now = s.now;
        let token = token.text();
        let up = (s.down_until.iter().enumerate())
            .map(|(n, &until)| until <= now && reached & (1 << n) != 0);
        for (node, _) in s.nodes.iter_mut().zip(up).filter(|(_, up)| *up) {
            if self.0.broken == Some(Broken::NoRaise) {
                node.release(&token, now);
            } else {
                node.release_raising(&token, fence, now);
            }
        }
    }
}

impl Model for RedlockModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let mut nodes = vec![LockNode::new(); usize::from(self.0.nodes)];
        if let Some(first) = nodes.first_mut() {
            *first = LockNode::with_clock_ahead(self.0.skew);
        }
        vec![State {
            now: 1,
            nodes,
            down_until: vec![0; usize::from(self.0.nodes)],
            clients: vec![(Phase::Idle, 0); usize::from(self.0.clients)],
            released: 0,
            holds: 0,
            restarted: false,
            token_reused: false,
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
                Phase::Idle if acquires < c.acquires => actions.push(Action::Start(client)),
                Phase::Idle => {}
                Phase::Asking { asked, .. } if asked == self.all() => {
                    for lag in 0..=c.drift {
                        actions.push(Action::Decide { client, lag });
                    }
                }
                Phase::Asking { asked, .. } if client == 0 => {
                    // The next node, in order (see the module docs).
                    let node = u8::try_from(asked.count_ones()).unwrap_or(u8::MAX);
                    for early in 0..=c.node_drift {
                        actions.push(Action::Ask {
                            client,
                            node,
                            early,
                        });
                    }
                }
                Phase::Asking { asked, .. } => {
                    for node in (0..c.nodes).filter(|n| asked & (1u8 << n) == 0) {
                        for early in 0..=c.node_drift {
                            actions.push(Action::Ask {
                                client,
                                node,
                                early,
                            });
                        }
                    }
                }
                Phase::Holding(_) if c.partial_releases => {
                    for reached in 1..=self.all() {
                        actions.push(Action::Release { client, reached });
                    }
                }
                Phase::Holding(_) => actions.push(Action::Release {
                    client,
                    reached: self.all(),
                }),
            }
        }
        if c.restart != Restart::Never && !state.restarted && state.now < c.max_time {
            for node in 0..c.nodes {
                actions.push(Action::Restart(node));
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        let now = s.now;
        let c = &self.0;
        match action {
            Action::Tick => s.now += 1,
            Action::Start(client) => {
                let (_, attempt) = s.clients[usize::from(client)];
                // The holds over by now: released, or presumed over.
                let over = s.clients.iter().filter_map(|(p, _)| match p {
                    Phase::Holding(h) if h.until <= now => Some(h.fence),
                    _ => None,
                });
                let after = over.fold(s.released, u64::max);
                s.clients[usize::from(client)] = (
                    Phase::Asking {
                        token: Token { client, attempt },
                        started: now,
                        asked: 0,
                        granted: 0,
                        fence: 0,
                        tokenless: false,
                        after,
                    },
                    attempt + 1,
                );
            }
            Action::Ask {
                client,
                node,
                early,
            } => {
                let Phase::Asking {
                    token,
                    started,
                    asked,
                    mut granted,
                    mut fence,
                    mut tokenless,
                    after,
                } = s.clients[usize::from(client)].0
                else {
                    return None;
                };
                let n = usize::from(node);
                // The node's clock runs its ttl out `early` ticks early.
                let ttl = c.ttl.saturating_sub(early).max(1);
                if s.down_until[n] > now {
                    // Grants nothing.
                } else if c.scriptless == Some(node) {
                    if s.nodes[n].acquire_plain(&token.text(), ttl, now) {
                        tokenless = true;
                        granted |= 1 << node;
                    }
                } else if let Some(issued) = s.nodes[n].acquire(&token.text(), ttl, now) {
                    fence = fence.max(issued);
                    granted |= 1 << node;
                }
                s.clients[usize::from(client)].0 = Phase::Asking {
                    token,
                    started,
                    asked: asked | (1 << node),
                    granted,
                    fence,
                    tokenless,
                    after,
                };
            }
            Action::Decide { client, lag } => {
                let Phase::Asking {
                    token,
                    started,
                    granted,
                    fence,
                    tokenless,
                    after,
                    ..
                } = s.clients[usize::from(client)].0
                else {
                    return None;
                };
                let valid_until = (started + c.ttl).saturating_sub(c.margin);
                if granted.count_ones() > u32::from(c.nodes) / 2 && now < valid_until {
                    // A tokenless hold has no token to compare (nor raise).
                    let has_token = !tokenless || c.broken == Some(Broken::TokenFromPart);
                    let fence = if has_token { fence } else { 0 };
                    s.token_reused |= has_token && fence <= after;
                    s.holds = (s.holds + 1).min(2);
                    s.clients[usize::from(client)].0 = Phase::Holding(Hold {
                        token,
                        fence,
                        until: crate::presumed_until(started, c.ttl, c.margin, lag),
                    });
                } else {
                    let all = self.all();
                    self.release(&mut s, token, 0, all);
                    s.clients[usize::from(client)].0 = Phase::Idle;
                }
            }
            Action::Release { client, reached } => {
                let Phase::Holding(hold) = s.clients[usize::from(client)].0 else {
                    return None;
                };
                self.release(&mut s, hold.token, hold.fence, reached);
                s.released = s.released.max(hold.fence);
                s.clients[usize::from(client)].0 = Phase::Idle;
            }
            Action::Restart(node) => {
                s.restarted = true;
                s.now += 1;
                let n = usize::from(node);
                s.nodes[n] = s.nodes[n].restarted_empty();
                if c.restart == Restart::AfterDelay {
                    s.down_until[n] = s.now + c.ttl;
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
                        Phase::Holding(h) => s.now < h.until,
                        Phase::Idle | Phase::Asking { .. } => false,
                    })
                    .count()
                    <= 1
            }),
            Property::always(TOKENS_INCREASE, |_, s: &State| !s.token_reused),
            Property::sometimes(TWO_HOLDS, |_, s: &State| s.holds >= 2),
        ]
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} nodes, {} clients x {} acquires, ttl {}, margin {}, drift {} (nodes {}, skew {}), \
             {} ticks, restart {:?}, broken {:?}, scriptless {:?}, partial releases {}",
            self.nodes,
            self.clients,
            self.acquires,
            self.ttl,
            self.margin,
            self.drift,
            self.node_drift,
            self.skew,
            self.max_time,
            self.restart,
            self.broken,
            self.scriptless,
            self.partial_releases
        )
    }
}

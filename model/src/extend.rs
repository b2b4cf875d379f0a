//! A manual `extend` beside the watchdog's renewals: what the holder
//! presumes of its lease, against what the node keeps.
//!
//! A renewal's script (`lock/extend.lua`) never shortens a lease when the
//! watchdog sends it: a renewal that lands after a manual extend with a
//! longer ttl leaves that lease alone. Without a script (`SET lock token
//! IFEQ token PX ttl`, on Valkey 9 and Redis 8.4: see `primitive/lock/
//! conditional.rs`), every renewal sets the lease to its ttl, so a
//! renewal that lands late shortens it. The runtime makes that safe with
//! two rules (`LockGuard::extend`, `HeldLock::outcome_unknown`):
//!
//! - **the gate**: a manual extend and the watchdog's renewal of one lock
//!   are never in flight together, so the one answered last was applied
//!   last;
//! - **the doubt**: a renewal or extend may land as soon as it is sent,
//!   so the holder counts on no more than its ttl from then (an extend
//!   that shortens the lease shortens what is counted at once); and one
//!   whose answer never came may still land at any later time, so from
//!   then on the holder counts on no more than the shortest ttl among
//!   those, from each later confirmation.
//!
//! # What is modelled
//! - **Time** is one global clock in ticks ([`Action::Tick`]); no drift:
//!   the holder presumes its lease held until `sent + ttl` of the latest
//!   confirmation sent (`HeldLock::renewed`).
//! - **The holder** sends the watchdog's renewals (with the lease's
//!   current ttl) and manual extends (with a ttl of [`Config::extend_ttls`])
//!   at any tick while it presumes the lock held. It stops waiting for a
//!   call whose answer is late ([`Action::GiveUp`], bounded by
//!   [`Config::timeouts`]): the request may still land later.
//! - **The node** is the in-memory twin's [`LockNode`]: it applies a
//!   request when it lands, in any order, by the script's rule (a
//!   renewal keeps a longer lease, [`LockNode::renew`]; an extend sets
//!   it, [`LockNode::extend`]) or the conditional `SET`'s (every call sets
//!   it, [`LockNode::extend`]'s rule) ([`Config::conditional`]).
//!
//! # Properties
//! - [`COUNTED_LEASE_HELD`]: whenever the holder presumes the lock held,
//!   the node holds it. Holds with scripts (given extends that only
//!   lengthen the lease, or no timeouts), and without scripts given both
//!   rules; each rule dropped has a counterexample, and so have scripts
//!   with a shortening extend that times out (fixed by the doubt too).
//! - [`EXTENDED_AFTER_A_TIMEOUT`] (`sometimes`): an extend was answered
//!   after a call timed out: the bounds reach the case the doubt is for.

use std::fmt;

use redlock_runtime::test_util::twin::LockNode;
use stateright::{Model, Property};

/// The holder's owner token.
const HOLDER: &str = "holder";

/// [`Property`] names.
pub const COUNTED_LEASE_HELD: &str = "the node holds the lock while the holder presumes it";
/// See the module docs.
pub const EXTENDED_AFTER_A_TIMEOUT: &str = "an extend was answered after a call timed out";

/// The model's bounds and the runtime's rules.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The lock's ttl, which the watchdog renews with until an extend
    /// changes it.
    pub ttl: u8,
    /// The ttls a manual extend may ask for.
    pub extend_ttls: [u8; 2],
    /// Renewals the watchdog may send.
    pub renewals: u8,
    /// Manual extends the holder may send.
    pub extends: u8,
    /// Calls the holder may stop waiting for.
    pub timeouts: u8,
    /// The clock stops here.
    pub max_time: u8,
    /// Renewals without a script: a late one shortens the lease.
    pub conditional: bool,
    /// A manual extend and a renewal are never in flight together.
    pub gate: bool,
    /// Count no more than a call sent, or one that timed out, can leave.
    pub doubt: bool,
}

impl Default for Config {
    /// A ttl of 3, extends to 2 or 5 ticks, three renewals, two extends,
    /// one timeout, 8 ticks, the runtime's rules without scripts.
    fn default() -> Self {
        Self {
            ttl: 3,
            extend_ttls: [2, 5],
            renewals: 3,
            extends: 2,
            timeouts: 1,
            max_time: 8,
            conditional: true,
            gate: true,
            doubt: true,
        }
    }
}

/// Which call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The watchdog's renewal.
    Renewal,
    /// A manual `extend`.
    Extend,
}

/// One call in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Call {
    kind: Kind,
    sent: u8,
    ttl: u8,
    /// `None` while the request is on its way; the node's answer once it
    /// landed.
    answer: Option<bool>,
    /// The holder stopped waiting for it.
    abandoned: bool,
}

/// The whole system.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    now: u8,
    /// The node: the holder's lock (no one else takes it).
    node: LockNode,
    /// The lease the holder counts on: the ttl renewals use, and the
    /// latest confirmation sent.
    ttl: u8,
    sent: u8,
    /// `sent + ` the ttl counted: the holder presumes the lock held before.
    until: u8,
    /// The shortest ttl of the calls whose answer never came.
    doubt: Option<u8>,
    calls: Vec<Call>,
    renewals: u8,
    extends: u8,
    timeouts: u8,
    /// The holder learned the lock was gone.
    lost: bool,
    /// Ghosts.
    timed_out: bool,
    extended_after_timeout: bool,
}

impl State {
    fn presumed(&self) -> bool {
        !self.lost && self.now < self.until
    }

    fn held(&self) -> bool {
        self.node.holder(self.now).is_some()
    }

    fn tracked(&self) -> bool {
        self.calls.iter().any(|c| !c.abandoned)
    }
}

/// A step of the system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock moves one tick.
    Tick,
    /// The watchdog sends a renewal.
    Renew,
    /// The holder sends a manual extend with this ttl.
    Extend(u8),
    /// The request of call `i` lands on the node.
    Land(usize),
    /// The holder reads call `i`'s answer.
    Answer(usize),
    /// The holder stops waiting for call `i`.
    GiveUp(usize),
}

/// The model: a [`Config`].
#[derive(Debug, Clone)]
pub struct ExtendModel(pub Config);

impl Model for ExtendModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let ttl = self.0.ttl;
        let mut node = LockNode::new();
        node.acquire(HOLDER, ttl, 0);
        vec![State {
            now: 0,
            node,
            ttl,
            sent: 0,
            until: ttl,
            doubt: None,
            calls: Vec::new(),
            renewals: 0,
            extends: 0,
            timeouts: 0,
            lost: false,
            timed_out: false,
            extended_after_timeout: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        let c = &self.0;
        if s.now < c.max_time {
            actions.push(Action::Tick);
        }
        // The watchdog never overlaps its own renewals, nor (the gate) an
        // extend; one extend at a time.
        let tracked = |kind| s.calls.iter().any(|x| !x.abandoned && x.kind == kind);
        let gated = c.gate && s.tracked();
        if s.presumed() {
            if s.renewals < c.renewals && !tracked(Kind::Renewal) && !gated {
                actions.push(Action::Renew);
            }
            if s.extends < c.extends && !tracked(Kind::Extend) && !gated {
                actions.extend(c.extend_ttls.iter().map(|&t| Action::Extend(t)));
            }
        }
        for (i, call) in s.calls.iter().enumerate() {
            match call.answer {
                None => actions.push(Action::Land(i)),
                Some(_) if !call.abandoned => actions.push(Action::Answer(i)),
                Some(_) => {}
            }
            if !call.abandoned && s.timeouts < c.timeouts {
                actions.push(Action::GiveUp(i));
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let c = &self.0;
        let mut s = last.clone();
        let send = |s: &mut State, kind, ttl: u8| {
            if c.doubt {
                // It may land at once: count no more than it leaves.
                let counted = s.doubt.map_or(ttl, |d| d.min(ttl));
                s.until = s.until.min(s.now + counted);
            }
            s.calls.push(Call {
                kind,
                sent: s.now,
                ttl,
                answer: None,
                abandoned: false,
            });
        };
        match action {
            Action::Tick => s.now += 1,
            Action::Renew => {
                s.renewals += 1;
                let ttl = s.ttl;
                send(&mut s, Kind::Renewal, ttl);
            }
            Action::Extend(ttl) => {
                s.extends += 1;
                send(&mut s, Kind::Extend, ttl);
            }
            Action::Land(i) => {
                let call = s.calls[i];
                let held = if call.kind == Kind::Renewal && !c.conditional {
                    s.node.renew(HOLDER, call.ttl, s.now)
                } else {
                    s.node.extend(HOLDER, call.ttl, s.now)
                };
                if call.abandoned {
                    s.calls.remove(i);
                } else {
                    s.calls[i].answer = Some(held);
                }
            }
            Action::Answer(i) => {
                let call = s.calls.remove(i);
                if call.answer == Some(true) {
                    if call.sent >= s.sent {
                        let counted = match (c.doubt, s.doubt) {
                            (true, Some(doubt)) => call.ttl.min(doubt),
                            _ => call.ttl,
                        };
                        s.ttl = call.ttl;
                        s.sent = call.sent;
                        s.until = call.sent + counted;
                    }
                    if call.kind == Kind::Extend && s.timed_out {
                        s.extended_after_timeout = true;
                    }
                } else {
                    s.lost = true;
                }
            }
            Action::GiveUp(i) => {
                s.timeouts += 1;
                s.timed_out = true;
                let ttl = s.calls[i].ttl;
                s.doubt = Some(s.doubt.map_or(ttl, |d| d.min(ttl)));
                if s.calls[i].answer.is_some() {
                    // It landed; only its answer is lost.
                    s.calls.remove(i);
                } else {
                    s.calls[i].abandoned = true;
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(COUNTED_LEASE_HELD, |_, s: &State| !s.presumed() || s.held()),
            Property::sometimes(EXTENDED_AFTER_A_TIMEOUT, |_, s: &State| {
                s.extended_after_timeout
            }),
        ]
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ttl {}, extends to {:?}, {} renewals, {} extends, {} timeouts, {} ticks, {}, gate {}, \
             doubt {}",
            self.ttl,
            self.extend_ttls,
            self.renewals,
            self.extends,
            self.timeouts,
            self.max_time,
            if self.conditional {
                "without scripts"
            } else {
                "scripts"
            },
            self.gate,
            self.doubt
        )
    }
}

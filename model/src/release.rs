//! The end of a lease when an answer is lost: what the release reports.
//!
//! A holder's release is a compare-and-delete (`lock/release.lua`). Its
//! request or its answer can be lost (a connection found dead); the
//! runtime then sends it again (`store/server/resend.rs`). A re-send that runs
//! after the first send deleted the lock finds it gone and answers "not
//! the owner", which before the fix of issue "last reply" was reported as
//! a lost lock: a clean release reported as a loss. The runtime now takes
//! "not the owner" after a re-send as released when the lease was
//! presumed held as the release went out (`HeldLock::end_as` in
//! `lock.rs`; the design page's "A lost answer is not a lost lock").
//!
//! # What is modelled
//! - **Time** is one global clock in ticks ([`Action::Tick`]). The holder
//!   took the lock at tick 1 with a lease of [`Config::ttl`] ticks and
//!   presumes it held until `1 + ttl - margin + lag`, its clock running
//!   `lag` ticks slow (`0..=drift`, a choice of the initial state).
//! - **The holder** sends its release at any tick, before or after its
//!   presumed lease ends. The request reaches the node or is lost; the
//!   node's answer reaches the holder or is lost; after a loss the holder
//!   sends again, up to [`Config::resends`] times, and with none left
//!   reports an error (neither released nor lost).
//! - **Another client** takes the lock whenever the node finds it free
//!   (expired or deleted), so a late request finds another owner's lock.
//! - **The node** is a [`LockNode`], the in-memory twin's steps: the
//!   release's compare-and-delete and its answer are the twin's.
//!
//! # Properties
//! - [`NO_FALSE_LOSS`]: a release sent while the lease was presumed held,
//!   whose request deleted the holder's own lock, is never reported as a
//!   loss. Fails in [`Broken::ResentNotOwnerIsLoss`], the runtime before
//!   the fix.
//! - [`NO_FALSE_RELEASE`]: a release reported clean went out while the
//!   lock was the holder's on the node. Needs the drift within the margin
//!   (the fix trusts the presumed lease); without it, a counterexample.
//! - [`RESENT_AND_RELEASED`] (`sometimes`): a re-sent release was reported
//!   clean: the bounds reach the case the fix is about.

use std::fmt;

use redlock_runtime::test_util::twin::LockNode;
use stateright::{Model, Property};

/// [`Property`] names.
pub const NO_FALSE_LOSS: &str = "a release that deleted its own lock is not reported as a loss";
/// See the module docs.
pub const NO_FALSE_RELEASE: &str = "a release reported clean went out while the lock was its own";
/// See the module docs.
pub const RESENT_AND_RELEASED: &str = "a re-sent release was reported clean";

/// A mechanism turned off, to show its property fails without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Broken {
    /// "Not the owner" is a loss, re-sent or not: the runtime before the
    /// fix of issue "last reply".
    ResentNotOwnerIsLoss,
}

/// The model's bounds and the deployment's settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The lease, in ticks.
    pub ttl: u8,
    /// What the holder takes off the ttl for its clock's drift.
    pub margin: u8,
    /// How many ticks slow the holder's clock may run over the lease.
    pub drift: u8,
    /// The clock stops here.
    pub max_time: u8,
    /// Requests and answers the network may lose.
    pub losses: u8,
    /// How many times the holder sends its release again.
    pub resends: u8,
    /// A mechanism turned off.
    pub broken: Option<Broken>,
}

impl Default for Config {
    /// A ttl of 3 ticks, a margin of 1 for a drift of 1, 6 ticks, two
    /// losses and two re-sends.
    fn default() -> Self {
        Self {
            ttl: 3,
            margin: 1,
            drift: 1,
            max_time: 6,
            losses: 2,
            resends: 2,
            broken: None,
        }
    }
}

/// The owner token of the holder whose release is modelled.
const HOLDER: &str = "holder";
/// The owner token of another client, which takes the lock once it is
/// free.
const OTHER: &str = "other";

/// What the holder reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Report {
    /// Released: the lease held until the release went out.
    Released,
    /// Lost: the lease did not hold throughout.
    Lost,
    /// The release failed (no re-send left): neither.
    Failed,
}

/// Where the holder's release is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Working under the lease; it presumes it held before `until`.
    Holding {
        /// The tick its presumed lease ends.
        until: u8,
    },
    /// The release went out.
    Releasing {
        /// The lease was presumed held when it went out.
        presumed: bool,
        /// The node held the holder's lock when it went out (ghost).
        held: bool,
        /// A send of it was sent again after a loss.
        resent: bool,
        /// Where the current send is.
        send: Sent,
    },
    /// The holder reported.
    Done(Report),
}

/// Where one send of the release is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sent {
    /// The request is on its way.
    Request,
    /// The node answered: `true` when it deleted the holder's lock.
    Answer(bool),
    /// The request or the answer was lost: the outcome is unknown.
    Unknown,
}

/// The whole system.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    now: u8,
    /// The node: the lock, its owner and when it expires.
    node: LockNode,
    phase: Phase,
    lost: u8,
    resends: u8,
    /// A request of the release deleted the holder's lock (ghost).
    deleted_own: bool,
    /// Ghost flags set by the report.
    false_loss: bool,
    false_release: bool,
    resent_and_released: bool,
}

/// A step of the system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock moves one tick.
    Tick,
    /// The holder sends its release.
    Release,
    /// The request reaches the node, which deletes the lock if it is the
    /// holder's.
    DeliverRequest,
    /// The answer reaches the holder, which reports.
    DeliverAnswer,
    /// The request or the answer is lost.
    Lose,
    /// The holder sends the release again.
    Resend,
    /// The holder's re-sends ran out: it reports a failure.
    GiveUp,
    /// Another client takes the free lock.
    OtherAcquires,
}

/// The model: a [`Config`].
#[derive(Debug, Clone)]
pub struct ReleaseModel(pub Config);

impl ReleaseModel {
    /// What the runtime reports for an answer (`HeldLock::end_as`).
    fn report(&self, deleted: bool, resent: bool, presumed: bool) -> Report {
        if deleted {
            return Report::Released;
        }
        let fixed = self.0.broken != Some(Broken::ResentNotOwnerIsLoss);
        if fixed && resent && presumed {
            Report::Released
        } else {
            Report::Lost
        }
    }
}

impl Model for ReleaseModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let c = &self.0;
        (0..=c.drift)
            .map(|lag| State {
                now: 1,
                node: {
                    let mut node = LockNode::new();
                    node.acquire(HOLDER, c.ttl, 1);
                    node
                },
                phase: Phase::Holding {
                    until: crate::presumed_until(1, c.ttl, c.margin, lag),
                },
                lost: 0,
                resends: 0,
                deleted_own: false,
                false_loss: false,
                false_release: false,
                resent_and_released: false,
            })
            .collect()
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        let c = &self.0;
        if state.now < c.max_time {
            actions.push(Action::Tick);
        }
        if state.node.holder(state.now).is_none() {
            actions.push(Action::OtherAcquires);
        }
        match state.phase {
            Phase::Holding { .. } => actions.push(Action::Release),
            Phase::Releasing { send, .. } => match send {
                Sent::Request => actions.push(Action::DeliverRequest),
                Sent::Answer(_) => actions.push(Action::DeliverAnswer),
                Sent::Unknown if state.resends < c.resends => actions.push(Action::Resend),
                Sent::Unknown => actions.push(Action::GiveUp),
            },
            Phase::Done(_) => {}
        }
        let in_flight = matches!(
            state.phase,
            Phase::Releasing {
                send: Sent::Request | Sent::Answer(_),
                ..
            }
        );
        if in_flight && state.lost < c.losses {
            actions.push(Action::Lose);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        let now = s.now;
        let own = s.node.holder(now) == Some(HOLDER);
        match (action, s.phase) {
            (Action::Tick, _) => s.now += 1,
            (Action::OtherAcquires, _) => {
                s.node.acquire(OTHER, self.0.ttl, now)?;
            }
            (Action::Release, Phase::Holding { until }) => {
                s.phase = Phase::Releasing {
                    presumed: now < until,
                    held: own,
                    resent: false,
                    send: Sent::Request,
                };
            }
            (
                Action::DeliverRequest,
                Phase::Releasing {
                    presumed,
                    held,
                    resent,
                    ..
                },
            ) => {
                // The compare-and-delete: whether it deleted the holder's
                // live lock.
                let deleted = s.node.release(HOLDER, now);
                s.deleted_own |= deleted;
                s.phase = Phase::Releasing {
                    presumed,
                    held,
                    resent,
                    send: Sent::Answer(deleted),
                };
            }
            (
                Action::DeliverAnswer,
                Phase::Releasing {
                    presumed,
                    held,
                    resent,
                    send: Sent::Answer(deleted),
                },
            ) => {
                let report = self.report(deleted, resent, presumed);
                s.false_loss = report == Report::Lost && presumed && s.deleted_own;
                s.false_release = report == Report::Released && !held;
                s.resent_and_released = report == Report::Released && resent;
                s.phase = Phase::Done(report);
            }
            (
                Action::Lose,
                Phase::Releasing {
                    presumed,
                    held,
                    resent,
                    ..
                },
            ) => {
                s.lost += 1;
                s.phase = Phase::Releasing {
                    presumed,
                    held,
                    resent,
                    send: Sent::Unknown,
                };
            }
            (Action::Resend, Phase::Releasing { presumed, held, .. }) => {
                s.resends += 1;
                s.phase = Phase::Releasing {
                    presumed,
                    held,
                    resent: true,
                    send: Sent::Request,
                };
            }
            (Action::GiveUp, Phase::Releasing { .. }) => s.phase = Phase::Done(Report::Failed),
            _ => return None,
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(NO_FALSE_LOSS, |_, s: &State| !s.false_loss),
            Property::always(NO_FALSE_RELEASE, |_, s: &State| !s.false_release),
            Property::sometimes(RESENT_AND_RELEASED, |_, s: &State| s.resent_and_released),
        ]
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ttl {}, margin {}, drift {}, {} ticks, {} lost messages, {} re-sends, broken {:?}",
            self.ttl,
            self.margin,
            self.drift,
            self.max_time,
            self.losses,
            self.resends,
            self.broken
        )
    }
}

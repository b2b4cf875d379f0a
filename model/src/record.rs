//! An idempotency record's lifecycle on one Redis, as the records' scripts
//! run it (`primitive/record/claim.lua`, `renew.lua`, `complete.lua`,
//! `release.lua`) under the axum layer and `redlock_runtime::records`. The
//! node is a [`RecordNode`]: the in-memory twin's steps, which the
//! differential suite checks against the scripts.
//!
//! # What is modelled
//! - **The record**: absent, in progress (its owner, the lease's end, its
//!   fencing token) or completed. A claim of an absent record, or of one
//!   whose lease ended (a crashed worker's), makes it in progress with a
//!   new fencing token (`max(counter + 1, clock)`, the twin's rule); a claim of a record in
//!   progress is answered "processing" (`409`), of a completed one with
//!   its result (the replay). Completing and releasing check the owner;
//!   completing keeps the record for its retention (longer than the
//!   model's clock).
//! - **Workers** claim, run the handler while they believe their lease
//!   holds (judged by a clock that may run slow by up to
//!   [`Config::drift`] ticks, less [`Config::margin`]), renew it (the
//!   watchdog), then complete, release (a failed handler), or crash
//!   (the lease runs out by itself).
//!
//! # Properties
//! - [`ONE_HANDLER`] (property (f) of issue 35): no two workers believe at
//!   once that they run the handler of the key; needs the drift within
//!   the margin.
//! - [`COMPLETED_STAYS`] (d): once completed, a record is never claimed
//!   again (within its retention): a duplicate is replayed, never run.
//! - [`NEW_TOKEN`] (d): every claim, a takeover included, gets a fencing
//!   token larger than every one before.
//!
//! [`Config::broken`] turns one mechanism off at a time; the tests
//! (`tests/record.rs`) check that each then has a counterexample.

use std::fmt;

use redlock_runtime::test_util::twin::{RecordClaim, RecordNode, RecordState};
use stateright::{Model, Property};

/// [`Property`] names.
pub const ONE_HANDLER: &str = "no two workers run the handler of one key at once";
/// See the module docs.
pub const COMPLETED_STAYS: &str = "a completed record is never claimed again";
/// See the module docs.
pub const NEW_TOKEN: &str = "every claim gets a fencing token larger than those before";
/// A `sometimes` property: the bounds reach a takeover of a crashed
/// worker's record (the checks are not vacuous).
pub const TAKEN_OVER: &str = "a crashed worker's record was taken over";

/// One mechanism turned off, to show its property fails without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Broken {
    /// Completing keeps the lease's expiry instead of the retention: the
    /// completed record vanishes when the lease would have ended (a
    /// completion sent with the lease's remaining time as its retention).
    CompleteKeepsLease,
    /// A takeover keeps the crashed worker's fencing token (the token the
    /// twin issues is replaced by the last one issued).
    TakeoverKeepsToken,
}

/// The model's bounds and the deployment's settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Workers handling the one key (a duplicate delivery each).
    pub workers: u8,
    /// Claims each worker may make.
    pub claims: u8,
    /// The lease, in ticks.
    pub ttl: u8,
    /// What a worker takes off the ttl for its clock's drift.
    pub margin: u8,
    /// How many ticks slow a worker's clock may run over one lease.
    pub drift: u8,
    /// The clock stops here.
    pub max_time: u8,
    /// A mechanism turned off.
    pub broken: Option<Broken>,
}

impl Default for Config {
    /// Three workers, two claims each, a ttl of 3 ticks, a margin of 1 for
    /// a drift of 1, 10 ticks.
    fn default() -> Self {
        Self {
            workers: 3,
            claims: 2,
            ttl: 3,
            margin: 1,
            drift: 1,
            max_time: 10,
            broken: None,
        }
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} workers x {} claims, ttl {}, margin {}, drift {}, {} ticks, broken {:?}",
            self.workers,
            self.claims,
            self.ttl,
            self.margin,
            self.drift,
            self.max_time,
            self.broken
        )
    }
}

/// What a worker is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Worker {
    /// Not running the handler.
    Idle,
    /// Running it under its claim, believing its lease holds before
    /// `until`.
    Running {
        /// Its claim, among the worker's.
        claim: u8,
        /// It believes the lease holds before this tick.
        until: u8,
    },
}

/// The whole system.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    now: u8,
    /// The node's record and its fencing counter.
    record: RecordNode,
    workers: Vec<(Worker, u8)>,
    /// Ghosts: the largest token issued, whether the record completed, and
    /// the flags a property-breaking step sets.
    issued: u64,
    completed: bool,
    claimed_after_completion: bool,
    token_reused: bool,
    taken_over: bool,
}

/// A step of the system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock moves one tick.
    Tick,
    /// A worker claims the record, its clock running `lag` ticks slow over
    /// the lease if it gets it.
    Claim {
        /// The worker.
        worker: u8,
        /// How slow its clock runs.
        lag: u8,
    },
    /// A running worker renews its lease (the watchdog).
    Renew {
        /// The worker.
        worker: u8,
        /// How slow its clock runs over the renewed lease.
        lag: u8,
    },
    /// A running worker's handler succeeded: it completes the record.
    Complete(u8),
    /// A running worker's handler failed: it releases the record.
    Release(u8),
    /// A running worker crashes.
    Crash(u8),
}

/// The owner token of a worker's claim, as the node stores it.
fn owner(worker: u8, claim: u8) -> String {
    format!("w{worker}.{claim}")
}

/// The tick a completed record's retention ends: after the model's clock
/// stops. A completion keeps the record until this one tick whenever it
/// runs (its retention is the time left to it), so completions at two
/// ticks leave the same state, as the old restated record's "completed"
/// did; a retention counted from each completion would multiply the
/// states tenfold.
const RETAINED_UNTIL: u8 = u8::MAX;

/// The model: a [`Config`].
#[derive(Debug, Clone)]
pub struct RecordModel(pub Config);

impl RecordModel {
    fn until(&self, now: u8, lag: u8) -> u8 {
        crate::presumed_until(now, self.0.ttl, self.0.margin, lag)
    }
}

impl Model for RecordModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 1,
            record: RecordNode::new(),
            workers: vec![(Worker::Idle, 0); usize::from(self.0.workers)],
            issued: 0,
            completed: false,
            claimed_after_completion: false,
            token_reused: false,
            taken_over: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.now < self.0.max_time {
            actions.push(Action::Tick);
        }
        for (i, &(worker, claims)) in state.workers.iter().enumerate() {
            let w = u8::try_from(i).unwrap_or(u8::MAX);
            match worker {
                Worker::Idle if claims < self.0.claims => {
                    for lag in 0..=self.0.drift {
                        actions.push(Action::Claim { worker: w, lag });
                    }
                }
                Worker::Idle => {}
                Worker::Running { until, .. } => {
                    if state.now < until {
                        for lag in 0..=self.0.drift {
                            actions.push(Action::Renew { worker: w, lag });
                        }
                    }
                    actions.push(Action::Complete(w));
                    actions.push(Action::Release(w));
                    actions.push(Action::Crash(w));
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
            Action::Claim { worker, lag } => {
                let claim = s.workers[usize::from(worker)].1;
                s.workers[usize::from(worker)].1 += 1;
                // A record in progress that the claim takes is a crashed
                // worker's whose lease ended: a takeover.
                let takeover = matches!(s.record.stored(), RecordState::InProgress { .. });
                let fence = match s.record.claim(&owner(worker, claim), ttl, now) {
                    RecordClaim::Claimed(_)
                        if takeover && self.0.broken == Some(Broken::TakeoverKeepsToken) =>
                    {
                        s.issued
                    }
                    RecordClaim::Claimed(fence) => fence,
                    // Answered "processing", or replayed: not run.
                    _ => return Some(s),
                };
                if fence <= s.issued {
                    s.token_reused = true;
                }
                s.issued = s.issued.max(fence);
                if s.completed {
                    s.claimed_after_completion = true;
                }
                s.taken_over |= takeover;
                s.workers[usize::from(worker)].0 = Worker::Running {
                    claim,
                    until: self.until(now, lag),
                };
            }
            Action::Renew { worker, lag } => {
                let Worker::Running { claim, .. } = s.workers[usize::from(worker)].0 else {
                    return None;
                };
                s.workers[usize::from(worker)].0 =
                    if s.record.renew(&owner(worker, claim), ttl, now) {
                        Worker::Running {
                            claim,
                            until: self.until(now, lag),
                        }
                    } else {
                        // Lost: the handler is told (and stops).
                        Worker::Idle
                    };
            }
            Action::Complete(worker) => {
                let Worker::Running { claim, .. } = s.workers[usize::from(worker)].0 else {
                    return None;
                };
                let retention = match (self.0.broken, s.record.stored()) {
                    (Some(Broken::CompleteKeepsLease), RecordState::InProgress { ends, .. }) => {
                        u8::try_from(ends.saturating_sub(u64::from(now))).unwrap_or(0)
                    }
                    _ => RETAINED_UNTIL - now,
                };
                if s.record.complete(&owner(worker, claim), retention, now) {
                    s.completed = true;
                }
                s.workers[usize::from(worker)].0 = Worker::Idle;
            }
            Action::Release(worker) => {
                let Worker::Running { claim, .. } = s.workers[usize::from(worker)].0 else {
                    return None;
                };
                s.record.release(&owner(worker, claim), now);
                s.workers[usize::from(worker)].0 = Worker::Idle;
            }
            Action::Crash(worker) => s.workers[usize::from(worker)].0 = Worker::Idle,
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(ONE_HANDLER, |_, s: &State| {
                s.workers
                    .iter()
                    .filter(|(w, _)| matches!(w, Worker::Running { until, .. } if s.now < *until))
                    .count()
                    <= 1
            }),
            Property::always(COMPLETED_STAYS, |_, s: &State| !s.claimed_after_completion),
            Property::always(NEW_TOKEN, |_, s: &State| !s.token_reused),
            Property::sometimes(TAKEN_OVER, |_, s: &State| s.taken_over),
        ]
    }
}

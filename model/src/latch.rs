//! A countdown latch on one Redis, as its scripts run it
//! (`primitive/latch/set.lua`, `count_down.lua`) under
//! `redlock_runtime::Latch`.
//!
//! # What is modelled
//! - **The node** is a [`LatchNode`], the in-memory twin's steps: it keeps
//!   the latch (absent, or its count) and the request ids of the
//!   count-downs done. A set-up sets the count only if the
//!   latch is absent (a second set-up, from another process, changes
//!   nothing); a count-down on an absent latch counts nothing and says
//!   so; otherwise it counts once per request id, and never below zero.
//! - **Workers** each count down once, under one request id
//!   (`Latch::count_down` makes one per call, `count_down_with_id` takes
//!   the caller's: a job retried by its queue). A count-down's answer may
//!   be lost, and the worker sends it again with the same id, up to
//!   [`Config::sends`] times in all (the runtime sends up to three);
//!   one that found the latch absent may be sent again later.
//! - **Two set-ups** of the count to the number of workers (two
//!   processes that each set the latch up), at any point.
//! - **Not modelled**: the latch's ttl (longer than the run here; once it
//!   ends the latch is absent again, and a count-down says so).
//!
//! # Properties
//! - [`OPENS_AFTER_ALL`]: the latch reaches zero only once every worker
//!   counted down; needs the request ids (without them, a count-down sent
//!   again after its answer was lost counts twice, and the latch opens
//!   early).
//! - [`OPENED`] (`sometimes`): the latch opens, after a count-down was
//!   sent twice, so the checks are not vacuous.
//!
//! [`Config::broken`] turns the ids off (each send of a count-down goes
//! with an id of its own, which is what a latch without ids amounts to);
//! the tests (`tests/latch.rs`)
//! check that it then has a counterexample.

use std::fmt;

use redlock_runtime::test_util::twin::LatchNode;
use stateright::{Model, Property};

/// The tick every step runs at, and the latch's ttl in ticks: the latch's
/// ttl is not modelled (longer than the run).
const NOW: u8 = 0;
const TTL: u8 = u8::MAX;

/// See the module docs.
pub const OPENS_AFTER_ALL: &str = "the latch opens only once every worker counted down";
/// See the module docs.
pub const OPENED: &str = "the latch opened after a count-down was sent twice";

/// One mechanism turned off, to show its property fails without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Broken {
    /// A count-down keeps no request ids: every one that arrives counts.
    NoIds,
}

/// The model's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Workers, each counting down once: the count set up.
    pub workers: u8,
    /// How many times a worker may send its count-down.
    pub sends: u8,
    /// A mechanism turned off.
    pub broken: Option<Broken>,
}

impl Default for Config {
    /// Three workers, each sending its count-down up to three times.
    fn default() -> Self {
        Self {
            workers: 3,
            sends: 3,
            broken: None,
        }
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} workers, up to {} sends each, broken {:?}",
            self.workers, self.sends, self.broken
        )
    }
}

/// The whole system.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    /// The node: the latch's count, `None` while it is not set up, and
    /// the request ids counted.
    latch: LatchNode,
    /// The set-ups done (of two).
    setups: u8,
    /// Each worker's sends so far, and whether it has its answer.
    workers: Vec<(u8, bool)>,
    /// Ghosts: the workers whose count-down reached a set-up latch (a bit
    /// each), and whether one was sent twice.
    arrived: u8,
    resent: bool,
}

/// A step of the system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// A process sets the latch up.
    SetUp,
    /// A worker's count-down runs on the node; its answer is lost or not.
    CountDown {
        /// The worker.
        worker: u8,
        /// The answer is lost: the worker will send it again.
        lost: bool,
    },
}

/// The model: a [`Config`].
#[derive(Debug, Clone)]
pub struct LatchModel(pub Config);

impl Model for LatchModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            latch: LatchNode::new(),
            setups: 0,
            workers: vec![(0, false); usize::from(self.0.workers)],
            arrived: 0,
            resent: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.setups < 2 {
            actions.push(Action::SetUp);
        }
        for (i, &(sends, answered)) in state.workers.iter().enumerate() {
            if !answered && sends < self.0.sends {
                let worker = u8::try_from(i).unwrap_or(u8::MAX);
                actions.push(Action::CountDown {
                    worker,
                    lost: false,
                });
                actions.push(Action::CountDown { worker, lost: true });
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::SetUp => {
                s.setups += 1;
                s.latch.set(u64::from(self.0.workers), TTL, NOW);
            }
            Action::CountDown { worker, lost } => {
                let bit = 1u8 << worker;
                let (sends, _) = s.workers[usize::from(worker)];
                s.resent |= sends > 0;
                let id = match self.0.broken {
                    Some(Broken::NoIds) => format!("w{worker}.{sends}"),
                    None => format!("w{worker}"),
                };
                let counted = s.latch.count_down(&id, NOW);
                // A count-down that found the latch absent is answered so,
                // and sent again later: as if its answer were lost.
                let answered = !lost && counted.is_some();
                s.workers[usize::from(worker)] = (sends + 1, answered);
                if counted.is_some() {
                    s.arrived |= bit;
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(OPENS_AFTER_ALL, |model: &LatchModel, s: &State| {
                let all = u8::try_from((1u16 << model.0.workers) - 1).unwrap_or(u8::MAX);
                s.latch.count() != Some(0) || s.arrived == all
            }),
            Property::sometimes(OPENED, |_, s: &State| {
                s.latch.count() == Some(0) && s.resent
            }),
        ]
    }
}

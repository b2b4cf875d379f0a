//! The Redlock model's node: its state for one lock's keys, with the steps
//! of `shared/fence.lua` restated over the model's clock (until that model
//! runs on the twin's `LockNode` too).

use crate::{CLOCK_STEP, Token};

/// A Redis node's state for the lock's keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Node {
    /// The lock's value and when it expires.
    pub(crate) lock: Option<(Token, u8)>,
    /// The fencing counter.
    pub(crate) counter: u64,
    /// Answers (grants) nothing before this tick: a restart delay.
    pub(crate) down_until: u8,
}

impl Node {
    pub(crate) fn empty() -> Self {
        Self {
            lock: None,
            counter: 0,
            down_until: 0,
        }
    }

    /// The holder's token at `now`, if the lock has not expired.
    pub(crate) fn holder(&self, now: u8) -> Option<Token> {
        self.lock
            .filter(|&(_, expires)| expires > now)
            .map(|(t, _)| t)
    }

    /// Issues the next fencing token at `now`: `max(counter + 1, clock)`,
    /// or the counter + 1 alone without the clock floor (a broken
    /// variant), and stores it in the counter.
    pub(crate) fn next_fence(&mut self, now: u8, clock_floor: bool) -> u64 {
        let counted = self.counter + 1;
        self.counter = if clock_floor {
            counted.max(u64::from(now) * CLOCK_STEP)
        } else {
            counted
        };
        self.counter
    }
}

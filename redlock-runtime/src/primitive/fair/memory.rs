//! Fair mode's line of waiters in the memory twin.

use std::collections::{HashMap, VecDeque};

use tokio::time::Instant;

/// A fair lock's line of waiters.
#[derive(Debug, Default)]
pub(crate) struct Line {
    /// The waiters' tokens in arrival order.
    pub(crate) order: VecDeque<String>,
    /// Each waiter's presence deadline.
    pub(crate) presence: HashMap<String, Instant>,
}

impl Line {
    /// Drops dead waiters from the head; the first live one.
    pub(crate) fn head(&mut self, now: Instant) -> Option<&str> {
        while let Some(head) = self.order.front() {
            if self.presence.get(head).is_some_and(|&until| until > now) {
                break;
            }
            if let Some(dead) = self.order.pop_front() {
                self.presence.remove(&dead);
            }
        }
        self.order.front().map(String::as_str)
    }
}

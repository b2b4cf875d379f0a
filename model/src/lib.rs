//! [`stateright`] models of redlock's protocols, checked exhaustively
//! within small bounds: [`lock`], a lock on one Redis with an optional
//! replica (mutual exclusion, fencing, owner checks); [`redlock`], the
//! same lock over a majority of independent masters; [`fair`], a fair
//! lock's line (no overtaking, a bounded wait); [`release`], the end
//! of a lease when answers are lost (what the release reports);
//! [`record`], an idempotency record's lifecycle (one handler at a time, a
//! completed record stays completed, a takeover gets a new fencing
//! token); [`rw`], a read/write lock (a writer holds alone, a downgrade
//! included); [`semaphore`], a leased semaphore (the permits believed held
//! stay within its limit); and [`latch`], a countdown latch (it opens only
//! once every worker counted down, count-downs sent again or not).
//!
//! What a node does is what the scripts do: in every model a node is the
//! in-memory twin itself (`redlock_runtime::test_util::twin`: the memory
//! store's step functions over a discrete clock), which the differential
//! suite (`redlock-runtime/tests/differential.rs`) checks against the
//! scripts step by step: what is checked is the code that runs. Bringing
//! the last three models onto the twin found two places where the memory
//! store was not the scripts' twin, both fixed in the runtime (issue 35):
//! a fair release deleted the lock and woke the first waiter, where
//! `fair/release.lua` hands the lock to it ([`fair`]); and the memory
//! store's renewals did not follow the scripts' rule that a watchdog
//! renewal never shortens a lease while a manual extend sets it
//! ([`extend`]; a permit's or a reader's manual extend kept a longer
//! lease).
//! Each model has a `Broken` choice that turns one
//! safety mechanism off; the tests (`tests/`) check that each then has a
//! counterexample, so the checker is shown to bite.
//!
//! ```
//! use redlock_model::lock::{Config, LockModel, OWN_KEY_ONLY};
//! use stateright::{Checker, Model};
//!
//! // Every state of two clients over four ticks.
//! let small = Config { max_time: 4, ..Config::default() };
//! let checker = LockModel(small).checker().spawn_bfs().join();
//! checker.assert_no_discovery(OWN_KEY_ONLY);
//! ```

use std::io::Write;

pub mod extend;
pub mod fair;
pub mod latch;
pub mod lock;
pub mod record;
pub mod redlock;
pub mod release;
pub mod rw;
pub mod semaphore;

/// The owner token of one acquire: the client and its attempt. A node
/// stores it as its text, `c<client>.<attempt>` ([`Token::text`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token {
    pub(crate) client: u8,
    pub(crate) attempt: u8,
}

impl Token {
    /// The owner token a node stores, written on the stack (a node's
    /// step takes it at every state the checker reaches).
    pub fn text(self) -> TokenText {
        let mut text = TokenText {
            bytes: [0; TokenText::CAPACITY],
            len: 0,
        };
        let mut rest = &mut text.bytes[..];
        // "c255.255" at most: it fits.
        let written = write!(rest, "c{}.{}", self.client, self.attempt);
        debug_assert!(written.is_ok(), "a token's text fits in its buffer");
        text.len = TokenText::CAPACITY - rest.len();
        text
    }
}

/// A token's text, `c<client>.<attempt>` ([`Token::text`]).
#[derive(Debug, Clone, Copy)]
pub struct TokenText {
    bytes: [u8; Self::CAPACITY],
    len: usize,
}

impl TokenText {
    const CAPACITY: usize = 8;
}

impl std::ops::Deref for TokenText {
    type Target = str;

    fn deref(&self) -> &str {
        // ASCII digits, `c` and `.` only.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

/// The tick before which a client presumes a lease granted at `granted`
/// held: `granted + ttl - margin`, as the runtime takes the drift margin
/// off the ttl, plus `lag`, how slow the client's clock runs over the
/// lease. Every model's drift assumption is this one line: the lease is
/// safe while `lag <= margin`.
pub(crate) fn presumed_until(granted: u8, ttl: u8, margin: u8, lag: u8) -> u8 {
    (granted + ttl + lag).saturating_sub(margin)
}

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
//! What a node does is what the scripts do, restated over a discrete
//! clock; the differential suite (`redlock-runtime/tests/differential.rs`)
//! checks the scripts against the in-memory twin step by step. (Once the
//! twins are pure step functions, the models call them instead of
//! restating them.) Each model has a `Broken` choice that turns one
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

pub mod extend;
pub mod fair;
pub mod latch;
pub mod lock;
mod node;
pub mod record;
pub mod redlock;
pub mod release;
pub mod rw;
pub mod semaphore;

/// The fencing clock's units per tick (the model's microseconds): more
/// than the tokens any bound here issues in one tick. A fencing token is
/// `max(counter + 1, clock)`, the clock floor of `shared/fence.lua`.
pub const CLOCK_STEP: u64 = 10;

/// The tick before which a client presumes a lease granted at `granted`
/// held: `granted + ttl - margin`, as the runtime takes the drift margin
/// off the ttl, plus `lag`, how slow the client's clock runs over the
/// lease. Every model's drift assumption is this one line: the lease is
/// safe while `lag <= margin`.
pub(crate) fn presumed_until(granted: u8, ttl: u8, margin: u8, lag: u8) -> u8 {
    (granted + ttl + lag).saturating_sub(margin)
}

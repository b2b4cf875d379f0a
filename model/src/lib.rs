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
//! What a node does is what the scripts do. In [`lock`], [`release`],
//! [`record`], [`rw`], [`semaphore`] and [`latch`] a node is
//! the in-memory twin itself (`redlock_runtime::test_util::twin`: the
//! memory store's step functions over a discrete clock), which the
//! differential suite (`redlock-runtime/tests/differential.rs`) checks
//! against the scripts step by step: what is checked is the code that
//! runs. Three models still restate their node: [`redlock`], whose three
//! twin nodes per state cost the checker about seven times the restated
//! ones' time at its bounds (over eight minutes on 2 cores, against CI's
//! three for the whole crate; its façade is ready,
//! `LockNode::with_clock_ahead` for the skew); [`fair`]
//! models `fair/release.lua`'s hand-over (the lock granted to the first
//! waiter), which the memory store does not do (it wakes that waiter,
//! whose next ask takes the lock); [`extend`] models the renewal that
//! keeps a longer lease (`extend.lua`'s flag) and the conditional `SET`
//! without a script, neither of which has a twin step.
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

/// The fencing clock's units per tick (the model's microseconds) in the
/// model that restates its node ([`redlock`]): more than the tokens any
/// bound here issues in one tick. A fencing token is
/// `max(counter + 1, clock)`, the clock floor of `shared/fence.lua`. (The
/// twin's nodes count `CLOCK_PER_TICK` of `test_util::twin`.)
pub const CLOCK_STEP: u64 = 10;

/// The owner token of one acquire: the client and its attempt. A node
/// stores it as its text, `c<client>.<attempt>` ([`Token::text`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token {
    pub(crate) client: u8,
    pub(crate) attempt: u8,
}

impl Token {
    /// The owner token a node stores.
    pub fn text(self) -> String {
        format!("c{}.{}", self.client, self.attempt)
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

//! Hooks for tests and benchmarks (the `test-util` feature): what a suite
//! that looks at Redis's keys, or a benchmark that measures a script on its
//! own, needs and a service never should. Not covered by semver: anything
//! here may change in any release. Never enable the feature in a service:
//! [`owner_token`] hands out the secret that releases a lock.

use crate::{LockClient, LockError};

pub mod twin;

/// The owner token of `guard`: the random secret that marks its owner in
/// Redis (for tests that look at the keys; never log it).
pub fn owner_token(guard: &crate::LockGuard) -> &str {
    guard.held().token()
}

/// Sends a permit's release twice, as a release re-sent after a lost
/// answer would be (for the tests that a second release changes nothing):
/// whether each found the permit. The permit is gone after it.
///
/// # Errors
/// A Redis failure of either release.
pub async fn release_twice(permit: crate::Permit) -> Result<(bool, bool), LockError> {
    let mut guard = permit.into_guard();
    let key = guard.key().to_owned();
    guard
        .finish_with(|core, held| async move {
            let limit = core.settings().command_timeout;
            let first = held.end(core.backend(), limit).await?;
            let second = held.end(core.backend(), limit).await?;
            Ok((first, second))
        })
        .await
        .map_err(|e| e.into_lock_error(&key, crate::Operation::Release))
}

/// How many renewal round trips `client`'s watchdog has sent so far: all
/// locks due together are renewed in one (for tests and benchmarks).
pub fn renewal_round_trips(client: &LockClient) -> u64 {
    client.core().watchdog().round_trips()
}

/// Redis Cluster: the watchdog's renewal pipelines sent to each node so
/// far, by node name (`redis://host:port`); empty on other stores.
pub fn renewal_pipelines_per_node(client: &LockClient) -> Vec<(String, u64)> {
    client.core().backend().renewal_pipelines()
}

/// One Redis (or Sentinel's primary): the batches of coalesced lock calls
/// sent so far, and the calls they carried (calls sent alone not counted;
/// for tests and benchmarks). `(0, 0)` on other stores.
pub fn coalesced_batches(client: &LockClient) -> (u64, u64) {
    client.core().backend().coalesced_batches()
}

/// The Lua function `next_fence(key, retention_ms, time_reply)` that issues
/// fencing tokens (at least Redis's clock in microseconds, and at least the
/// counter + 1): for lockbench's candidate scripts, so that the tokens they
/// issue follow the same rule as the locks'.
pub const NEXT_FENCE_LUA: &str = crate::scripts::FENCE_LUA;

/// The text of the lock's release script as one Redis receives it (for
/// lockbench, which measures it against the bare compare-and-delete).
pub fn release_lua() -> String {
    crate::primitive::lock::RELEASE.text(crate::scripts::Publish::Plain)
}

/// The text of the fenced acquire script (`.fenced()`'s one-lock acquire)
/// as one Redis receives it (for lockbench's acquire candidates).
pub fn acquire_lua() -> String {
    crate::primitive::lock::ACQUIRE.text(crate::scripts::Publish::Plain)
}

/// The text of the script that issues a plain lock's fencing token on
/// first ask, as one Redis receives it (for lockbench's acquire
/// candidates).
pub fn issue_fence_lua() -> String {
    crate::primitive::lock::ISSUE_FENCE.text(crate::scripts::Publish::Plain)
}

/// The texts of an idempotency record's claim and completion scripts, as
/// one Redis receives them (for idempotent_bench's raw baseline: the same
/// two scripts without the client around them).
pub fn record_lua() -> (String, String) {
    use crate::primitive::record::{RECORD_CLAIM, RECORD_COMPLETE};
    (
        RECORD_CLAIM.text(crate::scripts::Publish::Plain),
        RECORD_COMPLETE.text(crate::scripts::Publish::Plain),
    )
}

/// The text of the script a fair waiter that gives up runs (its
/// give-back), as one Redis receives it (for the test that runs it after
/// a release granted that waiter the lock).
pub fn fair_leave_lua() -> String {
    crate::primitive::fair::FAIR_LEAVE.text(crate::scripts::Publish::Plain)
}

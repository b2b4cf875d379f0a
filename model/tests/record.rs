//! The idempotency record's model checked within its bounds: its
//! properties hold with the drift within the margin, and each fails with
//! its mechanism removed (the checker bites). Every run prints its
//! explored state counts and time.
//!
//! `REDLOCK_MODEL_TICKS=<n>` runs every check with a longer clock (default
//! 8 ticks, a ttl of 3; three workers); `REDLOCK_MODEL_ACQUIRES=<n>` with
//! more claims per worker (default 2). The node is the in-memory twin's
//! (`RecordNode`), whose states cost more to copy than the old restated
//! record's: 8 ticks check in about 8 s on 2 cores, 10 ticks (the bound
//! before the twin) in about 25 s; both find every counterexample below.

mod support;

use redlock_model::record::{
    Broken, COMPLETED_STAYS, Config, NEW_TOKEN, ONE_HANDLER, RecordModel, TAKEN_OVER,
};
use support::bound;

/// The bounds, deepened by the environment.
fn config() -> Config {
    Config {
        max_time: bound("REDLOCK_MODEL_TICKS", 8),
        claims: bound("REDLOCK_MODEL_ACQUIRES", 2),
        ..Config::default()
    }
}

/// Checks `config`: the properties in `fail` have a counterexample, the
/// others hold.
fn check(what: &str, config: Config, fail: &[&'static str]) {
    support::check(
        what,
        RecordModel(config),
        config,
        &[ONE_HANDLER, COMPLETED_STAYS, NEW_TOKEN],
        fail,
        &[TAKEN_OVER],
    );
}

#[test]
fn with_the_drift_within_the_margin_every_record_property_holds() {
    check("records", config(), &[]);
}

/// A clock that drifts more than the margin: a crashed-looking worker
/// still runs its handler when another takes the record over.
#[test]
fn drift_beyond_the_margin_runs_two_handlers_at_once() {
    check(
        "records, drift 1, margin 0",
        Config {
            margin: 0,
            ..config()
        },
        &[ONE_HANDLER],
    );
}

/// A completion that keeps the lease's expiry: the record vanishes and a
/// duplicate runs the work again.
#[test]
fn a_completion_without_the_retention_lets_a_duplicate_run_again() {
    check(
        "records, completion keeps the lease",
        Config {
            broken: Some(Broken::CompleteKeepsLease),
            ..config()
        },
        &[COMPLETED_STAYS],
    );
}

/// A takeover that keeps the crashed worker's token: two holders of the
/// record share a fencing token.
#[test]
fn a_takeover_that_keeps_the_token_reuses_it() {
    check(
        "records, a takeover keeps the token",
        Config {
            broken: Some(Broken::TakeoverKeepsToken),
            ..config()
        },
        &[NEW_TOKEN],
    );
}

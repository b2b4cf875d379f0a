//! The leased semaphore's model checked within its bounds: the permits
//! believed held stay within the limit with the drift within the margin,
//! and not without the renewal's check that the lease has not run out, or
//! with a drift beyond the margin (the checker bites). Every run prints
//! its explored state counts and time.
//!
//! `REDLOCK_MODEL_TICKS=<n>` runs every check with a longer clock (default
//! 7 ticks, a ttl of 3; three clients); `REDLOCK_MODEL_ACQUIRES=<n>` with
//! more acquires per client (default 2). The node is the in-memory twin's
//! (`SemaphoreNode`): 7 ticks check in about 6 s on 2 cores, 8 (the bound
//! before the twin) in about 14 s; both find every counterexample below.

mod support;

use redlock_model::semaphore::{Broken, Config, SemaphoreModel, TAKEN_OVER, WITHIN_LIMIT};
use support::bound;

/// The bounds, deepened by the environment.
fn config() -> Config {
    Config {
        max_time: bound("REDLOCK_MODEL_TICKS", 7),
        acquires: bound("REDLOCK_MODEL_ACQUIRES", 2),
        ..Config::default()
    }
}

/// Checks `config`: the properties in `fail` have a counterexample, the
/// others hold.
fn check(what: &str, config: Config, fail: &[&'static str]) {
    support::check(
        what,
        SemaphoreModel(config),
        config,
        &[WITHIN_LIMIT],
        fail,
        &[TAKEN_OVER],
    );
}

#[test]
fn with_the_drift_within_the_margin_the_permits_stay_within_the_limit() {
    check("semaphore", config(), &[]);
}

/// A renewal that lands after its holder's lease ran out and puts the
/// holder back: the holder believes it holds permits that the node no
/// longer counts, and another client has taken them.
#[test]
fn a_renewal_that_revives_a_lease_that_ran_out_exceeds_the_limit() {
    check(
        "semaphore, a renewal without the expiry check",
        Config {
            broken: Some(Broken::RenewAfterExpiry),
            ..config()
        },
        &[WITHIN_LIMIT],
    );
}

/// A clock that drifts more than the margin: a holder still believes it
/// holds when the node has given its permits to another.
#[test]
fn drift_beyond_the_margin_exceeds_the_limit() {
    check(
        "semaphore, drift 1, margin 0",
        Config {
            margin: 0,
            ..config()
        },
        &[WITHIN_LIMIT],
    );
}

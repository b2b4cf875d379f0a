//! The model checked within its bounds: each property holds under the
//! assumptions the docs state, each fails with its assumption or its
//! mechanism removed (the checker bites), and every run prints its
//! explored state counts and time.
//!
//! The replica's cases lose no message (they explore failovers, and a
//! lost message there multiplies the states without a new interleaving of
//! interest); the others may lose one.
//!
//! `REDLOCK_MODEL_TICKS=<n>` runs every check with a longer clock (default
//! 6 ticks, a ttl of 3); `REDLOCK_MODEL_ACQUIRES=<n>` with more acquires
//! per client (default 2). The nodes are the in-memory twin's
//! (`LockNode`): 6 ticks check in about 40 s on 2 cores, 7 ticks (the
//! bound before the twin) in about 110 s (`REDLOCK_MODEL_TICKS=7`, one
//! check at a time); both find every counterexample below.

mod support;

use redlock_model::lock::{
    Broken, Config, LockModel, MUTUAL_EXCLUSION, OWN_KEY_ONLY, Restart, TOKENS_INCREASE,
    TWO_HOLDERS_WROTE, WRITES_IN_ORDER,
};
use support::bound;

/// The bounds, deepened by the environment.
fn config() -> Config {
    Config {
        max_time: bound("REDLOCK_MODEL_TICKS", 6),
        acquires: bound("REDLOCK_MODEL_ACQUIRES", 2),
        ..Config::default()
    }
}

/// Checks `config`: the properties in `fail` have a counterexample, the
/// others hold.
fn check(what: &str, config: Config, fail: &[&'static str]) {
    support::check(
        what,
        LockModel(config),
        config,
        &[
            MUTUAL_EXCLUSION,
            WRITES_IN_ORDER,
            TOKENS_INCREASE,
            OWN_KEY_ONLY,
        ],
        fail,
        &[TWO_HOLDERS_WROTE],
    );
}

#[test]
fn with_its_assumptions_every_property_holds() {
    check("one Redis", config(), &[]);
    check(
        "one Redis that restarts empty after the restart delay",
        Config {
            restart: Restart::EmptyAfterDelay,
            ..config()
        },
        &[],
    );
    check(
        "one Redis that restarts from its last snapshot after the restart delay",
        Config {
            restart: Restart::SnapshotAfterDelay,
            // One tick less: a snapshot multiplies the states (7 million
            // unique at 6 ticks, a minute).
            max_time: config().max_time - 1,
            ..config()
        },
        &[],
    );
    check(
        "one Redis, a release delivered twice",
        Config {
            duplicates: 1,
            // One tick less: a copy on its way doubles the states (4
            // million unique at 6 ticks, 16 s).
            max_time: config().max_time - 1,
            ..config()
        },
        &[],
    );
    check(
        "a primary and a replica that fails over, WAIT on every write",
        Config {
            replica: Some(true),
            losses: 0,
            ..config()
        },
        &[],
    );
}

/// A clock that drifts more than the margin: two clients believe they
/// hold the lock; fencing still keeps the writes in order.
#[test]
fn drift_beyond_the_margin_breaks_mutual_exclusion_not_fencing() {
    check(
        "drift 1, margin 0",
        Config {
            margin: 0,
            ..config()
        },
        &[MUTUAL_EXCLUSION],
    );
}

/// A restart without the delay (empty or from a snapshot), a failover
/// without `WAIT`: two clients believe they hold the lock (the docs'
/// assumptions), and the clock floor keeps fencing tokens increasing, so
/// the writes stay in order.
#[test]
fn a_restart_without_delay_or_a_failover_without_wait_breaks_only_mutual_exclusion() {
    check(
        "an empty restart at once",
        Config {
            restart: Restart::EmptyAtOnce,
            // One tick less reaches the counterexample (2 million unique
            // at 6 ticks, 16 s).
            max_time: config().max_time - 1,
            ..config()
        },
        &[MUTUAL_EXCLUSION],
    );
    check(
        "a restart from a snapshot at once",
        Config {
            restart: Restart::SnapshotAtOnce,
            // One tick less: a snapshot multiplies the states (7 million
            // unique at 6 ticks, a minute).
            max_time: config().max_time - 1,
            ..config()
        },
        &[MUTUAL_EXCLUSION],
    );
    check(
        "a failover without WAIT",
        Config {
            replica: Some(false),
            losses: 0,
            // One tick less: its states grow fastest (6 million unique at
            // 6 ticks, a minute; 5 ticks reach the counterexample).
            max_time: config().max_time - 1,
            ..config()
        },
        &[MUTUAL_EXCLUSION],
    );
}

/// Without the clock floor, a restarted counter issues tokens again, and a
/// stale holder's write lands after a newer holder's.
#[test]
fn without_the_clock_floor_tokens_repeat_and_writes_go_out_of_order() {
    check(
        "no clock floor, an empty restart at once",
        Config {
            restart: Restart::EmptyAtOnce,
            broken: Some(Broken::NoClockFloor),
            ..config()
        },
        &[MUTUAL_EXCLUSION, TOKENS_INCREASE, WRITES_IN_ORDER],
    );
    check(
        "no clock floor, a restart from a snapshot at once",
        Config {
            restart: Restart::SnapshotAtOnce,
            broken: Some(Broken::NoClockFloor),
            // One tick less: a snapshot multiplies the states (7 million
            // unique at 6 ticks, a minute).
            max_time: config().max_time - 1,
            ..config()
        },
        &[MUTUAL_EXCLUSION, TOKENS_INCREASE, WRITES_IN_ORDER],
    );
    check(
        "no clock floor, a failover without WAIT",
        Config {
            replica: Some(false),
            losses: 0,
            broken: Some(Broken::NoClockFloor),
            ..config()
        },
        &[MUTUAL_EXCLUSION, TOKENS_INCREASE, WRITES_IN_ORDER],
    );
}

/// Without the owner check, a late release deletes the next holder's lock.
#[test]
fn without_the_owner_check_a_late_release_deletes_another_owners_lock() {
    check(
        "a release without the token check",
        Config {
            broken: Some(Broken::NoOwnerCheck),
            ..config()
        },
        &[OWN_KEY_ONLY, MUTUAL_EXCLUSION],
    );
}

//! The Redlock model checked within its bounds: with the restart delay
//! every property holds; a node that restarts empty and grants at once
//! breaks mutual exclusion (not fencing); a release that does not raise
//! the counters lets a later majority repeat a token.
//!
//! `REDLOCK_MODEL_TICKS=<n>` runs the checks with a longer clock (default
//! 5 ticks, a ttl of 3); `REDLOCK_MODEL_ACQUIRES=<n>` with more acquires
//! per client (default 2).

mod support;

use redlock_model::redlock::{
    Broken, Config, MUTUAL_EXCLUSION, RedlockModel, Restart, TOKENS_INCREASE, TWO_HOLDS,
};
use support::bound;

fn config() -> Config {
    Config {
        max_time: bound("REDLOCK_MODEL_TICKS", 5),
        acquires: bound("REDLOCK_MODEL_ACQUIRES", 2),
        ..Config::default()
    }
}

fn check(what: &str, config: Config, fail: &[&'static str]) {
    support::check(
        what,
        RedlockModel(config),
        config,
        &[MUTUAL_EXCLUSION, TOKENS_INCREASE],
        fail,
        TWO_HOLDS,
    );
}

#[test]
fn with_the_restart_delay_every_property_holds() {
    check("three masters", config(), &[]);
    check(
        "three masters, one restarts empty after the restart delay",
        Config {
            restart: Restart::AfterDelay,
            ..config()
        },
        &[],
    );
}

/// A node that held the lock restarts empty and grants at once: with a
/// free node it makes a second majority. Its clock floor keeps the tokens
/// increasing.
#[test]
fn a_restart_without_the_delay_breaks_only_mutual_exclusion() {
    check(
        "three masters, one restarts empty at once",
        Config {
            restart: Restart::AtOnce,
            ..config()
        },
        &[MUTUAL_EXCLUSION],
    );
}

/// Without the release's raise, a node that issued more tokens within one
/// tick than the others gives a holder a token that a later majority of
/// the others repeats.
#[test]
fn without_the_raise_a_later_majority_repeats_a_token() {
    check(
        "three masters, a release without the raise",
        Config {
            broken: Some(Broken::NoRaise),
            ..config()
        },
        &[TOKENS_INCREASE],
    );
}

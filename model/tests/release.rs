//! The release's report checked within its bounds: with the fix of issue
//! "last reply", a release whose answer was lost is never reported as a
//! loss when its first send deleted the lock, and a release reported clean
//! went out while the lock was the holder's; the runtime before the fix
//! has a counterexample, and so has a drift beyond the margin.
//!
//! `REDLOCK_MODEL_TICKS=<n>` runs the checks with a longer clock (default
//! 6 ticks, a ttl of 3).

mod support;

use redlock_model::release::{
    Broken, Config, NO_FALSE_LOSS, NO_FALSE_RELEASE, RESENT_AND_RELEASED, ReleaseModel,
};
use support::bound;

fn config() -> Config {
    Config {
        max_time: bound("REDLOCK_MODEL_TICKS", 6),
        ..Config::default()
    }
}

fn check(what: &str, config: Config, fail: &[&'static str]) {
    support::check(
        what,
        ReleaseModel(config),
        config,
        &[NO_FALSE_LOSS, NO_FALSE_RELEASE],
        fail,
        &[RESENT_AND_RELEASED],
    );
}

#[test]
fn a_lost_answer_is_not_a_lost_lock() {
    check("a release whose answers can be lost", config(), &[]);
}

/// The runtime before the fix: the re-send finds the lock its first send
/// deleted gone, and "not the owner" is reported as a loss.
#[test]
fn before_the_fix_a_resent_release_reports_a_false_loss() {
    check(
        "'not the owner' after a re-send is a loss",
        Config {
            broken: Some(Broken::ResentNotOwnerIsLoss),
            ..config()
        },
        &[NO_FALSE_LOSS],
    );
}

/// The fix trusts the presumed lease: a clock that runs slow beyond the
/// margin presumes a lease that already ended, and a re-sent release that
/// finds the lock gone is reported clean.
#[test]
fn drift_beyond_the_margin_makes_a_resent_release_look_clean() {
    check(
        "drift 1, margin 0",
        Config {
            margin: 0,
            ..config()
        },
        &[NO_FALSE_RELEASE],
    );
}

//! The countdown latch's model, checked exhaustively: it opens only once
//! every worker counted down, with count-downs whose answers are lost and
//! that are sent again, and set-ups from two processes at any point; not
//! without the request ids (the checker bites). Every run prints its
//! explored state counts and time.
//!
//! `REDLOCK_MODEL_WORKERS=<n>` runs the checks with more workers (default
//! 3, each sending its count-down up to three times).

mod support;

use redlock_model::latch::{Broken, Config, LatchModel, OPENED, OPENS_AFTER_ALL};
use support::bound;

/// The bounds, deepened by the environment.
fn config() -> Config {
    Config {
        workers: bound("REDLOCK_MODEL_WORKERS", 3),
        ..Config::default()
    }
}

/// Checks `config`: the properties in `fail` have a counterexample, the
/// others hold.
fn check(what: &str, config: Config, fail: &[&'static str]) {
    support::check(
        what,
        LatchModel(config),
        config,
        &[OPENS_AFTER_ALL],
        fail,
        &[OPENED],
    );
}

#[test]
fn with_request_ids_the_latch_opens_only_after_every_worker() {
    check("latch", config(), &[]);
}

/// Without the ids, a count-down sent again after its answer was lost
/// counts twice: the latch opens while a worker has not counted down.
#[test]
fn without_request_ids_a_count_down_sent_again_opens_the_latch_early() {
    check(
        "latch, count-downs without request ids",
        Config {
            broken: Some(Broken::NoIds),
            ..config()
        },
        &[OPENS_AFTER_ALL],
    );
}

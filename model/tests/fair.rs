//! The fair lock checked within its bounds: no client takes the lock
//! ahead of a live waiter, and a live waiter is granted within its bound,
//! with waiters that give up, die, and holders that crash; the plain
//! acquire on a fair lock overtakes, and a line whose places never run
//! out is blocked by a dead waiter.
//!
//! `REDLOCK_MODEL_TICKS=<n>` runs the checks with a longer clock (default
//! 9 ticks, a ttl and a presence of 2); `REDLOCK_MODEL_CLIENTS=<n>` with
//! more clients (default 3).

mod support;

use redlock_model::fair::{BOUNDED_WAIT, Broken, Config, FairModel, GRANTED, NO_OVERTAKING};
use support::bound;

fn config() -> Config {
    Config {
        max_time: bound("REDLOCK_MODEL_TICKS", 9),
        clients: bound("REDLOCK_MODEL_CLIENTS", 3),
        ..Config::default()
    }
}

fn check(what: &str, config: Config, fail: &[&'static str]) {
    support::check(
        what,
        FairModel(config),
        config,
        &[NO_OVERTAKING, BOUNDED_WAIT],
        fail,
        &[GRANTED],
    );
}

#[test]
fn a_live_waiter_is_granted_in_turn_and_in_time() {
    check("a fair lock", config(), &[]);
}

/// A client that takes a free lock whoever waits (the plain acquire)
/// goes ahead of a live waiter.
#[test]
fn a_free_lock_to_anyone_overtakes_the_line() {
    check(
        "a free lock goes to anyone who asks",
        Config {
            broken: Some(Broken::FreeLockToAnyone),
            ..config()
        },
        &[NO_OVERTAKING],
    );
}

/// A place that never runs out: a waiter that died at the head of the
/// line keeps everyone behind it waiting.
#[test]
fn without_the_presence_deadline_a_dead_waiter_blocks_the_line() {
    check(
        "a waiter's place never runs out",
        Config {
            broken: Some(Broken::NoPresence),
            ..config()
        },
        &[BOUNDED_WAIT],
    );
}

//! The read/write lock's model checked within its bounds: a writer holds
//! alone with the drift within the margin, readers share, a write lock
//! follows a downgrade; not without the downgrade's owner check, or with
//! a drift beyond the margin (the checker bites). Every run prints its
//! explored state counts and time.
//!
//! `REDLOCK_MODEL_TICKS=<n>` runs every check with a longer clock (default
//! 5 ticks, a ttl of 3; three clients); `REDLOCK_MODEL_ACQUIRES=<n>` with
//! more acquires per client (default 2). The node is the in-memory twin's
//! (`RwNode`): 5 ticks check in about 4 s on 2 cores, 6 (the bound before
//! the twin) in about 9 s; both find every counterexample below.

mod support;

use redlock_model::rw::{
    Broken, Config, EXCLUSIVE_WRITER, READ_BESIDE_READ, RwModel, WRITE_AFTER_DOWNGRADE,
};
use support::bound;

/// The bounds, deepened by the environment.
fn config() -> Config {
    Config {
        max_time: bound("REDLOCK_MODEL_TICKS", 5),
        acquires: bound("REDLOCK_MODEL_ACQUIRES", 2),
        ..Config::default()
    }
}

/// Checks `config`: the properties in `fail` have a counterexample, the
/// others hold.
fn check(what: &str, config: Config, fail: &[&'static str]) {
    support::check(
        what,
        RwModel(config),
        config,
        &[EXCLUSIVE_WRITER],
        fail,
        &[READ_BESIDE_READ, WRITE_AFTER_DOWNGRADE],
    );
}

#[test]
fn with_the_drift_within_the_margin_a_writer_holds_alone() {
    check("read/write lock", config(), &[]);
}

/// A writer whose lease ran out downgrades without the owner check: it
/// deletes the next writer's lock and reads while that writer writes.
#[test]
fn a_downgrade_without_the_owner_check_reads_beside_a_writer() {
    check(
        "read/write lock, a downgrade without the owner check",
        Config {
            broken: Some(Broken::DowngradeWithoutOwner),
            ..config()
        },
        &[EXCLUSIVE_WRITER],
    );
}

/// A clock that drifts more than the margin: a writer still believes it
/// holds when the node has let a reader in.
#[test]
fn drift_beyond_the_margin_lets_a_reader_beside_a_writer() {
    check(
        "read/write lock, drift 1, margin 0",
        Config {
            margin: 0,
            ..config()
        },
        &[EXCLUSIVE_WRITER],
    );
}

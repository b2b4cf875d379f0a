//! The Redlock model checked within its bounds: with the restart delay
//! every property holds; a node that restarts empty and grants at once
//! breaks mutual exclusion (not fencing); a release that does not raise
//! the counters lets a later majority repeat a token. The nodes' clocks:
//! a node's clock running fast is covered by the margin, but only
//! together with the client's drift; a skew between the nodes' clocks
//! below the ttl keeps the tokens increasing, not one of the ttl.
//!
//! `REDLOCK_MODEL_TICKS=<n>` runs the checks with a longer clock (default
//! 5 ticks, a ttl of 3); `REDLOCK_MODEL_ACQUIRES=<n>` with more acquires
//! per client (default 2, and 1 for the checks of the nodes' clocks).

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

/// The bounds of the clock checks: one acquire per client (two holds at
/// most, all a counterexample to them needs), which the nodes' drift
/// (a choice at every grant) makes as many states as two acquires
/// without it.
fn one_acquire() -> Config {
    Config {
        acquires: bound("REDLOCK_MODEL_ACQUIRES", 1),
        ..config()
    }
}

fn check(what: &str, config: Config, fail: &[&'static str]) {
    support::check(
        what,
        RedlockModel(config),
        config,
        &[MUTUAL_EXCLUSION, TOKENS_INCREASE],
        fail,
        &[TWO_HOLDS],
    );
}

/// A node whose ACL refuses the acquire script grants plain locks
/// without a token, and the holds with such a grant have none: mutual
/// exclusion holds, and so do the tokens of the other holds, the
/// tokenless ones between them changing nothing; also when that node is
/// the one whose clock reads ahead.
#[test]
fn a_node_without_scripts_leaves_the_other_holds_tokens_increasing() {
    check(
        "three masters, node 2 without scripts",
        Config {
            scriptless: Some(2),
            ..config()
        },
        &[],
    );
    check(
        "three masters, node 0 (its clock ahead by 1) without scripts",
        Config {
            scriptless: Some(0),
            skew: 1,
            ..one_acquire()
        },
        &[],
    );
}

/// Releases that reach only some nodes, with node 2 without scripts and
/// node 0's clock ahead by 1 (its tokens above the others' within a
/// tick): the holds with a tokenless grant have no token, and every
/// property holds; were such a hold to take the largest token of its other
/// grants, a later majority sharing only the tokenless node with it
/// repeats that token.
#[test]
fn a_hold_with_a_tokenless_grant_must_have_no_token() {
    let partial = Config {
        scriptless: Some(2),
        skew: 1,
        partial_releases: true,
        max_time: bound("REDLOCK_MODEL_TICKS", 3),
        ..config()
    };
    check(
        "three masters, node 2 without scripts, releases that reach some nodes",
        partial,
        &[],
    );
    check(
        "the same, a token from the tokened part of a majority",
        Config {
            broken: Some(Broken::TokenFromPart),
            ..partial
        },
        &[TOKENS_INCREASE],
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

/// A node whose clock runs fast expires the lock early: within the
/// margin, no second majority forms while the holder believes it holds.
#[test]
fn a_nodes_fast_clock_within_the_margin_keeps_every_property() {
    check(
        "three masters, a node's clock one tick fast over a lease, the client's true",
        Config {
            drift: 0,
            node_drift: 1,
            ..one_acquire()
        },
        &[],
    );
}

/// The margin must cover a slow client and a fast node at once: each
/// within the margin alone, together beyond it, a second client gets a
/// majority while the first still believes it holds. And a client's
/// drift beyond the margin, nodes true, does the same.
#[test]
fn the_margin_must_cover_the_clients_drift_and_a_nodes_together() {
    check(
        "three masters, a client's clock and a node's each one tick off, margin 1",
        Config {
            drift: 1,
            node_drift: 1,
            ..one_acquire()
        },
        &[MUTUAL_EXCLUSION],
    );
    check(
        "three masters, a client's clock two ticks slow, margin 1",
        Config {
            drift: 2,
            ..one_acquire()
        },
        &[MUTUAL_EXCLUSION],
    );
}

/// Nodes whose clocks read up to one tick apart (ttl 3): every token
/// still exceeds the ones before, after leases that ran out (nothing
/// raised) and after a restart with the restart delay.
#[test]
fn a_skew_below_the_ttl_keeps_every_property() {
    check(
        "three masters, clocks up to one tick apart",
        Config {
            skew: 1,
            ..one_acquire()
        },
        &[],
    );
    check(
        "three masters, clocks up to one tick apart, one restarts after the restart delay",
        Config {
            skew: 1,
            restart: Restart::AfterDelay,
            ..one_acquire()
        },
        &[],
    );
}

/// A skew of the ttl: a holder's token came from a node whose clock reads
/// a ttl ahead; its lease runs out (no release, nothing raised), and the
/// next majority, of nodes whose clocks read the true time, issues a
/// token no larger (the node ahead, held meanwhile by another acquire, is
/// not in it). Mutual exclusion does not depend on the skew. (Two
/// acquires per client, and 4 ticks: the counterexample needs three
/// acquires in all.)
#[test]
fn a_skew_of_the_ttl_repeats_a_token() {
    let ttl = 2;
    check(
        "three masters, clocks up to a ttl apart",
        Config {
            ttl,
            skew: ttl,
            max_time: bound("REDLOCK_MODEL_TICKS", 4),
            ..config()
        },
        &[TOKENS_INCREASE],
    );
}

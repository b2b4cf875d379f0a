//! A manual extend beside the watchdog's renewals, checked within its
//! bounds: with the scripts' renewal (which never shortens a lease) and
//! without scripts (`SET .. IFEQ .. PX`, which does), the holder never
//! presumes a lease the node no longer keeps, given the gate and the
//! doubt of `HeldLock`; each dropped rule has a counterexample.
//!
//! `REDLOCK_MODEL_TICKS=<n>` runs the checks with a longer clock (default
//! 8 ticks, a ttl of 3), `REDLOCK_MODEL_TIMEOUTS` and
//! `REDLOCK_MODEL_RENEWALS` with more calls timing out (default 1) and
//! more renewals (default 3).

mod support;

use redlock_model::extend::{COUNTED_LEASE_HELD, Config, EXTENDED_AFTER_A_TIMEOUT, ExtendModel};
use support::bound;

fn config() -> Config {
    Config {
        max_time: bound("REDLOCK_MODEL_TICKS", 8),
        timeouts: bound("REDLOCK_MODEL_TIMEOUTS", 1),
        renewals: bound("REDLOCK_MODEL_RENEWALS", 3),
        ..Config::default()
    }
}

fn check(what: &str, config: Config, fails: bool) {
    let fail: &[&'static str] = if fails { &[COUNTED_LEASE_HELD] } else { &[] };
    support::check(
        what,
        ExtendModel(config),
        config,
        &[COUNTED_LEASE_HELD],
        fail,
        &[EXTENDED_AFTER_A_TIMEOUT],
    );
}

#[test]
fn without_scripts_the_gate_and_the_doubt_keep_the_presumed_lease() {
    check("renewals without scripts", config(), false);
}

#[test]
fn with_scripts_the_gate_and_the_doubt_keep_the_presumed_lease() {
    let scripts = Config {
        conditional: false,
        ..config()
    };
    check("renewals by script", scripts, false);
}

/// Without the gate, a renewal sent before an extend that lengthens the
/// lease lands after it and shortens it, its answer ignored as older.
#[test]
fn without_scripts_or_the_gate_a_late_renewal_shortens_the_lease() {
    let no_gate = Config {
        gate: false,
        ..config()
    };
    check("no gate", no_gate, true);
}

/// Without the doubt, a call that timed out (or one in flight) lands
/// after what the holder counts on, and leaves less.
#[test]
fn without_scripts_or_the_doubt_a_timed_out_renewal_shortens_the_lease() {
    let no_doubt = Config {
        doubt: false,
        ..config()
    };
    check("no doubt", no_doubt, true);
}

/// The runtime before this change: the scripts' renewal, no gate, no
/// doubt. An extend that leaves the lease shorter than it was (a ttl
/// shorter than what was left) lands, and until its answer is read (or
/// forever, when it is lost) the holder counts on the longer lease.
#[test]
fn with_scripts_an_extend_that_shortens_the_lease_needs_the_doubt() {
    let before = Config {
        conditional: false,
        gate: false,
        doubt: false,
        ..config()
    };
    check("scripts, no gate, no doubt", before, true);
}

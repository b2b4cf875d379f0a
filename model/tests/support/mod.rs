//! Checks a model exhaustively and asserts which properties hold.

use std::fmt::{Debug, Display};
use std::hash::Hash;
use std::time::Instant;

use stateright::{Checker, Model};

/// A bound from the environment variable `var`, else `default`.
pub(crate) fn bound(var: &str, default: u8) -> u8 {
    match std::env::var(var) {
        Ok(n) => n
            .parse()
            .unwrap_or_else(|_| panic!("{var}={n:?} is not a number")),
        Err(_) => default,
    }
}

/// Explores every state of `model` (breadth first, as far as its bounds
/// go) and prints how many there were and how long it took. Each of
/// `safety` must hold, except those in `fail`, which must have a
/// counterexample (printed, one action per line); each of `reached`
/// (`sometimes` properties) must have an example, so the checks are not
/// vacuous.
pub(crate) fn check<M>(
    what: &str,
    model: M,
    shown: impl Display,
    safety: &[&'static str],
    fail: &[&'static str],
    reached: &[&'static str],
) where
    M: Model + Send + Sync + 'static,
    M::State: Hash + Send + Sync + Clone + PartialEq + Debug + 'static,
    M::Action: Clone + PartialEq + Debug,
{
    let started = Instant::now();
    let checker = model.checker().threads(2).spawn_bfs().join();
    eprintln!(
        "{what} ({shown}): {} states, {} unique, {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        started.elapsed()
    );
    for &name in safety {
        if fail.contains(&name) {
            let path = checker.assert_any_discovery(name);
            eprintln!("  counterexample to \"{name}\":");
            for action in path.into_actions() {
                eprintln!("    {action:?}");
            }
        } else {
            checker.assert_no_discovery(name);
        }
    }
    for &name in reached {
        checker.assert_any_discovery(name);
    }
}

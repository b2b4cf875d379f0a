//! Counting a Redlock quorum's answers: pure, so the rules are unit-tested
//! apart from any Redis.

use std::time::Duration;

use crate::error::{NodeFailure, QuorumDetail};

/// What one node answered.
#[derive(Debug)]
pub(crate) enum Answer<T> {
    Yes(T),
    /// Held by another owner (acquire), or not held by us (extend, release).
    No(Option<Duration>),
    Failed(String),
}

/// How many nodes said yes, no, or failed (nodes not heard from count in
/// none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) yes: usize,
    pub(crate) no: usize,
    pub(crate) failed: usize,
}

impl Tally {
    pub(crate) fn of<T>(answers: &[Option<Answer<T>>]) -> Self {
        answers.iter().fold(
            Tally {
                yes: 0,
                no: 0,
                failed: 0,
            },
            |t, a| match a {
                Some(Answer::Yes(_)) => Tally {
                    yes: t.yes + 1,
                    ..t
                },
                Some(Answer::No(_)) => Tally { no: t.no + 1, ..t },
                Some(Answer::Failed(_)) => Tally {
                    failed: t.failed + 1,
                    ..t
                },
                None => t,
            },
        )
    }

    /// Enough is known: a majority said yes, or so many said no that no
    /// majority can. Failures alone decide nothing: a node not heard from
    /// may still say no, and busy must not be told as an outage.
    pub(crate) fn settled(&self, nodes: usize, quorum: usize) -> bool {
        self.yes >= quorum || self.no > nodes - quorum
    }

    /// `Some(true)`: a majority confirmed; `Some(false)`: too many nodes
    /// said no for a majority to; `None`: neither (a failure).
    pub(crate) fn verdict(&self, nodes: usize, quorum: usize) -> Option<bool> {
        if self.yes >= quorum {
            Some(true)
        } else if self.no > nodes - quorum {
            Some(false)
        } else {
            None
        }
    }
}

/// The detail of a failed quorum operation, node by node (`names` in the
/// nodes' order).
pub(crate) fn detail<'a, T>(
    answers: &[Option<Answer<T>>],
    names: impl Iterator<Item = &'a str>,
    quorum: usize,
) -> QuorumDetail {
    let tally = Tally::of(answers);
    let failed = answers
        .iter()
        .zip(names)
        .filter_map(|(a, node)| {
            let error = match a {
                Some(Answer::Failed(why)) => why.clone(),
                None => "no answer in time".to_owned(),
                _ => return None,
            };
            Some(NodeFailure {
                node: node.to_owned(),
                error,
            })
        })
        .collect();
    QuorumDetail {
        nodes: answers.len(),
        needed: quorum,
        granted: tally.yes,
        refused: tally.no,
        failed,
        expired_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(spec: &str) -> Vec<Option<Answer<()>>> {
        spec.chars()
            .map(|c| match c {
                'y' => Some(Answer::Yes(())),
                'n' => Some(Answer::No(None)),
                'f' => Some(Answer::Failed("refused".to_owned())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_majority_decides_and_failures_alone_do_not() {
        // (answers, settled, verdict) with 5 nodes, a quorum of 3.
        for (spec, settled, verdict) in [
            ("yyy..", true, Some(true)),
            ("yy...", false, None),
            ("nnn..", true, Some(false)),
            ("yynn.", false, None),
            ("yynnn", true, Some(false)),
            ("ffff.", false, None),
            ("yyff.", false, None),
            ("yyffy", true, Some(true)),
            ("yyffn", false, None),
        ] {
            let t = Tally::of(&answers(spec));
            assert_eq!(t.settled(5, 3), settled, "{spec}");
            assert_eq!(t.verdict(5, 3), verdict, "{spec}");
        }
        // 3 nodes, a quorum of 2: one refusal is not enough to rule it out.
        assert_eq!(Tally::of(&answers("n..")).verdict(3, 2), None);
        assert_eq!(Tally::of(&answers("nn.")).verdict(3, 2), Some(false));
    }

    #[test]
    fn the_detail_names_each_failed_or_silent_node() {
        let d = detail(&answers("yf.n"), ["a", "b", "c", "d"].into_iter(), 3);
        assert_eq!((d.nodes, d.needed, d.granted, d.refused), (4, 3, 1, 1));
        let failed: Vec<_> = d
            .failed
            .iter()
            .map(|f| (f.node.as_str(), f.error.as_str()))
            .collect();
        assert_eq!(failed, [("b", "refused"), ("c", "no answer in time")]);
    }
}

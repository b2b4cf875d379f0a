//! Reading a lock on Redlock: what a majority of the nodes agree on.

use std::collections::HashMap;
use std::time::Duration;

use super::super::{Inspect, Inspection, OpError};
use super::QuorumBackend;

impl QuorumBackend {
    /// The lock as a majority of the nodes hold it: its holder when a
    /// majority have the same token (the shortest lease left among them),
    /// the largest fencing counter any node has. Read/write locks and
    /// semaphores do not exist on Redlock.
    pub(crate) async fn inspect(
        &self,
        inspect: &Inspect<'_>,
        limit: Duration,
    ) -> Result<Inspection, OpError> {
        let limit = limit.min(self.node_timeout.max(Duration::from_millis(1)) * 4);
        let answers = futures_util::future::join_all(
            self.nodes
                .iter()
                .map(|node| node.backend.inspect(inspect, limit)),
        )
        .await;
        let mut seen = Vec::new();
        let mut last_error = None;
        for answer in answers {
            match answer {
                Ok(found) => seen.push(found),
                Err(e) => last_error = Some(e),
            }
        }
        if seen.len() < self.quorum {
            return Err(last_error.unwrap_or(OpError::Timeout(limit)));
        }
        let mut holders: HashMap<&str, (usize, Option<Duration>)> = HashMap::new();
        for lease in seen.iter().filter_map(|s| s.lock.as_ref()) {
            let entry = holders
                .entry(lease.token.as_str())
                .or_insert((0, lease.left));
            entry.0 += 1;
            entry.1 = entry.1.min(lease.left);
        }
        let lock = holders
            .into_iter()
            .find(|(_, (votes, _))| *votes >= self.quorum)
            .map(|(token, (_, left))| super::super::Lease {
                token: token.to_owned(),
                left,
                // No line on Redlock: a token's own time is its grant's.
                granted: None,
            });
        Ok(Inspection {
            lock,
            fence: seen.iter().filter_map(|s| s.fence).max(),
            // An operator ended a holder on any node that has its id.
            ended: seen.iter().flat_map(|s| s.ended.iter().cloned()).collect(),
            ..Inspection::default()
        })
    }

    /// The clock of the first node that answers.
    pub(crate) async fn time(&self, limit: Duration) -> Result<u64, OpError> {
        let mut last = None;
        for node in self.nodes.iter() {
            match node.backend.time(limit).await {
                Ok(ms) => return Ok(ms),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(OpError::Timeout(limit)))
    }
}

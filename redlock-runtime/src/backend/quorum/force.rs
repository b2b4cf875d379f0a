//! The operator's forced release on Redlock: on every node.

use std::time::Duration;

use super::super::{ForceRelease, ForceReply, OpError};
use super::QuorumBackend;

impl QuorumBackend {
    /// Ends the lock on every node that answers, and succeeds when a
    /// majority did: no owner can renew on a majority then, and no later
    /// holder's token can be at or below an ended one (each node that ran
    /// it raised its counter; a new holder's token is the largest of a
    /// majority's, and any two majorities share a node). Reports every
    /// holder any node had, and the largest counter.
    pub(crate) async fn force_release(
        &self,
        force: &ForceRelease<'_>,
        limit: Duration,
    ) -> Result<ForceReply, OpError> {
        let limit = limit.min(self.node_timeout.max(Duration::from_millis(1)) * 4);
        let answers = futures_util::future::join_all(
            self.nodes
                .iter()
                .map(|node| node.backend.force_release(force, limit)),
        )
        .await;
        let (mut out, mut answered, mut last_error) = (ForceReply::default(), 0, None);
        for answer in answers {
            match answer {
                Ok(reply) => {
                    answered += 1;
                    for lease in reply.ended {
                        if !out.ended.iter().any(|l| l.token == lease.token) {
                            out.ended.push(lease);
                        }
                    }
                    out.fence = out.fence.max(reply.fence);
                }
                Err(e) => last_error = Some(e),
            }
        }
        if answered < self.quorum {
            return Err(last_error.unwrap_or(OpError::Timeout(limit)));
        }
        Ok(out)
    }
}

//! [`LockClient::ping`](crate::LockClient::ping): whether every node of
//! the topology answers, as what, and how fast; for readiness probes.

use std::fmt;
use std::time::Duration;

use crate::backend::NodeRole;
use crate::core::Core;
use crate::error::LockError;

/// How one node answered a [`ping`](crate::LockClient::ping).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStatus {
    /// The node, as a URL without its password (`memory` in memory).
    pub node: String,
    /// What it is (`ROLE`).
    pub role: NodeRole,
    /// The round trip's time.
    pub latency: Duration,
}

/// `redis://127.0.0.1:6379: primary with 0 replicas, 0.4ms`.
impl fmt::Display for NodeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}, {:.1?}", self.node, self.role, self.latency)
    }
}

/// Pings every node at once, each within the command timeout.
pub(crate) async fn ping(core: &Core) -> Result<Vec<NodeStatus>, LockError> {
    // A shut-down client is not ready, whatever its nodes say.
    core.check_open("")?;
    let settings = core.settings();
    let answers = core
        .backend()
        .ping(&settings.target, settings.command_timeout)
        .await;
    let mut statuses = Vec::with_capacity(answers.len());
    let mut failed = Vec::new();
    for (node, answer) in answers {
        match answer {
            Ok((role, latency)) => statuses.push(NodeStatus {
                node,
                role,
                latency,
            }),
            Err(e) => failed.push((node, e)),
        }
    }
    let others = failed.len().saturating_sub(1);
    match failed.into_iter().next() {
        None => Ok(statuses),
        Some((node, e)) => {
            let (failure, detail) = e.connect_failure();
            Err(LockError::NodeDown {
                node,
                failure,
                detail,
                others,
            })
        }
    }
}

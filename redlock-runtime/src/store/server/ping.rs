//! A server's role (`ROLE`) and clock (`TIME`): what a readiness probe
//! and the clock-dependent callers ask of any Redis.

use std::time::Duration;

use super::super::OpError;
use super::{On, RedisBackend};

/// What a node of the topology is, as it answered
/// [`LockClient::ping`](crate::LockClient::ping) (`ROLE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeRole {
    /// A primary (one Redis, a Redlock node, a Cluster master, Sentinel's
    /// primary), with how many replicas are connected to it.
    Primary {
        /// The replicas connected to it now.
        replicas: usize,
    },
    /// A replica: a client that writes locks to it has the wrong node (a
    /// failover it has not followed yet, or a misconfigured URL).
    Replica,
    /// This process's memory ([`LockClient::in_memory`](crate::LockClient::in_memory)).
    Memory,
}

impl std::fmt::Display for NodeRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Primary { replicas: 1 } => f.write_str("primary with 1 replica"),
            Self::Primary { replicas } => write!(f, "primary with {replicas} replicas"),
            Self::Replica => f.write_str("replica"),
            Self::Memory => f.write_str("in memory"),
        }
    }
}

/// One node's answer to a ping: its name (URL without password), and its
/// role and latency, or why it did not answer.
pub(crate) type NodePing = (String, Result<(NodeRole, Duration), OpError>);

impl RedisBackend {
    /// The server's role (`ROLE`) and the round trip's time.
    pub(crate) async fn ping(&self, limit: Duration) -> Result<(NodeRole, Duration), OpError> {
        let sent = tokio::time::Instant::now();
        let reply: redis::Value = self
            .run(On::Plain, None, limit, |mut link| async move {
                redis::cmd("ROLE").query_async(&mut link.conn).await
            })
            .await?;
        let latency = sent.elapsed();
        let redis::Value::Array(fields) = reply else {
            return Err(OpError::Reply(format!("ROLE answered {reply:?}")));
        };
        let text = |v: Option<&redis::Value>| match v {
            Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            Some(redis::Value::SimpleString(s)) => s.clone(),
            _ => String::new(),
        };
        let role = match text(fields.first()).as_str() {
            "master" => NodeRole::Primary {
                replicas: match fields.get(2) {
                    Some(redis::Value::Array(replicas)) => replicas.len(),
                    _ => 0,
                },
            },
            "slave" | "replica" => NodeRole::Replica,
            other => return Err(OpError::Reply(format!("ROLE answered the role `{other}`"))),
        };
        Ok((role, latency))
    }

    /// The server's clock (`TIME`), ms since 1970.
    pub(crate) async fn time(&self, limit: Duration) -> Result<u64, OpError> {
        let (s, us): (u64, u64) = self
            .run(On::Plain, None, limit, |mut link| async move {
                redis::cmd("TIME").query_async(&mut link.conn).await
            })
            .await?;
        Ok(s * 1000 + us / 1000)
    }
}

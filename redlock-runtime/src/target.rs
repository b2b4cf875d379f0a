//! [`Target`]: where a client keeps its locks, as the builder was told.

use std::fmt;

use bb8::Pool;
use bb8_redis::RedisConnectionManager;
use redis::aio::ConnectionManager;

use crate::util::redact_url;

/// Where a client keeps its locks: exactly one per builder.
pub(crate) enum Target {
    Url(String),
    Pool(Pool<RedisConnectionManager>),
    Manager(ConnectionManager),
    Redlock(Vec<String>),
    Cluster(Vec<String>),
    Sentinel { urls: Vec<String>, master: String },
    Memory,
}

impl Target {
    /// The URLs the client opens connections from.
    pub(crate) fn urls(&self) -> &[String] {
        match self {
            Self::Url(url) => std::slice::from_ref(url),
            Self::Redlock(urls) | Self::Cluster(urls) | Self::Sentinel { urls, .. } => urls,
            Self::Pool(_) | Self::Manager(_) | Self::Memory => &[],
        }
    }

    /// The setter that chose it, for errors.
    pub(crate) fn setter(&self) -> &'static str {
        match self {
            Self::Url(_) => "`.url(..)`",
            Self::Pool(_) => "`.pool(..)`",
            Self::Manager(_) => "`.connection_manager(..)`",
            Self::Redlock(_) => "`.redlock(..)`",
            Self::Cluster(_) => "`.cluster(..)`",
            Self::Sentinel { .. } => "`.sentinel(..)`",
            Self::Memory => "`.in_memory()`",
        }
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(url) => f.debug_tuple("Url").field(&redact_url(url)).finish(),
            Self::Pool(_) => f.write_str("Pool"),
            Self::Manager(_) => f.write_str("ConnectionManager"),
            Self::Redlock(urls) => f
                .debug_tuple("Redlock")
                .field(&urls.iter().map(|u| redact_url(u)).collect::<Vec<_>>())
                .finish(),
            Self::Cluster(urls) => f
                .debug_tuple("Cluster")
                .field(&urls.iter().map(|u| redact_url(u)).collect::<Vec<_>>())
                .finish(),
            Self::Sentinel { urls, master } => f
                .debug_struct("Sentinel")
                .field("master", master)
                .field(
                    "urls",
                    &urls.iter().map(|u| redact_url(u)).collect::<Vec<_>>(),
                )
                .finish(),
            Self::Memory => f.write_str("Memory"),
        }
    }
}

//! Where the examples keep their locks, from the environment:
//!
//! - `REDIS_CLUSTER_URLS=redis://h1:7000,redis://h2:7000`: a Redis Cluster
//!   (any of its nodes, comma-separated);
//! - `REDIS_SENTINEL_URLS=redis://h1:26379,..` with `REDIS_SENTINEL_MASTER`
//!   (default `mymaster`): the primary those Sentinels monitor;
//! - `REDIS_URL=redis://host:6379`: one Redis;
//! - none of them: this process's memory.
//!
//! Setting more than one is refused, so a leftover variable never decides
//! silently.

use redlock_runtime::{LockClient, LockClientBuilder};

/// The store the environment names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Store {
    /// No variable set: this process's memory.
    Memory,
    /// `REDIS_URL`.
    Redis(String),
    /// `REDIS_CLUSTER_URLS`.
    Cluster(Vec<String>),
    /// `REDIS_SENTINEL_URLS` and `REDIS_SENTINEL_MASTER`.
    Sentinel {
        /// The Sentinels.
        urls: Vec<String>,
        /// The master name they monitor.
        master: String,
    },
}

/// The variables that name a store.
pub const VARIABLES: [&str; 3] = ["REDIS_URL", "REDIS_CLUSTER_URLS", "REDIS_SENTINEL_URLS"];

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .collect()
}

impl Store {
    /// Reads the environment (see the module docs).
    ///
    /// # Errors
    /// When more than one of [`VARIABLES`] is set, or a URL list is empty.
    pub fn from_env() -> Result<Self, String> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let set: Vec<&str> = VARIABLES.into_iter().filter(|v| var(v).is_some()).collect();
        if set.len() > 1 {
            return Err(format!(
                "{} are all set: set one of them (or none, for memory)",
                set.join(" and ")
            ));
        }
        if let Some(urls) = var("REDIS_CLUSTER_URLS") {
            let urls = list(&urls);
            if urls.is_empty() {
                return Err("REDIS_CLUSTER_URLS holds no URL".to_owned());
            }
            return Ok(Self::Cluster(urls));
        }
        if let Some(urls) = var("REDIS_SENTINEL_URLS") {
            let urls = list(&urls);
            if urls.is_empty() {
                return Err("REDIS_SENTINEL_URLS holds no URL".to_owned());
            }
            let master = var("REDIS_SENTINEL_MASTER").unwrap_or_else(|| "mymaster".to_owned());
            return Ok(Self::Sentinel { urls, master });
        }
        Ok(match var("REDIS_URL") {
            Some(url) => Self::Redis(url),
            None => Self::Memory,
        })
    }

    /// A builder aimed at this store; `None` for memory (use
    /// [`LockClient::in_memory`], whose clients can share one store).
    pub fn builder(&self) -> Option<LockClientBuilder> {
        let builder = LockClient::builder();
        Some(match self {
            Self::Memory => return None,
            Self::Redis(url) => builder.url(url.as_str()),
            Self::Cluster(urls) => builder.cluster(urls.iter().cloned()),
            Self::Sentinel { urls, master } => {
                builder.sentinel(urls.iter().cloned(), master.as_str())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_split_on_commas_and_skip_blanks() {
        assert_eq!(
            list(" redis://a:1, ,redis://b:2,"),
            vec!["redis://a:1".to_owned(), "redis://b:2".to_owned()]
        );
        assert!(list(" , ").is_empty());
    }
}

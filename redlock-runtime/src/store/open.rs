//! Opening the stores a builder describes: parse the URLs (password
//! redacted in every name and error), open the bb8 pools, and put the
//! lanes and backends together.

use std::time::Duration;

use bb8::Pool;
use bb8_redis::RedisConnectionManager;
use redis::aio::ConnectionManager;

use super::OpError;
use super::cluster::slots::Addr;
use super::cluster::{ClusterBackend, Seed};
use super::probe::PlainTextProbe;
use super::quorum::{Node, QuorumBackend};
use super::sentinel::{SentinelBackend, SentinelNode};
use super::server::conn::{Lane, LastError, Source};
use super::server::{RedisBackend, Replicas};
use crate::error::{ConfigError, ConnectFailure};
use crate::tls::TlsCertificates;
use crate::util::{redact_url, scrub};

/// What every Redis connection of a client is opened with.
#[derive(Debug, Clone)]
pub(crate) struct Connect {
    pub(crate) pool_size: u32,
    pub(crate) connection_timeout: Duration,
    pub(crate) replicas: Option<Replicas>,
    pub(crate) fence_retention: Duration,
    /// Redlock: nodes grant nothing until this long after they started.
    pub(crate) restart_delay: Option<Duration>,
    /// The CA and client certificate of `rediss://` connections.
    pub(crate) tls: Option<TlsCertificates>,
    /// A refused connection fails commands at once (cluster nodes).
    pub(crate) fail_fast: bool,
    /// Concurrent calls of fenced locks go out as one script call (see
    /// `server/coalesce.rs`); never on a cluster or Redlock node.
    pub(crate) coalesce: bool,
    /// Releases use the server's conditional delete where it has one (see
    /// `server/commands.rs`).
    pub(crate) conditional: bool,
}

/// Parses a Redis URL (with `tls`'s certificates for a `rediss://` one);
/// the error, and the name returned with the client, show the URL with its
/// password redacted.
pub(crate) fn open_url(
    url: &str,
    tls: Option<&TlsCertificates>,
) -> Result<(redis::Client, String), ConfigError> {
    let redacted = redact_url(url);
    let invalid = |reason: String| ConfigError::InvalidUrl {
        url: redacted.clone(),
        reason,
    };
    if !cfg!(feature = "tls") && (url.starts_with("rediss://") || tls.is_some()) {
        return Err(invalid(
            "TLS (`rediss://`) needs redlock-runtime's `tls` feature: \
             `redlock-runtime = { version = \"..\", features = [\"tls\"] }`"
                .to_owned(),
        ));
    }
    let opened = match tls {
        #[cfg(feature = "tls")]
        Some(certificates) => redis::Client::build_with_tls(url, certificates.to_redis()),
        _ => redis::Client::open(url),
    };
    let client = opened.map_err(|e| invalid(scrub(&e.to_string(), url)))?;
    Ok((client, redacted))
}

/// A lane of `c.pool_size` connections to `client`'s server, all kept open.
fn open_lane(client: &redis::Client, redacted: &str, c: &Connect) -> Result<Lane, ConfigError> {
    let manager =
        RedisConnectionManager::new(client.get_connection_info().clone()).map_err(|e| {
            ConfigError::InvalidUrl {
                url: redacted.to_owned(),
                reason: e.to_string(),
            }
        })?;
    let last_error = LastError::of(client);
    // FIFO (bb8's default) with every connection kept idle makes successive
    // check-outs hand out distinct connections.
    let pool = Pool::builder()
        .max_size(c.pool_size)
        .min_idle(Some(c.pool_size))
        .connection_timeout(c.connection_timeout)
        .error_sink(Box::new(last_error.clone()))
        .build_unchecked(manager);
    let mut lane = Lane::new(Source::Shared(pool), last_error);
    if c.fail_fast {
        lane = lane.failing_fast();
    }
    Ok(if c.restart_delay.is_some() {
        lane.learning_boot_time()
    } else {
        lane
    })
}

/// One Redis server at a parsed URL: its lanes (a second one for `WAIT`
/// with replicas) and settings.
pub(crate) fn server(
    client: &redis::Client,
    redacted: &str,
    c: &Connect,
) -> Result<RedisBackend, ConfigError> {
    let plain = open_lane(client, redacted, c)?;
    let waiting = match c.replicas {
        Some(r) => Some((open_lane(client, redacted, c)?, r)),
        None => None,
    };
    Ok(RedisBackend::new(plain, waiting, c.fence_retention)
        .with_restart_delay(c.restart_delay)
        .coalescing(c.coalesce)
        .conditional_commands(c.conditional))
}

/// One Redis server over a pool the user built: shared with them; with
/// replicas, `WAIT` keeps half of its connections checked out for itself.
pub(crate) fn from_pool(
    pool: Pool<RedisConnectionManager>,
    replicas: Option<Replicas>,
    fence_retention: Duration,
    coalesce: bool,
) -> RedisBackend {
    let waiting = replicas.map(|r| {
        let lane = Lane::new(Source::Exclusive(pool.clone()), LastError::default());
        (lane, r)
    });
    let plain = Lane::new(Source::Shared(pool), LastError::default());
    RedisBackend::new(plain, waiting, fence_retention).coalescing(coalesce)
}

/// One Redis server over the user's `ConnectionManager`: one connection,
/// no `WAIT` lane (refused by the builder).
pub(crate) fn from_manager(
    manager: ConnectionManager,
    fence_retention: Duration,
    coalesce: bool,
) -> RedisBackend {
    let plain = Lane::new(Source::Manager(manager), LastError::default());
    RedisBackend::new(plain, None, fence_retention).coalescing(coalesce)
}

/// Redlock over `urls`: at least 3 distinct servers. The quorum, and its
/// printable name `redlock[url, url, ..]`.
pub(crate) fn redlock(
    urls: &[String],
    c: &Connect,
    node_timeout: Duration,
) -> Result<(QuorumBackend, String), ConfigError> {
    let invalid = |reason: String| ConfigError::InvalidNodes { reason };
    if urls.len() < 3 {
        return Err(invalid(format!(
            "{} node(s) given; Redlock needs at least 3 independent Redis masters (5 tolerate 2 \
             failures); for one Redis use `.url(..)`",
            urls.len()
        )));
    }
    let mut nodes = Vec::with_capacity(urls.len());
    let mut seen: Vec<String> = Vec::new();
    for url in urls {
        let (client, redacted) = open_url(url, c.tls.as_ref())?;
        let info = client.get_connection_info();
        let address = format!("{}/{}", info.addr(), info.redis_settings().db());
        if seen.contains(&address) {
            return Err(invalid(format!(
                "{redacted} is listed twice; each node must be a different Redis, or one server \
                 would count twice toward the majority"
            )));
        }
        seen.push(address);
        // Each node's acquires are spread by the quorum, under the node
        // timeout: sent alone.
        let backend = server(&client, &redacted, c)?.coalescing(false);
        nodes.push(Node::new(backend, redacted));
    }
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let target = format!("redlock[{}]", names.join(", "));
    Ok((QuorumBackend::new(nodes, node_timeout), target))
}

/// One Redis server at `addr` (a cluster node, a Sentinel's primary), with
/// the connection settings (credentials, TLS) of `base`, a URL the user
/// gave; its backend and its name (`redis://host:port`, no password).
pub(crate) fn server_at(
    base: Option<&redis::ConnectionInfo>,
    addr: &Addr,
    c: &Connect,
) -> Result<(RedisBackend, String), OpError> {
    let unusable = |detail: String| OpError::Connect {
        failure: ConnectFailure::Other,
        detail,
    };
    let base = base.ok_or_else(|| unusable("no node was given".to_owned()))?;
    let (info, scheme) = info_at(base, addr);
    let name = format!("{scheme}://{addr}");
    let client = redis::Client::open(info).map_err(|e| unusable(format!("{name}: {e}")))?;
    let backend = server(&client, &name, c).map_err(|e| unusable(e.to_string()))?;
    Ok((backend, name))
}

/// `base`'s settings (credentials, TLS) for the server at `addr`, and its
/// scheme (`redis` or `rediss`).
pub(crate) fn info_at(
    base: &redis::ConnectionInfo,
    addr: &Addr,
) -> (redis::ConnectionInfo, &'static str) {
    let (to, scheme) = match base.addr() {
        redis::ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => (
            redis::ConnectionAddr::TcpTls {
                host: addr.host.clone(),
                port: addr.port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            "rediss",
        ),
        _ => (
            redis::ConnectionAddr::Tcp(addr.host.clone(), addr.port),
            "redis",
        ),
    };
    (base.clone().set_addr(to), scheme)
}

/// The address of a parsed URL, when it is TCP (with or without TLS).
fn tcp_addr(info: &redis::ConnectionInfo) -> Option<Addr> {
    match info.addr() {
        redis::ConnectionAddr::Tcp(host, port)
        | redis::ConnectionAddr::TcpTls { host, port, .. } => Some(Addr {
            host: host.clone(),
            port: *port,
        }),
        _ => None,
    }
}

/// A Redis Cluster from the nodes in `urls` (any of its nodes; the client
/// reads the rest of the cluster from them). Its printable name
/// `cluster[url, url, ..]`.
pub(crate) fn cluster(
    urls: &[String],
    c: &Connect,
) -> Result<(ClusterBackend, String), ConfigError> {
    let invalid = |reason: String| ConfigError::InvalidClusterNodes { reason };
    if urls.is_empty() {
        return Err(invalid(
            "no node given; list one or more nodes of the cluster, e.g. \
             `.cluster([\"redis://10.0.0.1:7000\", \"redis://10.0.0.2:7000\"])`"
                .to_owned(),
        ));
    }
    let mut seeds: Vec<Seed> = Vec::with_capacity(urls.len());
    let mut names = Vec::with_capacity(urls.len());
    for url in urls {
        let (client, redacted) = open_url(url, c.tls.as_ref())?;
        let info = client.get_connection_info().clone();
        let Some(addr) = tcp_addr(&info) else {
            return Err(ConfigError::InvalidUrl {
                url: redacted,
                reason: "a cluster node is reached over TCP: `redis://host:port`".to_owned(),
            });
        };
        if info.redis_settings().db() != 0 {
            return Err(ConfigError::InvalidUrl {
                url: redacted,
                reason: "Redis Cluster has database 0 only; drop the `/db` from the URL".to_owned(),
            });
        }
        if seeds.iter().any(|s| s.addr == addr) {
            return Err(invalid(format!(
                "{redacted} is listed twice; list each node once"
            )));
        }
        seeds.push(Seed { info, addr });
        names.push(redacted);
    }
    let target = format!("cluster[{}]", names.join(", "));
    let connect = Connect {
        fail_fast: true,
        ..c.clone()
    };
    Ok((ClusterBackend::new(seeds, connect), target))
}

/// A Sentinel-managed primary named `master`, found through the Sentinels
/// at `urls`. Its printable name `sentinel[master @ url, url, ..]`.
pub(crate) fn sentinel(
    urls: &[String],
    master: &str,
    c: &Connect,
    follow_announcements: bool,
) -> Result<(SentinelBackend, String), ConfigError> {
    let invalid = |reason: String| ConfigError::InvalidSentinels { reason };
    if urls.is_empty() {
        return Err(invalid(
            "no Sentinel given; list the Sentinels, e.g. \
             `.sentinel([\"redis://10.0.0.1:26379\", \"redis://10.0.0.2:26379\"], \"mymaster\")`"
                .to_owned(),
        ));
    }
    if master.trim().is_empty() {
        return Err(invalid(
            "the master name is empty; give the name the Sentinels monitor the primary under \
             (`sentinel monitor <name> ..` in their configuration)"
                .to_owned(),
        ));
    }
    let mut sentinels: Vec<SentinelNode> = Vec::with_capacity(urls.len());
    let mut seen: Vec<Addr> = Vec::new();
    for url in urls {
        let (client, redacted) = open_url(url, c.tls.as_ref())?;
        let Some(addr) = tcp_addr(client.get_connection_info()) else {
            return Err(ConfigError::InvalidUrl {
                url: redacted,
                reason: "a Sentinel is reached over TCP: `redis://host:26379`".to_owned(),
            });
        };
        if seen.contains(&addr) {
            return Err(invalid(format!(
                "{redacted} is listed twice; list each Sentinel once"
            )));
        }
        seen.push(addr);
        sentinels.push(SentinelNode {
            tls_probe: PlainTextProbe::of(client.get_connection_info()),
            client,
            name: redacted,
        });
    }
    let names: Vec<&str> = sentinels.iter().map(|s| s.name.as_str()).collect();
    let target = format!("sentinel[{master} @ {}]", names.join(", "));
    // A refused connection to a primary that died fails at once, so the
    // call can ask the Sentinels within its limit.
    let connect = Connect {
        fail_fast: true,
        ..c.clone()
    };
    Ok((
        SentinelBackend::new(sentinels, master.to_owned(), connect, follow_announcements),
        target,
    ))
}

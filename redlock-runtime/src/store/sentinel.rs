//! Redis Sentinel: one primary, found and followed through the Sentinels.
//!
//! The primary is a single Redis to the rest of the client ([`RedisBackend`]
//! over bb8-redis pools, `WAIT` on connections of its own with replicas);
//! this module only decides which server that is:
//! - **Discovery.** `SENTINEL GET-MASTER-ADDR-BY-NAME` on the Sentinels, all
//!   at once; the first address given wins. Sentinels that do not know the
//!   name answer nil: when every Sentinel that answers says so, the client
//!   fails with [`ConfigError::UnknownSentinelMaster`](crate::ConfigError::UnknownSentinelMaster).
//! - **Following a failover**, two ways. A task subscribed to `+switch-master`
//!   on a Sentinel switches as soon as the Sentinels announce the new
//!   primary. And a call that finds the primary gone (a connection error, a
//!   timeout) or demoted (`READONLY`) asks the Sentinels again, once, and
//!   if they name another primary, is sent there within its own time
//!   limit: at most the command timeout plus one Sentinel round trip.
//!
//! The primary's connections use the first Sentinel URL's credentials and
//! TLS settings (and its `/db`): give the Sentinels the same password as
//! the data nodes, or a URL per Sentinel with the data nodes' password when
//! the Sentinels need none.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::{ErrorKind, ServerErrorKind};
use tokio::sync::watch;
use tokio::time::Instant;

use super::cluster::slots::Addr;
use super::open::{self, Connect};
use super::probe::PlainTextProbe;
use super::server::RedisBackend;
use super::traced::Traced;
use super::{NodePing, OpError};
use crate::error::ConnectFailure;

/// The longest one Sentinel may take to answer.
const SENTINEL_LIMIT: Duration = Duration::from_secs(1);

/// How long the `+switch-master` watcher waits before reconnecting.
const WATCH_RETRY: Duration = Duration::from_millis(500);

/// A Sentinel the user listed.
#[derive(Debug)]
pub(crate) struct SentinelNode {
    pub(crate) client: redis::Client,
    /// Its URL, password redacted.
    pub(crate) name: String,
    /// For a `rediss://` Sentinel: tells a plain-text port from a silent
    /// Sentinel when it does not answer.
    pub(crate) tls_probe: Option<PlainTextProbe>,
}

impl SentinelNode {
    /// Why this Sentinel gave no answer within `waited`: a plain-text port
    /// behind a `rediss://` URL (probed now, or found by an earlier probe)
    /// is a TLS failure; else a timeout.
    async fn silent(&self, waited: Duration) -> (ConnectFailure, String) {
        if let Some(probe) = &self.tls_probe
            && let Some(found) = probe.run().await
        {
            return (ConnectFailure::Tls, format!("{}: {found}", self.name));
        }
        self.timed_out(waited)
    }

    /// A Sentinel still asked when the discovery's time ran out: a TLS
    /// failure if a probe found its port plain; else a timeout, and for a
    /// `rediss://` Sentinel a probe started for the next discovery to find
    /// (a call's time limit may end with the Sentinel's own, before its
    /// probe could run).
    fn unanswered(&self, waited: Duration) -> (ConnectFailure, String) {
        if let Some(probe) = &self.tls_probe {
            match probe.found() {
                Some(found) => return (ConnectFailure::Tls, format!("{}: {found}", self.name)),
                None => probe.start(),
            }
        }
        self.timed_out(waited)
    }

    fn timed_out(&self, waited: Duration) -> (ConnectFailure, String) {
        (
            ConnectFailure::Timeout,
            format!("{}: no answer within {waited:?}", self.name),
        )
    }
}

/// The primary in use.
#[derive(Debug)]
pub(crate) struct Primary {
    pub(crate) addr: Addr,
    pub(crate) name: String,
    pub(crate) backend: RedisBackend,
}

/// The lock store on the primary the Sentinels name.
#[derive(Debug)]
pub(crate) struct SentinelBackend {
    sentinels: Vec<SentinelNode>,
    master: String,
    connect: Connect,
    primary: RwLock<Option<Arc<Primary>>>,
    /// One discovery at a time; the others use its result.
    discovering: tokio::sync::Mutex<()>,
    /// The switch count: each switch to another primary adds one (the
    /// wake-up subscriber follows it).
    switches: watch::Sender<u64>,
    watching: AtomicBool,
}

/// Whether `e` says the primary may have changed: it cannot be reached, did
/// not answer, or refuses writes.
fn primary_gone(e: &OpError) -> bool {
    match e {
        OpError::Connect { .. } | OpError::Pool { .. } | OpError::Timeout(_) => true,
        OpError::Redis(e) => {
            matches!(
                e.kind(),
                ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
            ) || crate::error::is_connection_failure(e)
        }
        _ => false,
    }
}

impl SentinelBackend {
    /// Whether writes must reach replicas (`.replicas(..)`: `WAIT`).
    pub(crate) fn waits_for_replicas(&self) -> bool {
        self.connect.replicas.is_some()
    }

    /// Without `follow_announcements`, no `+switch-master` watcher starts:
    /// failovers are found by asking again on errors only.
    pub(crate) fn new(
        sentinels: Vec<SentinelNode>,
        master: String,
        connect: Connect,
        follow_announcements: bool,
    ) -> Self {
        Self {
            sentinels,
            master,
            connect,
            primary: RwLock::new(None),
            discovering: tokio::sync::Mutex::new(()),
            switches: watch::Sender::new(0),
            // "Already watching" keeps the watcher from starting.
            watching: AtomicBool::new(!follow_announcements),
        }
    }

    fn current(&self) -> Option<Arc<Primary>> {
        self.primary
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Switches to the primary at `addr` (kept if it is the one in use).
    fn switch_to(&self, addr: Addr) -> Result<Arc<Primary>, OpError> {
        if let Some(current) = self.current().filter(|p| p.addr == addr) {
            return Ok(current);
        }
        let base = self
            .sentinels
            .first()
            .map(|s| s.client.get_connection_info());
        let (backend, name) = open::server_at(base, &addr, &self.connect)?;
        tracing::info!(target: "redlock", master = %self.master, primary = %name, "using the primary the Sentinels name");
        let primary = Arc::new(Primary {
            addr,
            name,
            backend,
        });
        *self.primary.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&primary));
        self.switches.send_modify(|n| *n += 1);
        Ok(primary)
    }

    /// The primary's connection settings now (for the wake-up subscriber).
    pub(crate) fn primary_client(&self) -> Option<redis::Client> {
        let current = self.current()?;
        let base = self.sentinels.first()?.client.get_connection_info();
        redis::Client::open(open::info_at(base, &current.addr).0).ok()
    }

    /// Changes each time the client switches to another primary.
    pub(crate) fn switches(&self) -> watch::Receiver<u64> {
        self.switches.subscribe()
    }

    /// Asks the Sentinels for the primary's address and switches to it. A
    /// discovery that completed while this one waited its turn is used.
    ///
    /// When no Sentinel names it, the error keeps the kind of the
    /// Sentinels' failures ([`ConnectFailure::of_servers`], none spare): a
    /// Sentinel that rejected the password or the TLS handshake makes it
    /// [`Auth`](ConnectFailure::Auth) or [`Tls`](ConnectFailure::Tls)
    /// whatever the others did, because that is a mistake in the client's
    /// settings that no retry fixes, and the others' outage (a refused
    /// connection, a timeout) would hide it and have an acquire retry it
    /// for its whole wait; else, when every Sentinel failed the same way,
    /// that way; else `Other`, the detail naming each Sentinel's failure.
    pub(crate) async fn discover(&self, limit: Duration) -> Result<Arc<Primary>, OpError> {
        let seen = *self.switches.borrow();
        let Ok(_turn) = tokio::time::timeout(limit, self.discovering.lock()).await else {
            return Err(OpError::Timeout(limit));
        };
        if *self.switches.borrow() != seen
            && let Some(primary) = self.current()
        {
            return Ok(primary);
        }
        let per_sentinel = limit.min(SENTINEL_LIMIT);
        let master = self.master.as_str();
        let mut asks: FuturesUnordered<_> = self
            .sentinels
            .iter()
            .enumerate()
            .map(|(i, sentinel)| async move {
                let ask = async {
                    // Bounded by `per_sentinel` below, not by redis-rs's
                    // own (shorter) defaults.
                    let config = redis::AsyncConnectionConfig::new()
                        .set_response_timeout(None)
                        .set_connection_timeout(None);
                    let mut conn = sentinel
                        .client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await?;
                    redis::cmd("SENTINEL")
                        .arg("GET-MASTER-ADDR-BY-NAME")
                        .arg(master)
                        .query_async::<Option<(String, u16)>>(&mut Traced(&mut conn))
                        .await
                };
                let answer = match tokio::time::timeout(per_sentinel, ask).await {
                    Ok(Ok(answer)) => {
                        if let Some(probe) = &sentinel.tls_probe {
                            probe.forget();
                        }
                        Ok(answer)
                    }
                    Ok(Err(e)) => Err((ConnectFailure::of(&e), format!("{}: {e}", sentinel.name))),
                    Err(_) => Err(sentinel.silent(per_sentinel).await),
                };
                (i, answer)
            })
            .collect();
        let deadline = Instant::now() + limit;
        let mut answered = vec![false; self.sentinels.len()];
        let (mut unknown, mut failures) = (0, Vec::new());
        while let Ok(Some((i, answer))) = tokio::time::timeout_at(deadline, asks.next()).await {
            answered[i] = true;
            match answer {
                Ok(Some((host, port))) => return self.switch_to(Addr { host, port }),
                Ok(None) => unknown += 1,
                Err(failure) => failures.push(failure),
            }
        }
        if unknown > 0 && failures.is_empty() {
            return Err(OpError::UnknownMaster {
                master: self.master.clone(),
                sentinels: self.sentinels.iter().map(|s| s.name.clone()).collect(),
            });
        }
        failures.extend(
            self.sentinels
                .iter()
                .zip(&answered)
                .filter(|&(_, &done)| !done)
                .map(|(sentinel, _)| sentinel.unanswered(limit)),
        );
        let kinds: Vec<ConnectFailure> = failures.iter().map(|&(failure, _)| failure).collect();
        let details: Vec<String> = failures.into_iter().map(|(_, detail)| detail).collect();
        Err(OpError::Connect {
            failure: ConnectFailure::of_servers(&kinds, 0),
            detail: format!(
                "no Sentinel named the primary of `{}` ({} did not know it; {})",
                self.master,
                unknown,
                details.join("; ")
            ),
        })
    }

    /// The primary in use, discovered first if there is none yet; and the
    /// `+switch-master` watcher started.
    async fn primary(self: &Arc<Self>, limit: Duration) -> Result<Arc<Primary>, OpError> {
        self.watch();
        match self.current() {
            Some(primary) => Ok(primary),
            None => self.discover(limit).await,
        }
    }

    /// Runs `call` on the primary within `limit`; when the primary seems
    /// gone or demoted, asks the Sentinels once and, if they name another,
    /// sends it there.
    pub(crate) async fn route<T, F, Fut>(
        self: &Arc<Self>,
        _keys: &[&str],
        limit: Duration,
        call: F,
    ) -> Result<T, OpError>
    where
        F: Fn(Arc<Primary>, Duration) -> Fut,
        Fut: Future<Output = Result<T, OpError>>,
    {
        let deadline = Instant::now() + limit;
        let primary = self.primary(limit).await?;
        let error = match call(Arc::clone(&primary), limit).await {
            Ok(value) => return Ok(value),
            Err(e) if primary_gone(&e) => e,
            Err(e) => return Err(e),
        };
        // One Sentinel round trip, even when the call used up its limit.
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(SENTINEL_LIMIT);
        match self.discover(left).await {
            Ok(next) if next.addr != primary.addr => {
                tracing::debug!(target: "redlock", from = %primary.name, to = %next.name, "primary changed; sending again");
                if error.outcome_unknown() {
                    super::server::resend::note();
                }
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1));
                call(next, left).await
            }
            _ => Err(error),
        }
    }

    /// Starts the task that follows `+switch-master` (once, inside a tokio
    /// runtime). It holds the backend weakly and ends with it.
    fn watch(self: &Arc<Self>) {
        if self.watching.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.watching.store(false, Ordering::Release);
            return;
        };
        runtime.spawn(watch_switches(Arc::downgrade(self)));
    }

    /// Finds the primary (the Sentinels know the name) and reaches it.
    pub(crate) async fn check(self: &Arc<Self>) -> Result<(), OpError> {
        let limit = self.connect.connection_timeout;
        let primary = self.discover(limit).await?;
        self.watch();
        primary.backend.check().await
    }

    /// The primary in use, if found yet.
    pub(crate) fn current_primary(&self) -> Option<Arc<Primary>> {
        self.current()
    }

    /// Pings the primary the Sentinels name now (asking them first when
    /// none is known).
    pub(crate) async fn ping(self: &Arc<Self>, limit: Duration) -> NodePing {
        match self.primary(limit).await {
            Ok(primary) => (primary.name.clone(), primary.backend.ping(limit).await),
            Err(e) => (format!("the primary of `{}`", self.master), Err(e)),
        }
    }

    #[cfg(feature = "test-util")]
    /// The current primary's batches of coalesced calls, and their calls.
    pub(crate) fn coalesced_batches(&self) -> (u64, u64) {
        self.current()
            .map_or((0, 0), |p| p.backend.coalesced_batches())
    }
}

/// Follows `+switch-master` announcements on the first Sentinel that
/// answers, while the backend lives.
async fn watch_switches(backend: Weak<SentinelBackend>) {
    let mut next = 0;
    loop {
        let (client, master) = {
            let Some(b) = backend.upgrade() else { return };
            let client = b.sentinels[next % b.sentinels.len()].client.clone();
            (client, b.master.clone())
        };
        next += 1;
        let subscribed = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe("+switch-master").await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let Ok(Ok(mut pubsub)) = tokio::time::timeout(SENTINEL_LIMIT, subscribed).await else {
            tokio::time::sleep(WATCH_RETRY).await;
            continue;
        };
        let mut messages = pubsub.on_message();
        loop {
            // Wake now and then to notice the backend is gone.
            let message = match tokio::time::timeout(Duration::from_secs(5), messages.next()).await
            {
                Ok(Some(message)) => message,
                Ok(None) => break,
                Err(_) => {
                    if backend.strong_count() == 0 {
                        return;
                    }
                    continue;
                }
            };
            // `<name> <old-ip> <old-port> <new-ip> <new-port>`
            let payload: String = message.get_payload().unwrap_or_default();
            let parts: Vec<&str> = payload.split_whitespace().collect();
            if let [name, _, _, host, port] = parts.as_slice()
                && *name == master
                && let Ok(port) = port.parse::<u16>()
            {
                let Some(b) = backend.upgrade() else { return };
                let addr = Addr {
                    host: (*host).to_owned(),
                    port,
                };
                if let Err(error) = b.switch_to(addr) {
                    tracing::warn!(target: "redlock", %error, "could not switch to the new primary");
                }
            }
        }
        tokio::time::sleep(WATCH_RETRY).await;
    }
}

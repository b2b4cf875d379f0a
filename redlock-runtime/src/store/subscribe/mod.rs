//! Push wake-ups for waiters: a release publishes on the lock's channel, and
//! one shared subscriber connection per client wakes a waiter of that key
//! at once (the one of this client that waited longest) instead of letting
//! it sleep out its backoff. Only waiters on that key wake, and one per
//! client, so a release does not send a herd to Redis for one free lock.
//!
//! On Redis Cluster the releases publish with `SPUBLISH` and the subscriber
//! listens with `SSUBSCRIBE`: sharded pub/sub keeps each message on the
//! shard that owns the lock's slot, where plain `PUBLISH` is sent to every
//! node. The subscriber is redis-rs's cluster connection (RESP3), which
//! sends each `SSUBSCRIBE` to the slot's master and subscribes again where
//! a slot moved; when a node drops a channel itself (an unsolicited
//! `SUNSUBSCRIBE` as its slot leaves), the channel is subscribed again. On
//! a cluster older than Redis 7 there is no sharded pub/sub: releases skip
//! the publish and waiters poll.
//!
//! Through Sentinel the subscriber follows the primary: it connects to
//! the primary the client uses, and moves as soon as the client switches
//! to another one (a `+switch-master` announcement, or a command that
//! found the old one gone). Staying on the old server would lose every
//! release: a primary that was paused or cut off, or one demoted after a
//! second failover that does not replicate yet, never sees the new
//! primary's publishes.
//!
//! A message can be missed (the subscriber reconnecting, a lease that ran
//! out instead of being released): waiters therefore keep polling with
//! backoff, capped by the holder's remaining lease, so a missed message
//! delays a waiter by at most one backoff step and never strands it.
//!
//! A message that names a fair waiter names it by its [`waiter_id`], never
//! by its owner token: the channel is readable by anyone allowed to
//! subscribe, and the token is what releases and extends a lock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::ConnectionInfo;
use redis::aio::PubSubSink;
use redis::cluster_async::ClusterConnection;
use tokio::sync::{Notify, watch};

mod connection;
mod message;
use connection::{sharded_subscriber, subscriber};
#[cfg(test)]
pub(crate) use message::GRANT_SEPARATOR;
pub(crate) use message::{Grant, Message, waiter_id};

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Subscriber(_) => "Subscriber",
            Self::Following(_) => "Following",
            Self::Sharded(_) => "Sharded",
            Self::Local => "Local",
            Self::Off => "Off",
        })
    }
}

/// Where a subscriber that follows the primary (Sentinel) connects, and
/// when it must move.
pub(crate) struct Follow {
    /// The server to subscribe on now (the primary), if known.
    pub(crate) resolve: Arc<dyn Fn() -> Option<redis::Client> + Send + Sync>,
    /// Changes each time the client switches to another primary.
    pub(crate) switches: watch::Receiver<u64>,
}

/// How to (un)subscribe on the live subscriber connection.
#[derive(Clone)]
enum Sink {
    Plain(PubSubSink),
    Sharded(ClusterConnection),
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Plain(_) => "Plain",
            Self::Sharded(_) => "Sharded",
        })
    }
}

impl Sink {
    async fn subscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Self::Plain(sink) => sink.subscribe(channel).await,
            Self::Sharded(conn) => conn.ssubscribe(channel).await,
        }
    }

    async fn unsubscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Self::Plain(sink) => sink.unsubscribe(channel).await,
            Self::Sharded(conn) => conn.sunsubscribe(channel).await,
        }
    }
}

/// The wake-up side of a client.
#[derive(Debug)]
pub(crate) struct Wakeups {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    delivery: Delivery,
    state: Mutex<State>,
    /// Ends the subscriber task when the client is dropped.
    closed: Notify,
}

enum Delivery {
    /// Redis: a subscriber connection opened with this client.
    Subscriber(Box<redis::Client>),
    /// Redis (Sentinel): a subscriber connection to the primary in use,
    /// moved to the next one at each switch.
    Following(Follow),
    /// Redis Cluster: sharded pub/sub through a cluster connection seeded
    /// with these nodes.
    Sharded(Vec<ConnectionInfo>),
    /// In memory: releases in this process wake waiters directly.
    Local,
    /// No wake-ups (a client built from a pool alone has no URL to open a
    /// subscriber connection with): waiters poll.
    Off,
}

#[derive(Debug, Default)]
struct State {
    channels: HashMap<String, Channel>,
    /// The live subscriber connection's sink.
    sink: Option<Sink>,
    running: bool,
}

#[derive(Debug)]
struct Channel {
    watchers: usize,
    /// Wakes the channel's longest waiter (a plain release).
    notify: Arc<Notify>,
    /// Fair waiters by [`waiter_id`]: a fair release names the one to wake.
    targets: HashMap<String, Arc<Target>>,
}

/// A fair waiter as the subscriber knows it: woken by name, and handed the
/// lock when the release granted it (see [`Grant`]).
#[derive(Debug, Default)]
struct Target {
    notify: Arc<Notify>,
    grant: Mutex<Option<Grant>>,
}

impl Channel {
    /// Wakes the waiters `message` calls for (see [`Message`]): one waiter
    /// per client and release, except where the message lets several in.
    fn wake(&self, message: Message<'_>) {
        match message {
            Message::All => self.wake_all(),
            Message::Count(n) => (0..n.min(1024)).for_each(|_| self.notify.notify_one()),
            Message::Granted { id, grant } => {
                if let Some(target) = self.targets.get(id) {
                    *target.grant.lock().unwrap_or_else(PoisonError::into_inner) = Some(grant);
                    target.notify.notify_one();
                }
                // Granted to a waiter of another client: nothing to wake here.
            }
            Message::Named(id) => match self.targets.get(id) {
                Some(target) => target.notify.notify_one(),
                None => self.notify.notify_one(),
            },
            Message::Longest => self.notify.notify_one(),
        }
    }

    fn wake_all(&self) {
        self.notify.notify_waiters();
        for target in self.targets.values() {
            target.notify.notify_one();
        }
    }
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        self.inner.closed.notify_one();
    }
}

impl Wakeups {
    fn with(delivery: Delivery) -> Self {
        Self {
            inner: Arc::new(Inner {
                delivery,
                state: Mutex::default(),
                closed: Notify::new(),
            }),
        }
    }

    /// Wake-ups through a subscriber connection to this Redis.
    pub(crate) fn subscriber(client: redis::Client) -> Self {
        Self::with(Delivery::Subscriber(Box::new(client)))
    }

    /// Wake-ups through a subscriber connection to the server `follow`
    /// names, moved at each of its switches.
    pub(crate) fn following(follow: Follow) -> Self {
        Self::with(Delivery::Following(follow))
    }

    /// Wake-ups through sharded pub/sub on the Redis Cluster these nodes
    /// belong to.
    pub(crate) fn sharded(nodes: Vec<ConnectionInfo>) -> Self {
        Self::with(Delivery::Sharded(nodes))
    }

    /// Wake-ups inside this process: the in-memory backend wakes waiters
    /// through the [`LocalWake`] as it releases.
    pub(crate) fn local() -> (Self, LocalWake) {
        let wakeups = Self::with(Delivery::Local);
        let wake = LocalWake {
            inner: Arc::clone(&wakeups.inner),
        };
        (wakeups, wake)
    }

    /// No wake-ups: waiters poll.
    pub(crate) fn off() -> Self {
        Self::with(Delivery::Off)
    }

    /// Subscribes to `channel`: the returned handle's notify fires when a
    /// release is published there (for a fair waiter, `target` its token:
    /// when the release names it, by its [`waiter_id`]). Subscribing is
    /// bounded by `limit`; `None` when this client has no subscriber
    /// (polling only).
    pub(crate) async fn subscribe(
        &self,
        channel: &str,
        target: Option<&str>,
        limit: Duration,
    ) -> Option<Subscription> {
        let needs_subscriber = match self.inner.delivery {
            Delivery::Off => return None,
            Delivery::Local => false,
            Delivery::Subscriber(_) | Delivery::Following(_) | Delivery::Sharded(_) => true,
        };
        // Hashed before the lock is taken; only the id is kept.
        let id = target.map(waiter_id);
        let (notify, named, sink) = {
            let mut state = self.inner.state();
            let entry = state
                .channels
                .entry(channel.to_owned())
                .or_insert_with(|| Channel {
                    watchers: 0,
                    notify: Arc::new(Notify::new()),
                    targets: HashMap::new(),
                });
            entry.watchers += 1;
            let first = entry.watchers == 1;
            let named = id.as_ref().map(|id| {
                Arc::clone(
                    entry
                        .targets
                        .entry(id.clone())
                        .or_insert_with(|| Arc::new(Target::default())),
                )
            });
            let notify = match &named {
                Some(named) => Arc::clone(&named.notify),
                None => Arc::clone(&entry.notify),
            };
            if needs_subscriber && !state.running {
                state.running = true;
                let inner = Arc::clone(&self.inner);
                match &self.inner.delivery {
                    Delivery::Sharded(nodes) => {
                        tokio::spawn(sharded_subscriber(inner, nodes.clone()));
                    }
                    _ => {
                        tokio::spawn(subscriber(inner));
                    }
                }
            }
            (notify, named, if first { state.sink.clone() } else { None })
        };
        if let Some(mut sink) = sink {
            // Once subscribed, the next release of this key wakes us. When
            // this fails or is slow, the subscriber task (re)subscribes on
            // its next connect and polling covers the gap.
            let _ = tokio::time::timeout(limit, sink.subscribe(channel)).await;
        }
        Some(Subscription {
            inner: Arc::clone(&self.inner),
            channel: channel.to_owned(),
            target: id,
            named,
            notify,
        })
    }
}

impl Inner {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How the in-memory backend wakes this process's waiters as it releases
/// (Redis publishes from its scripts instead).
#[derive(Debug, Clone)]
pub(crate) struct LocalWake {
    inner: Arc<Inner>,
}

impl LocalWake {
    /// A release of `channel`'s lock, with the message a script would
    /// publish: a fair waiter is named by its [`waiter_id`] here too (the
    /// memory store's messages never leave this client, but the waiters
    /// are matched by id alike).
    pub(crate) fn released(&self, channel: &str, message: Message<'_>) {
        if let Some(channel) = self.inner.state().channels.get(channel) {
            channel.wake(message);
        }
    }
}

/// A waiter's interest in one channel; unsubscribes with the last one.
#[derive(Debug)]
pub(crate) struct Subscription {
    inner: Arc<Inner>,
    channel: String,
    /// A fair waiter's [`waiter_id`].
    target: Option<String>,
    /// A fair waiter's entry: where a grant for it lands.
    named: Option<Arc<Target>>,
    notify: Arc<Notify>,
}

impl Subscription {
    /// The grant a fair release published for this waiter, if one came
    /// (taken: it is returned once).
    pub(crate) fn grant(&self) -> Option<Grant> {
        self.named
            .as_ref()?
            .grant
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Fires on the next release published for the key.
    pub(crate) fn notify(&self) -> &Arc<Notify> {
        &self.notify
    }

    /// A wake-up armed now: a release published from now on (while the
    /// next attempt is in flight, too) completes it.
    pub(crate) fn armed(&self) -> Armed {
        let mut woken = Box::pin(Arc::clone(&self.notify).notified_owned());
        woken.as_mut().enable();
        Armed(woken)
    }
}

/// A wake-up armed before an attempt (see [`Subscription::armed`]).
pub(crate) struct Armed(std::pin::Pin<Box<tokio::sync::futures::OwnedNotified>>);

/// Sleeps `sleep` (the backoff), or less when `woken` fires first.
pub(crate) async fn nap(sleep: Duration, woken: Option<Armed>) {
    match woken {
        Some(Armed(woken)) => {
            tokio::select! {
                () = tokio::time::sleep(sleep) => {}
                () = woken => {}
            }
        }
        None => tokio::time::sleep(sleep).await,
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut state = self.inner.state();
        let Some(channel) = state.channels.get_mut(&self.channel) else {
            return;
        };
        if let Some(target) = &self.target {
            channel.targets.remove(target);
        }
        channel.watchers -= 1;
        if channel.watchers > 0 {
            return;
        }
        state.channels.remove(&self.channel);
        if let Some(mut sink) = state.sink.clone()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let channel = std::mem::take(&mut self.channel);
            let inner = Arc::clone(&self.inner);
            runtime.spawn(async move {
                let _ = sink.unsubscribe(&channel).await;
                // A new waiter may have subscribed while this was on its
                // way, and this unsubscribe then undid it: subscribe again
                // (the waiter polls meanwhile, so a release in between only
                // costs it one backoff step).
                if inner.state().channels.contains_key(&channel) {
                    let _ = sink.subscribe(&channel).await;
                }
            });
        }
    }
}

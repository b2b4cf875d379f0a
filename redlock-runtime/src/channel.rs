//! [`ChannelWatch`]: push notifications on any Redis channel through the
//! client's wake-up subscriber, for crates built on the runtime (the
//! idempotency layer of `redlock-axum` waits for a first request's result
//! with it).

use std::fmt;
use std::time::Duration;

use crate::client::LockClient;
use crate::wakeups::Watch;

impl LockClient {
    /// Starts watching the Redis channel `channel` through this client's
    /// subscriber connection (the one lock waiters are woken through), so
    /// that a `PUBLISH` on it (from a Lua script, say) completes
    /// [`ChannelWatch::changed`].
    ///
    /// Subscribing is bounded by `limit`. `None` when the client has no
    /// subscriber: one built with [`from_pool`](Self::from_pool) (no URL to
    /// open a subscriber connection with) or [`in_memory`](Self::in_memory)
    /// (no Redis). A message can be missed while the subscriber reconnects,
    /// so callers must also poll, with a bounded interval, whatever the
    /// message announces.
    pub async fn watch_channel(&self, channel: &str, limit: Duration) -> Option<ChannelWatch> {
        self.pool()?;
        let watch = self.wakeups().watch(channel, None, limit).await?;
        Some(ChannelWatch { watch })
    }
}

/// Interest in one Redis channel, made by [`LockClient::watch_channel`];
/// unsubscribes (with the client's last watcher of that channel) on drop.
pub struct ChannelWatch {
    watch: Watch,
}

impl fmt::Debug for ChannelWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelWatch").finish_non_exhaustive()
    }
}

impl ChannelWatch {
    /// Completes on the next message on the channel, or at once if one came
    /// since the watch started (or since the last `changed`) and was not yet
    /// taken by another watcher.
    ///
    /// Each message wakes one watcher of the channel in this client (the
    /// longest waiting); a watcher that finds the news concerns others too
    /// passes it on with [`wake_next`](Self::wake_next).
    pub async fn changed(&self) {
        self.watch.notify().notified().await;
    }

    /// Wakes the next watcher of the channel in this client, as a message
    /// would.
    pub fn wake_next(&self) {
        self.watch.notify().notify_one();
    }
}

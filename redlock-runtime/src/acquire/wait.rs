//! The wait between an acquire's attempts, one loop for every acquire (a
//! lock, a side of a read/write lock, permits, a multi-lock's group of
//! keys under one hash tag): each attempt's time limit, the wake-up armed
//! before it, the subscription to the busy key's channel (taken at the
//! first busy answer on that channel, and followed by one more attempt at
//! once, as a release may have come before it), and the backoff sleep,
//! cut short by a release and ended by the client's shutdown. What an
//! attempt sends, and what it may have taken, stay with its caller.

use std::time::Duration;

use tokio::time::Instant;

use crate::backoff::next_sleep;
use crate::core::Core;
use crate::error::LockError;
use crate::store::subscribe::{Armed, Subscription};

/// The shortest time an acquire attempt is given while waiting, even when
/// less of the wait is left: a shorter limit could never see an answer.
pub(crate) const MIN_ATTEMPT: Duration = Duration::from_millis(50);

/// An acquire's wait, from its first attempt to its last.
pub(crate) struct Wait {
    deadline: Instant,
    /// Whether the acquire waits at all (a zero wait tries once).
    waits: bool,
    /// Attempts answered so far that did not take (0 before the first).
    retries: u32,
    /// The busy key's channel: set after the first busy answer, it wakes
    /// this waiter when the key is released (push), while backoff keeps
    /// polling as the fallback.
    subscription: Option<Subscription>,
    /// The channel last subscribed to, or tried (a client without a
    /// subscriber is not asked again for the same one).
    channel: Option<String>,
}

/// Whether to send the next attempt.
pub(crate) enum Next {
    /// Send it now.
    Attempt,
    /// The wait is over: answer with the last attempt's outcome.
    GaveUp,
}

impl Wait {
    /// The wait of an acquire that waits up to `wait` from `now`.
    pub(crate) fn new(wait: Duration, now: Instant) -> Self {
        Self {
            deadline: now + wait,
            waits: !wait.is_zero(),
            retries: 0,
            subscription: None,
            channel: None,
        }
    }

    /// Attempts answered so far that did not take (0 before the first).
    pub(crate) fn retries(&self) -> u32 {
        self.retries
    }

    /// What is left of the wait.
    pub(crate) fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// The busy key's subscription, once taken.
    pub(crate) fn subscription(&self) -> Option<&Subscription> {
        self.subscription.as_ref()
    }

    /// The next attempt's time limit: the command timeout, within what is
    /// left of the wait but never below [`MIN_ATTEMPT`] while waiting.
    pub(crate) fn limit(&self, command_timeout: Duration) -> Duration {
        if self.waits {
            command_timeout.min(self.remaining().max(MIN_ATTEMPT.min(command_timeout)))
        } else {
            command_timeout
        }
    }

    /// A wake-up armed before an attempt: a release published while it is
    /// in flight still cuts the next sleep short.
    pub(crate) fn arm(&self) -> Option<Armed> {
        self.subscription.as_ref().map(Subscription::armed)
    }

    /// After an attempt that did not take: [`Next::GaveUp`] when the wait
    /// is over; else, when `busy` names a channel not subscribed to yet
    /// (with a fair waiter's token), subscribes and answers at once, or
    /// sleeps the backoff (`pttl`: the holder's lease left), cut short by
    /// `woken`. Fails with [`LockError::ShutDown`] (for `key`) when the
    /// client shuts down meanwhile.
    pub(crate) async fn next(
        &mut self,
        core: &Core,
        woken: Option<Armed>,
        busy: Option<(&str, Option<&str>)>,
        pttl: Option<Duration>,
        key: &str,
    ) -> Result<Next, LockError> {
        let remaining = self.remaining();
        if remaining.is_zero() {
            return Ok(Next::GaveUp);
        }
        if let Some((channel, target)) = busy
            && self.channel.as_deref() != Some(channel)
        {
            self.channel = Some(channel.to_owned());
            let subscription = core
                .wakeups()
                .subscribe(channel, target, remaining.min(MIN_ATTEMPT))
                .await;
            if subscription.is_some() {
                self.subscription = subscription;
                // A release may have come before we subscribed: look
                // again at once, now that none can be missed.
                self.retries = self.retries.max(1);
                return Ok(Next::Attempt);
            }
        }
        let settings = core.settings();
        let sleep = next_sleep(&settings.retry, self.retries, pttl, remaining);
        self.retries = self.retries.saturating_add(1);
        tokio::select! {
            () = crate::store::subscribe::nap(sleep, woken) => Ok(Next::Attempt),
            // Boxed: a pointer in every acquire's future, not the wait's
            // state (the acquire future's size is pinned by a test).
            () = Box::pin(core.closed()) => Err(LockError::ShutDown { key: key.to_owned() }),
        }
    }
}

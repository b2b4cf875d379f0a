//! The subscriber connection of a client's wake-ups: one task that keeps
//! it up while the client lives (plain pub/sub on one Redis or the
//! primary Sentinel names, sharded pub/sub on a cluster), subscribes to
//! every watched channel again after each reconnect, and hands each
//! message to its channel's waiters.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::{ConnectionInfo, PushInfo, PushKind};
use tokio::sync::watch;

use super::{Delivery, Inner, Message, Sink};

/// How long to wait before reconnecting a lost subscriber connection.
const RECONNECT_DELAY: Duration = Duration::from_millis(200);

/// Keeps one subscriber connection up while the client lives: subscribes to
/// every watched channel (again after a reconnect) and wakes the watchers
/// of each message's channel.
pub(super) async fn subscriber(inner: Arc<Inner>) {
    let mut switches = match &inner.delivery {
        Delivery::Following(follow) => Some(follow.switches.clone()),
        _ => None,
    };
    loop {
        // A switch from now on moves the connection made below.
        if let Some(switches) = switches.as_mut() {
            switches.borrow_and_update();
        }
        let client = match &inner.delivery {
            Delivery::Subscriber(client) => (**client).clone(),
            Delivery::Following(follow) => match (follow.resolve)() {
                Some(client) => client,
                None => {
                    if closed_within(&inner, RECONNECT_DELAY).await {
                        return;
                    }
                    continue;
                }
            },
            _ => return,
        };
        let connected = tokio::select! {
            () = inner.closed.notified() => return,
            c = tokio::time::timeout(Duration::from_secs(2), client.get_async_pubsub()) => c,
        };
        let pubsub = match connected {
            Ok(Ok(pubsub)) => pubsub,
            Ok(Err(error)) => {
                tracing::debug!(target: "redlock", %error, "wake-up subscriber could not connect; waiters poll");
                if closed_within(&inner, RECONNECT_DELAY).await {
                    return;
                }
                continue;
            }
            Err(_) => {
                tracing::debug!(target: "redlock", "wake-up subscriber connect timed out; waiters poll");
                continue;
            }
        };
        let (sink, mut stream) = pubsub.split();
        let mut sink = Sink::Plain(sink);
        let channels: Vec<String> = {
            let mut state = inner.state();
            state.sink = Some(sink.clone());
            state.channels.keys().cloned().collect()
        };
        let mut subscribed = true;
        for channel in &channels {
            if let Err(error) = sink.subscribe(channel).await {
                tracing::debug!(target: "redlock", %error, "wake-up subscribe failed; waiters poll");
                subscribed = false;
                break;
            }
        }
        // Releases may have been missed while unsubscribed: wake everyone
        // to look again.
        for channel in inner.state().channels.values() {
            channel.wake_all();
        }
        let mut moving = false;
        if subscribed {
            loop {
                let msg = tokio::select! {
                    () = inner.closed.notified() => return,
                    () = switched(&mut switches) => {
                        moving = true;
                        break;
                    }
                    msg = stream.next() => msg,
                };
                let Some(msg) = msg else { break };
                let state = inner.state();
                if let Some(channel) = state.channels.get(msg.get_channel_name()) {
                    // One waiter per client and release (the one a fair
                    // release names): waking all of them would send them all
                    // to Redis for one free lock.
                    let text = std::str::from_utf8(msg.get_payload_bytes()).unwrap_or("");
                    channel.wake(Message::parse(text));
                }
            }
        }
        inner.state().sink = None;
        if moving {
            // At once: the new primary is known, and each release until
            // the subscriber is there costs a waiter a backoff step.
            tracing::debug!(target: "redlock", "the primary changed; the wake-up subscriber moves to it");
            continue;
        }
        tracing::debug!(target: "redlock", "wake-up subscriber connection lost; reconnecting");
        if closed_within(&inner, RECONNECT_DELAY).await {
            return;
        }
    }
}

/// Completes when the primary a following subscriber is on changes; never
/// for the other subscribers (nor once the client is gone).
async fn switched(switches: &mut Option<watch::Receiver<u64>>) {
    if let Some(switches) = switches
        && switches.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

/// The cluster's subscriber: one redis-rs cluster connection (RESP3) whose
/// pushes come through a channel; it reconnects and moves subscriptions
/// with the slots by itself.
pub(super) async fn sharded_subscriber(inner: Arc<Inner>, nodes: Vec<ConnectionInfo>) {
    loop {
        let (tx, mut pushes) = tokio::sync::mpsc::unbounded_channel::<PushInfo>();
        let built = redis::cluster::ClusterClientBuilder::new(nodes.clone())
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(tx)
            .connection_timeout(Duration::from_secs(2))
            .response_timeout(Duration::from_secs(2))
            .retries(2)
            .build();
        let client = match built {
            Ok(client) => client,
            Err(error) => {
                tracing::debug!(target: "redlock", %error, "wake-up subscriber cannot be built; waiters poll");
                return;
            }
        };
        let connected = tokio::select! {
            () = inner.closed.notified() => return,
            c = tokio::time::timeout(Duration::from_secs(4), client.get_async_connection()) => c,
        };
        let conn = match connected {
            Ok(Ok(conn)) => conn,
            Ok(Err(error)) => {
                tracing::debug!(target: "redlock", %error, "wake-up subscriber could not connect to the cluster; waiters poll");
                if closed_within(&inner, RECONNECT_DELAY).await {
                    return;
                }
                continue;
            }
            Err(_) => continue,
        };
        let mut sink = Sink::Sharded(conn);
        let channels: Vec<String> = {
            let mut state = inner.state();
            state.sink = Some(sink.clone());
            state.channels.keys().cloned().collect()
        };
        for channel in &channels {
            if let Err(error) = sink.subscribe(channel).await {
                tracing::debug!(target: "redlock", %error, "wake-up SSUBSCRIBE failed (Redis older than 7?); waiters poll");
            }
        }
        for channel in inner.state().channels.values() {
            channel.wake_all();
        }
        loop {
            let push = tokio::select! {
                () = inner.closed.notified() => return,
                push = pushes.recv() => push,
            };
            let Some(PushInfo { kind, data }) = push else {
                break;
            };
            let text = |i: usize| match data.get(i) {
                Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                Some(redis::Value::SimpleString(s)) => s.clone(),
                _ => String::new(),
            };
            match kind {
                PushKind::SMessage | PushKind::Message => {
                    let state = inner.state();
                    if let Some(channel) = state.channels.get(&text(0)) {
                        channel.wake(Message::parse(&text(1)));
                    }
                }
                // A node dropped the channel as its slot left (or we did):
                // subscribe again where the slot is now, if still watched.
                PushKind::SUnsubscribe => {
                    let channel = text(0);
                    let watched = inner.state().channels.contains_key(&channel);
                    if watched {
                        tracing::debug!(target: "redlock", "wake-up channel dropped by its node (slot moved?); subscribing again");
                        let mut sink = sink.clone();
                        tokio::spawn(async move {
                            let _ = sink.subscribe(&channel).await;
                        });
                        if let Some(channel) = inner.state().channels.get(&text(0)) {
                            channel.wake_all();
                        }
                    }
                }
                // A node connection was lost: releases may have been missed.
                PushKind::Disconnection => {
                    for channel in inner.state().channels.values() {
                        channel.wake_all();
                    }
                }
                _ => {}
            }
        }
        inner.state().sink = None;
        if closed_within(&inner, RECONNECT_DELAY).await {
            return;
        }
    }
}

/// Sleeps `delay`; true if the client was dropped meanwhile.
async fn closed_within(inner: &Inner, delay: Duration) -> bool {
    tokio::select! {
        () = inner.closed.notified() => true,
        () = tokio::time::sleep(delay) => false,
    }
}

//! The cluster watchdog's batch: renewals grouped into one pipeline per
//! master, a second round for the slots that moved, then what is still
//! redirected on its own.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::time::Instant;

use super::{OpError, Renewal};
use crate::store::cluster::slots::{Addr, slot};
use crate::store::cluster::{ClusterBackend, Follow, follow};

impl ClusterBackend {
    /// The watchdog's batch: one pipeline per master (each command on one
    /// slot, `WAIT` at its end with replicas), all sent at once. Renewals
    /// whose slot moved (`MOVED`, or no master in the map) go in a second
    /// round of pipelines, per their new master: at most two pipelines per
    /// master per batch. What is still redirected then (`ASK`, `TRYAGAIN`
    /// during a migration) is sent on its own, following it.
    pub(crate) async fn extend_many(
        self: &Arc<Self>,
        items: &[Renewal<'_>],
        limit: Duration,
    ) -> Result<Vec<Result<bool, OpError>>, OpError> {
        let deadline = Instant::now() + limit;
        let mut answers: Vec<Option<Result<bool, OpError>>> =
            (0..items.len()).map(|_| None).collect();
        let mut pending: Vec<usize> = (0..items.len()).collect();
        for _round in 0..2 {
            if pending.is_empty() {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let map = match self.current_map() {
                Some(map) => map,
                None => self.refresh(left).await?,
            };
            let mut groups: HashMap<Addr, Vec<usize>> = HashMap::new();
            for &i in &pending {
                if let Some(addr) = map.owner(slot(items[i].keys.main().as_bytes())) {
                    groups.entry(addr.clone()).or_default().push(i);
                }
            }
            let sends: FuturesUnordered<_> = groups
                .into_iter()
                .map(|(addr, indexes)| async move {
                    let node = self.node(&addr)?;
                    let batch: Vec<Renewal<'_>> = indexes.iter().map(|&i| items[i]).collect();
                    node.renewal_pipelines.fetch_add(1, Ordering::Relaxed);
                    let replies = node.backend.extend_many(&batch, left).await;
                    Ok::<_, OpError>((indexes, replies))
                })
                .collect();
            for outcome in sends.collect::<Vec<_>>().await {
                let (indexes, replies) = outcome?;
                match replies {
                    Ok(replies) => {
                        for (i, reply) in indexes.into_iter().zip(replies) {
                            answers[i] = Some(reply);
                        }
                    }
                    Err(e) => {
                        if matches!(follow(&e), Follow::Remap) {
                            self.refresh_soon();
                        }
                        for i in indexes {
                            answers[i] = Some(Err(e.copy()));
                        }
                    }
                }
            }
            // Note where the slots went, and send those again.
            pending.retain(|&i| match &answers[i] {
                None => true,
                Some(Err(e)) => match follow(e) {
                    Follow::Moved(moved, addr) => {
                        if let Some(map) = self.current_map() {
                            self.set_map(map.with_owner(moved, addr));
                        }
                        true
                    }
                    _ => false,
                },
                Some(Ok(_)) => false,
            });
        }
        // Still redirected or unrouted: each on its own, at once.
        let followed: Vec<(usize, Result<bool, OpError>)> = answers
            .iter()
            .enumerate()
            .filter(|(_, answer)| match answer {
                None => true,
                Some(Err(e)) => matches!(
                    follow(e),
                    Follow::Moved(..) | Follow::Ask(_) | Follow::TryAgain
                ),
                Some(Ok(_)) => false,
            })
            .map(|(i, _)| async move {
                let left = deadline.saturating_duration_since(Instant::now());
                let answer = if left.is_zero() {
                    Err(OpError::Timeout(limit))
                } else {
                    self.renew_one(&items[i], left).await
                };
                (i, answer)
            })
            .collect::<FuturesUnordered<_>>()
            .collect()
            .await;
        for (i, answer) in followed {
            answers[i] = Some(answer);
        }
        Ok(answers
            .into_iter()
            .map(|a| a.unwrap_or(Err(OpError::Timeout(limit))))
            .collect())
    }

    /// One watchdog renewal, routed on its own (never shortening a lease).
    async fn renew_one(
        self: &Arc<Self>,
        renewal: &Renewal<'_>,
        limit: Duration,
    ) -> Result<bool, OpError> {
        self.route(&renewal.keys.routed(), limit, |node, left| async move {
            node.backend
                .extend_many(std::slice::from_ref(renewal), left)
                .await?
                .pop()
                .unwrap_or(Err(OpError::Reply("no answer to a renewal".to_owned())))
        })
        .await
    }
}

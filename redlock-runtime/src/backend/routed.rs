//! The verbs of the stores that send each call to one Redis they pick (a
//! cluster's slot master, Sentinel's primary) through their own
//! `route(keys, limit, call)`, which follows that store's redirections and
//! failovers within `limit`: written once, here, for both.

use std::sync::Arc;
use std::time::Duration;

use super::{OpError, Renewal};
use crate::store::cluster::ClusterBackend;
use crate::store::sentinel::SentinelBackend;

/// The verbs of a store that sends each call to one Redis it picks (a
/// cluster's slot master, Sentinel's primary) through its own
/// `route(keys, limit, call)`, which follows that store's redirections and
/// failovers within `limit`. Expands inside its `impl`; the list of verbs
/// is written once, here, for every such store.
macro_rules! routed_verbs {
    () => {
        routed_verbs! {
            @each
            acquire(request: $crate::backend::Acquire<'_>) -> $crate::backend::AcquireReply;
            extend(renewal: $crate::backend::Renewal<'_>) -> bool;
            end(end: $crate::backend::End<'_>) -> $crate::backend::Ended;
            give_back(give_back: $crate::backend::GiveBack<'_>) -> bool;
            claim(claim: $crate::backend::Claim<'_>) -> $crate::backend::Claimed<u64>;
            complete(complete: $crate::backend::Complete<'_>) -> bool;
            downgrade(downgrade: $crate::backend::Downgrade<'_>) -> bool;
            available(available: $crate::backend::Available<'_>) -> u32;
            latch(call: $crate::backend::LatchCall<'_>) -> $crate::backend::LatchReply;
            acquire_group(group: $crate::backend::GroupAcquire<'_>) -> $crate::backend::GroupReply;
            inspect(inspect: $crate::backend::Inspect<'_>) -> $crate::backend::Inspection;
            issue_fence(issue: $crate::backend::IssueFence<'_>) -> Option<u64>;
            force_release(force: $crate::backend::ForceRelease<'_>) -> $crate::backend::ForceReply;
        }
    };
    (@each $($verb:ident($request:ident: $ty:ty) -> $out:ty;)*) => {
        $(
            pub(crate) async fn $verb(
                self: &std::sync::Arc<Self>,
                $request: &$ty,
                limit: std::time::Duration,
            ) -> Result<$out, OpError> {
                self.route(&$request.keys.routed(), limit, |server, left| async move {
                    server.backend.$verb($request, left).await
                })
                .await
            }
        )*

        /// The clock of the server that serves an arbitrary key.
        pub(crate) async fn time(
            self: &std::sync::Arc<Self>,
            limit: std::time::Duration,
        ) -> Result<u64, OpError> {
            self.route(&["clock"], limit, |server, left| async move {
                server.backend.time(left).await
            })
            .await
        }
    };
}

impl ClusterBackend {
    routed_verbs!();
}

impl SentinelBackend {
    routed_verbs!();

    pub(crate) async fn extend_many(
        self: &Arc<Self>,
        items: &[Renewal<'_>],
        limit: Duration,
    ) -> Result<Vec<Result<bool, OpError>>, OpError> {
        // One Redis: the batch goes whole to the primary.
        let Some(first) = items.first() else {
            return Ok(Vec::new());
        };
        self.route(&first.keys.routed(), limit, |p, left| async move {
            p.backend.extend_many(items, left).await
        })
        .await
    }
}

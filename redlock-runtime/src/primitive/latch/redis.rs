//! The countdown latch on one Redis.

use std::time::Duration;

use super::scripts::{LATCH_COUNT_DOWN, LATCH_READ, LATCH_SET};
use super::{LatchCall, LatchOp, LatchReply};
use crate::store::OpError;
use crate::store::server::call::ScriptCall;
use crate::store::server::{On, RedisBackend};
use crate::util::millis_ceil;

impl RedisBackend {
    /// One call on a countdown latch: a set-up or a count-down is a write
    /// (acknowledged by the replicas, when required); a read is not.
    pub(crate) async fn latch(
        &self,
        call: &LatchCall<'_>,
        limit: Duration,
    ) -> Result<LatchReply, OpError> {
        let LatchCall { keys, op } = *call;
        match op {
            LatchOp::Set { count, ttl } => {
                let ttl_ms = millis_ceil(ttl);
                let set: i64 = self
                    .acknowledged_write(
                        &keys.latch,
                        limit,
                        |set| *set == 1,
                        |_| {
                            ScriptCall::new(LATCH_SET.on(self.publish))
                                .key(&keys.latch)
                                .arg(count)
                                .arg(ttl_ms)
                        },
                    )
                    .await?;
                Ok(if set == 1 {
                    LatchReply::Counting {
                        count,
                        ttl_left: Some(ttl),
                    }
                } else {
                    LatchReply::AlreadySet
                })
            }
            LatchOp::CountDown { id } => {
                let left: i64 = self
                    .acknowledged_write(
                        &keys.latch,
                        limit,
                        |left| *left >= 0,
                        |_| {
                            ScriptCall::new(LATCH_COUNT_DOWN.on(self.publish))
                                .key(&keys.latch)
                                .key(&keys.ids)
                                .arg(id)
                        },
                    )
                    .await?;
                Ok(match u64::try_from(left) {
                    Ok(count) => LatchReply::Counting {
                        count,
                        ttl_left: None,
                    },
                    Err(_) => LatchReply::Absent,
                })
            }
            LatchOp::Read => {
                let call = ScriptCall::new(LATCH_READ.on(self.publish)).key(&keys.latch);
                let reply: Vec<i64> = self.run_call(On::Plain, None, limit, call).await?;
                let count = reply.first().and_then(|&c| u64::try_from(c).ok());
                let ttl_left = reply
                    .get(1)
                    .and_then(|&t| u64::try_from(t).ok())
                    .map(Duration::from_millis);
                Ok(match count {
                    Some(count) => LatchReply::Counting { count, ttl_left },
                    None => LatchReply::Absent,
                })
            }
        }
    }
}

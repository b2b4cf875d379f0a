//! A script call as the `WAIT` lane sends it: alone, or with replicas in one
//! pipeline with the `WAIT` that acknowledges it, on the connection that
//! runs the write (`WAIT` counts that connection's writes). On Redis
//! Cluster that connection is the master of the key's slot: the `WAIT` is
//! never a lone command that a cluster client would send to every master.

use std::time::Duration;

use redis::{Cmd, Script, ScriptInvocation, ToRedisArgs};

use super::conn::Link;
use super::pipeline::{answers_as, pipeline};
use super::{On, OpError, RedisBackend, Replicas};
use crate::util::millis_ceil;

/// A script with its keys and arguments, to send as `EVALSHA`.
pub(crate) struct ScriptCall<'a> {
    pub(crate) script: &'a Script,
    keys: Vec<&'a str>,
    args: Vec<Vec<u8>>,
}

impl<'a> ScriptCall<'a> {
    pub(crate) fn new(script: &'a Script) -> Self {
        Self {
            script,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    pub(crate) fn key(mut self, key: &'a str) -> Self {
        self.keys.push(key);
        self
    }

    pub(crate) fn arg(mut self, arg: impl ToRedisArgs) -> Self {
        self.args.extend(arg.to_redis_args());
        self
    }

    /// The call on its own (`EVALSHA`, loading the script when Redis does
    /// not have it).
    pub(crate) fn invocation(&self) -> ScriptInvocation<'a> {
        let mut invocation = self.script.prepare_invoke();
        for key in &self.keys {
            invocation.key(*key);
        }
        for arg in &self.args {
            invocation.arg(arg.as_slice());
        }
        invocation
    }

    /// `EVALSHA` of the call, for a pipeline.
    pub(crate) fn evalsha(&self) -> Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.script.get_hash()).arg(self.keys.len());
        for key in &self.keys {
            cmd.arg(*key);
        }
        for arg in &self.args {
            cmd.arg(arg.as_slice());
        }
        cmd
    }
}

impl RedisBackend {
    /// Runs one script call on lane `on` (on `owner`'s connection of it,
    /// when given), within `limit` (see [`run`](Self::run)): its answer.
    /// A write that replicas must acknowledge goes through
    /// [`acknowledged_write`](Self::acknowledged_write) instead.
    pub(crate) async fn run_call<T: redis::FromRedisValue>(
        &self,
        on: On,
        owner: Option<&str>,
        limit: Duration,
        call: ScriptCall<'_>,
    ) -> Result<T, OpError> {
        let call = &call;
        self.run(on, owner, limit, |mut link| async move {
            call.invocation().invoke_async(&mut link.conn).await
        })
        .await
    }

    /// A script write on `token`'s connection of the `WAIT` lane; with
    /// replicas, in one pipeline with `WAIT` on that same connection (it
    /// counts that connection's writes), whose count matters when
    /// `wrote(&reply)`. Too few acknowledgements are [`OpError::Replicas`],
    /// an error whose outcome counts as unknown.
    pub(crate) async fn acknowledged_write<'a, T, F>(
        &self,
        token: &str,
        limit: Duration,
        wrote: fn(&T) -> bool,
        call: F,
    ) -> Result<T, OpError>
    where
        T: redis::FromRedisValue,
        F: Fn(&Link) -> ScriptCall<'a>,
    {
        let replicas = self.replicas;
        let (reply, acked) = self
            .run(
                On::Waiting,
                Some(token),
                self.with_wait(limit),
                |mut link| {
                    let call = call(&link);
                    async move {
                        let Some(r) = replicas else {
                            let reply = call.invocation().invoke_async(&mut link.conn).await?;
                            return Ok((reply, None));
                        };
                        let mut pipe = pipeline();
                        pipe.add_command(call.evalsha())
                            .cmd("WAIT")
                            .arg(r.count)
                            .arg(millis_ceil(r.timeout));
                        let (reply, acked): (T, i64) = match answers_as(&pipe, &mut link.conn).await
                        {
                            // The script cache was flushed (or Redis restarted):
                            // load the script, send both again.
                            Err(e)
                                if e.kind()
                                    == redis::ErrorKind::Server(
                                        redis::ServerErrorKind::NoScript,
                                    ) =>
                            {
                                call.script
                                    .prepare_invoke()
                                    .load_async(&mut link.conn)
                                    .await?;
                                answers_as(&pipe, &mut link.conn).await?
                            }
                            answer => answer?,
                        };
                        let acked = wrote(&reply).then_some(acked);
                        Ok((reply, acked))
                    }
                },
            )
            .await?;
        acknowledged(replicas, acked)?;
        Ok(reply)
    }
}

/// An error when fewer replicas than required acknowledged a write.
pub(crate) fn acknowledged(replicas: Option<Replicas>, acked: Option<i64>) -> Result<(), OpError> {
    match (replicas, acked) {
        (Some(r), Some(acked)) if acked < i64::from(r.count) => Err(OpError::Replicas {
            wanted: r.count,
            acknowledged: u32::try_from(acked.max(0)).unwrap_or(0),
            timeout: r.timeout,
        }),
        _ => Ok(()),
    }
}

//! A script call as the `WAIT` lane sends it: alone, or with replicas in one
//! pipeline with the `WAIT` that acknowledges it, on the connection that
//! runs the write (`WAIT` counts that connection's writes). On Redis
//! Cluster that connection is the master of the key's slot: the `WAIT` is
//! never a lone command that a cluster client would send to every master.

use redis::{Cmd, Script, ScriptInvocation, ToRedisArgs};

/// A script with its keys and arguments, to send as `EVALSHA`.
pub(super) struct ScriptCall<'a> {
    pub(super) script: &'a Script,
    keys: Vec<&'a str>,
    args: Vec<Vec<u8>>,
}

impl<'a> ScriptCall<'a> {
    pub(super) fn new(script: &'a Script) -> Self {
        Self {
            script,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    pub(super) fn key(mut self, key: &'a str) -> Self {
        self.keys.push(key);
        self
    }

    pub(super) fn arg(mut self, arg: impl ToRedisArgs) -> Self {
        self.args.extend(arg.to_redis_args());
        self
    }

    /// The call on its own (`EVALSHA`, loading the script when Redis does
    /// not have it).
    pub(super) fn invocation(&self) -> ScriptInvocation<'a> {
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
    pub(super) fn evalsha(&self) -> Cmd {
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

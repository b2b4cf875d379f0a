//! What one server can do without a script: its conditional delete, if it
//! has one, learned per connection.
//!
//! Valkey 9.0 added `DELIFEQ key value`; Redis 8.4 and Valkey 9.2 added
//! `DELEX key IFEQ value`. Either deletes a key only while it holds a
//! given value, in one command, which is what a lock's release needs: it
//! costs the server a fraction of a script's time (0.20 µs against 1.50 µs
//! for the Lua compare-and-delete, measured on Valkey 9.1.2 with `INFO
//! commandstats`), and works for a user whose ACL forbids scripts.
//!
//! **Learned by behaviour, not by version.** Valkey's `INFO` reports
//! `redis_version:7.2.4` whatever its real version, and a proxy or a
//! managed service may rename or hide commands. Each new connection asks
//! `COMMAND INFO DELEX DELIFEQ`, which writes nothing (an unknown command
//! is a nil entry), before its first call. A connection is new after a
//! reconnect, a restart or a failover (the primary a Sentinel names, a
//! cluster node, are reached over new connections), so what it learned
//! holds for its life. A connection whose probe failed (an ACL without
//! `COMMAND`, say) or got no answer within the connection timeout uses
//! scripts.
//!
//! **Falling back.** A conditional delete refused as unknown, not
//! permitted (`NOPERM`: an ACL that allows `COMMAND` but not the command)
//! or malformed is sent again as the script, and the connection (and its
//! clones) uses scripts from then on: see [`Commands::fall_back`]. A user's
//! `ConnectionManager` reconnects by itself, possibly to another server;
//! the refusal is how it learns.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use redis::RedisError;

use super::conn::Conn;
use super::sized::sized;

/// The conditional delete a server has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConditionalDelete {
    /// `DELEX key IFEQ value` (Redis 8.4, Valkey 9.2).
    DelEx,
    /// `DELIFEQ key value` (Valkey 9.0).
    DelIfEq,
}

impl ConditionalDelete {
    /// Adds the command that deletes `key` while it holds `value` (answers
    /// 1, or 0) to `pipe`.
    pub(crate) fn add(self, pipe: &mut redis::Pipeline, key: &str, value: &str) {
        pipe.add_command(match self {
            Self::DelEx => sized(&["DELEX", key, "IFEQ", value], 0),
            Self::DelIfEq => sized(&["DELIFEQ", key, value], 0),
        });
    }
}

const NONE: u8 = 0;
const DELEX: u8 = 1;
const DELIFEQ: u8 = 2;

/// What one connection's server can do without a script, shared by the
/// connection's handles (a fall-back seen on one holds for all: see
/// `conn::Learned`).
#[derive(Debug, Default)]
pub(crate) struct Commands(AtomicU8);

impl Commands {
    /// Scripts only: nothing probed, or probing turned off.
    pub(crate) fn none() -> Self {
        Self::default()
    }

    fn of(delete: Option<ConditionalDelete>) -> Self {
        let code = match delete {
            None => NONE,
            Some(ConditionalDelete::DelEx) => DELEX,
            Some(ConditionalDelete::DelIfEq) => DELIFEQ,
        };
        Self(AtomicU8::new(code))
    }

    /// The conditional delete to send, if the server has one.
    pub(crate) fn conditional_delete(&self) -> Option<ConditionalDelete> {
        match self.0.load(Ordering::Relaxed) {
            DELEX => Some(ConditionalDelete::DelEx),
            DELIFEQ => Some(ConditionalDelete::DelIfEq),
            _ => None,
        }
    }

    /// The server refused (`refusal`, see [`refused`]) a command this
    /// connection learned it had: scripts from now on, on every handle of
    /// the connection. Logs the error's code only: an unknown command's
    /// text echoes its arguments, the owner token among them.
    pub(crate) fn fall_back(&self, refusal: &RedisError) {
        if self.0.swap(NONE, Ordering::Relaxed) != NONE {
            tracing::debug!(
                target: "redlock",
                code = refusal.code().unwrap_or("?"),
                "the server refused a conditional command; this connection uses scripts from now on"
            );
        }
    }
}

/// Asks the server on `conn` which conditional delete it has (see the
/// module docs); `DELEX` when it has both. A probe that fails, or gets no
/// answer within `limit` (a server paused once connected), means scripts.
pub(crate) async fn probe(mut conn: Conn, limit: Duration) -> Commands {
    let mut cmd = redis::cmd("COMMAND");
    cmd.arg("INFO").arg("DELEX").arg("DELIFEQ");
    let ask = cmd.query_async::<Vec<redis::Value>>(&mut conn);
    let answer = tokio::time::timeout(limit, ask).await.unwrap_or_else(|_| {
        Err(RedisError::from((
            redis::ErrorKind::Io,
            "no answer to COMMAND INFO in time",
        )))
    });
    let known = |v: Option<&redis::Value>| v.is_some_and(|v| !matches!(v, redis::Value::Nil));
    Commands::of(match answer {
        Ok(entries) if known(entries.first()) => Some(ConditionalDelete::DelEx),
        Ok(entries) if known(entries.get(1)) => Some(ConditionalDelete::DelIfEq),
        Ok(_) => None,
        Err(e) => {
            tracing::debug!(target: "redlock", error = %e, "COMMAND INFO failed; this connection uses scripts");
            None
        }
    })
}

/// Whether `e` says the server cannot run a command it was sent: unknown,
/// not permitted, or not understood. Not an error of the call itself
/// (`WRONGTYPE`, `OOM`, a dead connection), which the script would meet as
/// well.
pub(crate) fn refused(e: &RedisError) -> bool {
    if matches!(e.code(), Some("NOPERM")) {
        return true;
    }
    let text = e.detail().unwrap_or_default().to_ascii_lowercase();
    matches!(e.code(), Some("ERR"))
        && (text.contains("unknown command")
            || text.contains("unknown subcommand")
            || text.contains("syntax error")
            || text.contains("wrong number of arguments"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(code: &str, detail: &str) -> RedisError {
        redis::make_extension_error(code.to_owned(), Some(detail.to_owned()))
    }

    #[test]
    fn a_fall_back_holds_from_then_on() {
        let commands = Commands::of(Some(ConditionalDelete::DelIfEq));
        assert_eq!(
            commands.conditional_delete(),
            Some(ConditionalDelete::DelIfEq)
        );
        let refusal = redis::make_extension_error("NOPERM".to_owned(), None);
        commands.fall_back(&refusal);
        assert_eq!(commands.conditional_delete(), None);
        commands.fall_back(&refusal);
        assert_eq!(
            Commands::of(Some(ConditionalDelete::DelEx)).conditional_delete(),
            Some(ConditionalDelete::DelEx)
        );
        assert_eq!(Commands::none().conditional_delete(), None);
    }

    #[test]
    fn only_a_refusal_of_the_command_falls_back() {
        let refusals = [
            server_error(
                "ERR",
                "unknown command 'DELIFEQ', with args beginning with: 'k'",
            ),
            server_error(
                "NOPERM",
                "User u has no permissions to run the 'delifeq' command",
            ),
            server_error("ERR", "syntax error"),
        ];
        for e in &refusals {
            assert!(refused(e), "{e}");
        }
        let calls = [
            server_error(
                "WRONGTYPE",
                "Operation against a key holding the wrong kind of value",
            ),
            server_error("OOM", "command not allowed when used memory > 'maxmemory'"),
            server_error("MOVED", "3999 127.0.0.1:6381"),
        ];
        for e in &calls {
            assert!(!refused(e), "{e}");
        }
    }
}

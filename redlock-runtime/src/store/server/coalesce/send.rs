//! Sending a call or a batch on a connection, and how its answer (alone or
//! in a batch) is read.

use redis::aio::ConnectionLike;
use redis::{Cmd, RedisError, RedisResult, Script, Value};

use super::super::conn::Conn;

/// Sends `cmd` on `conn` and returns its answer as it came, errors of
/// single calls in a batch's answer included; a script Redis does not
/// have (its cache was flushed, or Redis restarted) is loaded and the
/// command sent again.
pub(super) async fn send(
    conn: &mut Conn,
    cmd: &Cmd,
    script: Option<&Script>,
) -> RedisResult<Value> {
    match top_level(conn.req_packed_command(cmd).await) {
        Err(e) if is_no_script(&e) => {
            if let Some(script) = script {
                // Boxed: a call whose script is loaded carries none of it.
                Box::pin(script.prepare_invoke().load_async(conn)).await?;
                return top_level(conn.req_packed_command(cmd).await);
            }
            Err(e)
        }
        answer => answer,
    }
}

/// An answer that is an error as a whole as `Err` (also one call's answer
/// taken out of a batch's); errors nested in an array (one call's, in a
/// batch) stay where they are.
pub(super) fn top_level(answer: RedisResult<Value>) -> RedisResult<Value> {
    match answer? {
        Value::ServerError(e) => Err(e.into()),
        value => Ok(value),
    }
}

fn is_no_script(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// Whether a batch was refused for holding keys of several slots (a
/// cluster node, or a proxy in front of several).
pub(super) fn refuses_several_slots(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::CrossSlot)
        || e.to_string().contains("CROSSSLOT")
}

/// A batch that got no answer within its time limit: an error whose
/// outcome is unknown, as a call of its own timing out.
pub(super) fn timed_out() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "no answer to a batch of calls in time",
    ))
}

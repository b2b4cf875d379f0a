//! Pipelines whose errors keep their kind.
//!
//! Without `ignore_errors`, redis-rs folds a pipeline's errors into one
//! error of a kind of its own ("Pipeline failures"), where a Cluster's
//! `ASK`, `MOVED` or `TRYAGAIN`, a refused command (`NOPERM`, an unknown
//! command) or `NOSCRIPT` must keep its kind: for the layers that follow a
//! redirection (`store/cluster/`), for a fall-back to the scripts
//! ([`commands::refused`](super::commands::refused)), for the error that
//! names the permission to grant, and for a script to be loaded.

use redis::{FromRedisValue, Value};

use super::conn::Conn;

/// A pipeline whose answers [`answers`] reads.
pub(crate) fn pipeline() -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe
}

/// The answers of `pipe` (made by [`pipeline`]), one per command; the
/// first error among them as the error of the whole call.
pub(crate) async fn answers(
    pipe: &redis::Pipeline,
    conn: &mut Conn,
) -> redis::RedisResult<Vec<Value>> {
    // Read as they came (an error is a `Value::ServerError` among them):
    // no second vector of results to build on every release.
    let answers: Vec<Value> = pipe.query_async(conn).await?;
    let first_error = answers.iter().find_map(|answer| match answer {
        Value::ServerError(e) => Some(e),
        _ => None,
    });
    match first_error {
        Some(e) => Err(e.clone().into()),
        None => Ok(answers),
    }
}

/// [`answers`], read as one `T` (a tuple of one item per command).
pub(crate) async fn answers_as<T: FromRedisValue>(
    pipe: &redis::Pipeline,
    conn: &mut Conn,
) -> redis::RedisResult<T> {
    let answers = answers(pipe, conn).await?;
    Ok(redis::from_redis_value(Value::Array(answers))?)
}

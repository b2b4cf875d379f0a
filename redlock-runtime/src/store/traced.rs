//! The span of one Redis call, with the attribute names of OpenTelemetry's
//! database client conventions, so a `tracing-opentelemetry` exporter
//! shows each call as a client span that Jaeger, Tempo or Honeycomb read
//! like any other Redis client's.
//!
//! Every command and pipeline this crate sends on a lock connection goes
//! out through [`Conn`](super::conn::Conn)'s `ConnectionLike`, which
//! wraps it here, and so does the question to a Sentinel ([`Traced`]).
//! Not spanned: the pool's own health checks and the pub/sub connections
//! that wait for wake-ups (they subscribe once and then only listen).
//!
//! The span, `redis` at `TRACE` level with target `redlock::redis`:
//! - `db.system.name`: `redis` (Valkey speaks the same protocol and
//!   OpenTelemetry names no other system for it);
//! - `db.operation.name`: the command (`SET`, `WAIT`, a container
//!   command with its subcommand, `SCRIPT LOAD`), or for `EVALSHA` of one
//!   of this crate's scripts the script's name, the path of its `.lua`
//!   file (`lock/acquire`, `record/claim`); a pipeline is `BATCH <name>`
//!   when all its commands share one, else `BATCH`, with
//!   `db.operation.batch.size` and `redlock.operations` (each command's
//!   name, in order);
//! - on an error, `db.response.status_code` (the error's prefix:
//!   `NOSCRIPT`, `MOVED`, `READONLY`; the first one in a pipeline's
//!   replies), `error.type` (that prefix, or the kind of a failure that
//!   has none, such as `io`) and `otel.status_code = "ERROR"`;
//! - `otel.name` (the operation's name) and `otel.kind = "client"`.
//!
//! No key and no argument is recorded: a lock's name may be a user's
//! data, an idempotency record's key is a client's secret, and a token
//! proves ownership. When no subscriber listens at `TRACE` for this
//! target, a call costs one check of the callsite's cached interest: the
//! call's future is passed on as it is, and no name is computed.

use std::future::Future;

use redis::aio::ConnectionLike;
use redis::{Arg, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Value};
use tracing::field::Empty;
use tracing::{Instrument as _, Span};

use crate::scripts;

/// `db.operation.name` that holds a subcommand after the command.
const CONTAINERS: [&str; 9] = [
    "CLIENT", "CLUSTER", "COMMAND", "CONFIG", "FUNCTION", "MEMORY", "OBJECT", "SCRIPT", "SENTINEL",
];

/// A disabled span, or a new `redis` span with its fields still empty.
fn new_span() -> Span {
    tracing::trace_span!(
        target: "redlock::redis",
        "redis",
        "db.system.name" = "redis",
        "db.operation.name" = Empty,
        "db.operation.batch.size" = Empty,
        "redlock.operations" = Empty,
        "db.response.status_code" = Empty,
        "error.type" = Empty,
        "otel.name" = Empty,
        "otel.kind" = "client",
        "otel.status_code" = Empty,
    )
}

/// `call`, sending `cmd`, in a span named after `cmd`.
pub(crate) fn command<'a>(cmd: &Cmd, call: RedisFuture<'a, Value>) -> RedisFuture<'a, Value> {
    let span = new_span();
    if span.is_disabled() {
        return call;
    }
    let name = operation(cmd);
    span.record("db.operation.name", name.as_str());
    span.record("otel.name", name.as_str());
    Box::pin(watched(span, call, |answer| match answer {
        Ok(Value::ServerError(e)) => Some(e.code().to_owned()),
        Ok(_) => None,
        Err(e) => Some(failure(e)),
    }))
}

/// `call`, sending `count` of `pipeline`'s commands from `offset`, in a
/// span named after them.
pub(crate) fn pipeline<'a>(
    pipeline: &Pipeline,
    offset: usize,
    count: usize,
    call: RedisFuture<'a, Vec<Value>>,
) -> RedisFuture<'a, Vec<Value>> {
    let span = new_span();
    if span.is_disabled() {
        return call;
    }
    let names: Vec<String> = pipeline
        .cmd_iter()
        .skip(offset)
        .take(count)
        .map(operation)
        .collect();
    let name = batch(&names);
    span.record("db.operation.name", name.as_str());
    span.record("otel.name", name.as_str());
    span.record("db.operation.batch.size", names.len());
    span.record("redlock.operations", names.join(" ").as_str());
    Box::pin(watched(span, call, |answer| match answer {
        Ok(replies) => replies.iter().find_map(|reply| match reply {
            Value::ServerError(e) => Some(e.code().to_owned()),
            _ => None,
        }),
        Err(e) => Some(failure(e)),
    }))
}

/// `db.operation.name` of a pipeline of commands named `names`.
fn batch(names: &[String]) -> String {
    match names.split_first() {
        Some((first, rest)) if rest.iter().all(|n| n == first) => format!("BATCH {first}"),
        _ => "BATCH".to_owned(),
    }
}

/// Runs `call` in `span`, then records on it the failure `failed` finds
/// in the answer.
async fn watched<T>(
    span: Span,
    call: impl Future<Output = RedisResult<T>>,
    failed: impl FnOnce(&RedisResult<T>) -> Option<String>,
) -> RedisResult<T> {
    let answer = call.instrument(span.clone()).await;
    if let Some(code) = failed(&answer) {
        if answer.as_ref().err().is_none_or(|e| e.code().is_some()) {
            span.record("db.response.status_code", code.as_str());
        }
        span.record("error.type", code.as_str());
        span.record("otel.status_code", "ERROR");
    }
    answer
}

/// `error.type` of a call that failed: the server's error prefix, or the
/// kind of failure.
fn failure(e: &RedisError) -> String {
    match e.code() {
        Some(code) => code.to_owned(),
        None if e.is_timeout() => "timeout".to_owned(),
        None => match e.kind() {
            ErrorKind::Io => "io".to_owned(),
            ErrorKind::Parse | ErrorKind::UnexpectedReturnType => "parse".to_owned(),
            ErrorKind::AuthenticationFailed => "auth".to_owned(),
            _ => "client".to_owned(),
        },
    }
}

/// `db.operation.name` of `cmd`: its command (with the subcommand of a
/// container command), or the name of the script an `EVALSHA` runs.
fn operation(cmd: &Cmd) -> String {
    let mut args = cmd.args_iter().filter_map(|arg| match arg {
        Arg::Simple(bytes) => Some(bytes),
        _ => None,
    });
    let Some(first) = args.next() else {
        return "(empty)".to_owned();
    };
    let command = String::from_utf8_lossy(first).to_ascii_uppercase();
    match command.as_str() {
        "EVALSHA" | "EVALSHA_RO" => args
            .next()
            .and_then(scripts::name_of)
            .map_or(command, str::to_owned),
        c if CONTAINERS.contains(&c) => match args.next() {
            Some(sub) => format!("{c} {}", String::from_utf8_lossy(sub).to_ascii_uppercase()),
            None => command,
        },
        _ => command,
    }
}

/// A connection whose every call is spanned as above (for connections
/// other than the lanes' own, such as a Sentinel's).
pub(crate) struct Traced<'c, C>(pub(crate) &'c mut C);

impl<C: ConnectionLike + Send> ConnectionLike for Traced<'_, C> {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        command(cmd, self.0.req_packed_command(cmd))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipe: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        pipeline(
            pipe,
            offset,
            count,
            self.0.req_packed_commands(pipe, offset, count),
        )
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_named_by_command_or_script() {
        assert_eq!(operation(redis::cmd("set").arg("k").arg("v")), "SET");
        assert_eq!(
            operation(redis::cmd("SCRIPT").arg("load").arg("return 1")),
            "SCRIPT LOAD"
        );
        static SCRIPT: scripts::Lua = scripts::Lua::new("primitive/demo/step.lua", &[], "return 1");
        let script = SCRIPT.on(scripts::Publish::Plain);
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg(script.get_hash()).arg(1).arg("k");
        assert_eq!(operation(&evalsha), "demo/step");
        let mut unknown = redis::cmd("EVALSHA");
        unknown.arg("00").arg(0);
        assert_eq!(operation(&unknown), "EVALSHA");
        assert_eq!(operation(&redis::Cmd::new()), "(empty)");
    }

    #[test]
    fn a_pipeline_is_a_batch_named_by_its_one_operation() {
        let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            batch(&names(&["lock/extend", "lock/extend"])),
            "BATCH lock/extend"
        );
        assert_eq!(batch(&names(&["lock/acquire", "WAIT"])), "BATCH");
        assert_eq!(batch(&[]), "BATCH");
    }
}

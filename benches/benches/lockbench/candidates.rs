//! Acquire: the acquire and release commands a lock client could send,
//! measured side by side with no lock client (issue 17).
//!
//! Every candidate runs as acquire+release pairs on keys of their own, on
//! one redis-rs `MultiplexedConnection` shared by all tasks and all
//! candidates, at concurrency 1 and 32, in interleaved slices as in
//! [`uncontended`](crate::uncontended) (`--uncontended-secs` per cell).
//! Each is reported as pairs/s and its ratio to `set_nx`. A lock is
//! `acq:{candidate:task:i}`, its fencing counter `acq:{candidate:task:i}:fence`
//! (one hash tag, as the runtime names them); tokens are UUID v4 strings.
//!
//! - `set_nx`: `SET key token NX PX ttl`, then the compare-and-delete
//!   release (`GET == token → DEL`, a Lua script by `EVALSHA`): the raw
//!   baseline, what our client sends by default and rslock sends;
//! - `lua_fence`: one Lua acquire that reads `TIME`, takes the lock with
//!   `SET NX PX` and issues a fencing token `max(counter + 1, now_us)`,
//!   stored with `SET counter .. PX retention GET` (the runtime's own
//!   `ACQUIRE` text: what `.fenced()` sends for one lock), then the
//!   compare-and-delete release;
//! - `lua_set_nx`: a Lua acquire that only does `SET NX PX`, then the
//!   release: the floor of any acquire made in one script, so the cost of
//!   the fencing token is `lua_fence` against this, not against `set_nx`;
//! - `lua_fence_node_counter`: `lua_fence`'s acquire with one fencing
//!   counter for the whole server (`acq:fence`) instead of one per lock:
//!   what the token's counter costs when no key is created per lock.
//!   Measured, not used: a script's keys must share a slot on a cluster
//!   and behind a proxy, so a counter per server cannot serve every
//!   topology, and two counters for one key would let its tokens go back;
//! - `set_nx_lazy_token`: `SET NX PX`, then a second round trip for the
//!   token (the runtime's own `ISSUE_FENCE` text), then the release: a
//!   lock whose holder asks for its token every time;
//! - `multi_incr`: `MULTI; SET key token NX PX ttl; INCR counter; EXEC` in
//!   one round trip, then the release. Measured only because the issue
//!   asks: the `INCR` is not conditional on the `SET` (a busy lock still
//!   burns a number), the counter has no expiry, and there is no clock
//!   floor, so after a restart without persistence the counter starts
//!   over at 1 and repeats tokens already issued;
//! - `release_publish_always`: `SET NX PX`, then a release that always
//!   `PUBLISH`es on the key's channel after the `DEL` (the runtime's until
//!   waiters marked the lock): against `set_nx`, whose release publishes
//!   nothing;
//! - `release_on_mark`: `SET NX PX`, then the runtime's release as it was
//!   until waiters signalled on a key of their own: it publishes only
//!   when a waiter marked the lock (appended byte 31 to its holder's
//!   value), and so accepts the holder's token with or without that byte.
//!   Nobody waits here, so it never publishes: the cost measured is that
//!   release against the bare compare-and-delete;
//! - `release_on_waiters_key`: `SET NX PX`, then the runtime's release
//!   (its own text), sent with the lock and its waiters' key
//!   (`acq:{..}:waited`, which a waiter's busy attempt sets: the
//!   runtime's `scripts/shared/waiting.lua`): one `DEL` of both keys,
//!   and a publish only when the waiters' key was there. Nobody waits
//!   here: the cost measured is that release against `release_on_mark`
//!   (the one-key `DEL` it replaced) and the bare compare-and-delete.
//!   Measured when it replaced the mark (3 runs of `--only acquire`, Redis
//!   7.0, 2 cores): at concurrency 32, 0.91–0.98 × `release_on_mark`'s
//!   pairs/s, Redis's time 8.2–8.8 µs per pair against 7.0–7.2 (the
//!   second key of the `DEL`), and `release_publish_always` 1.04–1.09 ×
//!   its pairs/s (a `PUBLISH` no one hears costs less than that key; the
//!   runtime keeps the key so that an unheard release publishes nothing,
//!   which every pattern subscriber of a shared Redis would otherwise
//!   pay for);
//! - `release_numsub`: `SET NX PX`, then a release that checks `PUBSUB
//!   NUMSUB` first and `PUBLISH`es only when someone listens (a candidate
//!   the runtime tried and dropped: slower here, and it misses waiters
//!   subscribed on a replica). Nobody subscribes here, so it never
//!   publishes: the cost measured is the check.
//!
//! The fencing counters of `lua_fence` and `set_nx_lazy_token` (kept for
//! [`FENCE_RETENTION`]) and of `multi_incr` (no expiry) stay on the server
//! after the group: one key per pair (`lua_fence_node_counter` leaves one
//! in all).

use std::sync::Arc;
use std::time::Duration;

use redis::Script;
use redis::aio::MultiplexedConnection;

use crate::baselines;
use crate::config::Config;
use crate::support::connect;
use crate::uncontended::{CONCURRENCIES, Measured, UNCONTENDED_TTL, pair_numbers, run, with_cpu};

/// The candidates, in the order they are run and shown, each with what it
/// sends.
pub(crate) const CANDIDATES: [(&str, &str); 10] = [
    ("set_nx", "SET NX PX + Lua release (GET == token -> DEL)"),
    (
        "lua_fence",
        "one Lua acquire: TIME, SET NX PX, token max(counter+1, now_us) + Lua release",
    ),
    (
        "lua_set_nx",
        "a Lua acquire doing only SET NX PX + Lua release (the floor of a script acquire)",
    ),
    (
        "lua_fence_node_counter",
        "lua_fence with one counter per server, none per lock (not usable on a cluster)",
    ),
    (
        "set_nx_lazy_token",
        "SET NX PX, then a token script (2nd round trip) + Lua release",
    ),
    (
        "multi_incr",
        "MULTI; SET NX PX; INCR counter; EXEC + Lua release (unconditional, no clock floor)",
    ),
    (
        "release_publish_always",
        "SET NX PX + Lua release that always PUBLISHes (the runtime's)",
    ),
    (
        "release_numsub",
        "SET NX PX + Lua release: PUBLISH only if PUBSUB NUMSUB > 0",
    ),
    (
        "release_on_mark",
        "SET NX PX + Lua release: PUBLISH only if a waiter marked the value (the runtime's before)",
    ),
    (
        "release_on_waiters_key",
        "SET NX PX + Lua release: DEL lock waiters-key, PUBLISH if both were there (the runtime's)",
    ),
];

/// Cells are measured in interleaved slices of about this.
const SLICE: Duration = Duration::from_millis(500);

/// The fencing counters' retention: the runtime's default
/// (`DEFAULT_FENCE_RETENTION`, 24 h).
const FENCE_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// `lua_set_nx`'s acquire: 1 when the lock is taken.
const LUA_SET_NX: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
";

/// `lua_fence_node_counter`'s acquire, after the runtime's `scripts/shared/fence.lua`:
/// `KEYS` lock, the server's one counter; `ARGV` token, ttl (ms),
/// retention (ms). Returns `{1, fence}` when the lock is taken.
const NODE_COUNTER_BODY: &str = r"
local t = redis.call('TIME')
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, next_fence(KEYS[2], ARGV[3], t)}
end
return {0, redis.call('PTTL', KEYS[1])}
";

/// `lua_fence_node_counter`'s one counter.
const NODE_COUNTER: &str = "acq:fence";

/// The runtime's release until waiters signalled on a key of their own,
/// as Redis received it (`scripts/shared/publish.lua`, the
/// `release_lock` of `redlock-runtime/src/primitive/lock/release_lock.lua` and
/// `primitive/lock/release.lua` then, less their comments): the holder's
/// token, or it with a waiter's mark (byte 31) appended, which makes it
/// publish. The same shape as the runtime's text today (two functions,
/// then the body), so the two compare the signals, not the scripts' forms.
const RELEASE_ON_MARK: &str = r"
local function publish(channel, message)
  redis.call('PUBLISH', channel, message)
end
local function release_lock(key, token)
  local v = redis.call('GET', key)
  if v == token then
    redis.call('DEL', key)
    return 1
  end
  if v and #v == #token + 1 and string.byte(v, -1) == 31 and string.sub(v, 1, -2) == token then
    redis.call('DEL', key)
    publish(key, '')
    return 1
  end
  return 0
end
local released = release_lock(KEYS[1], ARGV[1])
if #KEYS > 1 and tonumber(ARGV[2]) > tonumber(redis.call('GET', KEYS[2]) or '0') then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
return released
";

/// A release that always publishes on the lock's channel.
const RELEASE_PUBLISH_ALWAYS: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[1], '')
  return 1
end
return 0
";

/// The runtime's release (`redlock-runtime/src/primitive/lock/release.lua`) as it
/// was with a `PUBSUB NUMSUB` check, which it dropped: publishes only when
/// the check finds a subscriber. Sent with one key and one argument, so
/// the counter branch is never taken.
const RELEASE_NUMSUB: &str = r"
local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  local listening = redis.pcall('PUBSUB', 'NUMSUB', KEYS[1])
  if type(listening) ~= 'table' or (tonumber(listening[2]) or 1) > 0 then
    redis.call('PUBLISH', KEYS[1], '')
  end
  released = 1
end
if #KEYS > 1 and tonumber(ARGV[2]) > tonumber(redis.call('GET', KEYS[2]) or '0') then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
return released
";

/// The scripts the candidates send.
struct Scripts {
    /// The raw baseline's compare-and-delete.
    release: Script,
    acquire: Script,
    lua_set_nx: Script,
    node_counter: Script,
    issue_fence: Script,
    publish_always: Script,
    numsub: Script,
    on_mark: Script,
    on_waiters_key: Script,
}

impl Scripts {
    fn new() -> Self {
        Scripts {
            release: baselines::release_script(),
            // The runtime's own texts, so that no copy drifts.
            acquire: Script::new(&redlock_runtime::test_util::acquire_lua()),
            lua_set_nx: Script::new(LUA_SET_NX),
            node_counter: Script::new(
                &[
                    redlock_runtime::test_util::NEXT_FENCE_LUA,
                    NODE_COUNTER_BODY,
                ]
                .concat(),
            ),
            issue_fence: Script::new(&redlock_runtime::test_util::issue_fence_lua()),
            publish_always: Script::new(RELEASE_PUBLISH_ALWAYS),
            numsub: Script::new(RELEASE_NUMSUB),
            on_mark: Script::new(RELEASE_ON_MARK),
            // The runtime's own text, sent with the lock, its waiters' key
            // and the token (the counter branch is never taken).
            on_waiters_key: Script::new(&redlock_runtime::test_util::release_lua()),
        }
    }
}

/// `r`'s pairs/s over those of `set_nx` at the same concurrency (NaN
/// without a `set_nx` cell).
pub(crate) fn ratio_to_set_nx(results: &[Measured], r: &Measured) -> f64 {
    let base = results
        .iter()
        .find(|b| b.name == "set_nx" && b.concurrency == r.concurrency)
        .map_or(f64::NAN, Measured::per_sec);
    r.per_sec() / base
}

/// `SET lock token NX PX ttl`; the key is new, so it must be taken.
async fn set_nx(conn: &mut MultiplexedConnection, lock: &str, token: &str) {
    let ok: Option<String> = redis::cmd("SET")
        .arg(lock)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(UNCONTENDED_TTL.as_millis() as u64)
        .query_async(conn)
        .await
        .expect("SET NX PX");
    assert!(ok.is_some(), "distinct keys are never busy");
}

/// One acquire+release pair of `candidate` on a key of its own.
async fn pair(
    candidate: &'static str,
    mut conn: MultiplexedConnection,
    scripts: &Scripts,
    task: usize,
    i: u64,
) {
    let lock = format!("acq:{{{candidate}:{task}:{i}}}");
    let fence = format!("{lock}:fence");
    let token = uuid::Uuid::new_v4().to_string();
    let ttl_ms = UNCONTENDED_TTL.as_millis() as u64;
    let retention_ms = FENCE_RETENTION.as_millis() as u64;
    let release = match candidate {
        "set_nx" => {
            set_nx(&mut conn, &lock, &token).await;
            &scripts.release
        }
        "lua_fence" => {
            let reply: Vec<i64> = scripts
                .acquire
                .key(&lock)
                .key(&fence)
                .arg(&token)
                .arg(ttl_ms)
                .arg(retention_ms)
                .arg("0")
                .arg(0)
                .invoke_async(&mut conn)
                .await
                .expect("lua_fence acquire");
            assert_eq!(reply.first(), Some(&1), "distinct keys are never busy");
            &scripts.release
        }
        "lua_set_nx" => {
            let taken: i64 = scripts
                .lua_set_nx
                .key(&lock)
                .arg(&token)
                .arg(ttl_ms)
                .invoke_async(&mut conn)
                .await
                .expect("lua_set_nx acquire");
            assert_eq!(taken, 1, "distinct keys are never busy");
            &scripts.release
        }
        "lua_fence_node_counter" => {
            let reply: Vec<i64> = scripts
                .node_counter
                .key(&lock)
                .key(NODE_COUNTER)
                .arg(&token)
                .arg(ttl_ms)
                .arg(retention_ms)
                .invoke_async(&mut conn)
                .await
                .expect("lua_fence_node_counter acquire");
            assert_eq!(reply.first(), Some(&1), "distinct keys are never busy");
            &scripts.release
        }
        "set_nx_lazy_token" => {
            set_nx(&mut conn, &lock, &token).await;
            let issued: i64 = scripts
                .issue_fence
                .key(&lock)
                .key(&fence)
                .arg(&token)
                .arg(retention_ms)
                .invoke_async(&mut conn)
                .await
                .expect("token script");
            assert!(issued > 0, "the lock is this pair's");
            &scripts.release
        }
        "multi_incr" => {
            let (set, _counter): (Option<String>, i64) = redis::pipe()
                .atomic()
                .cmd("SET")
                .arg(&lock)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .cmd("INCR")
                .arg(&fence)
                .query_async(&mut conn)
                .await
                .expect("MULTI SET INCR EXEC");
            assert!(set.is_some(), "distinct keys are never busy");
            &scripts.release
        }
        "release_publish_always" => {
            set_nx(&mut conn, &lock, &token).await;
            &scripts.publish_always
        }
        "release_numsub" => {
            set_nx(&mut conn, &lock, &token).await;
            &scripts.numsub
        }
        "release_on_mark" => {
            set_nx(&mut conn, &lock, &token).await;
            &scripts.on_mark
        }
        "release_on_waiters_key" => {
            set_nx(&mut conn, &lock, &token).await;
            let released: i64 = scripts
                .on_waiters_key
                .key(&lock)
                .key(format!("{lock}:waited"))
                .arg(&token)
                .invoke_async(&mut conn)
                .await
                .expect("release");
            assert_eq!(released, 1, "{candidate}: the release found its own token");
            return;
        }
        other => unreachable!("no acquire candidate `{other}`"),
    };
    let released: i64 = release
        .key(&lock)
        .arg(&token)
        .invoke_async(&mut conn)
        .await
        .expect("release");
    assert_eq!(released, 1, "{candidate}: the release found its own token");
}

/// Each cell's time is cut into slices of about [`SLICE`], run in rotating
/// order and added up, as the uncontended group's.
pub(crate) async fn candidates(url: &str, cfg: &Config) -> Vec<Measured> {
    let conn = connect(url).await;
    let mut admin = connect(url).await;
    let scripts = Arc::new(Scripts::new());
    let rounds = (cfg.uncontended_secs.as_secs_f64() / SLICE.as_secs_f64())
        .round()
        .max(1.0) as u32;
    let slice = cfg.uncontended_secs / rounds;
    let mut out = Vec::new();
    for concurrency in CONCURRENCIES {
        eprintln!(
            "  acquire x{concurrency}: {rounds} rounds of {slice:?} per candidate, {} candidates ...",
            CANDIDATES.len()
        );
        let mut cells = CANDIDATES.map(|(name, _)| Measured::empty(name, concurrency));
        for round in 0..rounds as usize {
            for k in 0..cells.len() {
                let which = (k + round) % CANDIDATES.len();
                let name = CANDIDATES[which].0;
                let (first, warm) = (pair_numbers(round, concurrency), round == 0);
                let (conn, scripts) = (conn.clone(), scripts.clone());
                let measured = with_cpu(
                    &mut admin,
                    run(name, concurrency, slice, first, warm, move |task, i| {
                        let (conn, scripts) = (conn.clone(), scripts.clone());
                        async move { pair(name, conn, &scripts, task, i).await }
                    }),
                )
                .await;
                cells[which].absorb(measured);
            }
        }
        for mut cell in cells {
            cell.latencies_us.sort_unstable();
            out.push(cell);
        }
    }
    out
}

//! The Lua scripts that make each lock transition one atomic step on Redis.
//!
//! Cluster-safe by construction, which `tests::every_script_is_cluster_safe`
//! checks on every text: each key a script touches comes in `KEYS` (none is
//! built inside Lua), every command name is a literal, and the keys of one
//! call share the lock's `{hash tag}` (see `backend::Keys`), so one slot
//! holds them and no cluster or proxy rejects a script.
//!
//! Scripts that wake waiters come in two texts: `PUBLISH` (one Redis,
//! Redlock; the subscriber listens on that server) and `SPUBLISH` (Redis
//! Cluster: sharded pub/sub stays on the shard that owns the lock's slot,
//! where plain `PUBLISH` would be sent to every node).

use std::sync::OnceLock;

use redis::Script;

mod batch;
mod fair;
mod force;
mod inspect;
mod sync;
pub(crate) use batch::BATCH;
pub(crate) use fair::{FAIR_ACQUIRE, FAIR_LEAVE, FAIR_RELEASE};
pub(crate) use force::FORCE_RELEASE;
pub(crate) use inspect::INSPECT;
pub(crate) use sync::*;

/// How a script publishes its wake-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Publish {
    /// `PUBLISH`: one Redis server (and Redlock's nodes).
    Plain,
    /// `SPUBLISH` (Redis 7): on the shard that owns the channel's slot.
    Sharded,
}

/// One script: its text, made of `parts`, in a `PUBLISH` and a `SPUBLISH`
/// variant (the same text for a script that publishes nothing), each
/// compiled once.
#[derive(Debug)]
pub(crate) struct Lua {
    parts: &'static [&'static str],
    plain: OnceLock<Script>,
    sharded: OnceLock<Script>,
}

impl Lua {
    const fn new(parts: &'static [&'static str]) -> Self {
        Self {
            parts,
            plain: OnceLock::new(),
            sharded: OnceLock::new(),
        }
    }

    /// The script's text as sent with `publish`.
    pub(crate) fn text(&self, publish: Publish) -> String {
        let text = self.parts.concat();
        match publish {
            Publish::Plain => text,
            // `pcall`: on a cluster older than Redis 7 (no `SPUBLISH`) the
            // release still happens, and waiters poll.
            Publish::Sharded => text.replace("redis.call('PUBLISH',", "redis.pcall('SPUBLISH',"),
        }
    }

    /// The script, publishing with `publish`.
    pub(crate) fn on(&self, publish: Publish) -> &Script {
        let cell = match publish {
            Publish::Plain => &self.plain,
            Publish::Sharded => &self.sharded,
        };
        cell.get_or_init(|| Script::new(&self.text(publish)))
    }
}

/// Lua: the next fencing token of the counter `key`, given `t` (the reply
/// of `TIME`): the larger of the counter + 1 and Redis's clock in
/// microseconds, stored back with an expiry of `retention` ms.
///
/// The clock floor is what keeps tokens increasing when the counter is
/// gone (it expired, the node restarted without persistence) or older than
/// the tokens issued from it (restored from a snapshot): a counter
/// starting over starts above every token issued before, as long as the
/// clock did not step back by more than the time since (see the crate
/// docs, "Fencing tokens"). Numbers stay exact: microseconds since 1970 are
/// about 2^51, below Lua's 2^53, and `%.0f` writes them without exponent.
///
/// One write in the usual case: `SET .. GET` (Redis 6.2) stores the clock
/// and returns the counter it replaced; only a counter already at or past
/// the clock (tokens issued within one microsecond, a Redlock node's raise
/// from a clock ahead of this one) takes a second `SET`.
///
/// `clock_us(t)` gives the clock in microseconds as a number and as the
/// text stored, and `next_fence_at(key, retention, now_us, now_text)`
/// issues from them, for a script that issues several tokens from one
/// reading of the clock (the batch of coalesced acquires): each key's
/// tokens still increase, as each is the larger of its counter + 1 and
/// that reading.
pub(crate) const NEXT_FENCE: &str = r"
local function clock_us(t)
  local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return now_us, string.format('%.0f', now_us)
end
local function next_fence_at(key, retention, now_us, now_text)
  local n = tonumber(redis.call('SET', key, now_text, 'PX', retention, 'GET') or '0') + 1
  if n > now_us then
    redis.call('SET', key, string.format('%.0f', n), 'PX', retention)
    return n
  end
  return now_us
end
local function next_fence(key, retention, t)
  local now_us, now_text = clock_us(t)
  return next_fence_at(key, retention, now_us, now_text)
end
";

/// The byte a waiter appends to the value of the lock it waits for, so
/// that the holder's release knows someone waits and publishes: a release
/// that finds no mark wakes no one and publishes nothing (see [`HELD`]).
/// Never in a token: client names hold no control character.
pub(crate) const WAITED_MARK: char = '\u{1f}';

/// Lua: whose a lock's value is, and the waiter's mark (see
/// [`WAITED_MARK`], byte 31 in Lua's `'\31'`).
///
/// `held(v, token)`: whether the value `v` (`GET`'s reply: `false` when the
/// key is gone) is `token`'s, as its acquire wrote it or marked by a
/// waiter since. Every script that checks a plain lock's holder checks it
/// with this, so a mark never costs its holder the lock.
///
/// `mark_waited(key, v)`: marks the lock `key`, whose value is `v`, as
/// waited for (once: `APPEND` keeps the lease), if its holder's token
/// starts with `~` ([`owner::MARKABLE`](crate::owner::MARKABLE), byte 126):
/// a holder of an older version, whose scripts would take the mark for
/// another owner's value, is left alone (its release always publishes).
/// An acquire attempt that
/// finds the lock busy marks it, in the same step; a waiter subscribes to
/// the lock's channel before it sends such an attempt. So the release of
/// a lock with a waiter always finds the mark and publishes: either the
/// waiter's attempt ran first (it marked) or the release did (the attempt
/// finds the lock free, or another holder, which it marks in turn).
pub(crate) const HELD: &str = r"
local function held(v, token)
  if v == token then return true end
  return v ~= false and #v == #token + 1 and string.byte(v, -1) == 31
    and string.sub(v, 1, -2) == token
end
local function mark_waited(key, v)
  if string.byte(v, 1) == 126 and string.byte(v, -1) ~= 31 then
    redis.call('APPEND', key, '\31')
  end
end
";

/// Lua: the lock's two steps, as functions shared by the one-lock scripts
/// ([`ACQUIRE`], [`RELEASE`]) and the batch of coalesced calls
/// ([`BATCH`]), so that a lock taken or released in a batch goes through
/// exactly the same step as one sent alone.
///
/// `acquire_lock(key, counter, token, ttl, retention, now_us, now_text)`
/// (after [`NEXT_FENCE`] and [`HELD`]; the clock as `clock_us` gives it): takes the
/// lock `key` for
/// `token` with a lease of `ttl` ms and issues its fencing token from
/// `counter`; returns two values, `1, fence`, or `0, pttl` when another
/// owner holds it (two values, not a table: the batch answers each
/// acquire with one number, and builds no table it would throw away).
/// When the lock already holds `token` (an earlier attempt of this
/// same acquire got through but its answer was lost) the lease is reset
/// and a new token issued (the earlier attempt may have been a plain `SET
/// NX`, which issued none), so a retried acquire never locks itself out
/// nor repeats the previous holder's token.
///
/// A busy answer marks the lock as waited for (see [`HELD`]'s
/// `mark_waited`).
///
/// `release_lock(key, token)` ([`RELEASE_STEP`]): deletes the lock if
/// `token` holds it and, when a waiter marked it, publishes on the channel
/// named like it, which wakes its waiters; returns 1, or 0 (another
/// owner's, or gone).
pub(crate) const ACQUIRE_STEP: &str = r"
local function acquire_lock(key, counter, token, ttl, retention, now_us, now_text)
  if redis.call('SET', key, token, 'NX', 'PX', ttl) then
    return 1, next_fence_at(counter, retention, now_us, now_text)
  end
  local v = redis.call('GET', key)
  if held(v, token) then
    -- Ours already (an earlier attempt, maybe a plain SET NX whose answer
    -- was lost): the counter may still hold the previous holder's token,
    -- so issue a new one, inside this tenure.
    redis.call('PEXPIRE', key, ttl)
    return 1, next_fence_at(counter, retention, now_us, now_text)
  end
  mark_waited(key, v)
  return 0, redis.call('PTTL', key)
end
";

/// Lua: the release step on `key` for `token`, setting `released` to 1
/// when it deletes the lock (see [`ACQUIRE_STEP`]'s `release_lock`): as a
/// function in [`RELEASE_STEP`] (the batch), inline in [`RELEASE`], where
/// a function would cost a closure per call. The holder check is
/// [`HELD`]'s `held`, written out: the value as written is compared first,
/// and a marked one only when that fails.
const RELEASE_CORE: &str = r"
local v = redis.call('GET', key)
if v == token then
  redis.call('DEL', key)
  released = 1
elseif v and #v == #token + 1 and string.byte(v, -1) == 31 and string.sub(v, 1, -2) == token then
  redis.call('DEL', key)
  redis.call('PUBLISH', key, '')
  released = 1
end
";

/// Lua: `release_lock(key, token)`, the release step (see
/// [`ACQUIRE_STEP`]) as a function.
pub(crate) const RELEASE_STEP: [&str; 3] = [
    "\nlocal function release_lock(key, token)\nlocal released = 0",
    RELEASE_CORE,
    "return released\nend\n",
];

/// Takes the lock and issues its fencing token in one step (see
/// [`ACQUIRE_STEP`]).
///
/// `KEYS[1]` lock, `KEYS[2]` fencing counter; `ARGV[1]` token, `ARGV[2]`
/// ttl (ms), `ARGV[3]` the counter's retention (ms), `ARGV[4]` `1` to also
/// return Redis's clock (ms), `ARGV[5]` the time (ms, on Redis's clock)
/// before which this node grants nothing (`0`: none; a restart delay).
/// Returns `{1, fence}` (or `{1, fence, now_ms}`) when the lock is ours,
/// `{0, pttl}` when another owner holds it, `{-4, ms left}` before
/// `ARGV[5]`.
pub(crate) static ACQUIRE: Lua = Lua::new(&[HELD, NEXT_FENCE, ACQUIRE_STEP, ACQUIRE_BODY]);
const ACQUIRE_BODY: &str = r"
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local not_before = tonumber(ARGV[5])
if not_before > now_ms then return {-4, not_before - now_ms} end
local now_us, now_text = clock_us(t)
local got, n = acquire_lock(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], now_us, now_text)
if got == 1 and ARGV[4] == '1' then return {1, n, now_ms} end
return {got, n}
";

/// Issues the fencing token of a lock taken without one (a plain `SET
/// NX`), if the token still holds it: tokens are then issued in the order
/// of tenure, because tenures do not overlap and each issue checks its
/// holder's tenure in the same step (see the crate docs, "Fencing
/// tokens").
///
/// `KEYS[1]` lock, `KEYS[2]` fencing counter; `ARGV[1]` token, `ARGV[2]`
/// the counter's retention (ms). Returns the token, or -1 when the lock is
/// not this owner's.
pub(crate) static ISSUE_FENCE: Lua = Lua::new(&[HELD, NEXT_FENCE, ISSUE_FENCE_BODY]);
const ISSUE_FENCE_BODY: &str = r"
if not held(redis.call('GET', KEYS[1]), ARGV[1]) then return -1 end
return next_fence(KEYS[2], ARGV[2], redis.call('TIME'))
";

/// Resets the lease if the token still holds the lock.
///
/// `KEYS[1]` lock; `ARGV[1]` token, `ARGV[2]` ttl (ms), `ARGV[3]` `1` for
/// a watchdog renewal, which never shortens the lease: a manual extend
/// sent on another connection may have landed first with a longer one.
/// Returns 1 or 0.
pub(crate) static EXTEND: Lua = Lua::new(&[HELD, EXTEND_BODY]);
const EXTEND_BODY: &str = r"
if not held(redis.call('GET', KEYS[1]), ARGV[1]) then return 0 end
if ARGV[3] == '1' and redis.call('PTTL', KEYS[1]) >= tonumber(ARGV[2]) then return 1 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
";

/// Deletes the lock if the token still holds it and, when a waiter marked
/// it (see [`HELD`]), publishes on the channel named like the lock key,
/// which wakes the waiters; never touches another owner's lock. The mark
/// is read with the value the release reads anyway, so a lock no one
/// waited for is released with rslock's two commands (`GET`, `DEL`); a
/// `PUBSUB NUMSUB` check measured slower than always publishing (lockbench
/// `--only candidates`), and would miss a waiter subscribed on a replica,
/// which a publish (and a mark) reaches through replication. Raises the fencing counter to the holder's token
/// (whoever holds the lock now: raising is always safe): on a Redlock node
/// that did not issue the largest token itself, this is what makes the next
/// holder's token larger (see the crate docs, "Fencing tokens").
///
/// `KEYS[1]` lock; `ARGV[1]` token. With a token to raise the counter to
/// (Redlock): `KEYS[2]` fencing counter, `ARGV[2]` the holder's fencing
/// token, `ARGV[3]` the counter's retention (ms); without, one key and one
/// argument, the least a release can send. Returns 1 (released) or 0.
pub(crate) static RELEASE: Lua = Lua::new(&[RELEASE_HEAD, RELEASE_CORE, RELEASE_BODY]);
const RELEASE_HEAD: &str = "local key, token, released = KEYS[1], ARGV[1], 0";
const RELEASE_BODY: &str = r"
if #KEYS > 1 and tonumber(ARGV[2]) > tonumber(redis.call('GET', KEYS[2]) or '0') then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
return released
";

/// Ends a lock that must be held for a minimum time (ShedLock's
/// `lockAtLeastFor`), measured on Redis's clock: if the minimum is not over,
/// shortens the lease to what is left of it; else deletes the lock.
///
/// `KEYS[1]` lock, `KEYS[2]` the fair queue (absent for an unfair lock);
/// `ARGV[1]` token, `ARGV[2]` acquire time on Redis's clock (ms), `ARGV[3]`
/// minimum hold (ms). Returns 0 (not the owner), 1 (deleted) or 2 (left to
/// expire when the minimum hold ends). A deletion publishes the first fair
/// waiter's id (`redis.sha1hex` of its token, never the token: see
/// `waiter_id` in `wakeups.rs`), as [`FAIR_LEAVE`] does, so
/// that it is the one woken; an empty message when no one is in line.
pub(crate) static RELEASE_AFTER_HOLD: Lua = Lua::new(&[HELD, RELEASE_AFTER_HOLD_BODY]);
const RELEASE_AFTER_HOLD_BODY: &str = r"
if not held(redis.call('GET', KEYS[1]), ARGV[1]) then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local left = tonumber(ARGV[2]) + tonumber(ARGV[3]) - now
if left > 0 then
  redis.call('PEXPIRE', KEYS[1], left)
  return 2
end
redis.call('DEL', KEYS[1])
local head = redis.call('LINDEX', KEYS[2], 0)
redis.call('PUBLISH', KEYS[1], head and redis.sha1hex(head) or '')
return 1
";

// Idempotency records (the public `records` module, under the `redlock-axum`
// layer). A record is a hash at `KEYS[1]`:
// - `st`: `p` (in progress), `c` (completed, replayable) or `n` (completed,
//   too large to replay);
// - `own`: the owner token (while in progress only), `fen`: the fencing
//   token, `fp`: the request fingerprint;
// - once completed, `code`, `hdr` (the stored headers), `body`, and `by`:
//   the owner token that completed it (see `RECORD_COMPLETE`).
// Its expiry is the lease while in progress and the retention once
// completed; the fencing counter lives beside it (`KEYS[2]`, same hash
// tag). Completing and releasing publish on the channel named like the
// record, which wakes duplicates waiting for the result.

/// absent -> in progress. `KEYS` record, counter. `ARGV` owner, lease
/// (ms), fingerprint, counter retention (ms). Returns `{'claimed', fence}`,
/// `{'mismatch'}`, `{'processing', pttl}` or `{state, code, hdr, body}`.
/// Repeating it with the same owner while in progress answers
/// `processing`: the give-back of a claim whose answer was lost releases it.
pub(crate) static RECORD_CLAIM: Lua = Lua::new(&[NEXT_FENCE, RECORD_CLAIM_BODY]);
const RECORD_CLAIM_BODY: &str = r"
local rec = redis.call('HMGET', KEYS[1], 'st', 'fp')
if not rec[1] then
  local fence = string.format('%.0f', next_fence(KEYS[2], ARGV[4], redis.call('TIME')))
  redis.call('HSET', KEYS[1], 'st', 'p', 'own', ARGV[1], 'fen', fence, 'fp', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {'claimed', fence}
end
if rec[2] ~= ARGV[3] then return {'mismatch'} end
if rec[1] == 'p' then return {'processing', tostring(redis.call('PTTL', KEYS[1]))} end
local done = redis.call('HMGET', KEYS[1], 'code', 'hdr', 'body')
return {rec[1], done[1] or '', done[2] or '', done[3] or ''}
";

/// Resets the lease while the owner holds the record. `ARGV` owner, lease
/// (ms), and a third argument ignored (the lock's `EXTEND` takes one, so
/// the watchdog's batch sends both alike). Returns 1 or 0.
pub(crate) static RECORD_RENEW: Lua = Lua::new(&[RECORD_RENEW_BODY]);
const RECORD_RENEW_BODY: &str = r"
if redis.call('HGET', KEYS[1], 'own') ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
";

/// in progress -> completed, for the owner only. `ARGV` owner, state (`c`
/// or `n`), status code, headers, body, retention (ms). Returns 1 or 0.
///
/// The completed record keeps who completed it (`by`), so the script is
/// its own evidence: sent again after its answer was lost (and it ran), it
/// finds the record completed by this owner and answers 1 again, instead
/// of a 0 that would claim the lease was lost before the result was
/// stored.
pub(crate) static RECORD_COMPLETE: Lua = Lua::new(&[RECORD_COMPLETE_BODY]);
const RECORD_COMPLETE_BODY: &str = r"
local own = redis.call('HMGET', KEYS[1], 'own', 'by')
if own[1] ~= ARGV[1] then
  if not own[1] and own[2] == ARGV[1] then return 1 end
  return 0
end
redis.call('HSET', KEYS[1], 'st', ARGV[2], 'code', ARGV[3], 'hdr', ARGV[4], 'body', ARGV[5], 'by', ARGV[1])
redis.call('HDEL', KEYS[1], 'own')
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('PUBLISH', KEYS[1], '')
return 1
";

/// in progress -> absent, for the owner only. `ARGV` owner. Returns 1 or 0.
pub(crate) static RECORD_RELEASE: Lua = Lua::new(&[RECORD_RELEASE_BODY]);
const RECORD_RELEASE_BODY: &str = r"
if redis.call('HGET', KEYS[1], 'own') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[1], '')
return 1
";

/// Every script, for the checks below.
#[cfg(test)]
pub(crate) const ALL: [(&str, &Lua); 28] = [
    ("ACQUIRE", &ACQUIRE),
    ("BATCH", &BATCH),
    ("ISSUE_FENCE", &ISSUE_FENCE),
    ("EXTEND", &EXTEND),
    ("RELEASE", &RELEASE),
    ("RELEASE_AFTER_HOLD", &RELEASE_AFTER_HOLD),
    ("FAIR_ACQUIRE", &FAIR_ACQUIRE),
    ("FAIR_RELEASE", &FAIR_RELEASE),
    ("FAIR_LEAVE", &FAIR_LEAVE),
    ("RECORD_CLAIM", &RECORD_CLAIM),
    ("RECORD_RENEW", &RECORD_RENEW),
    ("RECORD_COMPLETE", &RECORD_COMPLETE),
    ("RECORD_RELEASE", &RECORD_RELEASE),
    ("READ_ACQUIRE", &READ_ACQUIRE),
    ("WRITE_ACQUIRE", &WRITE_ACQUIRE),
    ("WRITE_RELEASE", &WRITE_RELEASE),
    ("READ_RELEASE", &READ_RELEASE),
    ("DOWNGRADE", &DOWNGRADE),
    ("LEASE_RENEW", &LEASE_RENEW),
    ("PERMITS_ACQUIRE", &PERMITS_ACQUIRE),
    ("PERMITS_RELEASE", &PERMITS_RELEASE),
    ("PERMITS_AVAILABLE", &PERMITS_AVAILABLE),
    ("LATCH_SET", &LATCH_SET),
    ("LATCH_COUNT_DOWN", &LATCH_COUNT_DOWN),
    ("LATCH_READ", &LATCH_READ),
    ("GROUP_ACQUIRE", &GROUP_ACQUIRE),
    ("INSPECT", &INSPECT),
    ("FORCE_RELEASE", &FORCE_RELEASE),
];

#[cfg(test)]
mod tests;

//! The Lua scripts that make each lock transition one atomic step on Redis.
//!
//! Each script is one `.lua` file beside this module (`lock/`, `fair/`,
//! `sync/`, `records/`, `inspect.lua`, `force_release.lua`), readable as
//! one text: its header says what it takes (`KEYS`, `ARGV`), what it
//! answers and why it is safe. The functions several scripts share are in
//! `shared/`, one file per function (or per small family), and a script
//! names the ones it calls as its [`Part`]s: [`Lua::text`] joins them
//! before its body, the one place a script's text is assembled. Nothing
//! rewrites a script's text.
//!
//! Cluster-safe by construction, which `tests::every_script_is_cluster_safe`
//! checks on every text: each key a script touches comes in `KEYS` (none is
//! built inside Lua), every command name is a literal, and the keys of one
//! call share the lock's `{hash tag}` (see `backend::Keys`), so one slot
//! holds them and no cluster or proxy rejects a script.
//!
//! Scripts that wake waiters call `publish(channel, message)`, and come in
//! two texts that differ in that function only ([`Part::Publish`]):
//! `PUBLISH` (one Redis, Redlock; the subscriber listens on that server,
//! `shared/publish.lua`) and `SPUBLISH` (Redis Cluster: sharded pub/sub
//! stays on the shard that owns the lock's slot, where plain `PUBLISH`
//! would be sent to every node, `shared/spublish.lua`).

use std::sync::OnceLock;

use redis::Script;

mod batch;
mod fair;
mod force;
mod inspect;
mod lock;
mod records;
mod sync;
pub(crate) use batch::BATCH;
pub(crate) use fair::{FAIR_ACQUIRE, FAIR_LEAVE, FAIR_RELEASE};
pub(crate) use force::FORCE_RELEASE;
pub(crate) use inspect::INSPECT;
pub(crate) use lock::{ACQUIRE, EXTEND, ISSUE_FENCE, RELEASE, RELEASE_AFTER_HOLD};
pub(crate) use records::{RECORD_CLAIM, RECORD_COMPLETE, RECORD_RELEASE, RECORD_RENEW};
pub(crate) use sync::*;

/// How a script publishes its wake-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Publish {
    /// `PUBLISH`: one Redis server (and Redlock's nodes).
    Plain,
    /// `SPUBLISH` (Redis 7): on the shard that owns the channel's slot.
    Sharded,
}

/// A shared function a script's body calls, joined before the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// A function (or a small family of them) from `shared/`.
    Lua(&'static str),
    /// `publish(channel, message)`, in the variant the script is sent
    /// with ([`Publish`]).
    Publish,
}

/// `next_fence`, `next_fence_at` and `clock_us`: fencing tokens.
pub(crate) const FENCE: Part = Part::Lua(FENCE_LUA);
/// [`FENCE`]'s text.
pub(crate) const FENCE_LUA: &str = include_str!("scripts/shared/fence.lua");
/// `mark_waited`: a waiter's "someone waits" signal, on a key the waiters
/// own (`backend::Keys::waited`), never on the holder's value.
pub(crate) const WAITING: Part = Part::Lua(include_str!("scripts/shared/waiting.lua"));
/// `acquire_lock`: the lock's acquire step (after [`WAITING`] and [`FENCE`]).
pub(crate) const ACQUIRE_LOCK: Part = Part::Lua(include_str!("scripts/shared/acquire_lock.lua"));
/// `release_lock`: the lock's release step (after [`Part::Publish`]).
pub(crate) const RELEASE_LOCK: Part = Part::Lua(include_str!("scripts/shared/release_lock.lua"));
/// `clock` and `purge`: the fair line.
pub(crate) const FAIR_LINE: Part = Part::Lua(include_str!("scripts/shared/fair.lua"));
/// `hand_over`: a fair lock goes to the first live waiter (after
/// [`Part::Publish`], [`FAIR_LINE`] and [`FENCE`]).
pub(crate) const HAND_OVER: Part = Part::Lua(include_str!("scripts/shared/hand_over.lua"));
/// `now_ms`, `drop_expired` and `keep_key`: leases in sorted sets.
pub(crate) const LEASES: Part = Part::Lua(include_str!("scripts/shared/leases.lua"));
/// [`Part::Publish`] on one server.
const PUBLISH: &str = include_str!("scripts/shared/publish.lua");
/// [`Part::Publish`] on a Redis Cluster node.
const SPUBLISH: &str = include_str!("scripts/shared/spublish.lua");

/// The byte a waiter of an earlier version appended to the value of the
/// lock it waited for (a holder whose token starts with
/// `owner::MARKED_BEFORE`). This version never writes it, and compares
/// every holder exactly (see `shared/waiting.lua`); what reads a holder's
/// token for display or for its ended-holder id leaves it out. Never in
/// a token: client names hold no control character.
pub(crate) const WAITED_MARK: char = '\u{1f}';

/// One script: the shared functions it calls and its body, in a `PUBLISH`
/// and a `SPUBLISH` variant (one text for a script that publishes
/// nothing), each compiled once.
#[derive(Debug)]
pub(crate) struct Lua {
    parts: &'static [Part],
    body: &'static str,
    plain: OnceLock<Script>,
    sharded: OnceLock<Script>,
}

impl Lua {
    /// The script whose body is `body` (a `.lua` file), after `parts`.
    const fn new(parts: &'static [Part], body: &'static str) -> Self {
        Self {
            parts,
            body,
            plain: OnceLock::new(),
            sharded: OnceLock::new(),
        }
    }

    /// Whether the script publishes (its two variants differ).
    pub(crate) fn publishes(&self) -> bool {
        self.parts.contains(&Part::Publish)
    }

    /// The script's text as sent with `publish`: its parts, then its body.
    pub(crate) fn text(&self, publish: Publish) -> String {
        let mut text = String::new();
        for part in self.parts {
            text.push_str(match (part, publish) {
                (Part::Lua(lua), _) => lua,
                (Part::Publish, Publish::Plain) => PUBLISH,
                (Part::Publish, Publish::Sharded) => SPUBLISH,
            });
        }
        text.push_str(self.body);
        text
    }

    /// The script, publishing with `publish`.
    pub(crate) fn on(&self, publish: Publish) -> &Script {
        let publish = if self.publishes() {
            publish
        } else {
            Publish::Plain
        };
        let cell = match publish {
            Publish::Plain => &self.plain,
            Publish::Sharded => &self.sharded,
        };
        cell.get_or_init(|| Script::new(&self.text(publish)))
    }
}

/// Every script, by the path of its `.lua` file in `scripts/` (without
/// the extension): the checks below, and the name a Redis call's span
/// gives a script ([`name_of`]).
pub(crate) const ALL: [(&str, &Lua); 28] = [
    ("lock/acquire", &ACQUIRE),
    ("lock/batch", &BATCH),
    ("lock/issue_fence", &ISSUE_FENCE),
    ("lock/extend", &EXTEND),
    ("lock/release", &RELEASE),
    ("lock/release_after_hold", &RELEASE_AFTER_HOLD),
    ("fair/acquire", &FAIR_ACQUIRE),
    ("fair/release", &FAIR_RELEASE),
    ("fair/leave", &FAIR_LEAVE),
    ("records/claim", &RECORD_CLAIM),
    ("records/renew", &RECORD_RENEW),
    ("records/complete", &RECORD_COMPLETE),
    ("records/release", &RECORD_RELEASE),
    ("sync/read_acquire", &READ_ACQUIRE),
    ("sync/write_acquire", &WRITE_ACQUIRE),
    ("sync/write_release", &WRITE_RELEASE),
    ("sync/read_release", &READ_RELEASE),
    ("sync/downgrade", &DOWNGRADE),
    ("sync/lease_renew", &LEASE_RENEW),
    ("sync/permits_acquire", &PERMITS_ACQUIRE),
    ("sync/permits_release", &PERMITS_RELEASE),
    ("sync/permits_available", &PERMITS_AVAILABLE),
    ("sync/latch_set", &LATCH_SET),
    ("sync/latch_count_down", &LATCH_COUNT_DOWN),
    ("sync/latch_read", &LATCH_READ),
    ("sync/group_acquire", &GROUP_ACQUIRE),
    ("inspect", &INSPECT),
    ("force_release", &FORCE_RELEASE),
];

/// The name (in [`ALL`]) of the script whose SHA1 (hex, as `EVALSHA`
/// sends it) is `sha`, among the variants compiled so far.
pub(crate) fn name_of(sha: &[u8]) -> Option<&'static str> {
    ALL.iter().find_map(|(name, lua)| {
        [&lua.plain, &lua.sharded]
            .into_iter()
            .filter_map(OnceLock::get)
            .any(|script| script.get_hash().as_bytes().eq_ignore_ascii_case(sha))
            .then_some(*name)
    })
}

#[cfg(test)]
mod tests;

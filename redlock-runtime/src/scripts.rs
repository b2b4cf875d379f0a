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
/// `held` and `mark_waited`: whose a lock's value is, and the waiter's
/// mark ([`WAITED_MARK`]).
pub(crate) const HELD: Part = Part::Lua(include_str!("scripts/shared/held.lua"));
/// `acquire_lock`: the lock's acquire step (after [`HELD`] and [`FENCE`]).
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

/// The byte a waiter appends to the value of the lock it waits for, so
/// that the holder's release knows someone waits and publishes: a release
/// that finds no mark wakes no one and publishes nothing (see
/// `shared/held.lua`). Never in a token: client names hold no control
/// character.
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

//! How a script is made and named: [`Lua`], one script's body after the
//! shared functions it calls ([`Part`]s, from `shared/`), compiled once per
//! [`Publish`] variant; and the name a span gives a script by its SHA1.
//! The scripts themselves, which make each transition of a primitive one
//! atomic step on Redis, are each primitive's, in its folder of
//! `primitive/`.
//!
//! Each script is one `.lua` file beside the module that declares it,
//! readable as one text: its header says what it takes (`KEYS`, `ARGV`),
//! what it answers and why it is safe. The functions several scripts share are in
//! `shared/`, one file per function (or per small family), and a script
//! names the ones it calls as its [`Part`]s: [`Lua::text`] joins them
//! before its body, the one place a script's text is assembled. Nothing
//! rewrites a script's text.
//!
//! Cluster-safe by construction, which `script_checks::every_script_is_cluster_safe`
//! checks on every text: each key a script touches comes in `KEYS` (none is
//! built inside Lua), every command name is a literal, and the keys of one
//! call share the primitive's `{hash tag}` (see `primitive::keys`), so one slot
//! holds them and no cluster or proxy rejects a script.
//!
//! Scripts that wake waiters call `publish(channel, message)`, and come in
//! two texts that differ in that function only ([`Part::Publish`]):
//! `PUBLISH` (one Redis, Redlock; the subscriber listens on that server,
//! `shared/publish.lua`) and `SPUBLISH` (Redis Cluster: sharded pub/sub
//! stays on the shard that owns the lock's slot, where plain `PUBLISH`
//! would be sent to every node, `shared/spublish.lua`).

use std::sync::{OnceLock, PoisonError, RwLock};

use redis::Script;

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
/// own (`LockKeys::waited`, in `primitive/lock/`), never on the holder's value.
pub(crate) const WAITING: Part = Part::Lua(include_str!("scripts/shared/waiting.lua"));
/// `clock` and `purge`: the fair line.
pub(crate) const FAIR_LINE: Part = Part::Lua(include_str!("scripts/shared/fair.lua"));
/// `hand_over`: a fair lock goes to the first live waiter (after
/// [`Part::Publish`], [`FAIR_LINE`] and [`FENCE`]).
pub(crate) const HAND_OVER: Part = Part::Lua(include_str!("scripts/shared/hand_over.lua"));
/// `now_ms`, `drop_expired` and `keep_key`: leases in sorted sets.
pub(crate) const LEASES: Part = Part::Lua(include_str!("scripts/shared/leases.lua"));
/// [`Part::Publish`] on one server.
pub(crate) const PUBLISH: &str = include_str!("scripts/shared/publish.lua");
/// [`Part::Publish`] on a Redis Cluster node.
pub(crate) const SPUBLISH: &str = include_str!("scripts/shared/spublish.lua");

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
    /// Its `.lua` file, under `src/`.
    file: &'static str,
    parts: &'static [Part],
    body: &'static str,
    plain: OnceLock<Script>,
    sharded: OnceLock<Script>,
}

impl Lua {
    /// The script whose body is `body`, the text of `file` (its path
    /// under `src/`), after `parts`.
    pub(crate) const fn new(
        file: &'static str,
        parts: &'static [Part],
        body: &'static str,
    ) -> Self {
        Self {
            file,
            parts,
            body,
            plain: OnceLock::new(),
            sharded: OnceLock::new(),
        }
    }

    /// Its `.lua` file, under `src/`.
    #[cfg(test)]
    pub(crate) fn file(&self) -> &'static str {
        self.file
    }

    /// Its name, which a Redis call's span gives it: its file's path under
    /// the folder that holds the scripts' modules (`scripts/` or
    /// `primitive/`), without `.lua` (`lock/acquire`, `record/claim`).
    pub(crate) fn name(&self) -> &'static str {
        let file = self.file.strip_suffix(".lua").unwrap_or(self.file);
        file.split_once('/').map_or(file, |(_, name)| name)
    }

    /// Its body: the text of its file.
    #[cfg(test)]
    pub(crate) fn body(&self) -> &'static str {
        self.body
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
        cell.get_or_init(|| {
            let script = Script::new(&self.text(publish));
            NAMES
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .push((script.get_hash().to_owned(), self.name()));
            script
        })
    }
}

/// Each script compiled so far, by its SHA1 (hex, as `EVALSHA` sends
/// it): what [`name_of`] reads.
static NAMES: RwLock<Vec<(String, &'static str)>> = RwLock::new(Vec::new());

/// The name ([`Lua::name`]) of the script whose SHA1 (hex, as `EVALSHA`
/// sends it) is `sha`, among the variants compiled so far.
pub(crate) fn name_of(sha: &[u8]) -> Option<&'static str> {
    NAMES
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .find(|(hash, _)| hash.as_bytes().eq_ignore_ascii_case(sha))
        .map(|(_, name)| *name)
}

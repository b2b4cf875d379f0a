//! What a release publishes on its lock's channel, as one type
//! ([`Message`]): the scripts write it in Lua (`redis.sha1hex`, `*`,
//! `*n`, the grant's fields joined by [`GRANT_SEPARATOR`]), the memory
//! store hands it over directly, and the subscriber reads it back with
//! [`Message::parse`].

/// A release's message: whom it wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Message<'a> {
    /// Wake the longest waiter of each client (an empty message: a plain
    /// release).
    Longest,
    /// Wake every waiter (`*`: a release that may let several in, a
    /// writer's, a latch reaching zero).
    All,
    /// Wake the `n` longest waiters (`*n`: a semaphore's `n` permits
    /// freed).
    Count(u32),
    /// Wake the fair waiter of this [`waiter_id`] (the first in line),
    /// or, in a client where it does not wait, the longest waiter.
    Named(&'a str),
    /// The lock is the fair waiter's of this [`waiter_id`] already (a
    /// fair release handed it over): wake it with its [`Grant`]; nobody
    /// else.
    Granted { id: &'a str, grant: Grant },
}

/// A fair release that handed the lock to the first waiter in line: the
/// lock is that waiter's from the release on (`primitive/fair/release.lua`),
/// for what was left of its presence in the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    /// The fencing token the release issued to it.
    pub(crate) fence: u64,
    /// When the release ran, on Redis's clock (ms).
    pub(crate) at_ms: u64,
}

/// The byte that separates a grant message's fields: `\31` in the fair
/// scripts' text (never in an id or a number).
pub(crate) const GRANT_SEPARATOR: char = '\u{1f}';

impl<'a> Message<'a> {
    /// The message published as `text`. Never fails: a text that is no
    /// other message names a waiter (which wakes the longest waiter
    /// where none has that name), so a message of a newer version still
    /// wakes someone.
    pub(crate) fn parse(text: &'a str) -> Self {
        if text.is_empty() {
            return Self::Longest;
        }
        if let Some(count) = text.strip_prefix('*') {
            return count.parse().map_or(Self::All, Self::Count);
        }
        match parse_grant(text) {
            Some((id, grant)) => Self::Granted { id, grant },
            None => Self::Named(text),
        }
    }
}

/// The waiter a grant message names (its [`waiter_id`]) and the grant
/// (the id, [`GRANT_SEPARATOR`], the fencing token, the separator, Redis's
/// clock in ms); `None` for any other message.
fn parse_grant(message: &str) -> Option<(&str, Grant)> {
    let mut parts = message.split(GRANT_SEPARATOR);
    let (id, fence, at_ms) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let grant = Grant {
        fence: fence.parse().ok()?,
        at_ms: at_ms.parse().ok()?,
    };
    Some((id, grant))
}

/// A fair waiter's name on its lock's channel: the SHA-1 of its owner
/// token, in lower-case hex, as Lua's `redis.sha1hex(token)` writes it in
/// the scripts that publish it (a grant and the wake-up of the first in
/// line: `FAIR_RELEASE`, `FAIR_LEAVE`, `RELEASE_AFTER_HOLD`).
///
/// Not the token itself: every client allowed to `SUBSCRIBE` to the
/// channel reads what is published there (an ACL can grant channels
/// without keys), and the token is the secret that releases and extends
/// the lock it holds. The id names the waiter and grants nothing: no
/// script takes it in place of a token, and the token (a random UUID
/// after the client's name) cannot be worked back from its SHA-1. The
/// waiter computes its own id once, as it subscribes; a message is
/// matched by exact comparison, as the token was.
pub(crate) fn waiter_id(token: &str) -> String {
    sha1_smol::Sha1::from(token).digest().to_string()
}

#[cfg(test)]
mod tests {
    use super::{Grant, Message, waiter_id};

    #[test]
    fn a_grant_message_names_its_waiter_and_carries_token_and_clock() {
        let id = waiter_id("~app:1:abc");
        assert_eq!(
            Message::parse(&format!("{id}\u{1f}1764170000000123\u{1f}1764170000000")),
            Message::Granted {
                id: id.as_str(),
                grant: Grant {
                    fence: 1_764_170_000_000_123,
                    at_ms: 1_764_170_000_000
                }
            }
        );
        // A release that names a waiter, nobody, every waiter or a count.
        assert_eq!(Message::parse(&id), Message::Named(&id));
        assert_eq!(Message::parse(""), Message::Longest);
        assert_eq!(Message::parse("*"), Message::All);
        assert_eq!(Message::parse("*3"), Message::Count(3));
        assert_eq!(Message::parse("*x"), Message::All);
        // No grant without its three fields, each a number: a name.
        for other in ["a\u{1f}1", "a\u{1f}x\u{1f}1", "a\u{1f}1\u{1f}2\u{1f}3"] {
            assert_eq!(Message::parse(other), Message::Named(other), "{other:?}");
        }
    }

    /// Issue 32, part 5: the id is what `redis.sha1hex` writes for the
    /// token: 40 lower-case hex digits (the known SHA-1 values of "" and
    /// "abc"), so never the separator a grant splits at; two tokens,
    /// two ids. (`tests/fair.rs` compares it with Redis's own.)
    #[test]
    fn a_waiter_id_is_the_sha1_hex_redis_writes() {
        assert_eq!(waiter_id(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(waiter_id("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        let (one, other) = (crate::owner::token("app", 0), crate::owner::token("app", 0));
        let id = waiter_id(&one);
        assert_eq!(id.len(), 40);
        assert!(
            id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            "{id}"
        );
        assert_ne!(id, waiter_id(&other));
    }
}

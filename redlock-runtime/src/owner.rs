//! Who holds a lock: the owner token every acquire writes, which names its
//! client and when it was taken, so that [`LockClient::inspect`](crate::LockClient::inspect)
//! and the busy errors can say who holds a lock. Writing it costs nothing
//! (it is the value the lock holds anyway); reading it back is
//! `inspect`'s one round trip, which a busy error makes once more after
//! its acquire failed.
//!
//! A token is `~uuid.since.name`: a random UUID (the secret part: whoever
//! has the whole token can release the lock), the acquire's time on
//! Redis's clock in ms (as the acquiring client estimates it), and the
//! client's name. Only the name and the time are ever shown.
//!
//! The time is that of the attempt that took the lock, not of the start of
//! a wait: each attempt after a busy answer goes out under a new token
//! (see `acquire.rs`), except where the old one may still hold something
//! (an attempt whose answer was lost, a place in a fair line or among the
//! waiting writers). There the time is when that token was minted, and a
//! fair waiter's hold is shown from when it joined the line.
//!
//! The leading [`MARKABLE`] says that its holder's scripts accept a
//! waiter's mark on the lock's value (see `scripts::HELD`). A waiter marks
//! only such a lock: a holder running an older version of this crate
//! (whose tokens start with the UUID, and whose scripts compare the value
//! exactly) is never marked, so a rolling upgrade never costs it its
//! renewals or its release; it always publishes, and wakes the new waiters.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The first character of every token this version writes: its holder
/// accepts a waiter's mark (see the module docs). Never a UUID's first
/// character.
pub(crate) const MARKABLE: char = '~';

/// The longest client name.
pub(crate) const MAX_NAME_LEN: usize = 128;

/// A new owner token for `name`, taken at `since_ms` (Redis's clock).
pub(crate) fn token(name: &str, since_ms: u64) -> String {
    use std::fmt::Write as _;
    // Sized once: one allocation per acquire, no regrowth.
    let mut token = String::with_capacity(uuid::fmt::Hyphenated::LENGTH + 23 + name.len());
    token.push(MARKABLE);
    token.push_str(
        uuid::Uuid::new_v4()
            .hyphenated()
            .encode_lower(&mut uuid::Uuid::encode_buffer()),
    );
    let _ = write!(token, ".{since_ms}.");
    token.push_str(name);
    token
}

/// The public part of a token: the client name and the acquire time;
/// `None` for a token in another form (an older client's bare UUID).
pub(crate) fn parse(token: &str) -> Option<(&str, SystemTime)> {
    let (_uuid, rest) = token.split_once('.')?;
    let (since, name) = rest.split_once('.')?;
    let since = since.parse::<u64>().ok()?;
    Some((name, UNIX_EPOCH + Duration::from_millis(since)))
}

/// The default client name: the host name and the process id.
pub(crate) fn default_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    let host: String = host
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_LEN - 12)
        .collect();
    format!("{host}:{}", std::process::id())
}

/// Why `name` cannot be a client name, if it cannot.
pub(crate) fn invalid_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_NAME_LEN {
        Some("it is longer than 128 bytes")
    } else if name.chars().any(char::is_control) {
        Some("it holds a control character")
    } else {
        None
    }
}

/// Milliseconds since 1970 on this machine's clock.
pub(crate) fn local_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_shows_its_name_and_time_but_keeps_its_secret() {
        let t = token("billing-7.eu:42", 1_700_000_000_123);
        let (name, since) = parse(&t).expect("our form");
        assert_eq!(name, "billing-7.eu:42");
        assert_eq!(since, UNIX_EPOCH + Duration::from_millis(1_700_000_000_123));
        let secret = t.split('.').next().expect("uuid");
        let uuid = secret.strip_prefix(MARKABLE).expect("markable");
        assert_eq!(uuid.len(), 36);
        assert!(uuid.chars().all(|c| c.is_ascii_hexdigit() || c == '-'));
        assert!(!name.contains(secret));
        assert_eq!(parse("0b7e4c1a-0000-4000-8000-000000000000"), None);
        assert_ne!(t, token("billing-7.eu:42", 1_700_000_000_123), "random");
    }

    #[test]
    fn names_are_checked() {
        assert!(invalid_name("").is_some());
        assert!(invalid_name(&"x".repeat(129)).is_some());
        assert!(invalid_name("a\nb").is_some());
        assert!(invalid_name("web-3:1234").is_none());
        let default = default_name();
        assert!(invalid_name(&default).is_none(), "{default}");
        assert!(default.ends_with(&format!(":{}", std::process::id())));
    }
}

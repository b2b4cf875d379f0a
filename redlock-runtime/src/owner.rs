//! Who holds a lock: the owner token every acquire writes, which names its
//! client and when it was taken, so that [`LockClient::inspect`](crate::LockClient::inspect)
//! and the busy errors can say who holds a lock. Writing it costs nothing
//! (it is the value the lock holds anyway); reading it back is
//! `inspect`'s one round trip, which a busy error makes once more after
//! its acquire failed.
//!
//! A token is `=uuid.since.name`: a random UUID (the secret part: whoever
//! has the whole token can release the lock), the acquire's time on
//! Redis's clock in ms (as the acquiring client estimates it), and the
//! client's name. Only the name and the time are ever shown.
//!
//! The time is that of the attempt that took the lock, not of the start of
//! a wait: each attempt after a busy answer goes out under a new token
//! (see `acquire.rs`), except where the old one may still hold something
//! (an attempt whose answer was lost, or a place in a line). A token that
//! keeps a place in a line (a fair waiter's, a waiting writer's) starts
//! with [`QUEUED`] instead: its time is when it joined the line, and the
//! time it was granted the lock is read from the lock's fencing counter
//! (see [`granted`]).
//!
//! Every script compares a lock's value with its holder's token exactly:
//! a waiter signals that it waits on a key of its own
//! (`scripts/shared/waiting.lua`), never on the holder's value. The
//! leading [`PLAIN`] keeps that true in a rolling upgrade: the previous
//! version's waiters appended a byte to the value of a lock whose token
//! started with [`MARKED_BEFORE`] (and only such a lock), so they leave
//! this version's tokens alone; and this version's waiters write to no
//! holder's value, so a previous version's holder keeps its renewals and
//! its release too. While both run, a waiter of one version behind a
//! holder of the other is not published to (each release looks for its
//! own version's signal): it wakes by its own timer, no later than the
//! lease's end, so an upgrade costs wake-up latency, never a lock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The first character of every plain token this version writes: not
/// [`MARKED_BEFORE`], so no waiter of the previous version marks its
/// holder's value (see the module docs). Never a UUID's first character.
pub(crate) const PLAIN: char = '=';

/// The first character of the previous version's plain tokens, whose
/// holders accepted a waiter's mark on their value
/// (`scripts::WAITED_MARK`); this version writes none.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) const MARKED_BEFORE: char = '~';

/// The longest client name.
pub(crate) const MAX_NAME_LEN: usize = 128;

/// The first character of a token that keeps a place in a line (a fair
/// waiter's, a waiting writer's): its time is when it joined the line, not
/// when it was granted the lock (see [`granted`]). No waiter of any
/// version marks it: every end of a fair lease (release, give-back, the
/// end of a minimum hold) publishes. Never a UUID's first character.
pub(crate) const QUEUED: char = '^';

/// A new owner token for `name`, taken at `since_ms` (Redis's clock).
pub(crate) fn token(name: &str, since_ms: u64) -> String {
    token_led_by(PLAIN, name, since_ms)
}

/// A new owner token for `name` that will wait in a line (see
/// [`QUEUED`]), minted at `since_ms` (Redis's clock).
pub(crate) fn queued_token(name: &str, since_ms: u64) -> String {
    token_led_by(QUEUED, name, since_ms)
}

fn token_led_by(lead: char, name: &str, since_ms: u64) -> String {
    use std::fmt::Write as _;
    // Sized once: one allocation per acquire, no regrowth.
    let mut token = String::with_capacity(uuid::fmt::Hyphenated::LENGTH + 23 + name.len());
    token.push(lead);
    token.push_str(
        uuid::Uuid::new_v4()
            .hyphenated()
            .encode_lower(&mut uuid::Uuid::encode_buffer()),
    );
    let _ = write!(token, ".{since_ms}.");
    token.push_str(name);
    token
}

/// When the holder of `token` was granted its lock, from the fencing
/// token `fence` last issued from the lock's counter, on a store whose
/// tokens are Redis's clock in microseconds (`scripts/shared/fence.lua`: each token is
/// the larger of that reading and the counter + 1), as read at `now`.
///
/// Only for a [`QUEUED`] token, whose own time is when it joined the line:
/// its grant (a fair hand-over or acquire, a writer's acquire) issued
/// `fence` from the counter, and nothing raises that counter while it
/// holds (an acquire of the name finds it busy and issues nothing; a
/// queued holder never asks for a fencing token later, having one; an
/// operator's `force_release` ends it). So the grant is no earlier than
/// `fence`'s reading, and no earlier than the token's own time. A reading
/// past `now` (the whole millisecond the clock was read in: it may have
/// been read in the grant's own) tells nothing (the counter ran ahead of a
/// clock that stepped back): then, as for any other token, `None`, and the
/// token's own time stands.
pub(crate) fn granted(token: &str, fence: Option<u64>, now_ms: SystemTime) -> Option<SystemTime> {
    if !token.starts_with(QUEUED) {
        return None;
    }
    let (_, joined) = parse(token)?;
    let issued = UNIX_EPOCH.checked_add(Duration::from_micros(fence?))?;
    (issued < now_ms + Duration::from_millis(1)).then_some(issued.max(joined))
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
        let uuid = secret.strip_prefix(PLAIN).expect("plain");
        assert_eq!(uuid.len(), 36);
        assert!(uuid.chars().all(|c| c.is_ascii_hexdigit() || c == '-'));
        assert!(!name.contains(secret));
        assert_eq!(parse("0b7e4c1a-0000-4000-8000-000000000000"), None);
        assert_ne!(t, token("billing-7.eu:42", 1_700_000_000_123), "random");
    }

    #[test]
    fn a_queued_holder_was_granted_when_its_fencing_token_was_issued() {
        let joined = 1_700_000_000_000;
        let t = queued_token("web", joined);
        assert!(t.starts_with(QUEUED));
        assert_eq!(parse(&t).map(|(name, _)| name), Some("web"));
        let at = |ms: u64| UNIX_EPOCH + Duration::from_millis(ms);
        let now = at(joined + 5_000);
        // Read in the grant's own millisecond.
        let fence = Some((joined + 5_000) * 1000 + 999);
        assert!(granted(&t, fence, now).is_some());
        // Granted 3 s after it joined the line.
        let fence = Some((joined + 3_000) * 1000 + 417);
        assert_eq!(
            granted(&t, fence, now),
            Some(at(joined + 3_000) + Duration::from_micros(417))
        );
        // A counter read before the token was minted: no earlier than that.
        assert_eq!(granted(&t, Some(joined * 1000 - 9), now), Some(at(joined)));
        // A counter ahead of the clock, no counter, or a token that never
        // waited in a line: its own time stands.
        assert_eq!(granted(&t, Some((joined + 5_001) * 1000), now), None);
        assert_eq!(granted(&t, None, now), None);
        assert_eq!(granted(&t, Some(u64::MAX), now), None);
        assert_eq!(granted(&token("web", joined), fence, now), None);
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

//! Small shared helpers: URL redaction, key and duration checks.

use std::time::Duration;

use crate::error::{ConfigError, LockError};

/// The longest key accepted, in bytes, not counting the client's prefix.
pub const MAX_KEY_LEN: usize = 1024;

/// The longest key prefix accepted, in bytes.
pub(crate) const MAX_PREFIX_LEN: usize = 256;

/// The longest ttl or wait accepted: Redis keeps `PX` in milliseconds as a
/// signed 64-bit number, and a year is far beyond any sane lease.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Replaces every credential in a Redis URL with `***`, so the URL can be
/// logged or printed. Every URL the crate shows (in `Debug`, errors, logs and
/// [`LockClient::target`](crate::LockClient::target)) went through this.
///
/// Redacted, for every form `redis` accepts and for malformed ones alike:
/// - the password of the userinfo (`redis://user:secret@host`), found at
///   the *last* `@`, so a password with a raw `@`, `/`, `?` or `#` is
///   still hidden whole; a userinfo without `:` is hidden whole too
///   (`redis://secret@host`);
/// - the value of a credential query parameter (`pass=`, `password=`,
///   `passwd=`, `pwd=`, `secret=`, `token=`, `auth=`, any case, also
///   percent-encoded) and everything after it, as used by `redis+unix://`
///   and `unix://` URLs (`?db=0&pass=secret`): a raw `&` or `#` inside such a
///   value cannot leak its tail.
///
/// ```
/// assert_eq!(
///     redlock_runtime::redact_url("redis://app:hunter2@cache:6379/0"),
///     "redis://app:***@cache:6379/0"
/// );
/// assert_eq!(
///     redlock_runtime::redact_url("redis+unix:///run/redis.sock?db=0&pass=hunter2"),
///     "redis+unix:///run/redis.sock?db=0&pass=***"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    // A query credential first: its value may hold any character,
    // `@` included, so nothing after its `=` is looked at.
    let (head, cut) = match credential_value_start(rest) {
        Some(start) => (&rest[..start], true),
        None => (rest, false),
    };
    let (userinfo, after) = match head.rfind('@') {
        Some(at) => (Some(&head[..at]), &head[at + 1..]),
        None => (None, head),
    };
    let mut out = String::with_capacity(url.len());
    if let Some(scheme) = scheme {
        out.push_str(scheme);
        out.push_str("://");
    }
    if let Some(userinfo) = userinfo {
        match userinfo.split_once(':') {
            // A user name is not secret; one with a character that ends the
            // authority is not a user name: hide it with the rest.
            Some((user, _)) if !user.contains(['/', '?', '#']) => {
                out.push_str(user);
                out.push_str(":***@");
            }
            _ => out.push_str("***@"),
        }
    }
    out.push_str(after);
    if cut {
        out.push_str("***");
    }
    out
}

/// Query parameters whose value is a credential.
const SECRET_PARAMS: [&str; 7] = [
    "pass", "password", "passwd", "pwd", "secret", "token", "auth",
];

/// Where the value of the first credential query parameter starts: a
/// `name=` after a `?`, `&` or `;` (with a `?` at or before it) whose name
/// is one of [`SECRET_PARAMS`], in any case, percent-encoded or not.
fn credential_value_start(s: &str) -> Option<usize> {
    let first_q = s.find('?')?;
    s.char_indices()
        .filter(|&(i, c)| i >= first_q && matches!(c, '?' | '&' | ';'))
        .find_map(|(i, _)| {
            let tail = &s[i + 1..];
            let eq = tail.find('=')?;
            let name = &tail[..eq];
            let is_secret = !name.contains(['?', '&', ';', '/', '@'])
                && SECRET_PARAMS.contains(&percent_decode(name).to_ascii_lowercase().as_str());
            is_secret.then_some(i + 1 + eq + 1)
        })
}

/// Percent-decodes `s` (invalid escapes stay as they are).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The credentials in `url` (raw and percent-decoded), as [`redact_url`]
/// finds them: what [`scrub`] removes from messages that may quote them.
fn secrets(url: &str) -> Vec<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let mut found = Vec::new();
    let head = match credential_value_start(rest) {
        Some(start) => {
            found.push(&rest[start..]);
            &rest[..start]
        }
        None => rest,
    };
    if let Some(at) = head.rfind('@') {
        let userinfo = &head[..at];
        found.push(userinfo.split_once(':').map_or(userinfo, |(_, pw)| pw));
    }
    let mut out = Vec::new();
    for secret in found.into_iter().filter(|s| !s.is_empty()) {
        let decoded = percent_decode(secret);
        out.push(secret.to_owned());
        if decoded != secret && !decoded.is_empty() {
            out.push(decoded);
        }
    }
    out
}

/// `text` (a driver's message about `url`) with every credential of `url`
/// replaced by `***`, and the URL itself by its redacted form.
pub(crate) fn scrub(text: &str, url: &str) -> String {
    let mut out = text.replace(url, &redact_url(url));
    for secret in secrets(url) {
        out = out.replace(&secret, "***");
    }
    out
}

/// Checks a user's lock key: non-empty and at most [`MAX_KEY_LEN`] bytes.
pub(crate) fn validate_key(key: &str) -> Result<(), LockError> {
    match key_problem(key) {
        None => Ok(()),
        Some(reason) => Err(LockError::InvalidKey {
            key: preview(key),
            reason,
        }),
    }
}

/// What is wrong with a user's key (a lock's, an idempotency key), if
/// anything: empty, or longer than [`MAX_KEY_LEN`] bytes. Never quotes the
/// key (an idempotency key may be a secret).
pub(crate) fn key_problem(key: &str) -> Option<String> {
    if key.is_empty() {
        Some("a key must not be empty".to_owned())
    } else if key.len() > MAX_KEY_LEN {
        Some(format!(
            "the key is {} bytes long; at most {MAX_KEY_LEN} bytes are allowed (after the prefix)",
            key.len()
        ))
    } else {
        None
    }
}

fn preview(key: &str) -> String {
    const SHOWN: usize = 64;
    match key.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}...", &key[..cut]),
        None => key.to_owned(),
    }
}

/// Checks a ttl: at least 1 ms (Redis counts in milliseconds) and at most a year.
pub(crate) fn validate_ttl(name: &'static str, ttl: Duration) -> Result<(), ConfigError> {
    if ttl < Duration::from_millis(1) {
        return Err(ConfigError::InvalidDuration {
            name,
            value: ttl,
            reason: "a lease must last at least 1 ms; use a few seconds or more in practice",
        });
    }
    if ttl > MAX_DURATION {
        return Err(ConfigError::InvalidDuration {
            name,
            value: ttl,
            reason: "at most 365 days is allowed",
        });
    }
    Ok(())
}

/// Checks a wait: zero (try once) up to a year.
pub(crate) fn validate_wait(wait: Duration) -> Result<(), ConfigError> {
    if wait > MAX_DURATION {
        return Err(ConfigError::InvalidDuration {
            name: "wait",
            value: wait,
            reason: "at most 365 days is allowed",
        });
    }
    Ok(())
}

/// Milliseconds for Redis `PX`, rounded up so a lease is never shorter than asked.
/// Checks a semaphore's limit and a request's permits: each at least 1,
/// and no more permits than the limit.
pub(crate) fn validate_permits(limit: u32, permits: u32) -> Result<(), ConfigError> {
    let bad = |name, value, reason| {
        Err(ConfigError::InvalidCount {
            name,
            value: u64::from(value),
            reason,
        })
    };
    if limit == 0 {
        return bad("limit", limit, "a semaphore needs at least one permit");
    }
    if permits == 0 {
        return bad("permits", permits, "take at least one permit");
    }
    if permits > limit {
        return bad(
            "permits",
            permits,
            "more than the semaphore's limit: the request could never be granted",
        );
    }
    Ok(())
}

pub(crate) fn millis_ceil(d: Duration) -> u64 {
    let ms = d.as_millis();
    let ms = if d.as_nanos().is_multiple_of(1_000_000) {
        ms
    } else {
        ms + 1
    };
    u64::try_from(ms).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_password_in_userinfo() {
        assert_eq!(
            redact_url("redis://user:s3cret@host:6379/0"),
            "redis://user:***@host:6379/0"
        );
        assert_eq!(redact_url("redis://:s3cret@host"), "redis://:***@host");
        assert_eq!(redact_url("rediss://s3cret@host"), "rediss://***@host");
        assert_eq!(redact_url("redis://host:6379"), "redis://host:6379");
        assert_eq!(
            redact_url("redis://:hunt#er2@10.0.0.1:6379"),
            "redis://:***@10.0.0.1:6379"
        );
        assert_eq!(
            redact_url("redis://u:p@ss/w?rd@host/1"),
            "redis://u:***@host/1"
        );
    }

    #[test]
    fn redacts_credentials_in_the_query() {
        let r = redact_url("redis://host/?user=a&password=s3cret&protocol=resp3");
        assert_eq!(r, "redis://host/?user=a&password=***");
        assert_eq!(
            redact_url("redis+unix:///run/redis.sock?db=0&pass=hunter2"),
            "redis+unix:///run/redis.sock?db=0&pass=***"
        );
        assert_eq!(
            redact_url("unix:///run/redis.sock?PaSs=a&b#c&db=1"),
            "unix:///run/redis.sock?PaSs=***"
        );
        assert_eq!(
            redact_url("unix:///s?%70ass=hunter2"),
            "unix:///s?%70ass=***"
        );
        assert_eq!(redact_url("unix:///s?db=1"), "unix:///s?db=1");
    }

    #[test]
    fn scrub_removes_raw_and_decoded_credentials() {
        let url = "redis://u:p%40ss@host";
        let text = format!("failed for {url}: bad password p@ss");
        let clean = scrub(&text, url);
        assert!(
            !clean.contains("p@ss") && !clean.contains("p%40ss"),
            "{clean}"
        );
        let url = "unix:///s?pass=hunter2";
        assert!(!scrub("saw hunter2", url).contains("hunter2"));
    }

    #[test]
    fn keys_are_checked() {
        assert!(validate_key("order:1").is_ok());
        assert!(validate_key(&"k".repeat(MAX_KEY_LEN)).is_ok());
        let err = validate_key("").expect_err("empty key");
        assert!(err.to_string().contains("must not be empty"), "{err}");
        let err = validate_key(&"k".repeat(MAX_KEY_LEN + 1)).expect_err("long key");
        assert!(err.to_string().contains("1025 bytes"), "{err}");
        // The key in the error is cut short.
        assert!(err.to_string().len() < 300);
    }

    #[test]
    fn durations_are_checked() {
        assert!(validate_ttl("ttl", Duration::ZERO).is_err());
        assert!(validate_ttl("ttl", Duration::from_micros(999)).is_err());
        assert!(validate_ttl("ttl", Duration::from_millis(1)).is_ok());
        assert!(validate_ttl("ttl", MAX_DURATION + Duration::from_secs(1)).is_err());
        assert!(validate_wait(Duration::ZERO).is_ok());
        assert!(validate_wait(MAX_DURATION * 2).is_err());
    }

    #[test]
    fn millis_round_up() {
        assert_eq!(millis_ceil(Duration::from_millis(5)), 5);
        assert_eq!(millis_ceil(Duration::from_micros(5001)), 6);
    }
}

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

/// Replaces the password of a Redis URL (`redis://user:secret@host`) and any
/// `password=` query parameter with `***`, so the URL can be logged or
/// printed. Every URL the crate shows (in `Debug`, errors and logs) went
/// through this.
///
/// ```
/// assert_eq!(
///     redlock_runtime::redact_url("redis://app:hunter2@cache:6379/0"),
///     "redis://app:***@cache:6379/0"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    let mut out = match url.split_once("://") {
        Some((scheme, rest)) => {
            // The authority ends at the first '/', '?' or '#'.
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let (authority, tail) = rest.split_at(end);
            let authority = match authority.rfind('@') {
                Some(at) => {
                    let (userinfo, host) = authority.split_at(at);
                    match userinfo.split_once(':') {
                        Some((user, _password)) => format!("{user}:***{host}"),
                        // `redis://secret@host` puts the password in the user part.
                        None if !userinfo.is_empty() => format!("***{host}"),
                        None => authority.to_owned(),
                    }
                }
                None => authority.to_owned(),
            };
            format!("{scheme}://{authority}{tail}")
        }
        None => url.to_owned(),
    };
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let query = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => pair.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("&");
        out = format!("{head}{query}");
    }
    out
}

/// Checks a user's lock key: non-empty and at most [`MAX_KEY_LEN`] bytes.
pub(crate) fn validate_key(key: &str) -> Result<(), LockError> {
    let reason = if key.is_empty() {
        "a lock key must not be empty".to_owned()
    } else if key.len() > MAX_KEY_LEN {
        format!(
            "the key is {} bytes long; at most {MAX_KEY_LEN} bytes are allowed (after the prefix)",
            key.len()
        )
    } else {
        return Ok(());
    };
    Err(LockError::InvalidKey {
        key: preview(key),
        reason,
    })
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
    }

    #[test]
    fn redacts_password_in_query() {
        let r = redact_url("redis://host/?user=a&password=s3cret&protocol=resp3");
        assert_eq!(r, "redis://host/?user=a&password=***&protocol=resp3");
        assert!(!r.contains("s3cret"));
    }

    #[test]
    fn redacts_password_containing_at_and_slash_safely() {
        // A password with '@' is percent-encoded in a valid URL; a raw one
        // must still never leak the part before the last '@'.
        let r = redact_url("redis://u:p@ss@host");
        assert!(!r.contains("p@ss"), "{r}");
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

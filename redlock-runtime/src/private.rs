//! Not public API: what `#[distributed_lock]` expands to.
//!
//! The macro crate is pinned to this exact version (`=x.y.z`), so anything
//! here may change in any release. Do not use it by hand: use
//! [`LockRequest::run`](crate::LockRequest::run) and friends.

use std::fmt::{self, Display, Write as _};
use std::sync::Arc;
use std::time::Duration;

pub use crate::LockRequest;

/// The Lua function `next_fence(key, retention_ms, time_reply)` that issues
/// fencing tokens (at least Redis's clock in microseconds, and at least the
/// counter + 1): for the idempotency layer's claim script, so that its
/// tokens follow the same rule as the locks'.
pub const NEXT_FENCE_LUA: &str = crate::scripts::NEXT_FENCE;
pub use crate::scope::OnLost;
pub use crate::util::redact_url;

/// Idempotency records for `redlock-axum`: see the module.
pub mod record {
    pub use crate::record::{
        ChannelSubscription, Claimed, Completion, RecordError, RecordKeys, RecordLease, Records,
    };
}
use crate::{ConfigError, LockClient, LockError};

/// The owner token of `guard`: the random secret that marks its owner in
/// Redis (for tests that look at the keys; never log it).
pub fn owner_token(guard: &crate::LockGuard) -> &str {
    guard.held().token()
}

/// How many renewal round trips `client`'s watchdog has sent so far: all
/// locks due together are renewed in one (for tests and benchmarks).
pub fn renewal_round_trips(client: &LockClient) -> u64 {
    client.core().watchdog().round_trips()
}

/// A lock key being built from the template's text and its arguments'
/// `Display` output, percent-encoded (see the macro's docs).
#[derive(Debug)]
pub struct Key {
    buf: String,
    /// Set when an argument's `Display` failed: the key would be cut short.
    failed: bool,
}

impl Key {
    /// An empty key with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Key {
        Key {
            buf: String::with_capacity(capacity),
            failed: false,
        }
    }

    /// The template's literal text, as is.
    pub fn text(&mut self, text: &str) {
        self.buf.push_str(text);
    }

    /// An argument's value: its `Display` output with `%`, `:`, `{`, `}`
    /// and control characters percent-encoded.
    pub fn value<T: Display + ?Sized>(&mut self, value: &T) {
        // A `Display` impl that fails would leave what it wrote so far (and
        // `format!` would panic): remembered, and the key refused.
        if write!(Encoder(&mut self.buf), "{value}").is_err() {
            self.failed = true;
        }
    }

    /// The finished key; [`LockError::InvalidKey`] when an argument's
    /// `Display` failed, rather than a key cut short that another call
    /// could share.
    pub fn finish(self) -> Result<String, LockError> {
        if self.failed {
            return Err(LockError::InvalidKey {
                key: self.buf.chars().take(64).collect(),
                reason: "formatting an argument of the key failed (its `Display` returned an \
                         error): the key would be cut short"
                    .to_owned(),
            });
        }
        Ok(self.buf)
    }
}

/// Writes through to a `String`, percent-encoding the characters that
/// separate a key's parts (`:`), delimit its hash tag (`{`, `}`), start an
/// escape (`%`), or would reach keys and logs as control characters (each
/// byte of their UTF-8 form).
struct Encoder<'a>(&'a mut String);

impl fmt::Write for Encoder<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let special = |c: char| matches!(c, '%' | ':' | '{' | '}') || c.is_control();
        let mut rest = s;
        while let Some(at) = rest.find(special) {
            self.0.push_str(&rest[..at]);
            let c = rest[at..].chars().next().unwrap_or_default();
            let mut utf8 = [0u8; 4];
            for byte in c.encode_utf8(&mut utf8).bytes() {
                let _ = write!(self.0, "%{byte:02X}");
            }
            rest = &rest[at + c.len_utf8()..];
        }
        self.0.push_str(rest);
        Ok(())
    }
}

/// Percent-encodes a value as the macro does (for tests and docs).
pub fn encode(value: &dyn Display) -> String {
    let mut out = String::new();
    // Tests and docs: a failing `Display` gives what it wrote.
    let _ = write!(Encoder(&mut out), "{value}");
    out
}

/// `ttl = <expr>`, `wait = <expr>`, `hold_at_least = <expr>`: the value
/// of an expression given for a duration option, which must be a
/// `Duration` (the call is spanned on the expression, so one of another
/// type is reported there). Its range is checked when the request runs,
/// as for the builder API.
pub const fn duration(value: Duration) -> Duration {
    value
}

/// What `client = ..` may name.
#[diagnostic::on_unimplemented(
    message = "`client = ..` must be a `LockClient`, not `{Self}`",
    label = "not a `LockClient`",
    note = "pass a `redlock_runtime::LockClient`, a reference to one, or an `Arc`/`Box` of one; \
            without `client = ..` the client from `redlock_runtime::install` is used"
)]
pub trait AsLockClient {
    /// The client.
    fn as_lock_client(&self) -> &LockClient;
}

impl AsLockClient for LockClient {
    fn as_lock_client(&self) -> &LockClient {
        self
    }
}

impl<T: AsLockClient + ?Sized> AsLockClient for &T {
    fn as_lock_client(&self) -> &LockClient {
        (**self).as_lock_client()
    }
}

impl<T: AsLockClient + ?Sized> AsLockClient for &mut T {
    fn as_lock_client(&self) -> &LockClient {
        (**self).as_lock_client()
    }
}

impl<T: AsLockClient + ?Sized> AsLockClient for Arc<T> {
    fn as_lock_client(&self) -> &LockClient {
        (**self).as_lock_client()
    }
}

impl<T: AsLockClient + ?Sized> AsLockClient for Box<T> {
    fn as_lock_client(&self) -> &LockClient {
        (**self).as_lock_client()
    }
}

/// `client = ..`: a clone of the named client.
pub fn client<C: AsLockClient + ?Sized>(client: &C) -> Result<LockClient, LockError> {
    Ok(client.as_lock_client().clone())
}

/// No `client = ..`: the installed client.
pub fn installed_client() -> Result<LockClient, LockError> {
    crate::installed().ok_or(LockError::Config(ConfigError::NotInstalled))
}

/// The attribute's options, with `None` for the runtime's defaults.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// `ttl = ".."`; `None`: the client's default ttl.
    pub ttl: Option<Duration>,
    /// `wait = ".."`.
    pub wait: Duration,
    /// `renew = ..`.
    pub renew: bool,
    /// `hold_at_least = ".."`.
    pub hold_at_least: Option<Duration>,
    /// `on_lost = ".."`.
    pub on_lost: OnLost,
    /// `fair = ..`.
    pub fair: bool,
    /// The key template as written: the `lock` label of the metrics.
    pub label: &'static str,
}

fn build(client: &LockClient, key: String, options: Options) -> LockRequest {
    let mut request = client
        .lock(key)
        .wait(options.wait)
        .renew(options.renew)
        .on_lost(options.on_lost)
        .label(options.label);
    if let Some(ttl) = options.ttl {
        request = request.ttl(ttl);
    }
    if let Some(hold) = options.hold_at_least {
        request = request.hold_at_least(hold);
    }
    if options.fair {
        request = request.fair();
    }
    request
}

/// The request the attribute's function runs its body under, with
/// [`LockRequest::run`] (`on_busy = "error"`) or [`LockRequest::try_run`]
/// (`on_busy = "skip"`), awaited right in the function: both box the body
/// at once, so the function's future holds a pointer, and a chain of
/// annotated functions calling each other neither grows nor copies bodies
/// through the stack.
pub fn request(
    client: Result<LockClient, LockError>,
    key: Result<String, LockError>,
    options: Options,
) -> Result<LockRequest, LockError> {
    let client = client?;
    Ok(build(&client, key?, options))
}

/// A return type that can carry a lock failure.
#[diagnostic::on_unimplemented(
    message = "`#[distributed_lock]` cannot return a lock failure as `{Self}`",
    label = "a lock failure cannot be returned as this type",
    note = "return `Result<T, E>` where `E: From<redlock_runtime::LockError>`, or add \
            `on_busy = \"skip\"` to skip the body when another holder has the lock"
)]
pub trait FromLockError {
    /// The failure as this type.
    fn from_lock_error(error: LockError) -> Self;
}

impl<T, E: From<LockError>> FromLockError for Result<T, E> {
    fn from_lock_error(error: LockError) -> Self {
        Err(E::from(error))
    }
}

/// `on_busy = "skip"` on a function returning `Result<T, E>`: `Ok(T::default())`.
#[diagnostic::on_unimplemented(
    message = "`on_busy = \"skip\"` needs `Ok(Default::default())` to return, and `{Self}` has none",
    label = "the `Ok` type of this `Result` must implement `Default` (or `E` lacks `From<LockError>`)",
    note = "return `Result<(), E>`, `Result<Option<T>, E>` or another `Ok` type with `Default`"
)]
pub trait SkipResult {
    /// The value of a skipped call.
    fn skipped() -> Self;
}

impl<T: Default, E: From<LockError>> SkipResult for Result<T, E> {
    fn skipped() -> Self {
        Ok(T::default())
    }
}

/// `on_busy = "skip"` on any other return type: `Default::default()`.
#[diagnostic::on_unimplemented(
    message = "`on_busy = \"skip\"` returns `Default::default()` when the body is skipped, and \
               `{Self}` does not implement `Default`",
    label = "this return type has no `Default`",
    note = "return `()`, `Option<T>`, `Result<T, E>` with `T: Default`, or a type that implements \
            `Default`"
)]
pub trait Skipped {
    /// The value of a skipped call.
    fn skipped() -> Self;
}

impl<R: Default> Skipped for R {
    fn skipped() -> Self {
        R::default()
    }
}

/// `on_busy = "skip"` without a `Result` to carry a failure (Redis down, a
/// bad key): the body is skipped and the failure logged at warn level.
pub fn skipped_after_error<R: Skipped>(error: LockError) -> R {
    tracing::warn!(target: "redlock", %error, "lock failed; body skipped");
    R::skipped()
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use super::*;

    #[test]
    fn separators_and_control_characters_are_percent_encoded() {
        assert_eq!(encode(&"a:b{c}%d"), "a%3Ab%7Bc%7D%25d");
        assert_eq!(
            encode(&"line\nbreak\tand\u{7f}del"),
            "line%0Abreak%09and%7Fdel"
        );
        // A C1 control character: each byte of its UTF-8 form.
        assert_eq!(encode(&"x\u{85}y"), "x%C2%85y");
        assert_eq!(encode(&"naïve ✓"), "naïve ✓", "other characters stay");
    }

    struct Failing;

    impl fmt::Display for Failing {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("partial")?;
            Err(fmt::Error)
        }
    }

    #[test]
    fn a_display_that_fails_is_an_invalid_key_not_a_shorter_one() {
        let mut key = Key::with_capacity(16);
        key.text("order:");
        key.value(&Failing);
        match key.finish() {
            Err(LockError::InvalidKey { key, reason }) => {
                assert_eq!(key, "order:partial");
                assert!(reason.contains("Display"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let mut key = Key::with_capacity(16);
        key.text("order:");
        key.value(&42);
        assert_eq!(key.finish().ok().as_deref(), Some("order:42"));
    }
}

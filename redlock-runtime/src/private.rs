//! Not public API: what `#[distributed_lock]` expands to.
//!
//! The macro crate is pinned to this exact version (`=x.y.z`), so anything
//! here may change in any release. Do not use it by hand: use
//! [`LockRequest::run`](crate::LockRequest::run) and friends.

use std::fmt::{self, Display, Write as _};
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use crate::LockRequest;
pub use crate::scope::OnLost;

// The old paths of what moved behind the public doors (`records`,
// `redact_url`) and the `test-util` feature (`test_util`), kept so that
// code written against them still builds (this workspace's own suites
// among it, until they move); nothing new goes here.
pub use crate::records as record;
#[cfg(feature = "test-util")]
pub use crate::test_util::*;
pub use crate::util::redact_url;

use crate::{LockClient, LockError};

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

/// No `client = ..`: the installed client, or
/// [`ConfigError::NotInstalled`](crate::ConfigError::NotInstalled).
pub fn installed_client() -> Result<LockClient, LockError> {
    crate::require_installed()
}

/// One annotated function: its key template and name, and the metrics
/// label made from the template once, on its first call (a `static` in the
/// generated code, so a call copies no label).
#[derive(Debug)]
pub struct Site {
    template: &'static str,
    function: &'static str,
    label: OnceLock<Arc<str>>,
}

impl Site {
    /// `template`: the key as written (`job:<id>`); `function`: the
    /// function's path (`my_crate::jobs::daily_report`).
    pub const fn new(template: &'static str, function: &'static str) -> Site {
        Site {
            template,
            function,
            label: OnceLock::new(),
        }
    }

    /// The key template as written: the `lock` label of the metrics.
    pub fn template(&self) -> &'static str {
        self.template
    }

    /// The annotated function's path.
    pub fn function(&self) -> &'static str {
        self.function
    }

    /// The `lock` label, shared by every call of this function.
    pub fn label(&self) -> Arc<str> {
        Arc::clone(self.label.get_or_init(|| Arc::from(self.template)))
    }

    /// A failure the caller cannot see (`on_busy = "skip"` on `()` or
    /// `Option<T>`): an error event naming the function and the key.
    fn log_failure(&self, error: &LockError) {
        if error.is_lost() {
            tracing::error!(
                target: "redlock",
                function = %self.function,
                key_template = %self.template,
                %error,
                "lock lost; the body was stopped, and the caller sees a skipped call"
            );
        } else {
            tracing::error!(
                target: "redlock",
                function = %self.function,
                key_template = %self.template,
                %error,
                "lock failed (not busy); the body did not run, and the caller sees a skipped call"
            );
        }
    }
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
    /// The function: its key template (the metrics' `lock` label) and name.
    pub site: &'static Site,
}

fn build(client: &LockClient, key: String, options: Options) -> LockRequest {
    let mut request = client
        .lock(key)
        .wait(options.wait)
        .renew(options.renew)
        .on_lost(options.on_lost)
        .label(options.site.label());
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

/// What an `on_busy = "skip"` function returns when its body was skipped,
/// and when the lock failed for another reason: decided by the return
/// type, so aliases (`AppResult<Option<T>>`) work.
///
/// - `()`: skipped is `()`; a failure is logged at error level.
/// - `Option<T>`: skipped is `None`; a failure is logged at error level
///   and is `None` too.
/// - `Result<Option<T>, E>` with `E: From<LockError>`: skipped is
///   `Ok(None)`; a failure is `Err(E::from(error))`.
#[diagnostic::on_unimplemented(
    message = "`on_busy = \"skip\"` cannot return `{Self}`: a skipped call would look like one \
               that ran",
    label = "a skipped call cannot be told apart in this type",
    note = "return `()` (a job run for its effects), `Option<T>` (`None`: skipped) or \
            `Result<Option<T>, E>` with `E: From<redlock_runtime::LockError>` (`Ok(None)`: \
            skipped, `Err`: the lock failed); for `Result<T, E>` write `Result<Option<T>, E>` \
            and end the body with `Ok(Some(..))`; for another type write `Option<..>` and \
            `Some(..)`"
)]
pub trait Skip: Sized {
    /// The value of a call skipped because another holder has the lock.
    fn skipped() -> Self;
    /// The value of a call whose lock failed otherwise (Redis, no
    /// installed client, a bad key, the lock lost).
    fn failed(error: LockError, site: &'static Site) -> Self;
}

impl Skip for () {
    fn skipped() -> Self {}

    fn failed(error: LockError, site: &'static Site) -> Self {
        site.log_failure(&error);
    }
}

impl<T> Skip for Option<T> {
    fn skipped() -> Self {
        None
    }

    fn failed(error: LockError, site: &'static Site) -> Self {
        site.log_failure(&error);
        None
    }
}

impl<T, E: From<LockError>> Skip for Result<Option<T>, E> {
    fn skipped() -> Self {
        Ok(None)
    }

    fn failed(error: LockError, _site: &'static Site) -> Self {
        Err(E::from(error))
    }
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

    #[test]
    fn every_call_of_a_function_shares_one_label() {
        static SITE: Site = Site::new("job:<id>", "tests::job");
        let options = Options {
            ttl: None,
            wait: Duration::ZERO,
            renew: true,
            hold_at_least: None,
            on_lost: OnLost::Cancel,
            fair: false,
            site: &SITE,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let _entered = rt.enter();
        let locks = LockClient::in_memory();
        let call =
            |key: &str| request(Ok(locks.clone()), Ok(key.to_owned()), options).expect("a request");
        let (first, second) = (call("job:1"), call("job:2"));
        let (first, second) = (
            first.label_set().expect("labelled"),
            second.label_set().expect("labelled"),
        );
        assert_eq!(&**first, "job:<id>");
        assert!(
            Arc::ptr_eq(first, second),
            "the label is allocated once per function, not copied per call"
        );
    }

    #[test]
    fn skip_gives_a_value_per_return_shape() {
        static SITE: Site = Site::new("job:x", "tests::job");
        let busy = || LockError::Busy {
            key: "job:x".to_owned(),
            holder: None,
        };
        <() as Skip>::failed(busy(), &SITE);
        assert_eq!(<Option<u32> as Skip>::skipped(), None);
        assert_eq!(<Option<u32> as Skip>::failed(busy(), &SITE), None);
        let skipped = <Result<Option<u32>, LockError> as Skip>::skipped();
        assert!(matches!(skipped, Ok(None)));
        let failed = <Result<Option<u32>, LockError> as Skip>::failed(busy(), &SITE);
        assert!(matches!(failed, Err(LockError::Busy { .. })));
    }
}

/// `#[idempotent]`'s options, with `None` for the runtime's defaults.
#[derive(Debug, Clone, Copy)]
pub struct IdempotentOptions {
    /// `ttl = ".."`: how long the result is kept.
    pub retention: Option<Duration>,
    /// `lease = ".."`.
    pub lease: Option<Duration>,
    /// `wait = ".."`.
    pub wait: Option<Duration>,
    /// `scope = ".."`, else the function's path.
    pub scope: &'static str,
}

/// What an `#[idempotent]` function's body becomes: the body run once per
/// key through [`LockClient::idempotent`], a failure to set the call up or
/// to run it converted into the function's error type.
pub async fn idempotent<Fut, T, E>(
    client: Result<LockClient, LockError>,
    key: Result<String, LockError>,
    fingerprint: Option<Result<String, LockError>>,
    options: IdempotentOptions,
    body: Fut,
) -> Result<T, E>
where
    Fut: Future<Output = Result<T, E>>,
    T: serde::Serialize + serde::de::DeserializeOwned,
    E: From<crate::IdempotentError>,
{
    use crate::IdempotentError;
    // The key's text is never shown: it may be a secret.
    let invalid = |e: LockError| match e {
        LockError::InvalidKey { reason, .. } => IdempotentError::InvalidKey { reason },
        other => IdempotentError::InvalidKey {
            reason: other.to_string(),
        },
    };
    let client = client.map_err(|e| E::from(IdempotentError::Client(e)))?;
    let key = key.map_err(|e| E::from(invalid(e)))?;
    let mut call = client.idempotent(key).scope(options.scope);
    if let Some(fingerprint) = fingerprint {
        let fingerprint = fingerprint.map_err(|e| {
            E::from(IdempotentError::InvalidOption {
                reason: format!("`fingerprint`: {}", invalid(e)),
            })
        })?;
        call = call.fingerprint(fingerprint);
    }
    if let Some(retention) = options.retention {
        call = call.retention(retention);
    }
    if let Some(lease) = options.lease {
        call = call.lease(lease);
    }
    if let Some(wait) = options.wait {
        call = call.wait(wait);
    }
    match call.run(|_| body).await {
        Ok(result) => result,
        Err(e) => Err(E::from(e)),
    }
}

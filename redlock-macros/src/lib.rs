//! The `#[distributed_lock]` attribute for
//! [`redlock-runtime`](../redlock_runtime/index.html): an `async fn` whose
//! body runs holding a distributed lock named after its arguments.
//!
//! Depend on `redlock-runtime` only; it re-exports the attribute behind its
//! default `macros` feature.
//!
//! ```
//! use redlock_runtime::{LockClient, LockError, distributed_lock};
//!
//! #[distributed_lock(key = "order:<user_id>:<order_id>", ttl = "15s", wait = "5s")]
//! async fn place_order(user_id: u64, order_id: &str) -> Result<String, LockError> {
//!     // Runs holding the lock `order:42:A-17`; released when it returns,
//!     // panics or is cancelled.
//!     Ok(format!("order {order_id} of user {user_id} placed"))
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // Once, at startup (usually `LockClient::connect(url).await?`).
//! redlock_runtime::install(LockClient::in_memory());
//! assert_eq!(place_order(42, "A-17").await?, "order A-17 of user 42 placed");
//! # Ok::<(), LockError>(())
//! # }).unwrap();
//! ```
//!
//! See [`macro@distributed_lock`] for every option, with the code each one stands
//! for.

mod attr;
mod duration;
mod expand;
mod key;
mod shape;

use proc_macro::TokenStream;

/// Runs the body of an `async fn` holding a distributed lock.
///
/// ```
/// # use redlock_runtime::{LockClient, LockError, distributed_lock};
/// # #[derive(Debug)] struct Order;
/// # #[derive(Debug)] enum AppError { Lock(LockError) }
/// # impl From<LockError> for AppError { fn from(e: LockError) -> Self { AppError::Lock(e) } }
/// struct Orders {
///     locks: LockClient,
/// }
///
/// impl Orders {
///     #[distributed_lock(key = "order:<user_id>:<order_id>", ttl = "15s", wait = "5s", client = self.locks)]
///     async fn place_order(&self, user_id: u64, order_id: &str) -> Result<Order, AppError> {
///         // Only one caller at a time, across every process sharing the Redis,
///         // runs this for a given (user_id, order_id).
///         Ok(Order)
///     }
/// }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// # let orders = Orders { locks: LockClient::in_memory() };
/// # orders.place_order(42, "A-17").await.unwrap();
/// # });
/// ```
///
/// The function keeps its attributes, docs, visibility, generics and
/// signature; only its body changes. It stands for:
///
/// ```
/// # use std::time::Duration;
/// # use redlock_runtime::{LockClient, LockError};
/// # #[derive(Debug)] struct Order;
/// # #[derive(Debug)] enum AppError { Lock(LockError) }
/// # impl From<LockError> for AppError { fn from(e: LockError) -> Self { AppError::Lock(e) } }
/// # struct Orders { locks: LockClient }
/// # impl Orders {
/// async fn place_order(&self, user_id: u64, order_id: &str) -> Result<Order, AppError> {
///     let key = format!("order:{user_id}:{order_id}"); // percent-encoded, see `key`
///     let locks = self.locks.clone();
///     let body = async move { Ok(Order) };
///     match locks
///         .lock(key)
///         .ttl(Duration::from_secs(15))
///         .wait(Duration::from_secs(5))
///         .run(body)
///         .await
///     {
///         Ok(value) => value,
///         Err(lock_error) => Err(AppError::from(lock_error)),
///     }
/// }
/// # }
/// ```
///
/// So everything [`LockRequest::run`] does applies: the watchdog renews
/// the lease while the body runs; the lock is released when the body
/// returns, panics, or its future is dropped (cancellation); the body is
/// stopped when the lock is lost ([`on_lost`](#on_lost)); inside it,
/// [`current_lock()`] gives the key and fencing token; and a nested
/// annotated call on the same key in the same task re-enters the lock
/// instead of deadlocking.
///
/// # Options
///
/// `key` is required; every other option has a default.
///
/// | option | value | default |
/// |---|---|---|
/// | [`key`](#key) | `"text:<arg>:<arg.field>"` | required |
/// | [`ttl`](#ttl) | duration such as `"15s"`, or a `Duration` expression | the client's default ttl (30 s) |
/// | [`wait`](#wait) | duration, at most a day (or an expression) | `"0s"`: try once |
/// | [`on_busy`](#on_busy) | `"error"` or `"skip"` | `"error"` |
/// | [`hold_at_least`](#hold_at_least) | duration (or an expression) | none |
/// | [`renew`](#renew) | `true` or `false` | `true` |
/// | [`on_lost`](#on_lost) | `"cancel"` or `"signal"` | `"cancel"` |
/// | [`fair`](#fair) | `true` or `false` | `false` |
/// | [`client`](#client) | an expression | the [`install`]ed client |
/// | [`crate`](#crate) | a path such as `"locks"` | `"redlock_runtime"` |
///
/// Durations are [humantime](https://docs.rs/humantime) strings (`"500ms"`,
/// `"15s"`, `"2m"`, `"1h 30m"`), checked at compile time, or expressions of
/// type [`Duration`](https://doc.rust-lang.org/std/time/struct.Duration.html) for values that come from
/// configuration: a `const`, `CONFIG.lock_ttl`, `Duration::from_secs(15)`,
/// an argument of the function. An expression is evaluated on each call,
/// its type checked by the compiler (a `u64` is an error pointing at it)
/// and its range when the call runs (a zero ttl is
/// `LockError::Config`). A bare number
/// (`ttl = 15`) has no unit and is refused.
///
/// ```
/// # use std::time::Duration;
/// # use redlock_runtime::{LockError, distributed_lock};
/// struct Config { lock_ttl: Duration, lock_wait: Duration }
/// static CONFIG: Config = Config {
///     lock_ttl: Duration::from_secs(15),
///     lock_wait: Duration::from_secs(5),
/// };
///
/// #[distributed_lock(key = "order:<id>", ttl = CONFIG.lock_ttl, wait = CONFIG.lock_wait)]
/// async fn place_order(id: u64) -> Result<(), LockError> { Ok(()) }
/// ```
///
/// Mistakes are compile errors pointing at the offending token: an unknown
/// or repeated option, a bad duration, an unknown placeholder, a
/// non-`async` function. All of them are reported at once, and the function
/// is still emitted unchanged (with its lints turned off, so that an
/// argument named only in the key is not also reported unused), so the
/// rest of the crate keeps compiling.
///
/// ## `key`
///
/// The lock's name: literal text with `<name>` placeholders. A name is an
/// argument of the function (`<user_id>`, `<self>`), or a field path on one
/// (`<req.user_id>`, `<self.tenant>`, `<pair.0>`). Values are formatted
/// with [`Display`](https://doc.rust-lang.org/std/fmt/trait.Display.html) and captured before the body runs,
/// so the body may move its arguments. Write `<<` and `>>` for a literal
/// `<` and `>`.
///
/// A raw identifier is named without its `r#`: `<type>` (or `<r#type>`)
/// for an argument `r#type`, `<item.ref>` for a field `r#ref`. A
/// placeholder refers to the argument through the argument's own name, so a
/// `macro_rules!` may write the function and its attribute, with the key
/// and the arguments coming from different places (a `$key:literal` from
/// its caller, an argument it declares itself, or the other way round).
///
/// **Encoding.** Inside a value, four characters are percent-encoded: `%`
/// as `%25`, `:` as `%3A`, `{` as `%7B` and `}` as `%7D`; so are control
/// characters (a newline is `%0A`), which never reach a key or a log raw.
/// The template's own text is kept as written. A value whose `Display`
/// fails makes the call fail with `LockError::InvalidKey` rather than run
/// under a key cut short. So `key = "order:<a>:<b>"` gives `order:1%3A2:3`
/// for `("1:2", "3")` and `order:1:2%3A3` for `("1", "2:3")`: two pairs of
/// values can never make the same key, and no value can end the Redis hash
/// tag (`{..}`) the runtime puts around the key.
///
/// ```
/// # use redlock_runtime::{LockError, distributed_lock};
/// # struct Request { tenant: String, user_id: u64 }
/// #[distributed_lock(key = "invoice:<req.tenant>:<req.user_id>:<month>")]
/// async fn send_invoice(req: Request, month: u32) -> Result<(), LockError> {
///     drop(req); // the key was built before the body ran
///     Ok(())
/// }
/// ```
///
/// Without the macro:
///
/// ```
/// # use redlock_runtime::{LockClient, LockError};
/// # struct Request { tenant: String, user_id: u64 }
/// # fn encode(v: &dyn std::fmt::Display) -> String { v.to_string().replace('%', "%25").replace(':', "%3A").replace('{', "%7B").replace('}', "%7D") }
/// # async fn send_invoice(locks: &LockClient, req: Request, month: u32) -> Result<(), LockError> {
/// let key = format!("invoice:{}:{}:{}", encode(&req.tenant), encode(&req.user_id), encode(&month));
/// locks.lock(key).run(async move { drop(req); Ok(()) }).await?
/// # }
/// ```
///
/// ## `ttl`
///
/// The lease: how long the lock outlives a holder that crashed. While the
/// body runs, the watchdog renews it every `ttl / 3`, so it is not a limit
/// on the body's duration (see [`renew`](#renew) for that). At least 1 ms.
/// Defaults to the client's default ttl (30 s unless the client was built
/// with another).
///
/// ```
/// # use redlock_runtime::{LockError, distributed_lock};
/// #[distributed_lock(key = "report:<id>", ttl = "15s")]
/// async fn build_report(id: u64) -> Result<(), LockError> { Ok(()) }
/// ```
///
/// Without the macro: `locks.lock(key).ttl(Duration::from_secs(15)).run(body)`.
///
/// ## `wait`
///
/// How long to wait while another caller holds the lock; the waiter is
/// woken as soon as the lock is released. At most a day. Defaults to
/// `"0s"`: try once, and fail (or skip) at once when the lock is held.
///
/// ```
/// # use redlock_runtime::{LockError, distributed_lock};
/// #[distributed_lock(key = "account:<id>", wait = "5s")]
/// async fn debit(id: u64, cents: u64) -> Result<(), LockError> { Ok(()) }
/// ```
///
/// Without the macro: `locks.lock(key).wait(Duration::from_secs(5)).run(body)`.
///
/// ## `on_busy`
///
/// What the call does when another holder keeps the lock (at once, or for
/// the whole wait).
///
/// - `"error"` (the default): the function returns the lock error. The
///   function must return `Result<T, E>` with `E: From<LockError>`
///   ([`LockError`] itself, `anyhow::Error`, `std::io::Error`, or your
///   error with a `From` impl): the error is
///   `Err(E::from(LockError::Busy { .. }))` or `WaitTimeout`. Any other
///   return type is a compile error that says so.
/// - `"skip"`: for scheduled jobs deduplicated across nodes. The body does
///   not run, and nothing is logged above debug level. The return type says
///   what the caller learns, and must be one of three (decided by the type,
///   so an alias such as `AppResult<Option<T>>` works):
///
///   | return type | ran | skipped (busy) | the lock failed otherwise |
///   |---|---|---|---|
///   | `()` | `()` | `()` | logged at error level |
///   | `Option<T>` | the body's value | `None` | logged at error level; `None` |
///   | `Result<Option<T>, E>`, `E: From<LockError>` | the body's value | `Ok(None)` | `Err(E::from(error))`, not logged |
///
///   "Failed otherwise" is every failure but busy: no client
///   [`install`]ed, Redis unreachable or refusing the password, a key whose
///   `Display` failed, the lock lost while the body ran. With `()` or
///   `Option<T>` the caller cannot tell it from a skip, so each such call
///   is a `tracing` error event (target `redlock`) carrying `function`
///   (the function's path), `key_template` (the key as written) and
///   `error`. To make a failure stop the caller instead, return
///   `Result<Option<T>, E>`, and check at start-up that a client is
///   installed with [`require_installed`]. Any other return type
///   (`Result<String, E>`, whose skip would read as success, or a `Default`
///   type) is a compile error that says what to write.
///
/// ```
/// # use redlock_runtime::{LockError, distributed_lock};
/// /// Every node ticks every minute; one of them sends the report.
/// #[distributed_lock(key = "job:daily-report", on_busy = "skip", hold_at_least = "30s")]
/// async fn send_daily_report() {
///     // ...
/// }
///
/// /// The same job, telling the scheduler what happened.
/// #[distributed_lock(key = "job:daily-report", on_busy = "skip", hold_at_least = "30s")]
/// async fn daily_report() -> Result<Option<usize>, LockError> {
///     Ok(Some(3)) // `Ok(None)`: another node has it; `Err`: the lock failed
/// }
/// ```
///
/// Without the macro:
///
/// ```
/// # use std::time::Duration;
/// # use redlock_runtime::{LockClient, LockError};
/// # async fn send_daily_report(locks: &LockClient) {
/// match locks
///     .lock("job:daily-report")
///     .hold_at_least(Duration::from_secs(30))
///     .try_run(async move { /* ... */ })
///     .await
/// {
///     Ok(Some(())) => {}
///     Ok(None) => {} // another node runs it
///     Err(error) => tracing::error!(
///         function = "send_daily_report",
///         key_template = "job:daily-report",
///         %error,
///         "lock failed (not busy); the body did not run",
///     ),
/// }
/// # }
/// # async fn daily_report(locks: &LockClient) -> Result<Option<usize>, LockError> {
/// // and for `Result<Option<T>, E>`:
/// match locks.lock("job:daily-report").try_run(async move { Ok(Some(3)) }).await {
///     Ok(Some(value)) => value,
///     Ok(None) => Ok(None),
///     Err(error) => Err(error.into()),
/// }
/// # }
/// ```
///
/// ## `hold_at_least`
///
/// Keeps other holders out for at least this long after the lock was
/// taken, even when the body ends sooner (ShedLock's `lockAtLeastFor`).
/// Measured on Redis's clock, so a node whose clock or tick runs a little
/// late still finds the job taken. Pair it with `on_busy = "skip"` for
/// scheduled jobs: give it most of the schedule's period.
///
/// ```
/// # use redlock_runtime::{LockError, distributed_lock};
/// #[distributed_lock(key = "job:sync", on_busy = "skip", hold_at_least = "50s")]
/// async fn sync_catalog() -> Result<Option<()>, LockError> { Ok(Some(())) }
/// ```
///
/// Without the macro: `locks.lock(key).hold_at_least(Duration::from_secs(50)).try_run(body)`.
///
/// ## `renew`
///
/// `renew = false` turns the watchdog off: the ttl becomes a hard limit on
/// the body. When the lease runs out before the body ends, the lock is
/// lost (see [`on_lost`](#on_lost)). Defaults to `true`.
///
/// ```
/// # use redlock_runtime::{LockError, distributed_lock};
/// #[distributed_lock(key = "import:<file>", ttl = "10m", renew = false)]
/// async fn import(file: String) -> Result<(), LockError> { Ok(()) }
/// ```
///
/// Without the macro: `locks.lock(key).ttl(Duration::from_secs(600)).renew(false).run(body)`.
///
/// ## `on_lost`
///
/// What happens to the body when the lock is lost while it runs (the lease
/// ran out unrenewed, or Redis could not be reached in time to renew it).
///
/// - `"cancel"` (the default): the body's future is dropped at its current
///   `.await`, and the function returns `Err(E::from(LockError::Lost { .. }))`.
/// - `"signal"`: the body runs on, and can check
///   [`current_lock()`]`.is_held()` or await its `lost()`.
///
/// ```
/// # use redlock_runtime::{LockError, current_lock, distributed_lock};
/// #[distributed_lock(key = "batch:<id>", on_lost = "signal")]
/// async fn process_batch(id: u64) -> Result<(), LockError> {
///     for _chunk in 0..10 {
///         if !current_lock().is_some_and(|held| held.is_held()) {
///             break; // stop at a safe point
///         }
///     }
///     Ok(())
/// }
/// ```
///
/// Without the macro: `locks.lock(key).on_lost(OnLost::Signal).run(body)`.
///
/// ## `fair`
///
/// `fair = true` serves waiters in arrival order through a queue in Redis
/// ([`LockRequest::fair`]). Every caller locking a key must use the same
/// mode. Defaults to `false`.
///
/// ```
/// # use redlock_runtime::{LockError, distributed_lock};
/// #[distributed_lock(key = "printer:<id>", wait = "30s", fair = true)]
/// async fn print(id: u32) -> Result<(), LockError> { Ok(()) }
/// ```
///
/// Without the macro: `locks.lock(key).wait(Duration::from_secs(30)).fair().run(body)`.
///
/// ## `client`
///
/// The [`LockClient`] to lock with: any expression giving a `LockClient`,
/// a reference to one, or an `Arc` or `Box` of one, evaluated before the
/// body runs (`client = self.locks`, `client = state.locks()`).
///
/// Without it, the process-wide client set with
/// [`redlock_runtime::install`][`install`] is used; a call made before any
/// client was installed fails with
/// [`ConfigError::NotInstalled`](../redlock_runtime/enum.ConfigError.html#variant.NotInstalled),
/// whose message names `install` (with `on_busy = "skip"` on `()` or
/// `Option<T>`: the call is skipped and logged at error level).
/// [`require_installed`] checks it at start-up.
///
/// ```
/// # use redlock_runtime::{LockClient, LockError, distributed_lock};
/// struct Billing {
///     locks: LockClient,
/// }
///
/// impl Billing {
///     #[distributed_lock(key = "invoice:<invoice_id>", client = self.locks)]
///     async fn charge(&self, invoice_id: u64) -> Result<(), LockError> {
///         Ok(())
///     }
/// }
/// ```
///
/// Without the macro: `self.locks.lock(key).run(body)`; without `client`:
/// `redlock_runtime::require_installed()?.lock(key).run(body)`.
///
/// ## `crate`
///
/// The path to `redlock-runtime` in the generated code, for a crate that
/// renamed the dependency (`locks = { package = "redlock-runtime", .. }`)
/// or re-exports it. Defaults to `"redlock_runtime"` (as `::redlock_runtime`).
///
/// ```
/// # use redlock_runtime::{LockError, distributed_lock};
/// use redlock_runtime as locks;
///
/// #[distributed_lock(key = "job:<id>", crate = "locks")]
/// async fn job(id: u64) -> Result<(), LockError> { Ok(()) }
/// ```
///
/// Without the macro: nothing to rename; the generated code calls
/// `locks::__private::..` instead of `::redlock_runtime::__private::..`.
///
/// # Functions it applies to
///
/// Any `async fn` with a body: free functions, inherent methods, trait
/// `impl` methods (native `async fn` in traits), generic functions,
/// functions with `impl Trait` arguments and `where` clauses. A function
/// that is not `async` is a compile error on its `fn` token. The returned
/// future is `Send` whenever the original body's future is. A `mut`
/// argument is rebound in the body (`let mut req = req;`), so assigning to
/// its fields is not reported as an unused assignment.
///
/// **`#[async_trait]`.** In an `#[async_trait]` `impl` (or trait), put
/// `#[distributed_lock]` on the method as usual. The `impl`'s attribute
/// expands first and has already made the method a plain `fn` returning
/// `Pin<Box<dyn Future<Output = T> + Send + 'async_trait>>` with the body
/// `Box::pin(async move { .. })`; the attribute recognizes that shape and
/// takes the lock inside the `async move` block, with `T` as the return
/// type. Another plain `fn` returning a boxed future is a compile error
/// saying so.
///
/// ```
/// # use redlock_runtime::{LockClient, LockError, distributed_lock};
/// # use async_trait::async_trait;
/// #[async_trait]
/// trait Job {
///     async fn run(&self, id: u64) -> Result<(), LockError>;
/// }
///
/// struct Cleanup {
///     locks: LockClient,
/// }
///
/// #[async_trait]
/// impl Job for Cleanup {
///     #[distributed_lock(key = "cleanup:<id>", client = self.locks)]
///     async fn run(&self, id: u64) -> Result<(), LockError> {
///         Ok(())
///     }
/// }
/// ```
///
/// **Other attributes.** Attributes expand from the top down, each seeing
/// the function as the ones above it left it.
///
/// - `#[tokio::test]`, `#[tokio::main]` and the like turn an `async fn`
///   into a plain one: put `#[distributed_lock]` *above* them. Below them,
///   it finds a plain `fn` running an `async` block, and the compile error
///   says to move it.
/// - `#[tracing::instrument]` keeps the function `async`, so it composes
///   either way, with a difference. *Below* `#[distributed_lock]`, it wraps
///   the whole call: its span covers the wait for the lock, and `err`
///   records a busy or failed lock. *Above* `#[distributed_lock]`, it
///   rewrites the body first, so it wraps only the body, which runs
///   holding the lock: its span starts once the lock is taken, and `err`
///   never sees a lock error.
///
/// ```
/// # use redlock_runtime::{LockClient, LockError, distributed_lock};
/// #[distributed_lock(key = "order:<id>", wait = "5s", client = locks)]
/// #[tracing::instrument(err, skip(locks))] // sees the wait and a busy error
/// async fn place_order(locks: &LockClient, id: u64) -> Result<(), LockError> {
///     Ok(())
/// }
///
/// #[distributed_lock(key = "test:orders")]
/// #[tokio::test] // below: the test runs holding the lock
/// async fn orders_test() -> Result<(), LockError> {
///     Ok(())
/// }
/// ```
///
/// # Debugging
///
/// Set `REDLOCK_MACROS_DEBUG=1` when building to print each expansion to
/// standard error as the crate compiles.
///
/// [`LockRequest::run`]: ../redlock_runtime/struct.LockRequest.html#method.run
/// [`LockRequest::fair`]: ../redlock_runtime/struct.LockRequest.html#method.fair
/// [`current_lock()`]: ../redlock_runtime/fn.current_lock.html
/// [`LockError`]: ../redlock_runtime/enum.LockError.html
/// [`LockClient`]: ../redlock_runtime/struct.LockClient.html
/// [`install`]: ../redlock_runtime/fn.install.html
/// [`require_installed`]: ../redlock_runtime/fn.require_installed.html
#[proc_macro_attribute]
pub fn distributed_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    let name = debug_name(&item);
    let expanded = expand::expand(args.into(), item.into());
    if let Some(name) = name {
        eprintln!("#[distributed_lock] expansion of `{name}`:\n{expanded}\n");
    }
    expanded.into()
}

/// The function's name when `REDLOCK_MACROS_DEBUG` asks for the expansion.
fn debug_name(item: &TokenStream) -> Option<String> {
    let on = std::env::var_os("REDLOCK_MACROS_DEBUG").is_some_and(|v| !v.is_empty() && v != "0");
    if !on {
        return None;
    }
    let mut tokens = item.clone().into_iter();
    while let Some(token) = tokens.next() {
        if token.to_string() == "fn" {
            return tokens.next().map(|t| t.to_string());
        }
    }
    Some("?".to_owned())
}

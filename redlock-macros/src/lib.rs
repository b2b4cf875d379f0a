//! The `#[distributed_lock]` and `#[distributed_semaphore]` attributes for
//! [`redlock-runtime`](../redlock_runtime/index.html): an `async fn` whose
//! body runs holding a distributed lock (or a semaphore's permit) named
//! after its arguments.
//!
//! Depend on `redlock-runtime` only; it re-exports the attributes behind
//! its default `macros` feature.
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
//! for. Besides a plain lock, the body can run holding:
//!
//! - **the read or the write lock of a read/write lock**, with `mode`:
//!
//!   ```
//!   # use redlock_runtime::{LockError, distributed_lock};
//!   #[distributed_lock(key = "product:<id>", mode = "read")] // or "write"
//!   async fn price(id: u64) -> Result<u64, LockError> { Ok(100) }
//!   ```
//!
//! - **several locks at once**, without deadlock, with `keys` instead of
//!   `key`:
//!
//!   ```
//!   # use redlock_runtime::{LockError, distributed_lock};
//!   #[distributed_lock(keys = ["account:<from>", "account:<to>"], wait = "5s")]
//!   async fn transfer(from: u64, to: u64) -> Result<(), LockError> { Ok(()) }
//!   ```
//!
//! - **one permit of a semaphore**, so that up to `permits` calls run at
//!   once, with [`macro@distributed_semaphore`]:
//!
//!   ```
//!   # use redlock_runtime::{LockError, distributed_semaphore};
//!   #[distributed_semaphore(key = "jobs", permits = 4, wait = "5s")]
//!   async fn job(id: u64) -> Result<(), LockError> { Ok(()) }
//!   ```

mod attr;
mod call;
mod ctxt;
mod duration;
mod expand;
mod key;
mod once;
mod options;
mod shape;

use proc_macro::TokenStream;

use crate::attr::Attr;

#[doc = include_str!("../docs/distributed_lock.md")]
#[proc_macro_attribute]
pub fn distributed_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Attr::Lock, args, item)
}

#[doc = include_str!("../docs/distributed_semaphore.md")]
#[proc_macro_attribute]
pub fn distributed_semaphore(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Attr::Semaphore, args, item)
}

#[doc = include_str!("../docs/idempotent.md")]
#[proc_macro_attribute]
pub fn idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Attr::Idempotent, args, item)
}

/// Expands `attr`, printing the expansion when `REDLOCK_MACROS_DEBUG` asks.
fn expand(attr: Attr, args: TokenStream, item: TokenStream) -> TokenStream {
    let name = debug_name(&item);
    let expanded = expand::expand(attr, args.into(), item.into());
    if let Some(name) = name {
        eprintln!("#[{}] expansion of `{name}`:\n{expanded}\n", attr.name());
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

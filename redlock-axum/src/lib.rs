//! Idempotency middleware for axum, built on `redlock-runtime`.
//!
//! Not built yet: this crate exports nothing so far. The idempotency layer
//! (409 for in-flight duplicates, replay of completed responses) is its own
//! issue and lands here.
//!
//! ```
//! // Nothing to import yet.
//! ```

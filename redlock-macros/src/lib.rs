//! Procedural macros for [`redlock-runtime`](https://docs.rs/redlock-runtime).
//!
//! This crate is a placeholder for the `#[distributed_lock]` attribute, which is
//! not built yet: it exports nothing. Depend on `redlock-runtime`, which will
//! re-export the attribute behind its default `macros` feature once it exists.
//!
//! ```
//! // Nothing to import yet: the crate compiles and exports no macro.
//! ```

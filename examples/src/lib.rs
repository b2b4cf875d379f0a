//! What the demo and the `order_service` binary share: the order service
//! itself (an annotated service method behind an axum route and the
//! idempotency layer), its fenced order store, and the Prometheus exporter.
//!
//! The binaries (`src/bin/*.rs`) are the examples; each says at its top how
//! to run it.

pub mod client;
pub mod orders;
pub mod prometheus;
pub mod store;

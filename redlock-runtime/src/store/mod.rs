//! Where a call runs: one Redis server (a bb8 pool or a connection
//! manager, with `WAIT` for replicas), a Redis Cluster (slot routing,
//! `MOVED`/`ASK`), a primary found and followed through Sentinel, or a
//! Redlock quorum of independent masters (fan-out, vote counting, drift);
//! and where its wake-ups arrive ([`subscribe`]: the subscriber
//! connections and the channel's message protocol).
//!
//! A store gets a command or a script call to the right connection and its
//! answer back, within a time limit, and says what went wrong in one error
//! type ([`OpError`]). What the calls are (a lock's acquire, a record's
//! claim) is decided above, in `primitive/`: nothing here builds one or
//! names a primitive ([`server::coalesce`] batches the calls of any
//! primitive that declares a batch step).

pub(crate) mod cluster;
mod error;
pub(crate) mod open;
mod probe;
pub(crate) mod quorum;
pub(crate) mod sentinel;
pub(crate) mod server;
pub(crate) mod subscribe;
mod traced;

pub(crate) use error::{OpError, refused_a_command, refused_command};
pub(crate) use server::NodePing;
pub use server::NodeRole;

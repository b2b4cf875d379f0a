//! Idempotency records: their keys ([`RecordKeys`]), their requests and
//! replies ([`Claim`], [`Claimed`], [`Complete`], [`Completion`]), their
//! scripts (`scripts.rs`, the `.lua` files beside it), their verbs on one
//! Redis (`redis.rs`) and their twin in process memory (`memory.rs`).

use std::time::Duration;

pub(crate) mod memory;
mod redis;
mod scripts;

pub(crate) use scripts::*;

/// An idempotency record's keys.
#[derive(Debug, Clone)]
pub(crate) struct RecordKeys {
    /// What logs and errors name it by: the hash of its key, never the
    /// raw key.
    pub(crate) user: String,
    /// The record (a hash with its state, owner and result: see
    /// `RECORD_CLAIM`); its lease is the expiry.
    pub(crate) record: String,
    /// Its fencing counter, under the record's hash tag.
    pub(crate) fence: String,
}

impl RecordKeys {
    /// The keys a store routes a call by (they share one slot).
    pub(crate) fn routed(&self) -> [&str; 2] {
        [&self.record, &self.fence]
    }
}

/// Claiming an idempotency record (absent -> in progress).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Claim<'a> {
    pub(crate) keys: &'a RecordKeys,
    pub(crate) token: &'a str,
    pub(crate) fingerprint: &'a str,
    pub(crate) lease: Duration,
    /// How long the fencing counter is kept after the claim.
    pub(crate) fence_ttl: Duration,
}

/// What a claim found: one type from the record script's reply to the
/// caller of the public `records` module (which names it `Claimed`, holding
/// a lease). `L` is what the claimer holds: the fencing token issued with
/// the claim (`u64`) as the stores answer, the lease that renews the claim
/// for the public API.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
// `records::Claimed::Claimed`: the public names, kept.
#[allow(clippy::enum_variant_names)]
pub enum Claimed<L> {
    /// The record is ours: run the work, then complete or release it.
    Claimed(L),
    /// Another claimer holds it; its lease has this much left.
    Processing {
        /// What is left of the holder's lease.
        lease_left: Duration,
    },
    /// It completed with this result.
    Completed(Completion),
    /// The key was used with another fingerprint.
    Mismatch,
}

impl<L> Claimed<L> {
    /// The same answer, holding `f(l)` where this holds `l`.
    pub(crate) fn map<M>(self, f: impl FnOnce(L) -> M) -> Claimed<M> {
        match self {
            Self::Claimed(l) => Claimed::Claimed(f(l)),
            Self::Processing { lease_left } => Claimed::Processing { lease_left },
            Self::Completed(result) => Claimed::Completed(result),
            Self::Mismatch => Claimed::Mismatch,
        }
    }
}

/// A completed record's result, as stored: what a duplicate is answered
/// with (see the `records` module). Made with [`Completion::new`]
/// or [`Completion::unreplayable`] (which say what `replayable` and `body`
/// must agree on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// `false`: completed, but too large to replay (no body stored).
    pub replayable: bool,
    /// The status the work ended with (an HTTP status code for the
    /// `redlock-axum` layer).
    pub status: u16,
    /// The stored headers, encoded by the caller.
    pub headers: Vec<u8>,
    /// The body (empty when not replayable).
    pub body: Vec<u8>,
}

impl Completion {
    /// A result to replay: its `status`, `headers` (encoded by the
    /// caller) and `body`.
    pub fn new(status: u16, headers: Vec<u8>, body: Vec<u8>) -> Self {
        Self {
            replayable: true,
            status,
            headers,
            body,
        }
    }

    /// A result kept without its body, because it was too large to store:
    /// a duplicate learns that the work completed, with this `status` and
    /// `headers`, but cannot be answered with the result itself.
    pub fn unreplayable(status: u16, headers: Vec<u8>) -> Self {
        Self {
            replayable: false,
            status,
            headers,
            body: Vec::new(),
        }
    }
}

/// Completing a claimed record (in progress -> completed), owner-checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Complete<'a> {
    pub(crate) keys: &'a RecordKeys,
    pub(crate) token: &'a str,
    pub(crate) result: &'a Completion,
    /// How long the completed record is kept.
    pub(crate) retention: Duration,
}

//! The scripts against their in-memory twin (issue 35 §1): `proptest`
//! generates sequences of steps over two names, two owners, a latch and an
//! idempotency record — plain, fenced and fair locks (take, a fair wait
//! that gives up, extend, fencing token, release), read and write locks
//! with downgrade, a semaphore of two permits, a multi-lock of both names,
//! the latch's set, count-down (with and without an id) and count, the
//! record's claim (two fingerprints), complete and release, an operator's
//! `force_release`, and `inspect` — and each sequence runs step by step on
//! a real server (Redis, then Valkey) and on the in-memory backend,
//! through the public API. Every step's answer must be the same on both,
//! and so must the state `inspect` shows.
//!
//! Time, in two kinds of sequences:
//! - Long leases (60 s, nothing renews but the records' watchdog): no
//!   lease ends during a sequence (a second at most), so every step is far
//!   from any expiry on both clocks, and the twin's clock and the server's
//!   never have to agree.
//! - Short leases ([`SHORT_TTL`]) with a step that lets time pass
//!   ([`Step::Lapse`]): it sleeps twice the ttl and more, so every lease
//!   taken before it has ended on both sides, and the steps between two
//!   lapses take milliseconds, far less than the ttl: each step again runs
//!   far from any expiry, before it (the lease is whole) or after it (it is
//!   long gone). The record's lease is the exception: the watchdog renews
//!   it on both sides, so it never lapses.
//!
//! Fencing tokens differ by design (both issue `max(counter + 1, clock in
//! µs)`, but Redis's clock counts from 1970 and the twin's from the
//! store's start), so each sequence's tokens are compared by their order:
//! every token is replaced by its rank among the tokens that sequence saw
//! from the same counter (a name's lock, its write lock, the record),
//! which must match.
//!
//! A failure shrinks to a shortest sequence and prints it one step per
//! line, with both answers at the first step they differ, and the seed.
//! `REDLOCK_DIFF_SEED=<n>` replays a seed; `REDLOCK_DIFF_CASES=<n>` sets
//! the number of long-lease sequences (default 256 per server, a few
//! seconds) and `REDLOCK_DIFF_LAPSE_CASES=<n>` the number of short-lease
//! ones (default 12 per server, about half a minute: each lapse sleeps).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use redlock_runtime::records::{Claimed, Completion, RecordKeys, RecordLease, Records};
use redlock_runtime::{Latch, LockClient, LockError, LockGuard, LockInfo, MultiLockGuard, Permit};
use redlock_tests::{RedisServer, Server};

/// Every lease in the long-lease sequences: far longer than any runs.
const LONG_TTL: Duration = Duration::from_secs(60);
/// Every lease in the sequences where time passes.
const SHORT_TTL: Duration = Duration::from_millis(1500);
/// How long a fair waiter waits before it gives up.
const FAIR_WAIT: Duration = Duration::from_millis(20);
/// A record's fencing counter, and its result once completed, are kept
/// this long.
const FENCE_TTL: Duration = Duration::from_secs(600);
const RETENTION: Duration = Duration::from_secs(600);
/// Each record call's bound.
const LIMIT: Duration = Duration::from_secs(5);
/// Names and owners a sequence plays with.
const NAMES: usize = 2;
const OWNERS: usize = 2;

/// What a lease slot holds: per owner and name, one of each kind (the
/// multi-lock and the record are one per owner, at name 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Lock,
    Read,
    Write,
    Permits,
    Group,
    Record,
}

/// One step of a sequence.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// `try_acquire` of `kind` (a fenced and/or fair lock when asked;
    /// `permits` of a semaphore of 2).
    Take {
        owner: usize,
        name: usize,
        kind: Kind,
        fenced: bool,
        fair: bool,
        permits: u32,
    },
    /// A fair `acquire` that waits [`FAIR_WAIT`]: it joins the line when
    /// the lock is held, and leaves it when its wait runs out.
    FairWait { owner: usize, name: usize },
    /// `extend` of the owner's lease of `kind`, if it has one, to the
    /// sequence's ttl; when `shorten`, first to [`LONG_TTL`] (in the
    /// sequences where time passes, the second extend shortens the lease,
    /// which must then end at the next lapse: a manual extend sets the
    /// lease, as the scripts do).
    Extend {
        owner: usize,
        name: usize,
        kind: Kind,
        shorten: bool,
    },
    /// `release` of the owner's lease of `kind`, if it has one.
    Release {
        owner: usize,
        name: usize,
        kind: Kind,
    },
    /// `downgrade` of the owner's write lock, if it has one (and no read
    /// lock there).
    Downgrade { owner: usize, name: usize },
    /// `fencing_token` of the owner's lock, if it has one.
    Token { owner: usize, name: usize },
    /// `multi_lock` of both names, `try_acquire`.
    GroupTake { owner: usize },
    /// `fencing_tokens` of the owner's multi-lock, if it has one.
    GroupTokens { owner: usize },
    /// `release` of the owner's multi-lock, if it has one.
    GroupRelease { owner: usize },
    /// `try_set_count` of the sequence's latch.
    LatchSet { count: u64 },
    /// `count_down_with_id` (one of two ids) or `count_down` (a fresh id).
    LatchDown { id: Option<usize> },
    /// `count` of the latch.
    LatchCount,
    /// `Records::claim` of the sequence's record with one of two
    /// fingerprints.
    Claim { owner: usize, fingerprint: usize },
    /// `complete` of the owner's claim with a one-byte body.
    Complete { owner: usize, body: u8 },
    /// `release` of the owner's claim.
    Unclaim { owner: usize },
    /// An operator's `force_release` of the name.
    Force { name: usize },
    /// `inspect` of the name.
    Inspect { name: usize },
    /// Time passes until every lease taken so far has run out (only in the
    /// sequences with short leases).
    Lapse,
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Step::Take {
                owner,
                name,
                kind,
                fenced,
                fair,
                permits,
            } => {
                write!(f, "owner {owner}: take {kind:?} n{name}")?;
                if fenced {
                    write!(f, " fenced")?;
                }
                if fair {
                    write!(f, " fair")?;
                }
                if kind == Kind::Permits {
                    write!(f, " ({permits} of 2)")?;
                }
                Ok(())
            }
            Step::FairWait { owner, name } => {
                write!(f, "owner {owner}: fair wait {FAIR_WAIT:?} for n{name}")
            }
            Step::Extend {
                owner,
                name,
                kind,
                shorten,
            } => {
                let to = if shorten { " long, then back" } else { "" };
                write!(f, "owner {owner}: extend {kind:?} n{name}{to}")
            }
            Step::Release { owner, name, kind } => {
                write!(f, "owner {owner}: release {kind:?} n{name}")
            }
            Step::Downgrade { owner, name } => write!(f, "owner {owner}: downgrade n{name}"),
            Step::Token { owner, name } => write!(f, "owner {owner}: fencing token of n{name}"),
            Step::GroupTake { owner } => write!(f, "owner {owner}: multi-lock n0 n1"),
            Step::GroupTokens { owner } => write!(f, "owner {owner}: multi-lock's tokens"),
            Step::GroupRelease { owner } => write!(f, "owner {owner}: release multi-lock"),
            Step::LatchSet { count } => write!(f, "latch: set count {count}"),
            Step::LatchDown { id: Some(id) } => write!(f, "latch: count down as id{id}"),
            Step::LatchDown { id: None } => write!(f, "latch: count down"),
            Step::LatchCount => write!(f, "latch: count"),
            Step::Claim { owner, fingerprint } => {
                write!(
                    f,
                    "owner {owner}: claim the record with fingerprint {fingerprint}"
                )
            }
            Step::Complete { owner, body } => {
                write!(f, "owner {owner}: complete the record with [{body}]")
            }
            Step::Unclaim { owner } => write!(f, "owner {owner}: release the record"),
            Step::Force { name } => write!(f, "operator: force_release n{name}"),
            Step::Inspect { name } => write!(f, "inspect n{name}"),
            Step::Lapse => write!(f, "every lease runs out"),
        }
    }
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        3 => Just(Kind::Lock),
        1 => Just(Kind::Read),
        1 => Just(Kind::Write),
        1 => Just(Kind::Permits),
    ]
}

/// The steps of one sequence; with `lapse`, time passes now and then.
fn step(lapse: bool) -> BoxedStrategy<Step> {
    let owner = 0..OWNERS;
    let name = 0..NAMES;
    let take = (
        owner.clone(),
        name.clone(),
        kind(),
        any::<bool>(),
        prop::bool::weighted(0.25),
        1u32..=2,
    )
        .prop_map(|(owner, name, kind, fenced, fair, permits)| Step::Take {
            owner,
            name,
            kind,
            fenced,
            fair: fair && kind == Kind::Lock,
            permits,
        });
    let locks = prop_oneof![
        8 => take,
        1 => (owner.clone(), name.clone()).prop_map(|(owner, name)| Step::FairWait { owner, name }),
        2 => (owner.clone(), name.clone(), kind(), any::<bool>()).prop_map(
            |(owner, name, kind, shorten)| Step::Extend {
                owner,
                name,
                kind,
                shorten
            }
        ),
        6 => (owner.clone(), name.clone(), kind())
            .prop_map(|(owner, name, kind)| Step::Release { owner, name, kind }),
        2 => (owner.clone(), name.clone()).prop_map(|(owner, name)| Step::Downgrade { owner, name }),
        4 => (owner.clone(), name.clone()).prop_map(|(owner, name)| Step::Token { owner, name }),
        2 => name.clone().prop_map(|name| Step::Force { name }),
        4 => name.prop_map(|name| Step::Inspect { name }),
    ];
    let others = prop_oneof![
        2 => owner.clone().prop_map(|owner| Step::GroupTake { owner }),
        1 => owner.clone().prop_map(|owner| Step::GroupTokens { owner }),
        1 => owner.clone().prop_map(|owner| Step::GroupRelease { owner }),
        1 => (1u64..=3).prop_map(|count| Step::LatchSet { count }),
        2 => prop::option::of(0..2usize).prop_map(|id| Step::LatchDown { id }),
        1 => Just(Step::LatchCount),
        2 => (owner.clone(), 0..2usize)
            .prop_map(|(owner, fingerprint)| Step::Claim { owner, fingerprint }),
        3 => (owner.clone(), any::<u8>()).prop_map(|(owner, body)| Step::Complete { owner, body }),
        1 => owner.prop_map(|owner| Step::Unclaim { owner }),
    ];
    let steps = prop_oneof![29 => locks, 14 => others];
    if lapse {
        prop_oneof![10 => steps, 1 => Just(Step::Lapse)].boxed()
    } else {
        steps.boxed()
    }
}

/// A fencing counter: a name's lock, a name's write lock, or the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Counter {
    Lock(usize),
    Write(usize),
    Record,
}

/// A fencing token and the counter it came from.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Tok {
    counter: Counter,
    value: u64,
}

impl fmt::Debug for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}#{}", self.counter, self.value)
    }
}

fn tok(counter: Counter) -> impl Fn(u64) -> Tok {
    move |value| Tok { counter, value }
}

/// What a step answered, with fencing tokens as they came (ranked later).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// The owner has no lease of that kind there (or already has the one
    /// asked for): nothing was sent.
    Nothing,
    Took,
    Busy,
    Done,
    Failed(String),
    Token(Tok),
    Tokens(Vec<Tok>),
    Bool(bool),
    Count(u64),
    Latch(Option<u64>),
    Claimed(Tok),
    Processing,
    Completed(Vec<u8>),
    Mismatch,
    Forced {
        ended: usize,
        fence: Option<Tok>,
        write_fence: Option<Tok>,
    },
    State {
        holder: bool,
        fence: Option<Tok>,
        waiters: usize,
        writer: bool,
        readers: usize,
        waiting_writers: usize,
        write_fence: Option<Tok>,
        permits: Vec<u32>,
    },
}

impl Seen {
    /// The answer's kind, for the tally of what a run exercised.
    fn label(&self) -> &'static str {
        match self {
            Seen::Nothing => "nothing sent",
            Seen::Took => "took",
            Seen::Busy => "busy",
            Seen::Done => "done",
            Seen::Failed(_) => "failed",
            Seen::Token(_) => "token",
            Seen::Tokens(_) => "tokens",
            Seen::Bool(_) => "yes/no",
            Seen::Count(_) => "count left",
            Seen::Latch(_) => "latch count",
            Seen::Claimed(_) => "claimed",
            Seen::Processing => "processing",
            Seen::Completed(_) => "completed",
            Seen::Mismatch => "mismatch",
            Seen::Forced { .. } => "forced",
            Seen::State { .. } => "state",
        }
    }

    /// Every fencing token this answer holds.
    fn tokens_mut(&mut self) -> Vec<&mut Tok> {
        match self {
            Seen::Token(t) | Seen::Claimed(t) => vec![t],
            Seen::Tokens(ts) => ts.iter_mut().collect(),
            Seen::Forced {
                fence, write_fence, ..
            }
            | Seen::State {
                fence, write_fence, ..
            } => fence.iter_mut().chain(write_fence.iter_mut()).collect(),
            _ => Vec::new(),
        }
    }
}

/// A failure by its kind and the reason a lost lock gives, never by its
/// message (which names the server).
fn class(e: &LockError) -> String {
    match e {
        LockError::Lost { reason, .. } => format!("lost: {reason:?}"),
        LockError::Busy { .. } => "busy".to_owned(),
        LockError::Upgrade { .. } => "upgrade".to_owned(),
        LockError::Latch { expired, .. } => format!("latch (expired: {expired})"),
        other => format!("unexpected: {other}"),
    }
}

/// A held lease.
enum Lease {
    Guard(LockGuard),
    Permit(Permit),
    Group(MultiLockGuard),
    Record(RecordLease),
}

impl Lease {
    async fn release(self) -> Result<(), LockError> {
        match self {
            Lease::Guard(g) => g.release().await,
            Lease::Permit(p) => p.release().await,
            Lease::Group(g) => g.release().await,
            Lease::Record(r) => {
                let _ = r.release(LIMIT).await;
                Ok(())
            }
        }
    }
}

/// One side of the comparison: a client and the leases its owners hold.
struct Side {
    client: LockClient,
    records: Records,
    leases: HashMap<(usize, usize, Kind), Lease>,
    /// Names are unique per sequence, so sequences never meet.
    prefix: String,
    /// Every lease's ttl.
    ttl: Duration,
}

impl Side {
    fn new(client: &LockClient, prefix: String, ttl: Duration) -> Self {
        Self {
            records: Records::new(client),
            client: client.clone(),
            leases: HashMap::new(),
            prefix,
            ttl,
        }
    }

    fn name(&self, name: usize) -> String {
        format!("{}:n{name}", self.prefix)
    }

    fn latch(&self) -> Latch {
        self.client.latch(format!("{}:latch", self.prefix))
    }

    fn record(&self) -> RecordKeys {
        let key = format!("rec:{{{}}}", self.prefix);
        RecordKeys::new("the record".to_owned(), key.clone(), format!("{key}:fence"))
    }

    fn has(&self, owner: usize, name: usize, kind: Kind) -> bool {
        self.leases.contains_key(&(owner, name, kind))
    }

    fn keep(&mut self, owner: usize, name: usize, kind: Kind, lease: Lease) -> Seen {
        self.leases.insert((owner, name, kind), lease);
        Seen::Took
    }

    async fn run(&mut self, step: Step) -> Seen {
        match step {
            Step::Take {
                owner,
                name,
                kind,
                fenced,
                fair,
                permits,
            } => {
                if self.has(owner, name, kind) {
                    return Seen::Nothing;
                }
                let key = self.name(name);
                let taken = match kind {
                    Kind::Permits => self
                        .client
                        .semaphore(key, 2)
                        .permits(permits)
                        .ttl(self.ttl)
                        .renew(false)
                        .try_acquire()
                        .await
                        .map(|p| p.map(Lease::Permit)),
                    _ => {
                        let request = match kind {
                            Kind::Read => self.client.rw_lock(key).read(),
                            Kind::Write => self.client.rw_lock(key).write(),
                            _ => self.client.lock(key),
                        };
                        let mut request = request.ttl(self.ttl).renew(false);
                        if fenced {
                            request = request.fenced();
                        }
                        if fair {
                            request = request.fair();
                        }
                        request.try_acquire().await.map(|g| g.map(Lease::Guard))
                    }
                };
                match taken {
                    Ok(Some(lease)) => self.keep(owner, name, kind, lease),
                    Ok(None) => Seen::Busy,
                    Err(e) => Seen::Failed(class(&e)),
                }
            }
            Step::FairWait { owner, name } => {
                if self.has(owner, name, Kind::Lock) {
                    return Seen::Nothing;
                }
                let taken = self
                    .client
                    .lock(self.name(name))
                    .fair()
                    .ttl(self.ttl)
                    .renew(false)
                    .wait(FAIR_WAIT)
                    .try_acquire()
                    .await;
                match taken {
                    Ok(Some(guard)) => self.keep(owner, name, Kind::Lock, Lease::Guard(guard)),
                    Ok(None) => Seen::Busy,
                    Err(e) => Seen::Failed(class(&e)),
                }
            }
            Step::Extend {
                owner,
                name,
                kind,
                shorten,
            } => {
                let lease = self.leases.get(&(owner, name, kind));
                let extend = |ttl| async move {
                    match lease {
                        Some(Lease::Guard(g)) => Some(g.extend(ttl).await),
                        Some(Lease::Permit(p)) => Some(p.extend(ttl).await),
                        _ => None,
                    }
                };
                let longer = match shorten {
                    true => extend(LONG_TTL).await,
                    false => Some(Ok(())),
                };
                let answer = match longer {
                    Some(Ok(())) => extend(self.ttl).await,
                    other => other,
                };
                let Some(answer) = answer else {
                    return Seen::Nothing;
                };
                answer.map_or_else(|e| Seen::Failed(class(&e)), |()| Seen::Done)
            }
            Step::Release { owner, name, kind } => match self.leases.remove(&(owner, name, kind)) {
                None => Seen::Nothing,
                Some(lease) => lease
                    .release()
                    .await
                    .map_or_else(|e| Seen::Failed(class(&e)), |()| Seen::Done),
            },
            Step::GroupRelease { owner } => match self.leases.remove(&(owner, 0, Kind::Group)) {
                None => Seen::Nothing,
                Some(lease) => lease
                    .release()
                    .await
                    .map_or_else(|e| Seen::Failed(class(&e)), |()| Seen::Done),
            },
            Step::Downgrade { owner, name } => {
                if self.has(owner, name, Kind::Read) {
                    return Seen::Nothing;
                }
                let Some(Lease::Guard(write)) = self.leases.remove(&(owner, name, Kind::Write))
                else {
                    return Seen::Nothing;
                };
                match write.downgrade().await {
                    Ok(read) => {
                        self.leases
                            .insert((owner, name, Kind::Read), Lease::Guard(read));
                        Seen::Done
                    }
                    Err(e) => Seen::Failed(class(&e)),
                }
            }
            Step::Token { owner, name } => match self.leases.get(&(owner, name, Kind::Lock)) {
                Some(Lease::Guard(g)) => g.fencing_token().await.map_or_else(
                    |e| Seen::Failed(class(&e)),
                    |t| Seen::Token(tok(Counter::Lock(name))(t)),
                ),
                _ => Seen::Nothing,
            },
            Step::GroupTake { owner } => {
                if self.has(owner, 0, Kind::Group) {
                    return Seen::Nothing;
                }
                let taken = self
                    .client
                    .multi_lock([self.name(0), self.name(1)])
                    .ttl(self.ttl)
                    .renew(false)
                    .try_acquire()
                    .await;
                match taken {
                    Ok(Some(group)) => self.keep(owner, 0, Kind::Group, Lease::Group(group)),
                    Ok(None) => Seen::Busy,
                    Err(e) => Seen::Failed(class(&e)),
                }
            }
            Step::GroupTokens { owner } => match self.leases.get(&(owner, 0, Kind::Group)) {
                Some(Lease::Group(g)) => match g.fencing_tokens().await {
                    Ok(tokens) => Seen::Tokens(
                        tokens
                            .into_iter()
                            .map(|(key, t)| {
                                let name = usize::from(key != self.name(0));
                                tok(Counter::Lock(name))(t)
                            })
                            .collect(),
                    ),
                    Err(e) => Seen::Failed(class(&e)),
                },
                _ => Seen::Nothing,
            },
            Step::LatchSet { count } => self
                .latch()
                .try_set_count(count, self.ttl)
                .await
                .map_or_else(|e| Seen::Failed(class(&e)), Seen::Bool),
            Step::LatchDown { id } => {
                let latch = self.latch();
                let answer = match id {
                    Some(id) => latch.count_down_with_id(&format!("id{id}")).await,
                    None => latch.count_down().await,
                };
                answer.map_or_else(|e| Seen::Failed(class(&e)), Seen::Count)
            }
            Step::LatchCount => self
                .latch()
                .count()
                .await
                .map_or_else(|e| Seen::Failed(class(&e)), Seen::Latch),
            Step::Claim { owner, fingerprint } => {
                if self.has(owner, 0, Kind::Record) {
                    return Seen::Nothing;
                }
                let claimed = self
                    .records
                    .claim(
                        &self.record(),
                        &format!("fp{fingerprint}"),
                        self.ttl,
                        FENCE_TTL,
                        LIMIT,
                    )
                    .await;
                match claimed {
                    Ok(Claimed::Claimed(lease)) => {
                        let token = tok(Counter::Record)(lease.fencing_token());
                        self.leases
                            .insert((owner, 0, Kind::Record), Lease::Record(lease));
                        Seen::Claimed(token)
                    }
                    Ok(Claimed::Processing { .. }) => Seen::Processing,
                    Ok(Claimed::Completed(done)) => Seen::Completed(done.body),
                    Ok(Claimed::Mismatch) => Seen::Mismatch,
                    Ok(other) => Seen::Failed(format!("unexpected claim: {other:?}")),
                    Err(e) => Seen::Failed(format!("record error: {e}")),
                }
            }
            Step::Complete { owner, body } => {
                let Some(Lease::Record(mut lease)) = self.leases.remove(&(owner, 0, Kind::Record))
                else {
                    return Seen::Nothing;
                };
                let done = Completion::new(200, Vec::new(), vec![body]);
                match lease.complete(&done, RETENTION, LIMIT).await {
                    Ok(ours) => Seen::Bool(ours),
                    Err(e) => Seen::Failed(format!("record error: {e}")),
                }
            }
            Step::Unclaim { owner } => match self.leases.remove(&(owner, 0, Kind::Record)) {
                Some(Lease::Record(lease)) => lease
                    .release(LIMIT)
                    .await
                    .map_or_else(|e| Seen::Failed(format!("record error: {e}")), Seen::Bool),
                _ => Seen::Nothing,
            },
            Step::Force { name } => match self.client.force_release(&self.name(name)).await {
                Ok(forced) => Seen::Forced {
                    ended: forced.ended.len(),
                    fence: forced.fencing_token.map(tok(Counter::Lock(name))),
                    write_fence: forced.write_fencing_token.map(tok(Counter::Write(name))),
                },
                Err(e) => Seen::Failed(class(&e)),
            },
            Step::Inspect { name } => match self.client.inspect(&self.name(name)).await {
                Ok(info) => state(name, &info),
                Err(e) => Seen::Failed(class(&e)),
            },
            // `compare` lets the time pass, once for both sides.
            Step::Lapse => Seen::Done,
        }
    }

    /// Ends what the sequence left held (its answers are not compared).
    async fn clear(&mut self) {
        for (_, lease) in self.leases.drain() {
            let _ = lease.release().await;
        }
    }
}

fn state(name: usize, info: &LockInfo) -> Seen {
    let mut permits: Vec<u32> = info.permits.iter().map(|(_, n)| *n).collect();
    permits.sort_unstable();
    Seen::State {
        holder: info.holder.is_some(),
        fence: info.fencing_token.map(tok(Counter::Lock(name))),
        waiters: info.waiters,
        writer: info.writer.is_some(),
        readers: info.readers.len(),
        waiting_writers: info.waiting_writers,
        write_fence: info.write_fencing_token.map(tok(Counter::Write(name))),
        permits,
    }
}

/// `seen` with every fencing token replaced by its rank (0 for the
/// smallest) among the tokens the sequence saw from the same counter.
/// Tokens are compared by their order per counter (on Redis they are
/// clock readings, comparable across counters; the twin counts each
/// counter from 1).
fn ranked(seen: &[Seen]) -> Vec<Seen> {
    let mut seen = seen.to_vec();
    let mut tokens: HashMap<Counter, BTreeSet<u64>> = HashMap::new();
    for s in &mut seen {
        for t in s.tokens_mut() {
            tokens.entry(t.counter).or_default().insert(t.value);
        }
    }
    for s in &mut seen {
        for t in s.tokens_mut() {
            t.value = tokens
                .get(&t.counter)
                .and_then(|set| set.iter().position(|x| *x == t.value))
                .map_or(u64::MAX, |r| r as u64);
        }
    }
    seen
}

/// Runs `steps` on both sides; the first step whose answers differ. Counts
/// the server's answers by kind in `tally`.
async fn compare(
    server: &mut Side,
    twin: &mut Side,
    steps: &[Step],
    tally: &Mutex<BTreeMap<&'static str, u64>>,
) -> Result<(), TestCaseError> {
    let mut on_server = Vec::with_capacity(steps.len());
    let mut on_twin = Vec::with_capacity(steps.len());
    for &step in steps {
        if step == Step::Lapse {
            // Once for both sides: their leases run out together.
            tokio::time::sleep(server.ttl * 2 + Duration::from_millis(200)).await;
            on_server.push(Seen::Done);
            on_twin.push(Seen::Done);
            continue;
        }
        on_server.push(server.run(step).await);
        on_twin.push(twin.run(step).await);
    }
    server.clear().await;
    twin.clear().await;
    {
        let mut tally = tally.lock().unwrap_or_else(PoisonError::into_inner);
        for seen in &on_server {
            *tally.entry(seen.label()).or_default() += 1;
        }
    }
    let (a, b) = (ranked(&on_server), ranked(&on_twin));
    match a.iter().zip(&b).position(|(x, y)| x != y) {
        None => Ok(()),
        Some(at) => {
            let script: Vec<String> = steps
                .iter()
                .enumerate()
                .map(|(i, s)| format!("  {i:>2}. {s:?}"))
                .collect();
            Err(TestCaseError::fail(format!(
                "step {at} differs:\n{}\n  server: {:?}\n  twin:   {:?}",
                script.join("\n"),
                a[at],
                b[at]
            )))
        }
    }
}

/// The seed to run with: `REDLOCK_DIFF_SEED`, else a fresh one (printed,
/// so a failure can be replayed).
fn seed() -> u64 {
    match std::env::var("REDLOCK_DIFF_SEED") {
        Ok(seed) => seed
            .parse()
            .unwrap_or_else(|_| panic!("REDLOCK_DIFF_SEED={seed:?} is not a number")),
        Err(_) => fastrand::u64(..),
    }
}

/// A number of cases from the environment variable `var`, else `default`.
fn cases(var: &str, default: u32) -> u32 {
    match std::env::var(var) {
        Ok(n) => n
            .parse()
            .unwrap_or_else(|_| panic!("{var}={n:?} is not a number")),
        Err(_) => default,
    }
}

/// Every generated sequence gives the same answers on `server` as on the
/// in-memory twin.
/// With `lapse`, leases are short and time passes now and then.
fn scripts_match_their_twin(program: Server, lapse: bool) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (_redis, client) = runtime.block_on(async {
        let redis = RedisServer::start_on(program, &[]).await;
        let client = LockClient::connect(redis.url()).await.expect("connect");
        (redis, client)
    });
    let twin = LockClient::in_memory();
    let seed = seed();
    let (cases, ttl, steps, what) = if lapse {
        let cases = cases("REDLOCK_DIFF_LAPSE_CASES", 12);
        (cases, SHORT_TTL, 1..16, "short leases, time passing")
    } else {
        (
            cases("REDLOCK_DIFF_CASES", 256),
            LONG_TTL,
            1..24,
            "long leases",
        )
    };
    eprintln!(
        "differential on {} ({what}): {cases} cases, seed {seed} (replay: REDLOCK_DIFF_SEED={seed})",
        program.name()
    );
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let sequences = AtomicU64::new(0);
    let tally = Mutex::new(BTreeMap::new());
    let started = std::time::Instant::now();
    let result = runner.run(&prop::collection::vec(step(lapse), steps), |steps| {
        let sequence = sequences.fetch_add(1, Ordering::Relaxed) + 1;
        let prefix = format!("diff:{}:{sequence}", u8::from(lapse));
        let mut server = Side::new(&client, prefix.clone(), ttl);
        let mut memory = Side::new(&twin, prefix, ttl);
        runtime.block_on(compare(&mut server, &mut memory, &steps, &tally))
    });
    eprintln!(
        "differential on {} ({what}): {} sequences run (shrinking included) in {:.1?}",
        program.name(),
        sequences.load(Ordering::Relaxed),
        started.elapsed()
    );
    let tally = tally.into_inner().unwrap_or_else(PoisonError::into_inner);
    let tally: Vec<String> = tally.iter().map(|(k, n)| format!("{k} {n}")).collect();
    eprintln!("  the server's answers: {}", tally.join(", "));
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, steps)) => panic!(
            "{} and the in-memory twin disagree (seed {seed}, replay with \
             REDLOCK_DIFF_SEED={seed}); shortest sequence found ({} steps): {reason}",
            program.name(),
            steps.len()
        ),
        Err(TestError::Abort(reason)) => panic!("aborted (seed {seed}): {reason}"),
    }
}

#[test]
fn redis_scripts_match_their_in_memory_twin() {
    scripts_match_their_twin(Server::Redis, false);
}

#[test]
fn valkey_scripts_match_their_in_memory_twin() {
    scripts_match_their_twin(Server::Valkey, false);
}

#[test]
fn redis_scripts_match_their_in_memory_twin_as_leases_end() {
    scripts_match_their_twin(Server::Redis, true);
}

#[test]
fn valkey_scripts_match_their_in_memory_twin_as_leases_end() {
    scripts_match_their_twin(Server::Valkey, true);
}

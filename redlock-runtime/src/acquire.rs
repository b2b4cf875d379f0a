//! The acquire: validate, re-enter a lock this task already holds, or
//! try, wait (woken by releases, paced by the retry policy) and try again
//! until the lock is taken or the wait ends; whatever an attempt may have
//! taken is given back if the acquire ends without a guard.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;
use tracing::{Instrument as _, Span};

use crate::backend::{Acquire, AcquireReply, Keys, Kind, LockKeys, PermitKeys, RwKeys};
use crate::core::Core;
use crate::error::{ConfigError, LockError, Operation};
use crate::giveback::PendingAcquire;
use crate::guard::LockGuard;
use crate::lock::{HeldLock, Hold, Taken};
use crate::scope::RunScope;
use crate::store::subscribe::Subscription;
use crate::telemetry::{self, AcquireEnd, Labels};
use crate::util::{validate_key, validate_ttl, validate_wait};

mod wait;
pub(crate) use wait::{MIN_ATTEMPT, Next, Wait};

/// What a request asks for (see [`LockRequest`](crate::LockRequest)'s
/// setters).
#[derive(Debug, Clone)]
pub(crate) struct Params {
    pub(crate) key: String,
    pub(crate) ttl: Option<Duration>,
    pub(crate) wait: Duration,
    pub(crate) renew: bool,
    pub(crate) hold_at_least: Option<Duration>,
    pub(crate) fair: bool,
    pub(crate) label: Option<Arc<str>>,
    /// What is taken: a lock, a side of a read/write lock, permits.
    pub(crate) shape: Shape,
    /// Issue the fencing token with the acquire (`None`: the client's
    /// default).
    pub(crate) fenced: Option<bool>,
}

/// What a request takes under its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A lock ([`LockClient::lock`](crate::LockClient::lock)).
    Lock,
    /// A read/write lock's read side.
    Read,
    /// A read/write lock's write side.
    Write,
    /// `permits` of a semaphore of `limit`.
    Permits { limit: u32, permits: u32 },
}

impl Shape {
    /// The keys of `key` for this shape.
    pub(crate) fn keys(self, prefix: &str, key: String) -> Keys {
        match self {
            Self::Lock => Keys::Lock(LockKeys::new(prefix, key)),
            Self::Read => Keys::Read(RwKeys::new(prefix, key)),
            Self::Write => Keys::Write(RwKeys::new(prefix, key)),
            Self::Permits { limit, permits } => {
                Keys::Permits(PermitKeys::new(prefix, key, limit, permits))
            }
        }
    }
}

impl Params {
    pub(crate) fn new(key: String) -> Self {
        Self {
            key,
            ttl: None,
            wait: Duration::ZERO,
            renew: true,
            hold_at_least: None,
            fair: false,
            label: None,
            shape: Shape::Lock,
            fenced: None,
        }
    }
}

/// The `run` scope of this task that a request re-enters instead of taking
/// its key again: one holding the same lock, or (a reader) either side of
/// the same read/write lock. A writer inside a read scope of its key is
/// refused at once: it would wait for its own read lock. Permits are
/// counted, never re-entered.
pub(crate) fn reentry(core: &Core, p: &Params) -> Result<Option<Arc<RunScope>>, LockError> {
    let outer = match p.shape {
        Shape::Lock => RunScope::holding(core.id(), &p.key, |k| k == Kind::Lock),
        Shape::Read | Shape::Write => {
            RunScope::holding(core.id(), &p.key, |k| matches!(k, Kind::Read | Kind::Write))
        }
        Shape::Permits { .. } => None,
    };
    if p.shape == Shape::Write
        && let Some(outer) = &outer
        && outer.held.keys().kind() == Kind::Read
    {
        return Err(LockError::Upgrade { key: p.key.clone() });
    }
    Ok(outer)
}

/// Refuses what this request's shape cannot do here.
fn check_shape(core: &Core, p: &Params) -> Result<(), LockError> {
    if p.shape == Shape::Lock {
        return Ok(());
    }
    if !core.backend().supports_synchronizers() {
        return Err(ConfigError::Unsupported {
            feature: "read/write locks and semaphores",
            reason: crate::error::SYNCHRONIZERS_ON_REDLOCK,
        }
        .into());
    }
    let refused = if p.fair {
        Some("fair()")
    } else if p.hold_at_least.is_some() {
        Some("hold_at_least()")
    } else {
        None
    };
    if let Some(feature) = refused {
        return Err(ConfigError::Unsupported {
            feature,
            reason: "it applies to plain locks only; a read/write lock already lets a waiting \
                     writer in before new readers, and a semaphore's waiters race for permits",
        }
        .into());
    }
    if let Shape::Permits { limit, permits } = p.shape {
        crate::util::validate_permits(limit, permits)?;
    }
    Ok(())
}

/// How an acquire ended, short of an error.
pub(crate) enum Outcome {
    Acquired(LockGuard),
    Busy,
}

/// A re-entry into the lock `outer` holds: refused with
/// [`LockError::Lost`] when that lock is lost, released or run out; else
/// this task's turn among concurrent re-entries of it, waiting up to `wait`
/// (`None`: another re-entry kept it that long).
pub(crate) async fn reenter(
    outer: &RunScope,
    key: &str,
    wait: Duration,
) -> Result<Option<OwnedMutexGuard<()>>, LockError> {
    if let Some(reason) = outer.held.reentry_refused() {
        return Err(LockError::Lost {
            key: key.to_owned(),
            reason,
        });
    }
    Ok(outer.turn(wait).await)
}

/// One acquire, in its span and measured.
pub(crate) async fn acquire(core: &Arc<Core>, p: &Params) -> Result<Outcome, LockError> {
    let labels = Labels::new(p.label.as_ref(), &p.key, core.backend().mode());
    // The hold span goes under the caller's span, beside the acquire's
    // (which then ends with the wait, not with the lock).
    let caller = Span::current();
    let span = telemetry::acquire_span(&p.key, p.wait);
    let waited = !p.wait.is_zero();
    let started = telemetry::Since::now();
    let outcome = attempts(core, p, labels.clone(), &caller)
        .instrument(span.clone())
        .await;
    let end = match &outcome {
        // A reentrant acquire touched nothing: not a new acquisition.
        Ok(Outcome::Acquired(guard)) if guard.is_reentrant() => None,
        Ok(Outcome::Acquired(guard)) => {
            if let Some(fence) = guard.held().issued_fence() {
                span.record("fencing_token", fence);
            }
            Some(AcquireEnd::Acquired)
        }
        Ok(Outcome::Busy) => Some(AcquireEnd::Busy { waited }),
        Err(e) => Some(AcquireEnd::Failed(e)),
    };
    if let Some(end) = end {
        telemetry::acquire_ended(&labels, end, started);
    }
    outcome
}

/// The acquire's attempts, in its span; the lock's hold span is made in
/// `caller`'s, and follows from the acquire's.
async fn attempts(
    core: &Arc<Core>,
    p: &Params,
    labels: Labels,
    caller: &Span,
) -> Result<Outcome, LockError> {
    validate_key(&p.key)?;
    let settings = core.settings();
    let ttl = p.ttl.unwrap_or(settings.default_ttl);
    validate_ttl("ttl", ttl)?;
    validate_wait(p.wait)?;
    if let Some(hold) = p.hold_at_least {
        validate_wait(hold).map_err(|_| ConfigError::InvalidDuration {
            name: "hold_at_least",
            value: hold,
            reason: "at most 365 days is allowed",
        })?;
    }
    if p.fair && !core.backend().supports_fair() {
        return Err(ConfigError::Unsupported {
            feature: "fair()",
            reason: "a fair lock keeps its line of waiters in one Redis; with Redlock, use \
                     the default (unfair) mode",
        }
        .into());
    }
    check_shape(core, p)?;
    core.check_open(&p.key)?;
    if let Some(outer) = reentry(core, p)? {
        // Boxed: a first acquire carries none of it.
        return Ok(match Box::pin(reenter(&outer, &p.key, p.wait)).await? {
            Some(turn) => Outcome::Acquired(LockGuard::reentrant(
                Arc::clone(core),
                Arc::clone(&outer.held),
                turn,
            )),
            None => Outcome::Busy,
        });
    }

    let keys = p.shape.keys(&settings.key_prefix, p.key.clone());
    // A fair waiter holds a place in the line, a waiting writer one in the
    // writers' set (not one that does not wait: it would keep readers out
    // for nothing): both are given back with the rest.
    let queued = p.fair || (p.shape == Shape::Write && !p.wait.is_zero());
    let token = core.new_token(queued);
    let started = Instant::now();
    let mut wait = Wait::new(p.wait, started);
    // Gives back, when this future ends without a guard (gave up, failed
    // or was dropped at any await), what an attempt may have taken: the
    // lock, or a place in the fair line. It keeps the keys and the token
    // (the attempts borrow them) and hands them to the guard.
    let mut pending = PendingAcquire::new(core, keys, token, queued);

    let presence = settings.retry.max() * 3 + settings.command_timeout;
    // When the last attempt answered "busy" was sent: our place in a fair
    // line lasts `presence` from no earlier than then.
    let mut asked: Option<Instant> = None;
    let got = loop {
        // Armed before the attempt: a release published while it is in
        // flight still wakes us.
        let woken = wait.arm();
        let limit = wait.limit(settings.command_timeout);
        // (`retries` is 0 only before the first attempt.)
        if wait.retries() > 0 && !queued && pending.holds_nothing() {
            // A token says when its holder took the lock (`owner.rs`), and
            // `inspect` and busy errors show it: an attempt after a busy
            // answer goes out under a new one, so that it is the grant's
            // time, not the start of the wait. Only when nothing of the
            // last token can be held (no answer lost, no place in a line):
            // an attempt whose outcome is unknown is followed by one with
            // the same token, which finds the lock its own.
            pending.retoken(core.new_token(false));
        }
        // The first attempt goes out now: `started` serves (a lease counted
        // from a little before its send only ends sooner).
        let sent = if wait.retries() == 0 {
            started
        } else {
            Instant::now()
        };
        pending.sending(sent, ttl.max(if queued { presence } else { ttl }));
        let request = Acquire {
            keys: pending.keys(),
            token: pending.token(),
            ttl,
            want_time: p.hold_at_least.is_some(),
            line: queued.then_some(presence),
            fenced: p.fenced.unwrap_or(settings.fenced),
            // Only the first attempt may be a plain `SET NX`: the later
            // ones run the acquire script, which signals on a busy lock
            // that someone waits (its release then wakes this waiter) and
            // answers its pttl.
            fresh: wait.retries() == 0,
        };
        let attempt = core.backend().acquire(&request, limit).await;
        let (result, pttl) = match attempt {
            Ok(AcquireReply::Acquired { fence, at_ms }) => {
                break Got {
                    fence,
                    sent,
                    validity: core.backend().validity(ttl),
                    at_ms,
                    handed_over: false,
                };
            }
            Ok(AcquireReply::Busy { pttl }) => {
                pending.answered(false);
                asked = Some(sent);
                (Ok(()), pttl)
            }
            Err(e) => {
                // An error reply to an acquire script may follow its first
                // write (a fencing counter of another type fails after the
                // lock was set): given back, as a lost answer is.
                pending.answered(e.may_have_written());
                if !e.is_transient() {
                    return Err(e.into_lock_error(&p.key, Operation::Acquire));
                }
                tracing::debug!(target: "redlock", key = %p.key, error = %e, "acquire attempt failed");
                (Err(e), None)
            }
        };
        if wait.retries() == 0 && result.is_ok() && !wait.remaining().is_zero() {
            tracing::debug!(target: "redlock", key = %p.key, wait_ms = p.wait.as_millis() as u64, "lock busy, waiting");
        }
        let busy = result
            .is_ok()
            .then(|| (pending.keys().main(), p.fair.then_some(pending.token())));
        // `pending` is dropped on a shutdown: what an attempt may hold is
        // given back.
        // Boxed: an acquire that took the lock at once carries none of it.
        match Box::pin(wait.next(core, woken, busy, pttl, &p.key)).await? {
            Next::Attempt => {}
            // Anything an attempt may hold is given back: before "busy" is
            // answered (a fair waiter has left the line when it says it
            // gave up), or as `pending` is dropped on an error. Boxed, as
            // a shutdown's is.
            Next::GaveUp => {
                return match result {
                    Ok(()) => {
                        Box::pin(pending.give_back_now()).await;
                        Ok(Outcome::Busy)
                    }
                    Err(e) => Err(e.into_lock_error(&p.key, Operation::Acquire)),
                };
            }
        }
        // A fair release that handed us the lock: ours without asking.
        let grant = wait.subscription().and_then(Subscription::grant);
        if let (Some(grant), Some(asked)) = (grant, asked) {
            let validity = core.backend().validity(presence);
            let usable = p.renew
                && core.backend().takes_grants()
                && Instant::now() + MIN_ATTEMPT < asked + validity;
            if usable {
                // The lease is our presence in the line, counted from no
                // earlier than our last ask (see `FAIR_RELEASE`); the
                // watchdog renews it to `ttl` at once.
                break Got {
                    fence: grant.fence,
                    sent: asked,
                    validity,
                    at_ms: Some(grant.at_ms),
                    handed_over: true,
                };
            }
            // Else the next ask finds the lock ours (the holder path).
        }
    };
    let (keys, token) = pending.took();
    tracing::debug!(
        target: "redlock",
        key = %p.key,
        fencing_token = (got.fence > 0).then_some(got.fence),
        waited_ms = started.elapsed().as_millis() as u64,
        retries = wait.retries(),
        handed_over = got.handed_over,
        "lock acquired"
    );
    let taken = Taken {
        keys,
        token,
        fence: got.fence,
        ttl,
        sent: got.sent,
        renew: p.renew,
        fair: p.fair,
        // A busy answer came first: others likely wait as well.
        contended: asked.is_some(),
        labels,
        hold: p
            .hold_at_least
            .zip(got.at_ms)
            .map(|(min, at_ms)| Hold { at_ms, min }),
        parent: caller.clone(),
    };
    let held = HeldLock::new(core.id(), taken, got.validity);
    held.span().follows_from(Span::current());
    if got.handed_over {
        held.renew_now();
    }
    let guard = LockGuard::new(Arc::clone(core), held);
    if core.is_closed() {
        // Boxed, as above: the release's future is only on this rare path.
        return Box::pin(closed_after(guard)).await;
    }
    Ok(Outcome::Acquired(guard))
}

/// The end of an acquire whose `guard`, just taken and on the client's
/// books, finds the client shut down: the shutdown may have read the books
/// before the guard was on them, so the guard is released here, and the
/// acquire fails (see `shutdown.rs`).
async fn closed_after<T>(guard: LockGuard) -> Result<T, LockError> {
    let key = guard.key().to_owned();
    // Released here, or by the shutdown: either way, not the caller's.
    let _ = guard.release().await;
    Err(LockError::ShutDown { key })
}

/// How the attempts got the lock.
struct Got {
    /// The fencing token issued with it (0: not yet).
    fence: u64,
    /// When the command that gave it was sent: the lease's start.
    sent: Instant,
    /// How long from `sent` the lease lasts.
    validity: Duration,
    /// When it was taken, on the store's clock (ms), if known.
    at_ms: Option<u64>,
    /// A fair release handed it over: its lease is what was left of our
    /// place in the line, not the ttl, until the watchdog renews it.
    handed_over: bool,
}

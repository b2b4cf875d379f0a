//! The client's core: the lock store, the settings, the watchdog and the
//! wake-ups, shared (behind an `Arc`) by the public handle
//! ([`LockClient`](crate::LockClient)), the requests, the guards and the
//! acquires in flight. The watchdog task holds only a `Weak` to it, so a
//! client whose handles and guards are all gone is dropped, task and all.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::backend::Backend;
use crate::backoff::RetryPolicy;
use crate::error::LockError;
use crate::lock::HeldLock;
use crate::store::subscribe::Wakeups;
use crate::watchdog::{self, Watchdog};

/// Pause between two tries of a give-back or drop-release that failed.
const RETRY_EVERY: Duration = Duration::from_millis(50);

/// The default fencing retention: a day.
pub(crate) const DEFAULT_FENCE_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// The settings every operation reads.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// What the client talks to, safe to print (password redacted).
    pub(crate) target: String,
    pub(crate) key_prefix: String,
    pub(crate) default_ttl: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) retry: RetryPolicy,
    /// How long a fencing counter outlives its key's last acquire.
    pub(crate) fence_retention: Duration,
    /// Written with each lock this client takes (see `owner.rs`).
    pub(crate) client_name: Arc<str>,
    /// Issue fencing tokens with each acquire (else on first ask).
    pub(crate) fenced: bool,
    /// Coalesce the concurrent calls of locks with fencing tokens (see
    /// `store/server/coalesce.rs`).
    pub(crate) coalesce: bool,
    /// Release plain locks with the server's conditional delete where it
    /// has one (see `store/server/commands.rs`).
    pub(crate) conditional_commands: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings::defaults(String::new())
    }
}

impl Settings {
    pub(crate) fn defaults(target: String) -> Self {
        Self {
            target,
            key_prefix: "lock:".to_owned(),
            default_ttl: Duration::from_secs(30),
            command_timeout: Duration::from_millis(500),
            retry: RetryPolicy::default(),
            fence_retention: DEFAULT_FENCE_RETENTION,
            client_name: crate::owner::default_name().into(),
            fenced: false,
            coalesce: true,
            conditional_commands: true,
        }
    }
}

/// What every handle of one client shares.
#[derive(Debug)]
pub(crate) struct Core {
    /// Tells clients apart (reentrancy is per client).
    id: u64,
    backend: Backend,
    settings: Settings,
    watchdog: Watchdog,
    wakeups: Wakeups,
    /// Redis's clock less this machine's (ms), as last measured; zero
    /// until then.
    clock_offset_ms: AtomicI64,
    /// Set by [`LockClient::shutdown`](crate::LockClient::shutdown):
    /// nothing new is taken. Read by every acquire (an atomic load; the
    /// token's own check takes a mutex).
    is_closed: AtomicBool,
    /// Cancelled with `is_closed` set: wakes the acquires that wait, which
    /// give up.
    closed: CancellationToken,
    /// The work left to run in the background (give-backs of acquires cut
    /// short, releases of dropped guards, reads of why a lock was lost),
    /// which a shutdown waits for.
    tasks: TaskTracker,
    /// A Redlock client's idempotency records, kept in this process (it
    /// has no single Redis): made on first use, shared by every
    /// `Records` of this client.
    local_records: std::sync::OnceLock<Arc<Core>>,
}

impl Core {
    pub(crate) fn new(backend: Backend, settings: Settings, wakeups: Wakeups) -> Arc<Self> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Arc::new(Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            backend,
            settings,
            watchdog: Watchdog::default(),
            wakeups,
            clock_offset_ms: AtomicI64::new(0),
            is_closed: AtomicBool::new(false),
            closed: CancellationToken::new(),
            tasks: TaskTracker::new(),
            local_records: std::sync::OnceLock::new(),
        })
    }

    /// A Redlock client's records store in this process, made by `make`
    /// on first use.
    pub(crate) fn local_records(&self, make: impl FnOnce() -> Arc<Core>) -> &Arc<Core> {
        self.local_records.get_or_init(make)
    }

    /// Closes the client (see `shutdown.rs`): from now on nothing new is
    /// taken, and acquires that wait give up.
    pub(crate) fn close(&self) {
        // SeqCst, with the load below: an acquire that registers its lease
        // on the books and then finds the client open was on the books
        // before the shutdown read them (see `shutdown.rs`).
        self.is_closed.store(true, Ordering::SeqCst);
        self.closed.cancel();
    }

    /// Whether the client was shut down.
    pub(crate) fn is_closed(&self) -> bool {
        self.is_closed.load(Ordering::SeqCst)
    }

    /// Completes when the client is shut down.
    pub(crate) async fn closed(&self) {
        self.closed.cancelled().await;
    }

    /// `Err` once the client is shut down: what an operation on `key`
    /// answers from then on.
    pub(crate) fn check_open(&self, key: &str) -> Result<(), LockError> {
        if self.is_closed() {
            return Err(LockError::ShutDown {
                key: key.to_owned(),
            });
        }
        Ok(())
    }

    /// Runs `work` in the background on `runtime`, tracked: a shutdown
    /// waits for it (within its timeout).
    pub(crate) fn spawn_on<F>(&self, runtime: &tokio::runtime::Handle, work: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tasks.spawn_on(work, runtime);
    }

    /// [`spawn_on`](Self::spawn_on) the current runtime.
    pub(crate) fn spawn<F>(&self, work: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tasks.spawn(work);
    }

    /// Waits, until `deadline`, for the background work to finish; true
    /// when it did. The tracker stays closed: work spawned later (a guard
    /// dropped after the shutdown) is still tracked, and a second shutdown,
    /// even one running at the same time, waits for it too.
    pub(crate) async fn settle(&self, deadline: Instant) -> bool {
        self.tasks.close();
        tokio::time::timeout_at(deadline, self.tasks.wait())
            .await
            .is_ok()
    }

    /// Measures Redis's clock against this machine's (one `TIME`), for the
    /// acquire times written with each lock; keeps the last measure when
    /// it fails.
    pub(crate) async fn learn_clock(&self) {
        let sent = crate::owner::local_ms();
        if let Ok(redis_ms) = self.backend.time(self.settings.command_timeout).await {
            let received = crate::owner::local_ms();
            let local = sent + (received - sent) / 2;
            let redis_ms = i64::try_from(redis_ms).unwrap_or(i64::MAX);
            self.clock_offset_ms
                .store(redis_ms.saturating_sub(local), Ordering::Relaxed);
        }
    }

    /// A new owner token: this client's name, and the time on Redis's
    /// clock as this client estimates it; `queued` for one that keeps a
    /// place in a line (see `owner::QUEUED`).
    pub(crate) fn new_token(&self, queued: bool) -> String {
        let now = crate::owner::local_ms() + self.clock_offset_ms.load(Ordering::Relaxed);
        let (name, now) = (&self.settings.client_name, u64::try_from(now).unwrap_or(0));
        if queued {
            crate::owner::queued_token(name, now)
        } else {
            crate::owner::token(name, now)
        }
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    pub(crate) fn wakeups(&self) -> &Wakeups {
        &self.wakeups
    }

    pub(crate) fn watchdog(&self) -> &Watchdog {
        &self.watchdog
    }

    /// Has the watchdog renew (or watch the end of) `held`; its id there.
    /// Starts the watchdog task when none runs.
    pub(crate) fn track(self: &Arc<Self>, held: Arc<HeldLock>) -> u64 {
        let (id, start) = self.watchdog.register(held);
        if start {
            tokio::spawn(run_watchdog(Arc::downgrade(self)));
        }
        id
    }

    /// Runs `op` (each try bounded by the command timeout and by what is
    /// left) until it succeeds or `until` passes; `None` if it never did.
    pub(crate) async fn retry_until<T, E, F, Fut>(
        &self,
        key: &str,
        until: Instant,
        op: F,
    ) -> Option<T>
    where
        F: Fn(Duration) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: std::fmt::Display,
    {
        let command_timeout = self.settings.command_timeout;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match op(command_timeout.min(left).max(Duration::from_millis(1))).await {
                Ok(value) => return Some(value),
                Err(error) => {
                    if Instant::now() + RETRY_EVERY >= until {
                        return None;
                    }
                    tracing::debug!(target: "redlock", key = %key, %error, "give-back failed; retrying");
                    tokio::time::sleep(RETRY_EVERY).await;
                }
            }
        }
    }
}

/// Clears the watchdog's `running` flag if its task ends without doing so
/// itself (its runtime shut down), so that the next acquisition starts a
/// new one.
struct Running {
    core: Weak<Core>,
    armed: bool,
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.armed
            && let Some(core) = self.core.upgrade()
        {
            core.watchdog.stopped();
        }
    }
}

/// The watchdog task: plans, renews due locks in batches, sleeps until the
/// next is due. It holds the core only while it works, never while it
/// sleeps, and ends with the last held lock (or with the client).
async fn run_watchdog(weak: Weak<Core>) {
    let mut running = Running {
        core: weak.clone(),
        armed: true,
    };
    loop {
        let Some(core) = weak.upgrade() else {
            running.armed = false;
            return;
        };
        let Some(plan) = core.watchdog.plan(Instant::now()) else {
            // `plan` cleared `running` under its lock: a registration from
            // now on starts a new task, which this one must not undo.
            running.armed = false;
            return;
        };
        for (held, reason) in plan.expired {
            held.mark_lost(reason);
        }
        let mut sent = false;
        for chunk in plan.renew.chunks(watchdog::MAX_BATCH) {
            let timeout = core.settings.command_timeout;
            let renewed = watchdog::renew(&core.backend, timeout, &core.watchdog, chunk).await;
            sent |= renewed.sent;
            for (held, at) in renewed.gone {
                // Known lost at once; why costs a read: off this loop, so
                // that the other locks' renewals do not wait for it.
                held.refuse(at);
                let task = Arc::clone(&core);
                core.spawn(async move {
                    let settings = &task.settings;
                    let (prefix, limit) = (&settings.key_prefix, settings.command_timeout);
                    held.lose(&task.backend, prefix, at, limit).await;
                });
            }
        }
        let wake_at = if plan.renew.is_empty() {
            match plan.sleep_until {
                Some(at) => at,
                None => continue, // only expired leases: plan again
            }
        } else if sent {
            continue; // renewed: plan again at once
        } else {
            // Every due lock is being released or finished (see
            // `watchdog::renew`): look again a little later, not at once.
            Instant::now() + watchdog::RELEASING_PAUSE
        };
        let woken = core.watchdog.woken();
        drop(core);
        tokio::select! {
            () = sleep_until(wake_at) => {}
            () = woken => {}
        }
    }
}

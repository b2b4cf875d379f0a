//! [`Keys`]: where one lock, record or leased synchronizer lives in
//! Redis, and [`Kind`]: which of them it is; [`LatchKeys`]: where a
//! countdown latch lives.

/// The Redis keys of one lock: the lease and its fencing counter, sharing a
/// `{hash tag}` so Redis Cluster puts them in one slot.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    /// What they hold: a lock, or an idempotency record.
    pub(crate) kind: Kind,
    /// The key as the user gave it (for errors and logs; a record's is the
    /// hash of its key, never the raw key).
    pub(crate) user: String,
    /// `prefix{user}`: holds the owner's token, with the lease as its expiry.
    pub(crate) lock: String,
    /// `prefix{user}:fence`: the fencing counter, kept for the retention
    /// after each acquire (tokens never go back: see `design`). A
    /// semaphore's permit counts (a hash), a latch's request ids (a set).
    pub(crate) fence: String,
    /// `prefix{user}:waited`: a lock's waiters' signal, which a waiter's
    /// busy attempt sets and the release deletes, publishing when it was
    /// there (see `scripts/shared/waiting.lua`); empty for other kinds.
    pub(crate) waited: String,
    /// A read/write lock's readers (a sorted set: token -> lease deadline
    /// on Redis's clock); empty for other kinds.
    pub(crate) readers: String,
    /// A read/write lock's waiting writers (a sorted set: token -> presence
    /// deadline), which keep new readers out; empty for other kinds.
    pub(crate) writers: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str, user: String) -> Self {
        // Sized once (the hot path of every acquire): no regrowth.
        let mut lock = String::with_capacity(prefix.len() + user.len() + 2);
        lock.push_str(prefix);
        lock.push('{');
        lock.push_str(&user);
        lock.push('}');
        let mut fence = String::with_capacity(lock.len() + 6);
        fence.push_str(&lock);
        fence.push_str(":fence");
        let mut waited = String::with_capacity(lock.len() + 7);
        waited.push_str(&lock);
        waited.push_str(":waited");
        Self {
            kind: Kind::Lock,
            user,
            lock,
            fence,
            waited,
            readers: String::new(),
            writers: String::new(),
        }
    }

    /// A read/write lock's keys, for its `Read` or `Write` side:
    /// `prefix{user}:rw` (the writer's token, and the channel every
    /// release publishes on), its fencing counter, readers and waiting
    /// writers, under one hash tag.
    pub(crate) fn rw(prefix: &str, user: String, kind: Kind) -> Self {
        let lock = format!("{prefix}{{{user}}}:rw");
        Self {
            kind,
            fence: format!("{lock}:fence"),
            waited: String::new(),
            readers: format!("{lock}:readers"),
            writers: format!("{lock}:writers"),
            user,
            lock,
        }
    }

    /// A semaphore's keys: `prefix{user}:sem`, its holders (token -> lease
    /// deadline), and in `fence` each holder's permit count (a hash).
    pub(crate) fn semaphore(prefix: &str, user: String, limit: u32, permits: u32) -> Self {
        let lock = format!("{prefix}{{{user}}}:sem");
        Self {
            kind: Kind::Permits { limit, permits },
            fence: format!("{lock}:permits"),
            waited: String::new(),
            readers: String::new(),
            writers: String::new(),
            user,
            lock,
        }
    }

    /// Everything kept under one name, as `Inspect` reads it: the lock's
    /// keys, the read/write lock's (of its `Write` side) and the
    /// semaphore's (its limit and permits play no part in a read).
    pub(crate) fn of_name(prefix: &str, name: &str) -> [Keys; 3] {
        [
            Keys::new(prefix, name.to_owned()),
            Keys::rw(prefix, name.to_owned(), Kind::Write),
            Keys::semaphore(prefix, name.to_owned(), 1, 1),
        ]
    }

    /// The keys a renewal of this kind resets: the lock (a lock, a record,
    /// a writer), the readers (a reader), or the holders and their counts
    /// (a semaphore's permits).
    pub(crate) fn renewed(&self) -> (&str, Option<&str>) {
        match self.kind {
            Kind::Read => (&self.readers, None),
            Kind::Permits { .. } => (&self.lock, Some(&self.fence)),
            Kind::Lock | Kind::Record | Kind::Write => (&self.lock, None),
        }
    }

    /// The keys a store routes a call of these keys by (a Cluster checks
    /// that they share one slot).
    pub(crate) fn routed(&self) -> [&str; 2] {
        [&self.lock, &self.fence]
    }

    /// The hash tag the keys share (what Redis Cluster hashes).
    pub(crate) fn tag(&self) -> &str {
        let lock = self.lock.as_str();
        lock.find('{')
            .and_then(|open| {
                let rest = &lock[open + 1..];
                rest.find('}')
                    .filter(|&len| len > 0)
                    .map(|len| &rest[..len])
            })
            .unwrap_or(lock)
    }

    /// An idempotency record at `record` (named `user` in logs) with its
    /// fencing counter at `fence`, under one hash tag.
    pub(crate) fn record(user: String, record: String, fence: String) -> Self {
        Self {
            kind: Kind::Record,
            user,
            lock: record,
            fence,
            waited: String::new(),
            readers: String::new(),
            writers: String::new(),
        }
    }

    /// Fair mode: the waiters' tokens in arrival order (a list).
    pub(crate) fn queue(&self) -> String {
        format!("{}:queue", self.lock)
    }

    /// The holders of this name's lock and read/write lock that an
    /// operator ended (a set of their `waiter_id`s: see
    /// `scripts::FORCE_RELEASE`), on a lock's keys.
    pub(crate) fn ended(&self) -> String {
        format!("{}:ended", self.lock)
    }

    /// Fair mode: each waiter's presence deadline (a sorted set).
    pub(crate) fn waiters(&self) -> String {
        format!("{}:waiters", self.lock)
    }
}

/// What a set of [`Keys`] holds: each verb below acts on either, with the
/// scripts (and memory maps) of its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A lock: a string key holding the owner token.
    Lock,
    /// An idempotency record: a hash with its state, owner and result (see
    /// `backend::record::RECORD_CLAIM`).
    Record,
    /// A read/write lock's shared side: one lease among its readers.
    Read,
    /// A read/write lock's exclusive side: the writer's token, fenced.
    Write,
    /// `permits` of a semaphore of `limit`, under one lease.
    Permits { limit: u32, permits: u32 },
}

/// A countdown latch's keys (not a lease: see
/// [`LatchCall`](super::LatchCall)), under one hash tag.
#[derive(Debug, Clone)]
pub(crate) struct LatchKeys {
    /// `prefix{user}:latch`: a hash with the count, expiring with the
    /// latch (the channel its count-downs publish on, too).
    pub(crate) latch: String,
    /// `prefix{user}:latch:ids`: the request ids of the count-downs done
    /// (a set), so a count-down sent twice counts once.
    pub(crate) ids: String,
}

impl LatchKeys {
    /// The latch `user` under `prefix`.
    pub(crate) fn new(prefix: &str, user: &str) -> Self {
        let latch = format!("{prefix}{{{user}}}:latch");
        Self {
            ids: format!("{latch}:ids"),
            latch,
        }
    }

    /// The keys a store routes a call by (they share one slot).
    pub(crate) fn routed(&self) -> [&str; 2] {
        [&self.latch, &self.ids]
    }
}

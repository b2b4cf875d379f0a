//! Where each primitive lives in Redis: one type per primitive, holding
//! only its own keys, all under one `{hash tag}` so that Redis Cluster
//! puts them in one slot ([`LockKeys`], [`RwKeys`], [`PermitKeys`],
//! [`RecordKeys`], [`LatchKeys`]); and [`Keys`], the keys of a lease, whichever primitive
//! holds it (what the watchdog renews and a release ends).

/// `prefix{user}` followed by `suffix`, sized once (the hot path of every
/// acquire builds several).
fn tagged(prefix: &str, user: &str, suffix: &str) -> String {
    let mut key = String::with_capacity(prefix.len() + user.len() + 2 + suffix.len());
    key.push_str(prefix);
    key.push('{');
    key.push_str(user);
    key.push('}');
    key.push_str(suffix);
    key
}

/// `key` followed by `suffix`.
fn suffixed(key: &str, suffix: &str) -> String {
    let mut out = String::with_capacity(key.len() + suffix.len());
    out.push_str(key);
    out.push_str(suffix);
    out
}

/// A lock's keys.
#[derive(Debug, Clone)]
pub(crate) struct LockKeys {
    /// The key as the user gave it (for errors and logs).
    pub(crate) user: String,
    /// `prefix{user}`: holds the owner's token, with the lease as its
    /// expiry; the channel its releases publish on.
    pub(crate) lock: String,
    /// `prefix{user}:fence`: the fencing counter, kept for the retention
    /// after each acquire (tokens never go back: see `design`).
    pub(crate) fence: String,
    /// `prefix{user}:waited`: the waiters' signal, which a waiter's busy
    /// attempt sets and the release deletes, publishing when it was there
    /// (see `scripts/shared/waiting.lua`).
    pub(crate) waited: String,
}

impl LockKeys {
    /// The lock `user` under `prefix`.
    pub(crate) fn new(prefix: &str, user: String) -> Self {
        let lock = tagged(prefix, &user, "");
        Self {
            fence: suffixed(&lock, ":fence"),
            waited: suffixed(&lock, ":waited"),
            user,
            lock,
        }
    }

    /// Fair mode: the waiters' tokens in arrival order (a list).
    pub(crate) fn queue(&self) -> String {
        suffixed(&self.lock, ":queue")
    }

    /// Fair mode: each waiter's presence deadline (a sorted set).
    pub(crate) fn waiters(&self) -> String {
        suffixed(&self.lock, ":waiters")
    }

    /// The holders of this name's lock and read/write lock that an
    /// operator ended (a set of their `waiter_id`s: see
    /// `scripts::FORCE_RELEASE`).
    pub(crate) fn ended(&self) -> String {
        suffixed(&self.lock, ":ended")
    }

    /// The keys a store routes a call by (they share one slot).
    pub(crate) fn routed(&self) -> [&str; 2] {
        [&self.lock, &self.fence]
    }

    /// The hash tag the keys share (what Redis Cluster hashes): the
    /// first `{..}` of the lock's key, which a prefix may hold too.
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
}

/// A read/write lock's keys (both sides).
#[derive(Debug, Clone)]
pub(crate) struct RwKeys {
    /// The key as the user gave it.
    pub(crate) user: String,
    /// `prefix{user}:rw`: the writer's token, with its lease as the
    /// expiry; the channel every release publishes on.
    pub(crate) rw: String,
    /// `prefix{user}:rw:fence`: the writers' fencing counter.
    pub(crate) fence: String,
    /// `prefix{user}:rw:readers`: the readers (a sorted set: token ->
    /// lease deadline on Redis's clock).
    pub(crate) readers: String,
    /// `prefix{user}:rw:writers`: the waiting writers (a sorted set:
    /// token -> presence deadline), which keep new readers out.
    pub(crate) writers: String,
}

impl RwKeys {
    /// The read/write lock `user` under `prefix`.
    pub(crate) fn new(prefix: &str, user: String) -> Self {
        let rw = tagged(prefix, &user, ":rw");
        Self {
            fence: suffixed(&rw, ":fence"),
            readers: suffixed(&rw, ":readers"),
            writers: suffixed(&rw, ":writers"),
            user,
            rw,
        }
    }

    /// The keys a store routes a call by (they share one slot).
    pub(crate) fn routed(&self) -> [&str; 2] {
        [&self.rw, &self.fence]
    }
}

/// A semaphore's keys, and the permits one lease of it takes.
#[derive(Debug, Clone)]
pub(crate) struct PermitKeys {
    /// The key as the user gave it.
    pub(crate) user: String,
    /// `prefix{user}:sem`: the holders (a sorted set: token -> lease
    /// deadline); the channel releases publish on.
    pub(crate) holders: String,
    /// `prefix{user}:sem:permits`: each holder's permit count (a hash).
    pub(crate) counts: String,
    /// The semaphore's limit.
    pub(crate) limit: u32,
    /// The permits this lease takes.
    pub(crate) permits: u32,
}

impl PermitKeys {
    /// `permits` of the semaphore `user` of `limit`, under `prefix`.
    pub(crate) fn new(prefix: &str, user: String, limit: u32, permits: u32) -> Self {
        let holders = tagged(prefix, &user, ":sem");
        Self {
            counts: suffixed(&holders, ":permits"),
            user,
            holders,
            limit,
            permits,
        }
    }

    /// The keys a store routes a call by (they share one slot).
    pub(crate) fn routed(&self) -> [&str; 2] {
        [&self.holders, &self.counts]
    }
}

/// An idempotency record's keys.
#[derive(Debug, Clone)]
pub(crate) struct RecordKeys {
    /// What logs and errors name it by: the hash of its key, never the
    /// raw key.
    pub(crate) user: String,
    /// The record (a hash with its state, owner and result: see
    /// `backend::record::RECORD_CLAIM`); its lease is the expiry.
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

/// Everything kept under one name, as `Inspect` reads it and a forced
/// release ends it: the lock's keys, the read/write lock's and the
/// semaphore's (its limit and permits play no part there).
pub(crate) fn of_name(prefix: &str, name: &str) -> (LockKeys, RwKeys, PermitKeys) {
    (
        LockKeys::new(prefix, name.to_owned()),
        RwKeys::new(prefix, name.to_owned()),
        PermitKeys::new(prefix, name.to_owned(), 1, 1),
    )
}

/// A countdown latch's keys (not a lease: see
/// [`LatchCall`](super::LatchCall)).
#[derive(Debug, Clone)]
pub(crate) struct LatchKeys {
    /// `prefix{user}:latch`: a hash with the count, expiring with the
    /// latch; the channel its count-downs publish on.
    pub(crate) latch: String,
    /// `prefix{user}:latch:ids`: the request ids of the count-downs done
    /// (a set), so a count-down sent twice counts once.
    pub(crate) ids: String,
}

impl LatchKeys {
    /// The latch `user` under `prefix`.
    pub(crate) fn new(prefix: &str, user: &str) -> Self {
        let latch = tagged(prefix, user, ":latch");
        Self {
            ids: suffixed(&latch, ":ids"),
            latch,
        }
    }

    /// The keys a store routes a call by (they share one slot).
    pub(crate) fn routed(&self) -> [&str; 2] {
        [&self.latch, &self.ids]
    }
}

/// The keys of one lease, by what holds it: each verb on a lease
/// ([`Acquire`](super::Acquire), [`Renewal`](super::Renewal),
/// [`End`](super::End), [`GiveBack`](super::GiveBack)) acts with the
/// scripts (and memory maps) of its primitive.
#[derive(Debug, Clone)]
pub(crate) enum Keys {
    /// A lock.
    Lock(LockKeys),
    /// A read/write lock's shared side: one lease among its readers.
    Read(RwKeys),
    /// A read/write lock's exclusive side: the writer's token, fenced.
    Write(RwKeys),
    /// Permits of a semaphore, under one lease.
    Permits(PermitKeys),
    /// An idempotency record, claimed.
    Record(RecordKeys),
}

/// Which primitive a [`Keys`] holds (what the books and errors name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A lock.
    Lock,
    /// A read/write lock's shared side.
    Read,
    /// A read/write lock's exclusive side.
    Write,
    /// `permits` of a semaphore of `limit`.
    Permits { limit: u32, permits: u32 },
    /// An idempotency record.
    Record,
}

impl Keys {
    /// Which primitive this is.
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Self::Lock(_) => Kind::Lock,
            Self::Read(_) => Kind::Read,
            Self::Write(_) => Kind::Write,
            Self::Permits(p) => Kind::Permits {
                limit: p.limit,
                permits: p.permits,
            },
            Self::Record(_) => Kind::Record,
        }
    }

    /// The key as the user gave it (a record's: the hash of its key).
    pub(crate) fn user(&self) -> &str {
        match self {
            Self::Lock(k) => &k.user,
            Self::Read(k) | Self::Write(k) => &k.user,
            Self::Permits(k) => &k.user,
            Self::Record(k) => &k.user,
        }
    }

    /// The key the lease is named by: the lock, the read/write lock's
    /// `:rw`, the semaphore's holders, the record. Its releases publish on
    /// it (the channel waiters subscribe to).
    pub(crate) fn main(&self) -> &str {
        match self {
            Self::Lock(k) => &k.lock,
            Self::Read(k) | Self::Write(k) => &k.rw,
            Self::Permits(k) => &k.holders,
            Self::Record(k) => &k.record,
        }
    }

    /// The keys a store routes a call of this lease by (a Cluster checks
    /// that they share one slot).
    pub(crate) fn routed(&self) -> [&str; 2] {
        match self {
            Self::Lock(k) => k.routed(),
            Self::Read(k) | Self::Write(k) => k.routed(),
            Self::Permits(k) => k.routed(),
            Self::Record(k) => k.routed(),
        }
    }

    /// The keys a renewal of this lease resets: the lock (a lock, a
    /// record, a writer), the readers (a reader), or the holders and
    /// their counts (a semaphore's permits).
    pub(crate) fn renewed(&self) -> (&str, Option<&str>) {
        match self {
            Self::Lock(k) => (&k.lock, None),
            Self::Write(k) => (&k.rw, None),
            Self::Read(k) => (&k.readers, None),
            Self::Permits(k) => (&k.holders, Some(&k.counts)),
            Self::Record(k) => (&k.record, None),
        }
    }
}

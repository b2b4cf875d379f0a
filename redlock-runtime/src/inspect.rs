//! [`LockInfo`]: who holds a lock, since when, for how long, and who
//! waits; what [`LockClient::inspect`](crate::LockClient::inspect) reads.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::acquire::Shape;
use crate::backend::{Inspect, Inspection, Lease, keys};
use crate::core::Core;
use crate::error::{LockError, Operation};
use crate::util::validate_key;

/// One holder of a lock, a read lock or permits, as stored with its lease.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The holder's [`client_name`](crate::LockClientBuilder::client_name)
    /// (by default its host name and process id); `None` for a lock taken
    /// by a client that writes no name.
    pub client_name: Option<String>,
    /// When it took the lock, on Redis's clock: for a holder that waited
    /// in a line (fair mode, a writer), when the lock was granted to it, as
    /// Redis recorded it; for any other, as the holder's client estimated
    /// it from a `TIME` when it was built (within a round trip and the
    /// clocks' drift since), and after an acquire whose answer was lost,
    /// when that attempt was sent.
    pub since: Option<SystemTime>,
    /// What is left of its lease, on Redis's clock.
    pub ttl_left: Option<Duration>,
}

impl Holder {
    /// The holder a stored lease names (the public part of its token).
    pub(crate) fn of(lease: &Lease) -> Holder {
        let public = crate::owner::parse(&lease.token);
        Holder {
            client_name: public.map(|(name, _)| name.to_owned()),
            since: lease.granted.or(public.map(|(_, since)| since)),
            ttl_left: lease.left,
        }
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.client_name.as_deref().unwrap_or("an unnamed client"))?;
        if let Some(since) = self.since
            && let Ok(held) = SystemTime::now().duration_since(since)
        {
            write!(f, ", for {:.1?}", held)?;
        }
        if let Some(left) = self.ttl_left {
            write!(f, ", lease ends in {left:.1?}")?;
        }
        Ok(())
    }
}

/// What is kept under one name: the lock, and the read/write lock and
/// semaphore of the same name. Never an owner token.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// The name inspected.
    pub key: String,
    /// The lock's holder ([`LockClient::lock`](crate::LockClient::lock)),
    /// when it is held.
    pub holder: Option<Holder>,
    /// The last fencing token issued for the lock (while its counter is
    /// kept: the fencing retention after the last acquire). On Redlock,
    /// the largest counter of any node: at least the holder's token (a
    /// node outside the majority that answered first may have issued a
    /// larger one).
    pub fencing_token: Option<u64>,
    /// Fair mode: how many waiters are in line.
    pub waiters: usize,
    /// The read/write lock's writer ([`LockClient::rw_lock`](crate::LockClient::rw_lock)).
    pub writer: Option<Holder>,
    /// The read/write lock's readers.
    pub readers: Vec<Holder>,
    /// How many writers wait (keeping new readers out).
    pub waiting_writers: usize,
    /// The last write token of the read/write lock.
    pub write_fencing_token: Option<u64>,
    /// The semaphore's holders, each with its permits
    /// ([`LockClient::semaphore`](crate::LockClient::semaphore)).
    pub permits: Vec<(Holder, u32)>,
}

impl LockInfo {
    /// Whether the lock is held.
    pub fn is_held(&self) -> bool {
        self.holder.is_some()
    }

    fn of(key: String, found: &Inspection) -> LockInfo {
        LockInfo {
            key,
            holder: found.lock.as_ref().map(Holder::of),
            fencing_token: found.fence,
            waiters: usize::try_from(found.fair_waiters).unwrap_or(usize::MAX),
            writer: found.writer.as_ref().map(Holder::of),
            readers: found.readers.iter().map(Holder::of).collect(),
            waiting_writers: usize::try_from(found.waiting_writers).unwrap_or(usize::MAX),
            write_fencing_token: found.write_fence,
            permits: found
                .permits
                .iter()
                .map(|(lease, n)| (Holder::of(lease), *n))
                .collect(),
        }
    }
}

/// Several lines: the name, then one line per thing held under it (the
/// lock, the read/write lock, the semaphore), with each holder's client
/// name, how long it has held it and when its lease ends, the fencing
/// tokens and who waits; `free` when nothing is.
///
/// ```text
/// order:42
///   lock: api-1 (pid 7), for 1.2s, lease ends in 28.8s; fencing token 17; 2 waiting in line
/// ```
impl fmt::Display for LockInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)?;
        let token = |f: &mut fmt::Formatter<'_>, token: Option<u64>| match token {
            Some(token) => write!(f, "; fencing token {token}"),
            None => Ok(()),
        };
        if let Some(holder) = &self.holder {
            write!(f, "\n  lock: {holder}")?;
            token(f, self.fencing_token)?;
        } else if self.waiters > 0 {
            f.write_str("\n  lock: free")?;
        }
        if self.waiters > 0 {
            write!(f, "; {} waiting in line", self.waiters)?;
        }
        if let Some(writer) = &self.writer {
            write!(f, "\n  write lock: {writer}")?;
            token(f, self.write_fencing_token)?;
        }
        if !self.readers.is_empty() {
            write!(f, "\n  read lock: {} reader(s)", self.readers.len())?;
            for reader in &self.readers {
                write!(f, "\n    {reader}")?;
            }
        }
        if self.waiting_writers > 0 {
            write!(f, "\n  {} writer(s) waiting", self.waiting_writers)?;
        }
        if !self.permits.is_empty() {
            let total: u64 = self.permits.iter().map(|(_, n)| u64::from(*n)).sum();
            write!(f, "\n  semaphore: {total} permit(s) held")?;
            for (holder, n) in &self.permits {
                write!(f, "\n    {n} by {holder}")?;
            }
        }
        let nothing = self.holder.is_none()
            && self.waiters == 0
            && self.writer.is_none()
            && self.readers.is_empty()
            && self.waiting_writers == 0
            && self.permits.is_empty();
        if nothing {
            f.write_str(": free")?;
        }
        Ok(())
    }
}

/// Reads everything kept under `key` (see [`LockClient::inspect`](crate::LockClient::inspect)).
pub(crate) async fn inspect(core: &Arc<Core>, key: &str) -> Result<LockInfo, LockError> {
    validate_key(key)?;
    core.check_open(key)?;
    let found = read(core, key, core.settings().command_timeout)
        .await
        .map_err(|e| e.into_lock_error(key, Operation::Inspect))?;
    Ok(LockInfo::of(key.to_owned(), &found))
}

async fn read(
    core: &Arc<Core>,
    key: &str,
    limit: Duration,
) -> Result<Inspection, crate::backend::OpError> {
    let (lock, rw, semaphore) = keys::of_name(&core.settings().key_prefix, key);
    let inspect = Inspect {
        keys: &lock,
        rw: &rw,
        semaphore: &semaphore,
    };
    core.backend().inspect(&inspect, limit).await
}

/// Who holds `key` for a request of `shape` that found it busy, for the
/// error's message: the lock's holder, or the read/write lock's writer
/// (else, for a writer, its first reader). Best effort: `None` when the
/// read fails or finds no one (a semaphore's permits name no one holder).
pub(crate) async fn holder(core: &Arc<Core>, key: &str, shape: Shape) -> Option<String> {
    if matches!(shape, Shape::Permits { .. }) || validate_key(key).is_err() {
        return None;
    }
    let found = read(core, key, core.settings().command_timeout)
        .await
        .ok()?;
    let lease = match shape {
        Shape::Lock => found.lock.as_ref(),
        Shape::Read => found.writer.as_ref(),
        Shape::Write => found.writer.as_ref().or(found.readers.first()),
        Shape::Permits { .. } => None,
    }?;
    Some(Holder::of(lease).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(name: &str, held: u64, left: u64) -> Holder {
        Holder {
            client_name: Some(name.to_owned()),
            since: SystemTime::now().checked_sub(Duration::from_secs(held)),
            ttl_left: Some(Duration::from_secs(left)),
        }
    }

    fn nothing(key: &str) -> LockInfo {
        LockInfo {
            key: key.to_owned(),
            holder: None,
            fencing_token: None,
            waiters: 0,
            writer: None,
            readers: Vec::new(),
            waiting_writers: 0,
            write_fencing_token: None,
            permits: Vec::new(),
        }
    }

    #[test]
    fn a_free_name_says_free() {
        assert_eq!(nothing("order:1").to_string(), "order:1: free");
    }

    #[test]
    fn a_held_lock_shows_holder_times_token_and_waiters_as_durations() {
        let info = LockInfo {
            holder: Some(holder("api-1", 3, 27)),
            fencing_token: Some(17),
            waiters: 2,
            ..nothing("order:42")
        };
        let shown = info.to_string();
        let mut lines = shown.lines();
        assert_eq!(lines.next(), Some("order:42"));
        let lock = lines.next().unwrap_or_default();
        assert!(lock.starts_with("  lock: api-1, for 3."), "{lock}");
        assert!(lock.contains("lease ends in 27"), "{lock}");
        assert!(
            lock.ends_with("; fencing token 17; 2 waiting in line"),
            "{lock}"
        );
        assert_eq!(lines.next(), None);
    }

    #[test]
    fn readers_writers_and_permits_each_get_their_lines() {
        let info = LockInfo {
            writer: None,
            readers: vec![holder("r-1", 1, 9), holder("r-2", 2, 8)],
            waiting_writers: 1,
            permits: vec![(holder("p-1", 1, 5), 2)],
            ..nothing("jobs")
        };
        let shown = info.to_string();
        assert!(
            shown.contains("\n  read lock: 2 reader(s)\n    r-1, for"),
            "{shown}"
        );
        assert!(shown.contains("\n  1 writer(s) waiting"), "{shown}");
        assert!(
            shown.contains("\n  semaphore: 2 permit(s) held\n    2 by p-1"),
            "{shown}"
        );
        assert!(!shown.contains("free"), "{shown}");
    }
}

//! Redis Cluster's key space: which of the 16384 slots a key hashes to, and
//! which master serves each slot (a `CLUSTER SLOTS` reply).

use std::fmt;

/// How many slots a cluster has.
pub(crate) const SLOTS: usize = 16384;

/// The slot of `key`: CRC16 (XMODEM) of its hash tag (the part between the
/// first `{` and the first `}` after it, when that is not empty), else of
/// the whole key, modulo 16384.
pub(crate) fn slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16::State::<crc16::XMODEM>::calculate(hashed) % SLOTS as u16
}

/// A node's address as the cluster names it: `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Addr {
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl Addr {
    /// Parses `host:port` (as in a `MOVED` or `ASK` error); the host may be
    /// an IPv6 address, the port is after the last colon.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        let (host, port) = s.rsplit_once(':')?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return None;
        }
        Some(Self {
            host: host.to_owned(),
            port: port.parse().ok()?,
        })
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Which master serves each slot, as one node saw it.
#[derive(Debug, Clone)]
pub(crate) struct SlotMap {
    /// The masters, each once.
    masters: Vec<Addr>,
    /// For each slot, its master's index in `masters` (`NONE`: unserved).
    owners: Box<[u16]>,
}

const NONE: u16 = u16::MAX;

impl SlotMap {
    /// Reads a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id, ..],
    /// replicas..], ..]`. An empty host (a node that does not know its own
    /// address) stands for `asked`, the node that answered.
    pub(crate) fn from_reply(reply: &redis::Value, asked: &Addr) -> Result<Self, String> {
        use redis::Value;
        let Value::Array(ranges) = reply else {
            return Err(format!("CLUSTER SLOTS answered {reply:?}"));
        };
        let mut map = Self {
            masters: Vec::new(),
            owners: vec![NONE; SLOTS].into_boxed_slice(),
        };
        let int = |v: &Value| match v {
            Value::Int(i) => usize::try_from(*i).ok(),
            _ => None,
        };
        for range in ranges {
            let Value::Array(fields) = range else {
                return Err(format!("CLUSTER SLOTS range {range:?}"));
            };
            let (Some(start), Some(end), Some(Value::Array(master))) = (
                fields.first().and_then(int),
                fields.get(1).and_then(int),
                fields.get(2),
            ) else {
                return Err(format!("CLUSTER SLOTS range {fields:?}"));
            };
            let host = match master.first() {
                Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                Some(Value::SimpleString(s)) => s.clone(),
                _ => String::new(),
            };
            let port = master
                .get(1)
                .and_then(int)
                .and_then(|p| u16::try_from(p).ok())
                .ok_or_else(|| format!("CLUSTER SLOTS master {master:?}"))?;
            let addr = if host.is_empty() || host == "?" {
                Addr {
                    host: asked.host.clone(),
                    port,
                }
            } else {
                Addr { host, port }
            };
            if start > end || end >= SLOTS {
                return Err(format!("CLUSTER SLOTS range {start}-{end}"));
            }
            let index = map.index_of(addr);
            map.owners[start..=end].fill(index);
        }
        Ok(map)
    }

    fn index_of(&mut self, addr: Addr) -> u16 {
        match self.masters.iter().position(|a| *a == addr) {
            Some(i) => u16::try_from(i).unwrap_or(NONE),
            None => {
                self.masters.push(addr);
                u16::try_from(self.masters.len() - 1).unwrap_or(NONE)
            }
        }
    }

    /// The master serving `slot`, if any.
    pub(crate) fn owner(&self, slot: u16) -> Option<&Addr> {
        let i = *self.owners.get(usize::from(slot))?;
        self.masters.get(usize::from(i))
    }

    /// The masters, each once.
    pub(crate) fn masters(&self) -> &[Addr] {
        &self.masters
    }

    /// The same map with `slot` served by `addr` (a `MOVED` answer).
    pub(crate) fn with_owner(&self, slot: u16, addr: Addr) -> Self {
        let mut map = self.clone();
        let index = map.index_of(addr);
        if let Some(owner) = map.owners.get_mut(usize::from(slot)) {
            *owner = index;
        }
        map
    }

    /// How many slots no master serves.
    pub(crate) fn unserved(&self) -> usize {
        self.owners.iter().filter(|&&i| i == NONE).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT`.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"lock:{order:42}"), slot(b"order:42"));
        assert_eq!(slot(b"lock:{order:42}:fence"), slot(b"order:42"));
        // An empty tag hashes the whole key.
        assert_eq!(
            slot(b"a{}b"),
            crc16::State::<crc16::XMODEM>::calculate(b"a{}b") % 16384
        );
        assert_eq!(slot(b"{user1000}.following"), slot(b"{user1000}.followers"));
    }

    #[test]
    fn addresses_parse() {
        let a = Addr::parse("127.0.0.1:7000").expect("parses");
        assert_eq!((a.host.as_str(), a.port), ("127.0.0.1", 7000));
        assert_eq!(a.to_string(), "127.0.0.1:7000");
        let v6 = Addr::parse("::1:7001").expect("parses");
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 7001));
        assert_eq!(v6.to_string(), "[::1]:7001");
        assert!(Addr::parse("7000").is_none());
        assert!(Addr::parse("h:x").is_none());
    }

    fn node(host: &str, port: i64) -> Value {
        Value::Array(vec![
            Value::BulkString(host.as_bytes().to_vec()),
            Value::Int(port),
            Value::BulkString(b"id".to_vec()),
        ])
    }

    #[test]
    fn a_cluster_slots_reply_maps_every_slot() {
        let asked = Addr::parse("10.0.0.9:7000").expect("parses");
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(8191),
                node("10.0.0.1", 7000),
                node("10.0.0.2", 7001),
            ]),
            Value::Array(vec![Value::Int(8192), Value::Int(16383), node("", 7002)]),
        ]);
        let map = SlotMap::from_reply(&reply, &asked).expect("parses");
        assert_eq!(
            map.owner(0).map(ToString::to_string).as_deref(),
            Some("10.0.0.1:7000")
        );
        assert_eq!(
            map.owner(16383).map(ToString::to_string).as_deref(),
            Some("10.0.0.9:7002")
        );
        assert_eq!(map.masters().len(), 2);
        assert_eq!(map.unserved(), 0);
        let moved = map.with_owner(5, Addr::parse("10.0.0.3:7003").expect("parses"));
        assert_eq!(
            moved.owner(5).map(ToString::to_string).as_deref(),
            Some("10.0.0.3:7003")
        );
        assert_eq!(moved.owner(6), map.owner(6));
        assert!(SlotMap::from_reply(&Value::Nil, &asked).is_err());
        let bad = Value::Array(vec![Value::Array(vec![
            Value::Int(10),
            Value::Int(99999),
            node("h", 1),
        ])]);
        assert!(SlotMap::from_reply(&bad, &asked).is_err());
    }
}

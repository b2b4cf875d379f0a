//! A fenced resource: what fencing tokens protect.

/// A store that accepts a write only with a fencing token at least as high
/// as any it accepted before, as a fenced resource does.
///
/// It also counts what a `>=` check cannot tell apart: a write accepted
/// with the highest token but from another writer (a stale holder that got
/// past the fence with a repeated token).
#[derive(Debug, Default)]
pub struct FencedStore {
    highest: u64,
    /// The writer that wrote `highest`.
    writer: usize,
    /// Writes accepted.
    pub accepted: usize,
    /// Writes refused: their token was below the highest.
    pub rejected: usize,
    /// Writes accepted with the highest token from another writer.
    pub stale_accepted: usize,
}

impl FencedStore {
    /// A write with `token` by `writer` (any id naming who wrote: a
    /// critical section, a handler run); whether the store accepted it.
    pub fn write(&mut self, token: u64, writer: usize) -> bool {
        if token < self.highest {
            self.rejected += 1;
            return false;
        }
        if token == self.highest && writer != self.writer && self.accepted > 0 {
            self.stale_accepted += 1;
        }
        self.highest = token;
        self.writer = writer;
        self.accepted += 1;
        true
    }
}

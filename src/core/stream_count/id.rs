//! Stream entry IDs (`<ms>-<seq>`) and inclusive ranges of them, as RL.STREAMCOUNT reads them.

use crate::core::decimal::{U64_DIGITS, write_u64_before};

/// A stream entry ID: milliseconds and sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

/// Room for any ID rendered by [`StreamId::format_into`]: two `u64` and the dash.
pub const ID_BUF: usize = 2 * U64_DIGITS + 1;

impl StreamId {
    /// The smallest ID.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };

    /// The largest ID.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// The ID as Redis writes it, `<ms>-<seq>`, into `buf` without allocating.
    pub fn format_into(self, buf: &mut [u8; ID_BUF]) -> &[u8] {
        let seq_start = write_u64_before(self.seq, buf, ID_BUF);
        let dash = seq_start.saturating_sub(1);
        if let Some(slot) = buf.get_mut(dash) {
            *slot = b'-';
        }
        let start = write_u64_before(self.ms, buf, dash);
        buf.get(start..).unwrap_or_default()
    }

    /// The first ID of millisecond `ms`.
    pub const fn at_ms(ms: u64) -> Self {
        StreamId { ms, seq: 0 }
    }

    /// The next ID, `None` after the largest.
    pub fn next(self) -> Option<Self> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => Some(StreamId {
                ms: self.ms.checked_add(1)?,
                seq: 0,
            }),
        }
    }

    /// The previous ID, `None` before the smallest.
    pub fn prev(self) -> Option<Self> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => Some(StreamId {
                ms: self.ms.checked_sub(1)?,
                seq: u64::MAX,
            }),
        }
    }
}

/// An inclusive range of IDs to read, `[from, to]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRange {
    pub from: StreamId,
    pub to: StreamId,
}

impl IdRange {
    /// From `from` to the end of any stream.
    pub const fn to_end(from: StreamId) -> Self {
        IdRange {
            from,
            to: StreamId::MAX,
        }
    }
}

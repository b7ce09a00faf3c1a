//! The log header: what the consumer stores with its own committed state (as OpenZFS keeps
//! `zil_header_t` in the object set), so that claim and replay progress change atomically
//! with the consumer's transaction groups.

use crate::layout::Position;

/// Whether the log holds entries and whether a replay is under way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogState {
    /// No log: the region's entries belong to nobody; claim frees every chunk.
    NoLog,
    /// Entries of txgs at or after the consumer's first unsynced txg are live.
    Logging,
    /// A replay was under way: entries at or after `claim_txg` up to `resume` are applied.
    Replaying,
}

/// The log's identity and replay progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogHeader {
    pub state: LogState,
    pub pool_guid: u64,
    pub log_guid: u64,
    /// The txg claim kept entries from (meaningful while replaying).
    pub claim_txg: u64,
    /// The last entry applied (meaningful while replaying).
    pub resume: Position,
}

/// Bytes of an encoded log header.
pub const LOG_HEADER_LEN: usize = 48;

impl LogHeader {
    /// A new, empty log with these (non-zero) GUIDs.
    pub fn new(pool_guid: u64, log_guid: u64) -> Self {
        assert!(pool_guid != 0 && log_guid != 0, "GUIDs are non-zero");
        LogHeader {
            state: LogState::Logging,
            pool_guid,
            log_guid,
            claim_txg: 0,
            resume: Position::default(),
        }
    }

    pub fn encode(&self) -> [u8; LOG_HEADER_LEN] {
        let state = match self.state {
            LogState::NoLog => 1u64,
            LogState::Logging => 2,
            LogState::Replaying => 3,
        };
        let words = [
            state,
            self.pool_guid,
            self.log_guid,
            self.claim_txg,
            self.resume.gen,
            self.resume.id,
        ];
        let mut out = [0; LOG_HEADER_LEN];
        for (i, word) in words.into_iter().enumerate() {
            out[i * 8..][..8].copy_from_slice(&word.to_le_bytes());
        }
        out
    }

    /// `None` when the bytes are no header this library wrote.
    pub fn decode(bytes: &[u8; LOG_HEADER_LEN]) -> Option<Self> {
        let word = |i: usize| u64::from_le_bytes(bytes[i * 8..][..8].try_into().expect("8"));
        let state = match word(0) {
            1 => LogState::NoLog,
            2 => LogState::Logging,
            3 => LogState::Replaying,
            _ => return None,
        };
        Some(LogHeader {
            state,
            pool_guid: word(1),
            log_guid: word(2),
            claim_txg: word(3),
            resume: Position {
                gen: word(4),
                id: word(5),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_headers_round_trip() {
        let mut header = LogHeader::new(1, 2);
        header.state = LogState::Replaying;
        header.claim_txg = 9;
        header.resume = Position { gen: 4, id: 2 };
        assert_eq!(LogHeader::decode(&header.encode()), Some(header));
        assert_eq!(LogHeader::decode(&[0; LOG_HEADER_LEN]), None);
    }
}

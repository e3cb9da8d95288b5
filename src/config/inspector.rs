//! The `inspector` section, typed: the recent calls kept for the admin listener's `/calls`
//! endpoints and `strata tap`, and the bearer token that guards them.

use std::fmt;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::sync::Arc;

/// Allowed `inspector.recent`: call records kept at most.
pub const INSPECTOR_RECENT_RANGE: RangeInclusive<usize> = 1..=1_000_000;
/// Allowed `inspector.max_bytes`: bytes of records' JSON text kept at most (1 KiB..=1 GiB).
pub const INSPECTOR_MAX_BYTES_RANGE: RangeInclusive<usize> = (1 << 10)..=(1 << 30);

/// The recent calls inspector, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InspectorConfig {
    /// `/`, `/calls`, `/calls/stream`, `/calls/inflight` and `/calls/counts` are served.
    pub enabled: bool,
    /// Finished call records kept at most.
    pub recent: usize,
    /// Bytes of the kept records' JSON text at most.
    pub max_bytes: usize,
    /// The file the token was read from.
    pub token_file: Option<PathBuf>,
    /// The token read from `token_file` (surrounding whitespace trimmed), when set.
    pub token: Option<BearerToken>,
}

impl Default for InspectorConfig {
    fn default() -> Self {
        InspectorConfig {
            enabled: false,
            recent: 1000,
            max_bytes: 1 << 20,
            token_file: None,
            token: None,
        }
    }
}

/// A bearer token: compared in constant time, never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(Arc<str>);

impl BearerToken {
    /// The token in `text` with surrounding whitespace trimmed; `None` when that is empty.
    pub fn from_text(text: &str) -> Option<BearerToken> {
        let token = text.trim();
        (!token.is_empty()).then(|| BearerToken(Arc::from(token)))
    }

    /// The token's text, for a client to send.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `offered` is this token. Takes the same time whatever bytes differ (it
    /// depends only on the two lengths), so timing does not reveal a prefix.
    pub fn matches(&self, offered: &[u8]) -> bool {
        let mine = self.0.as_bytes();
        let mut differ = u8::from(mine.len() != offered.len());
        for (i, &byte) in mine.iter().enumerate() {
            differ |= byte ^ offered.get(i).copied().unwrap_or(!byte);
        }
        differ == 0
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_matches_itself_only() {
        let token = BearerToken::from_text(" s3cret\n").unwrap();
        assert_eq!(token.as_str(), "s3cret");
        assert!(token.matches(b"s3cret"));
        for other in [&b"s3cre"[..], b"s3cretx", b"S3cret", b""] {
            assert!(!token.matches(other), "{other:?}");
        }
        assert_eq!(BearerToken::from_text(" \n"), None);
        assert_eq!(format!("{token:?}"), "BearerToken(..)");
    }
}

//! Validation of `inspector`, the recent calls kept for the admin listener and `strata tap`.
//!
//! The token file is read here, so `check-config` and a reload both see what strata would
//! serve with: a missing or empty file is an error at its key. The safety rule: with the admin
//! listener on a non-loopback address the inspector shows calls to the network, so it may be
//! enabled only with a token.

use std::net::SocketAddr;

use serde_saphyr::Spanned;

use super::super::error::{Position, quoted};
use super::super::inspector::{
    BearerToken, INSPECTOR_MAX_BYTES_RANGE, INSPECTOR_RECENT_RANGE, InspectorConfig,
};
use super::super::raw::RawInspector;
use super::tls::existing_file;
use super::{Validator, count, size_in};

impl Validator<'_> {
    pub(super) fn inspector(&mut self, raw: RawInspector, admin: SocketAddr) -> InspectorConfig {
        let d = InspectorConfig::default();
        let enabled_at = raw.enabled.as_ref().map(Position::of);
        let enabled = raw.enabled.map_or(d.enabled, |e| e.value);
        let recent = self.parse(raw.recent, "inspector.recent", d.recent, |s| {
            count(s, INSPECTOR_RECENT_RANGE)
        });
        let max_bytes = self.parse(raw.max_bytes, "inspector.max_bytes", d.max_bytes, |s| {
            size_in(s, INSPECTOR_MAX_BYTES_RANGE)
        });
        let (token_file, token) = self.token(raw.token_file);
        if enabled && token_file.is_none() && !admin.ip().is_loopback() {
            let message = format!(
                "inspector.enabled: the admin listener {admin} is not loopback, so the \
                 inspector needs inspector.token_file (a file holding a bearer token); \
                 or bind admin to 127.0.0.1"
            );
            self.report(enabled_at.flatten(), message);
        }
        InspectorConfig {
            enabled,
            recent,
            max_bytes,
            token_file,
            token,
        }
    }

    /// The token file (relative to the config file's directory) and the token it holds.
    fn token(
        &mut self,
        raw: Option<Spanned<String>>,
    ) -> (Option<std::path::PathBuf>, Option<BearerToken>) {
        let dir = self.source.dir;
        let read = self.parse(raw, "inspector.token_file", None, |s| {
            let path = existing_file(dir, s)?;
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", quoted(s)))?;
            let token = BearerToken::from_text(&text)
                .ok_or_else(|| format!("{} holds no token (it is empty)", quoted(s)))?;
            Ok(Some((path, token)))
        });
        read.map_or((None, None), |(path, token)| (Some(path), Some(token)))
    }
}

//! Validation of `tls`, the agent-facing TLS termination.
//!
//! Only the files' existence is checked here, as for `upstream_tls.ca_file`: their contents
//! are read when the listener is built, at start and at every reload, so that a renewed
//! certificate is what a reload picks up. A file that exists but holds no usable PEM fails
//! the start (or refuses the reload) with an error naming the key.

use std::path::{Path, PathBuf};

use serde_saphyr::Spanned;

use super::super::error::{Position, quoted};
use super::super::raw::RawTls;
use super::super::sections::ListenTls;
use super::Validator;

impl Validator<'_> {
    /// `None` when neither a certificate nor a key is set (plain TCP); an error when only one
    /// of the pair is, or when a client CA is given without them.
    pub(super) fn listen_tls(&mut self, raw: RawTls) -> Option<ListenTls> {
        let cert_at = raw.cert_file.as_ref().map(Position::of);
        let key_at = raw.key_file.as_ref().map(Position::of);
        let ca_at = raw.client_ca_file.as_ref().map(Position::of);
        let cert_file = self.file(raw.cert_file, "tls.cert_file");
        let key_file = self.file(raw.key_file, "tls.key_file");
        let client_ca_file = self.file(raw.client_ca_file, "tls.client_ca_file");
        match (cert_at, key_at) {
            (Some(_), Some(_)) => Some(ListenTls {
                // A bad path was reported; `None` only after that, and the result is discarded.
                cert_file: cert_file?,
                key_file: key_file?,
                client_ca_file,
            }),
            (Some(at), None) => {
                let message = "tls.cert_file: tls.key_file is required with it".to_owned();
                self.report(at, message);
                None
            }
            (None, Some(at)) => {
                let message = "tls.key_file: tls.cert_file is required with it".to_owned();
                self.report(at, message);
                None
            }
            (None, None) => {
                if let Some(at) = ca_at {
                    let message = "tls.client_ca_file: needs tls.cert_file and tls.key_file \
                                   (client certificates are only asked for over TLS)";
                    self.report(at, message.to_owned());
                }
                None
            }
        }
    }

    /// A path relative to the config file's directory, which must name a file.
    fn file(&mut self, raw: Option<Spanned<String>>, path: &str) -> Option<PathBuf> {
        let dir = self.source.dir;
        self.parse(raw, path, None, |s| existing_file(dir, s).map(Some))
    }
}

/// A path that must name a file, relative to `dir`.
pub(super) fn existing_file(dir: &Path, text: &str) -> Result<PathBuf, String> {
    let path = dir.join(text);
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() => Ok(path),
        Ok(_) => Err(format!("{} is not a file", quoted(text))),
        Err(e) => Err(format!("cannot read {}: {e}", quoted(text))),
    }
}

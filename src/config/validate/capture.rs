//! Validation of `capture`: the path (the `--capture` flag replaces it), the two size limits
//! and the extra header names to redact.

use std::path::PathBuf;

use http::HeaderName;
use serde_saphyr::Spanned;

use super::super::capture::{CAPTURE_MAX_BODY_RANGE, CAPTURE_MAX_FILE_RANGE, CaptureConfig};
use super::super::error::{Position, quoted};
use super::super::raw::RawCapture;
use super::{Validator, size_in};

impl Validator<'_> {
    /// `Some` when a path is set in the file or by `flag`; the section is checked either way.
    pub(super) fn capture(
        &mut self,
        raw: Option<RawCapture>,
        flag: Option<&PathBuf>,
    ) -> Option<CaptureConfig> {
        let raw = raw.unwrap_or_default();
        let d = CaptureConfig::at(PathBuf::new());
        let path = self.parse(raw.path, "capture.path", None, |s| match s.trim() {
            "" => Err("expected a file path".to_owned()),
            text => Ok(Some(PathBuf::from(text))),
        });
        let config = CaptureConfig {
            path: PathBuf::new(),
            max_body: self.parse(raw.max_body, "capture.max_body", d.max_body, |s| {
                size_in(s, CAPTURE_MAX_BODY_RANGE)
            }),
            max_file: self.parse(raw.max_file, "capture.max_file", d.max_file, |s| {
                size_in(s, CAPTURE_MAX_FILE_RANGE).map(|n| n as u64)
            }),
            redact: self.redact(raw.redact.unwrap_or_default()),
        };
        let path = flag.cloned().or(path.map(|p| self.source.dir.join(p)))?;
        Some(CaptureConfig { path, ..config })
    }

    fn redact(&mut self, raw: Vec<Spanned<String>>) -> Vec<String> {
        let mut names = Vec::with_capacity(raw.len());
        for (i, entry) in raw.into_iter().enumerate() {
            match HeaderName::from_bytes(entry.value.trim().as_bytes()) {
                Ok(name) => names.push(name.as_str().to_owned()),
                Err(_) => self.report(
                    Position::of(&entry),
                    format!(
                        "capture.redact[{i}]: {} is not a header name",
                        quoted(&entry.value)
                    ),
                ),
            }
        }
        names
    }
}

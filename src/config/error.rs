//! Config errors: every problem found in one pass, each pointing at a place a human can open.
use std::fmt;

use serde_saphyr::Spanned;

/// A 1-based line and column in the config file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub line: u64,
    pub column: u64,
}

/// One problem with the configuration.
///
/// Displays as `FILE:LINE:COL: message` when the position is known, `FILE: message` when only
/// the file is (it could not be read, or a required key is absent), and `message` alone when the
/// value came from the command line (the message then names the flag, e.g. `--upstream`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The config file as the user named it; `None` for command-line values.
    pub file: Option<String>,
    pub position: Option<Position>,
    /// Starts with the key path (`timeouts.connect: ...`) or flag (`--upstream: ...`).
    pub message: String,
}

/// Every error found, in file order; never empty.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(Vec<ConfigError>);

// === impl Position ===

impl Position {
    /// The start of a spanned YAML value (where it is used, for aliases).
    ///
    /// Returns `None` when serde-saphyr could not record a location (line 0), which it documents
    /// for values buffered through `flatten` or untagged enums; our raw types use neither.
    pub(super) fn of<T>(spanned: &Spanned<T>) -> Option<Self> {
        Self::from_location(spanned.referenced)
    }

    pub(super) fn from_location(location: serde_saphyr::Location) -> Option<Self> {
        (location.line() > 0).then(|| Self {
            line: location.line(),
            column: location.column(),
        })
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

// === impl ConfigError ===

impl ConfigError {
    /// An error at a place in the file, or about the file as a whole when `position` is `None`.
    pub(super) fn in_file(file: &str, position: Option<Position>, message: String) -> Self {
        Self {
            file: Some(file.to_owned()),
            position,
            message,
        }
    }

    /// An error in a command-line value; `message` names the flag.
    pub(super) fn on_command_line(message: String) -> Self {
        Self {
            file: None,
            position: None,
            message,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.position) {
            (Some(file), Some(pos)) => write!(f, "{file}:{pos}: {}", self.message),
            (Some(file), None) => write!(f, "{file}: {}", self.message),
            (None, _) => f.write_str(&self.message),
        }
    }
}

// === impl ConfigErrors ===

impl ConfigErrors {
    /// Wraps a list of errors, sorted by position so the output reads top to bottom.
    ///
    /// Returns `None` when `errors` is empty: "no errors" is `Ok`, never an empty `Err`.
    pub(super) fn new(mut errors: Vec<ConfigError>) -> Option<Self> {
        if errors.is_empty() {
            return None;
        }
        // Command-line errors (no file) first, then file-wide ones, then by line and column.
        // The sort is stable, so errors at one position keep the order they were found in.
        errors.sort_by_key(|e| (e.file.is_some(), e.position));
        Some(Self(errors))
    }

    pub(super) fn one(error: ConfigError) -> Self {
        Self(vec![error])
    }

    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false; present because clippy expects it next to `len`.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_vec(self) -> Vec<ConfigError> {
        self.0
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// Quotes a value the user wrote for an error message, escaping control characters and quotes
/// so a hostile config cannot rewrite the terminal it is reported to.
pub(super) fn quoted(value: &str) -> String {
    format!("{value:?}")
}

/// Escapes control characters in a message from the YAML parser (which may echo key names from
/// the file) without escaping the quotes and backticks it uses for emphasis.
pub(super) fn sanitized(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for c in message.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

//! The capture file: a HAR document that is valid after every entry. Each entry is written
//! over the document's closing `]}}` and followed by it again (a seek back), so a reader
//! may open the file at any time. When an entry would take the file past `capture.max_file`,
//! the file is renamed to `FILE.1` (replacing the one before: one old file is kept) and a
//! new one begun. An existing `FILE` at the first write is rotated the same way.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::har;

/// The file being written.
pub(super) struct HarFile {
    path: PathBuf,
    max_file: u64,
    open: Option<Open>,
}

struct Open {
    file: File,
    /// Bytes in the file, the tail included.
    len: u64,
    entries: u64,
}

impl HarFile {
    pub(super) fn new(path: PathBuf, max_file: u64) -> Self {
        HarFile {
            path,
            max_file,
            open: None,
        }
    }

    /// The previous file's name: `FILE.1`.
    pub(super) fn rotated(path: &Path) -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(".1");
        PathBuf::from(name)
    }

    /// Appends one entry (HAR JSON). On error the entry is lost and the file left as it was
    /// before it (or closed, to be begun anew at the next entry).
    pub(super) fn append(&mut self, entry: &[u8]) -> io::Result<()> {
        let fits =
            |open: &Open| open.entries == 0 || open.len + 1 + entry.len() as u64 <= self.max_file;
        if self.open.as_ref().is_some_and(|open| !fits(open)) {
            self.open = None;
        }
        let open = match &mut self.open {
            Some(open) => open,
            None => self.open.insert(begin(&self.path)?),
        };
        let mut bytes = Vec::with_capacity(entry.len() + 1 + har::TAIL.len());
        if open.entries > 0 {
            bytes.push(b',');
        }
        bytes.extend_from_slice(entry);
        bytes.extend_from_slice(har::TAIL);
        let at = open.len - har::TAIL.len() as u64;
        match write_at(&mut open.file, at, &bytes) {
            Ok(()) => {
                open.len = at + bytes.len() as u64;
                open.entries += 1;
                Ok(())
            }
            Err(err) => {
                // Back to the last whole entry; failing that, start afresh next time.
                let restored = open
                    .file
                    .set_len(open.len)
                    .and_then(|()| write_at(&mut open.file, at, har::TAIL));
                if restored.is_err() {
                    self.open = None;
                }
                Err(err)
            }
        }
    }
}

/// A new, empty document at `path`, the file there before renamed to `FILE.1`.
fn begin(path: &Path) -> io::Result<Open> {
    if path.exists() {
        std::fs::rename(path, HarFile::rotated(path))?;
    }
    let mut file = File::create(path)?;
    let mut bytes = har::head().into_bytes();
    bytes.extend_from_slice(har::TAIL);
    file.write_all(&bytes)?;
    Ok(Open {
        file,
        len: bytes.len() as u64,
        entries: 0,
    })
}

fn write_at(file: &mut File, at: u64, bytes: &[u8]) -> io::Result<()> {
    file.seek(SeekFrom::Start(at))?;
    file.write_all(bytes)?;
    file.flush()
}

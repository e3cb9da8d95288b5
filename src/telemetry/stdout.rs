//! Log lines to stdout without a process-wide lock per line.
//!
//! `io::stdout()` serialises every write behind one lock, held across the `write(2)`: with a
//! log line per call and a worker thread per core, the workers queued on it — half a futex
//! wait and wake per call at 64 agents (strace, `bench/README.md`). Here each line goes out
//! in one `write(2)` on a duplicate of descriptor 1, which POSIX already makes atomic: a write
//! of at most `PIPE_BUF` bytes to a pipe is never interleaved with another (POSIX.1-2017
//! `write()`), and Linux serialises writes to a regular file's offset. Only a longer line,
//! which a pipe may interleave, takes the lock — exclusively, while short lines share it.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::sync::{Arc, RwLock};

use tracing_subscriber::fmt::MakeWriter;

/// POSIX's minimum for `PIPE_BUF`, Linux's value.
const PIPE_BUF: usize = 4096;

/// Makes one [`LineWriter`] per log event.
#[derive(Clone, Debug)]
pub(super) struct StdoutLines {
    out: Arc<Out>,
}

#[derive(Debug)]
struct Out {
    file: File,
    /// Shared by writes that are atomic anyway, exclusive for the ones that are not.
    long: RwLock<()>,
}

/// Writes one event's line.
#[derive(Debug)]
pub(super) struct LineWriter<'a> {
    out: &'a Out,
}

// === impl StdoutLines ===

impl StdoutLines {
    /// Writes to a duplicate of this process's descriptor 1; `None` when it cannot be
    /// duplicated (stdout closed), and the caller keeps `io::stdout`.
    pub(super) fn new() -> Option<Self> {
        let fd = io::stdout().as_fd().try_clone_to_owned().ok()?;
        Some(Self::to(File::from(fd)))
    }

    /// Writes to `file` (tests: a pipe).
    pub(super) fn to(file: File) -> Self {
        StdoutLines {
            out: Arc::new(Out {
                file,
                long: RwLock::new(()),
            }),
        }
    }
}

impl<'a> MakeWriter<'a> for StdoutLines {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter { out: &self.out }
    }
}

// === impl LineWriter ===

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_all(buf).map(|()| buf.len())
    }

    /// tracing-subscriber hands over a whole line in one call.
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        // A poisoned lock guards nothing but the ordering of writes; go on.
        if buf.len() <= PIPE_BUF {
            let _shared = self.out.long.read().unwrap_or_else(|e| e.into_inner());
            (&self.out.file).write_all(buf)
        } else {
            let _alone = self.out.long.write().unwrap_or_else(|e| e.into_inner());
            (&self.out.file).write_all(buf)
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    /// Four threads write lines of 1 byte to 3 × PIPE_BUF into one pipe at once: every line
    /// arrives whole, none interleaved with another.
    #[test]
    fn concurrent_lines_arrive_whole() {
        let (mut reader, writer) = io::pipe().unwrap();
        let lines = StdoutLines::to(File::from(std::os::fd::OwnedFd::from(writer)));
        let read = std::thread::spawn(move || {
            let mut all = Vec::new();
            reader.read_to_end(&mut all).unwrap();
            all
        });
        let writers: Vec<_> = (0..4u8)
            .map(|t| {
                let lines = lines.clone();
                std::thread::spawn(move || {
                    for i in 0..300usize {
                        let len = 1 + (i * 97 + usize::from(t) * 1013) % (3 * PIPE_BUF);
                        let mut line = vec![b'a' + t; len];
                        line.push(b'\n');
                        lines.make_writer().write_all(&line).unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        drop(lines);
        let all = read.join().unwrap();
        let mut count = 0;
        for line in all.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let first = line[0];
            assert!(line.iter().all(|&b| b == first), "a line was interleaved");
            count += 1;
        }
        assert_eq!(count, 4 * 300);
    }
}

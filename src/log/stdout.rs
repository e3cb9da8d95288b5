//! Log lines to stdout without a process-wide lock per line.
//!
//! `io::stdout()` serialises every write behind one lock, held across the `write(2)`: with a
//! log line per call and a worker thread per core, the workers queued on it — half a futex
//! wait and wake per call at 64 agents (strace, `bench/README.md`). Here each line goes out
//! in one `write(2)` on a duplicate of descriptor 1, which POSIX already makes atomic: a write
//! of at most `PIPE_BUF` bytes to a pipe is never interleaved with another (POSIX.1-2017
//! `write()`), and Linux serialises writes to a regular file's offset. Only a longer line,
//! which a pipe may interleave, takes the lock — exclusively, while short lines share it.
//!
//! A worker thread (`runtime/workers.rs`) batches its lines: they gather in a buffer of the
//! thread's and go out together, in one `write(2)` of at most `PIPE_BUF` bytes (atomic as
//! above), when the next line would not fit or when its runtime is about to park — it has
//! nothing left to run, so a line waits no longer than the calls ready beside it. At 64
//! agents that is several lines a `write(2)` instead of one per call.

use std::cell::RefCell;
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
    out: &'a Arc<Out>,
}

/// A worker thread's lines not yet written, and where they go.
struct Batch {
    out: Option<Arc<Out>>,
    lines: Vec<u8>,
}

thread_local! {
    /// `None` on threads that write each line at once (all but the workers).
    static BATCH: RefCell<Option<Batch>> = const { RefCell::new(None) };
}

/// From now on this thread's lines are batched; [`flush_batched`] writes them.
pub(crate) fn batch_this_thread() {
    BATCH.with(|batch| {
        if let Ok(mut batch) = batch.try_borrow_mut() {
            batch.get_or_insert_with(|| Batch {
                out: None,
                lines: Vec::with_capacity(PIPE_BUF),
            });
        }
    });
}

/// Writes the lines this thread has batched (its runtime is about to park, or it ends).
pub(crate) fn flush_batched() {
    BATCH.with(|batch| {
        if let Ok(mut batch) = batch.try_borrow_mut()
            && let Some(batch) = batch.as_mut()
        {
            batch.flush();
        }
    });
}

impl Batch {
    fn flush(&mut self) {
        if let Some(out) = &self.out
            && !self.lines.is_empty()
        {
            // Nothing to tell a failed log write to; the lines are dropped either way.
            let _ = out.write_atomic(&self.lines);
        }
        self.lines.clear();
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.flush();
    }
}

impl Out {
    /// One write of at most `PIPE_BUF` bytes, beside the others.
    fn write_atomic(&self, buf: &[u8]) -> io::Result<()> {
        // A poisoned lock guards nothing but the ordering of writes; go on.
        let _shared = self.long.read().unwrap_or_else(|e| e.into_inner());
        (&self.file).write_all(buf)
    }
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
        if buf.len() <= PIPE_BUF {
            let batched = BATCH.with(|batch| {
                let Ok(mut batch) = batch.try_borrow_mut() else {
                    return false;
                };
                let Some(batch) = batch.as_mut() else {
                    return false;
                };
                let same = batch.out.as_ref().is_some_and(|o| Arc::ptr_eq(o, self.out));
                if !same || batch.lines.len() + buf.len() > PIPE_BUF {
                    batch.flush();
                }
                if !same {
                    batch.out = Some(self.out.clone());
                }
                batch.lines.extend_from_slice(buf);
                true
            });
            if batched {
                return Ok(());
            }
            self.out.write_atomic(buf)
        } else {
            // Lines before this one first.
            flush_batched();
            // A poisoned lock guards nothing but the ordering of writes; go on.
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

    /// On a batching thread lines wait for the flush (or for the batch to fill), go out in
    /// their order, and a line too long to batch first pushes out the ones before it.
    #[test]
    fn a_batching_thread_writes_its_lines_together_and_in_order() {
        let (mut reader, writer) = io::pipe().unwrap();
        let lines = StdoutLines::to(File::from(std::os::fd::OwnedFd::from(writer)));
        let written = std::thread::spawn(move || {
            batch_this_thread();
            lines.make_writer().write_all(b"one\n").unwrap();
            lines.make_writer().write_all(b"two\n").unwrap();
            let held = BATCH.with(|b| b.borrow().as_ref().map_or(0, |b| b.lines.len()));
            // Filling the batch: the lines so far go out, this one waits.
            let fill = vec![b'f'; PIPE_BUF - 4];
            lines.make_writer().write_all(&fill).unwrap();
            let long = [vec![b'l'; PIPE_BUF], b"\n".to_vec()].concat();
            lines.make_writer().write_all(&long).unwrap();
            lines.make_writer().write_all(b"three\n").unwrap();
            flush_batched();
            lines.make_writer().write_all(b"four\n").unwrap();
            // Written when the thread ends.
            held
        });
        assert_eq!(written.join().unwrap(), 8, "held until the flush");
        let mut all = Vec::new();
        reader.read_to_end(&mut all).unwrap();
        let fill = vec![b'f'; PIPE_BUF - 4];
        let long = [vec![b'l'; PIPE_BUF], b"\n".to_vec()].concat();
        let want = [&b"one\ntwo\n"[..], &fill, &long, b"three\n", b"four\n"].concat();
        assert_eq!(all, want);
    }
}

//! The writer thread: takes finished exchanges off the queue, writes each as a HAR entry
//! and counts it written or dropped. A write error (a missing directory, a full disk) loses
//! the entry; it is logged at most once per 10 s, with how many were lost since.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Duration;

use tokio::time::Instant;

use super::entry::Entry;
use super::file::HarFile;
use super::{QUEUE, har};
use crate::config::CaptureConfig;
use crate::metrics::{CaptureResult, Metrics};

/// Least time between two warnings about lost entries.
const WARN_EVERY: Duration = Duration::from_secs(10);

pub(super) enum Message {
    Entry(Box<Entry>),
    /// Answered once everything queued before it is written.
    Flush(tokio::sync::oneshot::Sender<()>),
}

struct Writer {
    file: HarFile,
    metrics: Arc<Metrics>,
    last_warning: Option<Instant>,
    lost_since_warning: u64,
}

/// Starts the thread; it ends when every sender is gone.
pub(super) fn spawn(
    config: &CaptureConfig,
    metrics: Arc<Metrics>,
) -> std::io::Result<SyncSender<Message>> {
    let (queue, messages) = sync_channel(QUEUE);
    let mut writer = Writer {
        file: HarFile::new(config.path.clone(), config.max_file),
        metrics,
        last_warning: None,
        lost_since_warning: 0,
    };
    std::thread::Builder::new()
        .name("strata-capture".to_owned())
        .spawn(move || writer.run(messages))?;
    Ok(queue)
}

impl Writer {
    fn run(&mut self, messages: Receiver<Message>) {
        for message in messages {
            match message {
                Message::Entry(entry) => self.write(&entry),
                Message::Flush(done) => {
                    let _ = done.send(());
                }
            }
        }
    }

    fn write(&mut self, entry: &Entry) {
        match self.file.append(&har::entry(entry)) {
            Ok(()) => self.metrics.capture_entries(CaptureResult::Written, 1),
            Err(err) => {
                self.metrics.capture_entries(CaptureResult::Dropped, 1);
                self.lost_since_warning += 1;
                let due = self
                    .last_warning
                    .is_none_or(|at| at.elapsed() >= WARN_EVERY);
                if due {
                    tracing::warn!(
                        error = %err,
                        lost = self.lost_since_warning,
                        "capture: cannot write the capture file; exchanges are not captured"
                    );
                    self.last_warning = Some(Instant::now());
                    self.lost_since_warning = 0;
                }
            }
        }
    }
}

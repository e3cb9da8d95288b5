//! Reloading when the config file, or a file it names, changes on disk (`watch_config`).
//!
//! A task stats each watched path every [`POLL`] (see [`stamp`]); on a change it waits until
//! the paths look the same twice [`SETTLE`] apart (a burst of writes is one change), then asks
//! for a reload on the channel SIGHUP uses (`main.rs`), so a signal and a change coalesce and
//! both take the one reload path (`app::run`). Polling follows a path through any symlink on
//! every look, which a Kubernetes ConfigMap's `..data` swap needs. The design and its costs:
//! `docs/architecture.md`, "Reloading".

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::config::Config;

mod stamp;

use stamp::Stamp;

/// How often the watched paths are looked at.
pub const POLL: Duration = Duration::from_secs(1);

/// How long the paths must stay unchanged before a change is acted on.
pub const SETTLE: Duration = Duration::from_millis(250);

/// Looks at most this many times for a burst to end; a file that never stops changing is
/// reloaded anyway, [`SETTLE`] × this after the change was seen.
const MAX_SETTLE: u32 = 8;

/// The watching task; dropped, it ends.
pub struct ConfigWatch {
    config_file: PathBuf,
    paths: watch::Sender<Vec<PathBuf>>,
    task: JoinHandle<()>,
}

impl ConfigWatch {
    /// Starts watching `config_file` and the files `config` reads (none when `config` turns
    /// watching off); a change sends on `reloads`.
    pub fn spawn(config_file: PathBuf, config: &Config, reloads: mpsc::Sender<()>) -> Self {
        let (paths, watched) = watch::channel(paths_of(&config_file, config));
        let task = tokio::spawn(watch_paths(watched, reloads));
        ConfigWatch {
            config_file,
            paths,
            task,
        }
    }

    /// Watches what `config` (just loaded from the file) names from now on.
    pub fn follow(&self, config: &Config) {
        let paths = paths_of(&self.config_file, config);
        self.paths.send_if_modified(|current| {
            let changed = *current != paths;
            *current = paths;
            changed
        });
    }
}

impl Drop for ConfigWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn paths_of(config_file: &Path, config: &Config) -> Vec<PathBuf> {
    if !config.watch_config {
        return Vec::new();
    }
    let files = config.files_read().into_iter().map(Path::to_path_buf);
    std::iter::once(config_file.to_path_buf())
        .chain(files)
        .collect()
}

/// Polls the paths `watched` holds; a new set of paths is looked at afresh.
async fn watch_paths(mut watched: watch::Receiver<Vec<PathBuf>>, reloads: mpsc::Sender<()>) {
    loop {
        let paths = watched.borrow_and_update().clone();
        let Some(mut seen) = stamps(&paths).await else {
            return;
        };
        loop {
            tokio::select! {
                changed = watched.changed() => match changed {
                    Ok(()) => break,
                    Err(_) => return,
                },
                () = tokio::time::sleep(POLL), if !paths.is_empty() => {}
            }
            let Some(now) = stamps(&paths).await else {
                return;
            };
            let Some(path) = first_changed(&paths, &seen, &now) else {
                continue;
            };
            tracing::info!(path = %path.display(), "a watched config file changed; reloading");
            seen = settle(&paths, now).await;
            // Full: a reload is already asked for, and it reads the files after this change.
            if let Err(mpsc::error::TrySendError::Closed(())) = reloads.try_send(()) {
                return;
            }
        }
    }
}

/// The first of `paths` whose stamp differs between `before` and `after`.
fn first_changed<'a>(paths: &'a [PathBuf], before: &[Stamp], after: &[Stamp]) -> Option<&'a Path> {
    let differs = |(_, (a, b)): &(&PathBuf, (&Stamp, &Stamp))| a != b;
    let found = paths.iter().zip(before.iter().zip(after)).find(differs);
    found.map(|(path, _)| path.as_path())
}

/// The stamps of `paths` once they look the same twice [`SETTLE`] apart (at most
/// [`MAX_SETTLE`] looks), starting from `last`.
async fn settle(paths: &[PathBuf], mut last: Vec<Stamp>) -> Vec<Stamp> {
    for _ in 0..MAX_SETTLE {
        tokio::time::sleep(SETTLE).await;
        match stamps(paths).await {
            Some(now) if now == last => break,
            Some(now) => last = now,
            None => break,
        }
    }
    last
}

/// The stamps of `paths`, taken off the runtime's thread (a `stat` may block on a network
/// file system). `None`: the runtime is shutting down.
async fn stamps(paths: &[PathBuf]) -> Option<Vec<Stamp>> {
    let paths = paths.to_vec();
    tokio::task::spawn_blocking(move || paths.iter().map(|p| Stamp::of(p)).collect())
        .await
        .ok()
}

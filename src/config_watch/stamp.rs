//! What a watched path looks like on disk: the file it resolves to, and that file's identity,
//! size and times. Two stamps differ when the file was written in place, replaced by a rename,
//! or reached through a symlink that now points elsewhere (a Kubernetes ConfigMap's `..data`).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// One path, as `stat` (following symlinks) and `realpath` see it. A part that cannot be
/// read is `None`: a missing file is a state too, and its return is a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Stamp {
    target: Option<PathBuf>,
    file: Option<FileStamp>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    /// Device, inode and change time (ctime, which a write or rename sets and no one can set
    /// back, unlike the modification time): where the platform has them.
    identity: (u64, u64, i64, i64),
}

impl Stamp {
    /// The path's stamp now. Blocking: a `stat` and a `realpath`.
    pub(super) fn of(path: &Path) -> Stamp {
        Stamp {
            target: std::fs::canonicalize(path).ok(),
            file: std::fs::metadata(path).ok().map(|meta| FileStamp {
                len: meta.len(),
                modified: meta.modified().ok(),
                identity: identity(&meta),
            }),
        }
    }
}

#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> (u64, u64, i64, i64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec())
}

#[cfg(not(unix))]
fn identity(_meta: &std::fs::Metadata) -> (u64, u64, i64, i64) {
    (0, 0, 0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("strata-stamp-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_rename_over_the_file_changes_it() {
        let dir = dir("rename");
        let file = dir.join("config.yaml");
        std::fs::write(&file, "a: 1\n").unwrap();
        let before = Stamp::of(&file);
        assert_eq!(Stamp::of(&file), before, "nothing changed");
        // Same size, and the new file's modification time set back to the old one's.
        let tmp = dir.join("config.yaml.tmp");
        std::fs::write(&tmp, "a: 2\n").unwrap();
        let old = std::fs::metadata(&file).unwrap().modified().unwrap();
        std::fs::File::options()
            .write(true)
            .open(&tmp)
            .unwrap()
            .set_modified(old)
            .unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        assert_ne!(Stamp::of(&file), before);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_swapped_directory_symlink_changes_it() {
        let dir = dir("swap");
        for (version, text) in [("..v1", "a: 1\n"), ("..v2", "a: 1\n")] {
            std::fs::create_dir(dir.join(version)).unwrap();
            std::fs::write(dir.join(version).join("config.yaml"), text).unwrap();
        }
        std::os::unix::fs::symlink("..v1", dir.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/config.yaml", dir.join("config.yaml")).unwrap();
        let file = dir.join("config.yaml");
        let before = Stamp::of(&file);
        std::os::unix::fs::symlink("..v2", dir.join("..data_tmp")).unwrap();
        std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
        assert_ne!(Stamp::of(&file), before);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(Stamp::of(&file), Stamp::of(&dir.join("gone")), "missing");
    }
}

//! Which haproxy binary judges, taken afresh for every check: the path is
//! resolved again each time (a bare name on `PATH`, an explicit path as
//! given), and the file is hashed again only when its stamp (device, inode,
//! size, mtime, ctime) changed. A binary upgraded, installed or removed while
//! the gate runs is seen at the next check, for the price of a `stat`.
//!
//! The identity (`<path> sha256:<hash>`) is part of the verdict memory's key
//! (docs/operations.md), so answers of an old binary are never reused. One
//! check has no memory: it names the binary by its stamp
//! (`<path> stamp:<hex>`), since hashing a 3 MB binary costs it some 3 ms.

use sha2::{Digest, Sha256};
use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// One binary as it was hashed.
#[derive(Debug, PartialEq, Eq)]
pub struct Binary {
    /// Absolute: HAProxy runs in the check directory.
    pub path: PathBuf,
    /// `<path> sha256:<hash>`, or `<path> stamp:<hex>` ([`Naming::Stamp`]).
    pub identity: Arc<str>,
    stamp: Stamp,
}

impl Binary {
    /// Whether `path` still holds exactly the file that was hashed. A check
    /// asks after it ran: only then is its answer this binary's.
    pub fn unchanged(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|meta| Stamp::of(&meta) == self.stamp)
    }
}

/// What changes when a file is replaced or written: a rename brings another
/// inode, a write moves size or mtime, and ctime moves with any of them
/// (and cannot be set back, unlike mtime).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn hex(&self) -> String {
        let Stamp { dev, ino, size, mtime, ctime } = *self;
        format!("{dev:x}.{ino:x}.{size:x}.{:x}.{:x}.{:x}.{:x}", mtime.0, mtime.1, ctime.0, ctime.1)
    }

    fn of(meta: &Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// How a binary is named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// By the SHA-256 of its content: the same name wherever the same file
    /// is, as the verdict memory's key needs.
    Hash,
    /// By its stamp only: enough to tell a file replaced within one run.
    Stamp,
}

/// The configured binary and the last one named.
#[derive(Debug)]
pub struct BinaryIdentity {
    configured: PathBuf,
    naming: Naming,
    /// `PATH` for a bare name; `None`: the process's, read at every lookup.
    search: Option<OsString>,
    last: Mutex<Option<Arc<Binary>>>,
    /// Files hashed so far (tests count them).
    hashes: AtomicU64,
}

impl BinaryIdentity {
    pub fn new(configured: &Path, naming: Naming) -> Self {
        BinaryIdentity {
            configured: configured.to_path_buf(),
            naming,
            search: None,
            last: Mutex::new(None),
            hashes: AtomicU64::new(0),
        }
    }

    /// The identity of no binary: `<configured> missing`.
    pub fn missing(&self) -> Arc<str> {
        format!("{} missing", self.configured.display()).into()
    }

    /// The binary a check runs now, or why there is none
    /// ("haproxy binary not found: …"). Hashes only a changed file.
    pub fn current(&self) -> Result<Arc<Binary>, String> {
        let (path, mut stamp) = resolve_binary(&self.configured, self.search.as_deref())?;
        // Held while hashing: a second caller waits for this hash, not a second one.
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = last.as_ref().filter(|b| b.path == path && b.stamp == stamp) {
            return Ok(known.clone());
        }
        let identity = match self.naming {
            Naming::Stamp => format!("{} stamp:{}", path.display(), stamp.hex()),
            Naming::Hash => {
                self.hashes.fetch_add(1, Ordering::Relaxed);
                let (hash, hashed) = hash_file(&path)
                    .map_err(|e| format!("haproxy binary not readable: {}: {e}", path.display()))?;
                stamp = hashed; // what was read, should it differ from the stat
                format!("{} sha256:{hash}", path.display())
            }
        };
        let binary = Arc::new(Binary { identity: identity.into(), path, stamp });
        *last = Some(binary.clone());
        Ok(binary)
    }

    /// The current identity, or [`BinaryIdentity::missing`].
    pub fn identity(&self) -> Arc<str> {
        self.current().map_or_else(|_| self.missing(), |b| b.identity.clone())
    }
}

/// The binary's path and stamp: as given when it has a `/` (made absolute,
/// since HAProxy runs in the check directory), else the first executable
/// match on `search` (the process's `PATH` when `None`).
fn resolve_binary(binary: &Path, search: Option<&OsStr>) -> Result<(PathBuf, Stamp), String> {
    let text = binary.as_os_str().as_encoded_bytes();
    if text.is_empty() {
        return Err("haproxy binary not found: no binary configured".into());
    }
    if text.contains(&b'/') {
        let path = std::path::absolute(binary)
            .map_err(|e| format!("haproxy binary not found: {}: {e}", binary.display()))?;
        return match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => Ok((path, Stamp::of(&meta))),
            Ok(_) => Err(format!("haproxy binary not found: {} is not a file", path.display())),
            Err(e) => Err(format!("haproxy binary not found: {}: {e}", path.display())),
        };
    }
    let search =
        search.map_or_else(|| std::env::var_os("PATH").unwrap_or_default(), |s| s.to_os_string());
    std::env::split_paths(&search)
        // an empty entry means "the current directory": never trusted
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(binary))
        .find_map(|c| {
            let meta = std::fs::metadata(&c).ok()?;
            (meta.is_file() && meta.mode() & 0o111 != 0).then(|| (c, Stamp::of(&meta)))
        })
        .ok_or_else(|| format!("haproxy binary not found: no {} on PATH", binary.display()))
}

/// The file's SHA-256 and the stamp of what was read: taken from the open
/// file before and after reading, so a file written meanwhile is refused
/// rather than named by a hash of half of each.
fn hash_file(path: &Path) -> io::Result<(String, Stamp)> {
    let mut file = File::open(path)?;
    let before = Stamp::of(&file.metadata()?);
    let mut hasher = Sha256::new();
    io::copy(&mut file, &mut hasher)?;
    if Stamp::of(&file.metadata()?) != before {
        return Err(io::Error::other("it changed while it was read"));
    }
    Ok((rendergate_core::hex::hex(&hasher.finalize()), before))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::time::{Duration, SystemTime};

    fn hashes(b: &BinaryIdentity) -> u64 {
        b.hashes.load(Ordering::Relaxed)
    }

    fn write(path: &Path, content: &str) {
        std::fs::write(path, content).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// The identity of a binary at `path` holding `content`.
    fn hashed(path: &Path, content: &str) -> String {
        let sha = rendergate_core::hex::hex(&Sha256::digest(content.as_bytes()));
        format!("{} sha256:{sha}", path.display())
    }

    #[test]
    fn an_unchanged_binary_is_hashed_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("haproxy");
        write(&path, "one");
        let ids = BinaryIdentity::new(&path, Naming::Hash);
        let first = ids.current().unwrap();
        assert_eq!(&*first.identity, hashed(&path, "one"));
        for _ in 0..3 {
            assert!(Arc::ptr_eq(&ids.current().unwrap(), &first));
            assert_eq!(ids.identity(), first.identity);
        }
        assert_eq!(hashes(&ids), 1);
        assert!(first.unchanged());
    }

    #[test]
    fn a_changed_mtime_size_or_inode_is_hashed_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("haproxy");
        write(&path, "one");
        let ids = BinaryIdentity::new(&path, Naming::Hash);
        let one = ids.current().unwrap();

        // touched: the same content, hashed again, the same identity
        let file = File::options().write(true).open(&path).unwrap();
        file.set_modified(SystemTime::now() + Duration::from_secs(60)).unwrap();
        drop(file);
        assert!(!one.unchanged());
        let touched = ids.current().unwrap();
        assert_eq!(hashes(&ids), 2);
        assert_eq!(touched.identity, one.identity);

        // rewritten in place, longer: another identity
        write(&path, "one, longer");
        assert!(!touched.unchanged());
        let longer = ids.current().unwrap();
        assert_eq!(hashes(&ids), 3);
        assert_eq!(&*longer.identity, hashed(&path, "one, longer"));

        // replaced by rename, as package managers do: another inode
        let new = dir.path().join("haproxy.new");
        write(&new, "two, longer");
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        File::options().write(true).open(&new).unwrap().set_modified(mtime).unwrap();
        std::fs::rename(&new, &path).unwrap();
        assert!(!longer.unchanged());
        let renamed = ids.current().unwrap();
        assert_eq!(hashes(&ids), 4);
        assert_eq!(&*renamed.identity, hashed(&path, "two, longer"));

        // only the mode changed (ctime moves): hashed again, same identity
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(ids.current().unwrap().identity, renamed.identity);
        assert_eq!(hashes(&ids), 5);
        ids.current().unwrap();
        assert_eq!(hashes(&ids), 5);
    }

    #[test]
    fn a_stamp_names_a_binary_unread_and_another_file_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("haproxy");
        write(&path, "one");
        let ids = BinaryIdentity::new(&path, Naming::Stamp);
        let one = ids.current().unwrap();
        assert!(
            one.identity.starts_with(&format!("{} stamp:", path.display())),
            "{}",
            one.identity
        );
        assert_eq!(ids.identity(), one.identity);
        assert_eq!(hashes(&ids), 0);
        // replaced by rename: another inode, another name
        let new = dir.path().join("haproxy.new");
        write(&new, "one");
        std::fs::rename(&new, &path).unwrap();
        assert_ne!(ids.identity(), one.identity);
        assert_eq!(hashes(&ids), 0);
    }

    #[test]
    fn a_missing_binary_is_found_once_installed_and_lost_once_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("haproxy");
        let ids = BinaryIdentity::new(&path, Naming::Hash);
        let problem = ids.current().unwrap_err();
        assert!(
            problem.starts_with(&format!("haproxy binary not found: {}: ", path.display())),
            "{problem}"
        );
        assert_eq!(&*ids.identity(), format!("{} missing", path.display()));

        write(&path, "one");
        assert_eq!(&*ids.identity(), hashed(&path, "one"));

        std::fs::remove_file(&path).unwrap();
        assert!(ids.current().unwrap_err().starts_with("haproxy binary not found: "));
        assert_eq!(&*ids.identity(), format!("{} missing", path.display()));
    }

    #[test]
    fn a_bare_name_is_looked_up_on_path_at_every_call() {
        let (early_dir, late_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let search = std::env::join_paths([early_dir.path(), late_dir.path()]).unwrap();
        let (early, late) = (early_dir.path().join("haproxy"), late_dir.path().join("haproxy"));
        let ids = BinaryIdentity {
            search: Some(search),
            ..BinaryIdentity::new(Path::new("haproxy"), Naming::Hash)
        };
        assert_eq!(ids.current().unwrap_err(), "haproxy binary not found: no haproxy on PATH");
        assert_eq!(&*ids.identity(), "haproxy missing");

        write(&late, "late");
        assert_eq!(ids.current().unwrap().path, late);

        // one installed earlier on PATH wins from the next call on
        write(&early, "early");
        let found = ids.current().unwrap();
        assert_eq!(found.path, early);
        assert_eq!(&*found.identity, hashed(&early, "early"));

        // not executable: not a match on PATH
        std::fs::set_permissions(&early, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(ids.current().unwrap().path, late);
    }

    #[test]
    fn an_explicit_path_is_taken_as_given_and_made_absolute() {
        let dir = tempfile::tempdir().unwrap();
        let ids = BinaryIdentity::new(dir.path(), Naming::Hash);
        assert_eq!(
            ids.current().unwrap_err(),
            format!("haproxy binary not found: {} is not a file", dir.path().display())
        );
        let relative = BinaryIdentity::new(Path::new("./no-such-haproxy"), Naming::Hash);
        let problem = relative.current().unwrap_err();
        let absolute = std::env::current_dir().unwrap().join("no-such-haproxy");
        assert!(
            problem.starts_with(&format!("haproxy binary not found: {}", absolute.display())),
            "{problem}"
        );
        assert_eq!(
            BinaryIdentity::new(Path::new(""), Naming::Hash).current().unwrap_err(),
            "haproxy binary not found: no binary configured"
        );
    }
}

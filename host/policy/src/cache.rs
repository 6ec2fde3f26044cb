//! The precompiled-component cache: a restart with the same policy skips
//! compilation. Entries are keyed by the component's content hash and the
//! engine's compatibility hash, and carry the hash of the compiled bytes;
//! an entry that does not verify is ignored and rebuilt, never trusted.
//! The cache keeps the entries used last ([`KEPT`]): each rollout of a
//! policy and each upgrade of the gate adds one, and one of a JavaScript
//! policy is some 40 MB.

use rendergate_core::hex::hex;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// How many entries the cache keeps, by last use: a gate's live and shadow
/// policies, and a few earlier ones to roll back to without compiling.
pub const KEPT: usize = 8;

/// How old a temporary file must be to be a dead writer's, never one
/// another process is still writing.
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(600);

/// Whether a directory is this user's and no one else may write in it.
fn private(meta: &std::fs::Metadata, me: u32) -> bool {
    meta.uid() == me && meta.permissions().mode() & 0o022 == 0
}

/// How a load used the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheUse {
    /// A verified entry was deserialized: no compilation.
    Hit,
    /// No entry: compiled and stored.
    Compiled,
    /// An entry failed verification (corrupt, foreign): compiled and replaced.
    Rebuilt,
}

#[derive(Clone, Debug)]
pub struct ComponentCache {
    dir: PathBuf,
}

impl ComponentCache {
    /// Opens (creating, mode 0700) a cache directory. A directory another
    /// user owns, or others may write, cannot hold entries we trust; if it
    /// is root's or ours (a pod's `emptyDir` is root's, mode 0777 or, with
    /// an `fsGroup`, group-writable), the cache is this user's own
    /// subdirectory in it, `rendergate-<euid>`, made owner-only, as check
    /// directories are made under `TMPDIR`. Anything else is refused.
    pub fn open(dir: &Path) -> Result<Self, String> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create the policy cache {}: {e}", dir.display()))?;
        let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if private(&meta, me) {
            return Ok(ComponentCache { dir: dir.to_path_buf() });
        }
        if meta.uid() != me && meta.uid() != 0 {
            return Err(format!(
                "the policy cache {} belongs to another user (uid {}); not using it",
                dir.display(),
                meta.uid()
            ));
        }
        let own = dir.join(format!("rendergate-{me}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&own) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(format!("cannot create the policy cache {}: {e}", own.display()));
            }
        }
        // never through a symlink someone else put there
        let meta =
            std::fs::symlink_metadata(&own).map_err(|e| format!("{}: {e}", own.display()))?;
        if !meta.is_dir() || !private(&meta, me) {
            return Err(format!(
                "the policy cache {} is not private to this user; not using it",
                own.display()
            ));
        }
        Ok(ComponentCache { dir: own })
    }

    /// `$XDG_CACHE_HOME/rendergate/policies`, else `~/.cache/rendergate/policies`.
    pub fn default_dir() -> PathBuf {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        base.join("rendergate").join("policies")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn load_or_compile(&self, engine: &Engine, bytes: &[u8]) -> Result<Component, String> {
        self.load_or_compile_traced(engine, bytes).map(|(c, _)| c)
    }

    /// The component for `bytes`, from a verified entry or freshly compiled.
    pub fn load_or_compile_traced(
        &self,
        engine: &Engine,
        bytes: &[u8],
    ) -> Result<(Component, CacheUse), String> {
        let key = format!("{}-{}", hex(&Sha256::digest(bytes)), engine_hash(engine));
        let artifact = self.dir.join(format!("{key}.cwasm"));
        let digest = self.dir.join(format!("{key}.sha256"));
        let mut found = false;
        if let (Ok(compiled), Ok(recorded)) =
            (std::fs::read(&artifact), std::fs::read_to_string(&digest))
        {
            found = true;
            if hex(&Sha256::digest(&compiled)) == recorded.trim() {
                // SAFETY: the bytes are the output of `Component::serialize`
                // of this engine configuration (the key carries its
                // compatibility hash), verified against the digest we wrote
                // next to them, in a directory private to this user.
                match unsafe { Component::deserialize(engine, &compiled) } {
                    Ok(component) => {
                        // used now: the last to go
                        let now = std::time::SystemTime::now();
                        let touched = std::fs::File::options()
                            .write(true)
                            .open(&artifact)
                            .and_then(|f| f.set_modified(now));
                        if let Err(e) = touched {
                            tracing::debug!("cannot mark {} used: {e}", artifact.display());
                        }
                        return Ok((component, CacheUse::Hit));
                    }
                    Err(e) => tracing::warn!(
                        "policy cache entry {} unusable, rebuilding: {e:#}",
                        artifact.display()
                    ),
                }
            } else {
                tracing::warn!(
                    "policy cache entry {} does not verify, rebuilding",
                    artifact.display()
                );
            }
        }
        let component = Component::from_binary(engine, bytes).map_err(|e| format!("{e:#}"))?;
        match component.serialize() {
            Ok(compiled) => {
                let stored = write_atomically(&artifact, &compiled).and_then(|()| {
                    write_atomically(&digest, hex(&Sha256::digest(&compiled)).as_bytes())
                });
                if let Err(e) = stored {
                    tracing::warn!(
                        "cannot store the compiled policy in {}: {e}",
                        self.dir.display()
                    );
                }
                prune(&self.dir, KEPT, std::time::SystemTime::now());
            }
            Err(e) => tracing::warn!("cannot serialize the compiled policy: {e:#}"),
        }
        Ok((component, if found { CacheUse::Rebuilt } else { CacheUse::Compiled }))
    }
}

/// The engine's compatibility hash, stable for one build and configuration.
fn engine_hash(engine: &Engine) -> String {
    struct ShaHasher(Sha256);
    impl std::hash::Hasher for ShaHasher {
        fn finish(&self) -> u64 {
            unreachable!("only the digest is read")
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut hasher = ShaHasher(Sha256::new());
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
    hex(&hasher.0.finalize()[..16])
}

/// Removes from `dir` all but the `kept` entries used last (by their
/// artifact's modification time: written or loaded), each with its digest,
/// and the temporary files of writers dead for [`STALE_TMP`] at `now`.
/// Best effort: the cache works as well unpruned.
fn prune(dir: &Path, kept: usize, now: std::time::SystemTime) {
    let Ok(listing) = std::fs::read_dir(dir) else { return };
    let mut entries = Vec::new();
    for entry in listing.flatten() {
        let path = entry.path();
        let Ok(modified) = entry.metadata().and_then(|m| m.modified()) else { continue };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".cwasm") {
            entries.push((modified, path));
        } else if name.contains(".tmp")
            && now.duration_since(modified).is_ok_and(|age| age > STALE_TMP)
        {
            let _ = std::fs::remove_file(&path);
        }
    }
    entries.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    for (_, artifact) in entries.into_iter().skip(kept) {
        let _ = std::fs::remove_file(artifact.with_extension("sha256"));
        if let Err(e) = std::fs::remove_file(&artifact) {
            tracing::debug!("cannot remove {} from the policy cache: {e}", artifact.display());
        }
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_directory_others_may_write_holds_the_cache_in_a_subdirectory_of_this_users_own() {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let base = tempfile::tempdir().unwrap();
        // an emptyDir: mode 0777, and with an fsGroup group-writable and setgid
        for shared in [0o777, 0o2775] {
            let dir = base.path().join(format!("{shared:o}"));
            std::fs::create_dir(&dir).unwrap();
            mode(&dir, shared);
            let cache = ComponentCache::open(&dir).unwrap();
            assert_eq!(cache.dir(), dir.join(format!("rendergate-{me}")));
            let meta = std::fs::symlink_metadata(cache.dir()).unwrap();
            assert_eq!((meta.uid(), meta.permissions().mode() & 0o777), (me, 0o700));
            // opened again (a restarted serve): the same entries
            assert_eq!(ComponentCache::open(&dir).unwrap().dir(), cache.dir());
        }
        // a private directory is used as it is
        let private = base.path().join("private");
        let cache = ComponentCache::open(&private).unwrap();
        assert_eq!(cache.dir(), private);
    }

    #[test]
    fn the_cache_keeps_the_entries_used_last_and_no_dead_writers_files() {
        let dir = tempfile::tempdir().unwrap();
        let now = std::time::SystemTime::now();
        let at = |path: &Path, ago: u64| {
            std::fs::write(path, "x").unwrap();
            let file = std::fs::File::options().write(true).open(path).unwrap();
            file.set_modified(now - std::time::Duration::from_secs(ago)).unwrap();
        };
        // twelve entries, used 1 to 12 minutes ago
        for i in 1..=12u64 {
            at(&dir.path().join(format!("k{i}.cwasm")), 60 * i);
            at(&dir.path().join(format!("k{i}.sha256")), 60 * i);
        }
        // a dead writer's file, and one being written now
        at(&dir.path().join("k0.cwasm.tmp123"), 3600);
        at(&dir.path().join("k13.tmp456"), 1);
        prune(dir.path(), 8, now);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut want: Vec<String> = (1..=8)
            .flat_map(|i| [format!("k{i}.cwasm"), format!("k{i}.sha256")])
            .chain(["k13.tmp456".to_owned()])
            .collect();
        want.sort();
        assert_eq!(left, want);
    }

    #[test]
    fn a_subdirectory_someone_else_made_writable_or_a_symlink_is_refused() {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("shared");
        std::fs::create_dir(&dir).unwrap();
        mode(&dir, 0o777);
        let own = dir.join(format!("rendergate-{me}"));
        std::fs::create_dir(&own).unwrap();
        mode(&own, 0o777);
        let refused = ComponentCache::open(&dir).unwrap_err();
        assert!(refused.contains("not private"), "{refused}");
        std::fs::remove_dir(&own).unwrap();
        std::os::unix::fs::symlink(base.path(), &own).unwrap();
        let refused = ComponentCache::open(&dir).unwrap_err();
        assert!(refused.contains("not private"), "{refused}");
    }
}

//! The precompiled-component cache: a restart with the same policy skips
//! compilation. Entries are keyed by the component's content hash and the
//! engine's compatibility hash, and carry the hash of the compiled bytes;
//! an entry that does not verify is ignored and rebuilt, never trusted.

use rendergate_core::hex::hex;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

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
                    Ok(component) => return Ok((component, CacheUse::Hit)),
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

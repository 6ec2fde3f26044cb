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
    /// user owns, or others may write, is refused: its entries could not be
    /// trusted to be ours.
    pub fn open(dir: &Path) -> Result<Self, String> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create the policy cache {}: {e}", dir.display()))?;
        let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me || meta.permissions().mode() & 0o022 != 0 {
            return Err(format!(
                "the policy cache {} is not private to this user; not using it",
                dir.display()
            ));
        }
        Ok(ComponentCache { dir: dir.to_path_buf() })
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

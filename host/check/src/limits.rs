//! How big a render may be (docs/behaviour.md, "Render limits"): how many
//! files, how many bytes, how long a path and how deep. A render past a
//! limit could not run, with a reason naming the limit and the render's
//! value; nothing of it is written.
//!
//! The count and the bytes are flags (`--max-render-files`,
//! `--max-render-size`, on `serve` and `check`), with defaults several times
//! the largest real renders. The path's length and depth are fixed: no real
//! render comes near them, and they keep the work per path constant.

use rendergate_core::render::Render;

/// Longest render path, in bytes as sent. Linux resolves at most 4096 bytes
/// (`PATH_MAX`) for HAProxy, and the check directory's own path comes first;
/// a controller's paths (`/etc/haproxy/ssl/<namespace>_<secret>.pem`) stay
/// under 400 bytes.
pub const MAX_PATH_BYTES: usize = 1024;

/// Most components a render path may have where it lands (its directories
/// and its name). Absolute and bare paths land two deep (`maps/a.map`); a
/// relative path keeps its own directories.
pub const MAX_PATH_DEPTH: usize = 32;

/// The limits a render must fit for its check to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenderLimits {
    /// Most auxiliary files (the config is not counted): `--max-render-files`.
    pub files: usize,
    /// Most bytes of the config and every file's content together: `--max-render-size`.
    pub bytes: u64,
}

impl Default for RenderLimits {
    /// 20,000 files: twice a render with a certificate for each of 10,000
    /// backends (the largest HAPTIC renders), maps and error files included.
    /// 128 MiB: several times such a render (a few MB of config, maps of
    /// several MB, thousands of certificates of a few KiB), and twice the
    /// longest input line `serve` reads by default, so there the line limit
    /// speaks first.
    fn default() -> Self {
        RenderLimits { files: 20_000, bytes: 128 << 20 }
    }
}

impl RenderLimits {
    /// Whether `render` fits, and if not, why (the first limit it passes).
    pub fn admit(&self, render: &Render) -> Result<(), String> {
        let files = render.files().len();
        if files > self.files {
            return Err(self.too_many_files(&files.to_string()));
        }
        let bytes = render.config().len() as u64
            + render.files().iter().map(|f| f.content.len() as u64).sum::<u64>();
        if bytes > self.bytes {
            return Err(self.too_many_bytes(&bytes.to_string()));
        }
        Ok(())
    }

    /// The reason for a render with `files` files (`at least N` when counting stopped early).
    pub fn too_many_files(&self, files: &str) -> String {
        format!("the render has {files} files, more than --max-render-files {}", self.files)
    }

    /// The reason for a render of `bytes` bytes (`at least N` when reading stopped early).
    pub fn too_many_bytes(&self, bytes: &str) -> String {
        format!(
            "the render has {bytes} bytes, more than --max-render-size {}",
            crate::size::format(self.bytes as usize)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rendergate_core::render::{FileKind, RenderFile};

    fn render(config: &str, files: usize, each: usize) -> Render {
        let files = (0..files)
            .map(|n| RenderFile {
                kind: FileKind::Map,
                path: format!("m{n}.map"),
                content: "x".repeat(each).into(),
            })
            .collect();
        Render::new("p", "r", config, files)
    }

    #[test]
    fn a_render_at_the_limits_fits_and_one_past_them_is_refused_by_name() {
        let limits = RenderLimits { files: 3, bytes: 100 };
        assert_eq!(limits.admit(&render("0123456789", 3, 30)), Ok(()));
        assert_eq!(
            limits.admit(&render("", 4, 1)),
            Err("the render has 4 files, more than --max-render-files 3".into())
        );
        assert_eq!(
            limits.admit(&render("0123456789", 3, 31)),
            Err("the render has 103 bytes, more than --max-render-size 100".into())
        );
        let limits = RenderLimits::default();
        assert_eq!(
            limits.too_many_bytes("at least 134217729"),
            "the render has at least 134217729 bytes, more than --max-render-size 128MiB"
        );
        assert_eq!(limits.admit(&render("global\n", 20_000, 0)), Ok(()));
    }
}

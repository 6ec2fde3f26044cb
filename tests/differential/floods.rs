//! Warning floods sized around each buffer HAProxy's output may meet: just
//! below, at and just above 4 KiB, 64 KiB and 1 MiB, with no error, or one
//! real error at the start, in the middle or at the very end of the output,
//! or with no listener at all.
//!
//! Every backend without timeouts earns one multi-line `[WARNING]`. Its size
//! differs between HAProxy versions, so the number of backends that crosses
//! each size is measured on the haproxy under test, with bare runs of the
//! error-free flood. HAProxy prints its own pid on every line, so "at" is
//! within a few bytes of the size, not to the byte.

use crate::case::Case;
use crate::sides;

pub const SIZES: [(&str, usize); 3] = [("4KiB", 4 << 10), ("64KiB", 64 << 10), ("1MiB", 1 << 20)];

#[derive(Clone, Copy, Debug)]
enum Error {
    None,
    /// `use_backend` naming a missing backend in the first proxy: the alert
    /// comes before every warning.
    Start,
    /// The same in a `listen` section halfway through the backends.
    Middle,
    /// The same in the last proxy, which has its timeout: the alert is the
    /// last line before HAProxy's closing "Fatal errors".
    End,
    /// No frontend: valid, but "will not start" (exit 2) after the flood.
    NoListener,
}

const ERRORS: [(&str, Error); 5] = [
    ("none", Error::None),
    ("start", Error::Start),
    ("middle", Error::Middle),
    ("end", Error::End),
    ("no-listener", Error::NoListener),
];

/// A flood of `backends` warning backends.
fn config(backends: usize, error: Error) -> String {
    let mut out = String::from("global\ndefaults\n    mode http\n");
    if !matches!(error, Error::NoListener) {
        out.push_str(
            "frontend f\n    bind 127.0.0.1:18080\n    timeout client 5s\n    default_backend b0\n",
        );
    }
    if matches!(error, Error::Start) {
        out.push_str("    use_backend missing if { path /x }\n");
    }
    for i in 0..backends {
        out.push_str(&format!("backend b{i}\n    server s 127.0.0.1:8080\n"));
        if matches!(error, Error::Middle) && i == backends / 2 {
            out.push_str("listen middle\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\n");
            out.push_str("    use_backend missing\n");
        }
    }
    if matches!(error, Error::End) {
        out.push_str("frontend last\n    bind 127.0.0.1:18081\n    timeout client 5s\n    use_backend missing\n");
    }
    out
}

/// Bytes bare HAProxy prints for the error-free flood of `backends`.
fn output_size(backends: usize) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(dir.path()).unwrap();
    Case::new("measure", config(backends, Error::None)).write_for_bare(&dir);
    let (kind, run) = sides::bare(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(kind, sides::Kind::Pass, "an error-free flood must pass: {}", run.stderr);
    run.stdout.len() + run.stderr.len()
}

/// The fewest backends whose flood's output reaches `target` bytes.
fn crossing(target: usize) -> usize {
    let (a, b) = (output_size(10), output_size(20));
    let per_backend = ((b - a) / 10).max(1);
    let fixed = a.saturating_sub(10 * per_backend);
    let mut n = target.saturating_sub(fixed).div_ceil(per_backend).max(2);
    while output_size(n) < target {
        n += 1;
    }
    while n > 2 && output_size(n - 1) >= target {
        n -= 1;
    }
    n
}

/// Every flood case, sized for the haproxy under test.
pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (size_name, size) in SIZES {
        let at = crossing(size);
        for (where_name, backends) in [("below", at - 1), ("at", at), ("above", at + 1)] {
            for (error_name, error) in ERRORS {
                let name =
                    format!("flood-{size_name}-{where_name}-{error_name} ({backends} backends)");
                cases.push(Case::new(name, config(backends, error)));
            }
        }
    }
    cases
}

//! The loader model against the loader itself: `ldd` (glibc's `ld.so
//! --list`) is the oracle for real binaries and for small ones built here
//! with `cc` (which links every Rust test, so it is present).

use super::*;
use std::process::Command;

/// What glibc's loader loads for `binary`, canonical paths, loader excluded.
fn ldd(binary: &Path) -> HashSet<PathBuf> {
    let out = Command::new("ldd").arg(binary).env_clear().output().expect("ldd runs");
    assert!(
        out.status.success(),
        "ldd {}: {}",
        binary.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(" => ").map(|(_, right)| right.trim()))
        .map(|right| {
            let path = right.rsplit_once(" (").map_or(right, |(p, _)| p);
            assert_ne!(path, "not found", "{}", binary.display());
            real(path)
        })
        .collect()
}

fn ours(binary: &Path) -> HashSet<PathBuf> {
    let c = closure(binary).unwrap();
    assert!(c.unresolved.is_empty(), "{:?}", c.unresolved);
    c.libraries.iter().map(real).collect()
}

/// `path` with its symlinks followed.
fn real(path: impl AsRef<Path>) -> PathBuf {
    std::fs::canonicalize(path).unwrap()
}

#[test]
fn reads_the_headers_of_a_dynamic_binary() {
    let elf = Elf::read(Path::new("/bin/sh")).unwrap();
    let interp = elf.interpreter.clone().expect("/bin/sh is dynamically linked here");
    assert!(interp.exists() && interp.to_string_lossy().contains("ld-"), "{}", interp.display());
    assert!(elf.needed.iter().any(|n| n.starts_with("libc.")), "{:?}", elf.needed);
    assert!(Elf::read(Path::new("/etc/hostname")).is_err());
    let c = closure(Path::new("/bin/sh")).unwrap();
    assert_eq!(c.interpreter, Some(interp));
    assert!(c.data.contains(&PathBuf::from(LD_SO_CACHE)), "{:?}", c.data);
}

#[test]
fn the_closure_of_the_test_haproxy_and_of_sh_is_what_ldd_loads() {
    let mut binaries = vec![PathBuf::from("/bin/sh")];
    binaries.extend(["/usr/sbin/haproxy"].map(PathBuf::from).into_iter().filter(|p| p.exists()));
    // a path; a bare name is the PATH's haproxy, /usr/sbin/haproxy here
    if let Ok(h) = std::env::var("RENDERGATE_TEST_HAPROXY")
        && h.contains('/')
    {
        binaries.push(h.into());
    }
    for b in binaries {
        assert_eq!(ours(&b), ldd(&b), "{}", b.display());
    }
}

/// A minimal ELF64 little-endian file: its program headers and `PT_INTERP`
/// string placed at `far` (beyond the first MiB), a `PT_DYNAMIC` naming one
/// library and a run path, its strings reached through a `PT_LOAD`.
fn synthetic(far: u64) -> Vec<u8> {
    let strings = b"\0libexample.so.1\0/opt/example/lib\0";
    let interp = b"/opt/example/ld.so\0";
    let phoff = far;
    let phnum = 4u64;
    let interp_at = phoff + phnum * 56;
    let strtab_at = interp_at + interp.len() as u64;
    let dynamic_at = strtab_at + strings.len() as u64;
    let vaddr_base = 0x40_0000u64;
    let mut f = vec![0u8; dynamic_at as usize + 5 * 16];
    // ELFCLASS64, little-endian, version 1
    f[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
    f[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
    f[18..20].copy_from_slice(&62u16.to_le_bytes()); // x86_64
    f[0x20..0x28].copy_from_slice(&phoff.to_le_bytes());
    f[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
    f[0x38..0x3a].copy_from_slice(&(phnum as u16).to_le_bytes());
    let mut ph = |i: u64, kind: u32, offset: u64, vaddr: u64, size: u64| {
        let at = (phoff + i * 56) as usize;
        f[at..at + 4].copy_from_slice(&kind.to_le_bytes());
        f[at + 8..at + 16].copy_from_slice(&offset.to_le_bytes());
        f[at + 16..at + 24].copy_from_slice(&vaddr.to_le_bytes());
        f[at + 32..at + 40].copy_from_slice(&size.to_le_bytes());
    };
    let total = dynamic_at + 5 * 16;
    ph(0, PT_LOAD, 0, vaddr_base, total);
    ph(1, PT_INTERP, interp_at, vaddr_base + interp_at, interp.len() as u64);
    ph(2, PT_DYNAMIC, dynamic_at, vaddr_base + dynamic_at, 5 * 16);
    ph(3, 0x6474_e551, 0, 0, 0); // PT_GNU_STACK, ignored
    f[interp_at as usize..strtab_at as usize].copy_from_slice(interp);
    f[strtab_at as usize..dynamic_at as usize].copy_from_slice(strings);
    let dynamic = [
        (DT_NEEDED, 1u64),
        (DT_RUNPATH, 17),
        (DT_STRTAB, vaddr_base + strtab_at),
        (DT_STRSZ, strings.len() as u64),
        (DT_NULL, 0),
    ];
    for (i, (tag, val)) in dynamic.iter().enumerate() {
        let at = dynamic_at as usize + i * 16;
        f[at..at + 8].copy_from_slice(&tag.to_le_bytes());
        f[at + 8..at + 16].copy_from_slice(&val.to_le_bytes());
    }
    f
}

#[test]
fn headers_are_read_wherever_they_are_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for far in [64u64, 3 << 20] {
        let path = dir.path().join(format!("elf-{far}"));
        std::fs::write(&path, synthetic(far)).unwrap();
        let elf = Elf::read(&path).unwrap();
        assert_eq!(elf.interpreter, Some(PathBuf::from("/opt/example/ld.so")), "at {far}");
        assert_eq!(elf.needed, ["libexample.so.1"]);
        assert_eq!(elf.runpath.as_deref(), Some("/opt/example/lib"));
        assert_eq!(elf.rpath, None);
        assert!(elf.class64 && !elf.big_endian && elf.machine == 62);
    }
    // cut short: an error, never a panic
    let whole = synthetic(3 << 20);
    for len in [0, 10, 63, 64, (3 << 20) + 100, whole.len() - 1] {
        let path = dir.path().join("short");
        std::fs::write(&path, &whole[..len]).unwrap();
        assert!(Elf::read(&path).is_err(), "{len}");
    }
}

/// Builds `src` into `out` with `cc`, with extra arguments.
fn cc(src: &str, out: &Path, args: &[&str]) {
    let dir = out.parent().unwrap();
    let c = dir.join(format!("{}.c", out.file_name().unwrap().to_string_lossy()));
    std::fs::write(&c, src).unwrap();
    let status = Command::new("cc")
        .arg(&c)
        .arg("-o")
        .arg(out)
        .args(args)
        .status()
        .expect("cc links the tests, so it is here");
    assert!(status.success(), "cc {args:?}");
}

/// `bin/app` needs `librgtop.so.1`, which needs `librgdeep.so.1`; both live
/// in `lib/` only, and `deep/` holds a second copy of `librgdeep`.
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        for d in ["bin", "lib", "deep"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        let lib = dir.path().join("lib");
        for at in [lib.join("librgdeep.so.1"), dir.path().join("deep/librgdeep.so.1")] {
            let args = ["-shared", "-fPIC", "-Wl,-soname,librgdeep.so.1"];
            cc("int rg_deep(void) { return 7; }\n", &at, &args);
        }
        cc(
            "int rg_deep(void);\nint rg_top(void) { return rg_deep() + 1; }\n",
            &lib.join("librgtop.so.1"),
            &[
                "-shared",
                "-fPIC",
                "-Wl,-soname,librgtop.so.1",
                "-L",
                lib.to_str().unwrap(),
                "-l:librgdeep.so.1",
            ],
        );
        Tree { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `bin/<name>`, linked against librgtop with `link` arguments.
    fn app(&self, name: &str, link: &[&str]) -> PathBuf {
        let out = self.path(&format!("bin/{name}"));
        let lib = self.path("lib");
        let mut args = vec!["-L", lib.to_str().unwrap(), "-l:librgtop.so.1"];
        args.extend_from_slice(link);
        cc("int rg_top(void);\nint main(void) { return rg_top() == 8 ? 0 : 1; }\n", &out, &args);
        out
    }
}

#[test]
fn runpath_and_rpath_are_searched_as_the_loader_searches_them() {
    let t = Tree::new();
    // RUNPATH ($ORIGIN): covers the app's own needs only, so librgdeep
    // (needed by librgtop, which has no run path) is not found
    let runpath = t.app("runpath", &["-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib"]);
    let elf = Elf::read(&runpath).unwrap();
    assert_eq!(elf.runpath.as_deref(), Some("$ORIGIN/../lib"));
    let c = closure(&runpath).unwrap();
    assert_eq!(c.unresolved, ["librgdeep.so.1"]);
    let top = real(t.path("lib/librgtop.so.1"));
    assert!(c.libraries.iter().any(|l| real(l) == top), "{:?}", c.libraries);
    // and the loader fails on it the same way
    assert!(!Command::new(&runpath).env_clear().output().unwrap().status.success());

    // RPATH: inherited down the chain, so librgdeep comes from lib/ too
    let rpath = t.app("rpath", &["-Wl,--disable-new-dtags,-rpath,$ORIGIN/../lib"]);
    assert_eq!(Elf::read(&rpath).unwrap().rpath.as_deref(), Some("$ORIGIN/../lib"));
    let got = ours(&rpath);
    assert!(got.contains(&real(t.path("lib/librgdeep.so.1"))), "{got:?}");
    assert_eq!(got, ldd(&rpath));

    // RPATH before RUNPATH-less lookups: deep/ first in the path wins
    let both = t.app(
        "both",
        &[&format!("-Wl,--disable-new-dtags,-rpath,{}:$ORIGIN/../lib", t.path("deep").display())],
    );
    let got = ours(&both);
    assert!(got.contains(&real(t.path("deep/librgdeep.so.1"))), "{got:?}");
    assert_eq!(got, ldd(&both));

    // run from a symlink elsewhere: $ORIGIN is where the file really is
    std::fs::create_dir(t.path("elsewhere")).unwrap();
    let link = t.path("elsewhere/rpath");
    std::os::unix::fs::symlink(&rpath, &link).unwrap();
    assert_eq!(ours(&link), ldd(&link));
    assert!(Command::new(&link).env_clear().status().unwrap().success());
}

#[test]
fn a_run_path_longer_than_the_span_read_at_once_is_read_whole() {
    // the string table is read around its names (NAME_SPAN past the last
    // one's start); a longer name reads on to the table's end
    let t = Tree::new();
    let long = format!("{}/missing{}:$ORIGIN/../lib", t.path("deep").display(), "x".repeat(5000));
    let app = t.app("long", &[&format!("-Wl,--disable-new-dtags,-rpath,{long}")]);
    assert_eq!(Elf::read(&app).unwrap().rpath.as_deref(), Some(long.as_str()));
    assert_eq!(ours(&app), ldd(&app));
}

#[test]
fn an_object_that_names_nothing_is_read_whole() {
    // no DT_NEEDED, no soname, no run path, and a string table past the span
    let dir = tempfile::tempdir().unwrap();
    let functions: String =
        (0..400).map(|i| format!("int rg_function_{i}(void) {{ return {i}; }}\n")).collect();
    let out = dir.path().join("lonely.so");
    cc(&functions, &out, &["-shared", "-fPIC", "-nostdlib"]);
    let elf = Elf::read(&out).unwrap();
    assert!(elf.needed.is_empty() && elf.soname.is_none() && elf.rpath.is_none(), "{elf:?}");
}

#[test]
fn a_needed_name_already_loaded_is_not_searched_again() {
    // libc needs the loader by its soname: it is the interpreter, not a library
    let c = closure(Path::new("/bin/sh")).unwrap();
    let interp = real(c.interpreter.unwrap());
    assert!(c.libraries.iter().all(|l| real(l) != interp), "{:?}", c.libraries);
}

#[test]
fn the_real_loader_cache_names_libc() {
    let cache = LdCache::new(std::fs::read(LD_SO_CACHE).unwrap());
    let libc = cache.lookup("libc.so.6");
    assert!(libc.iter().any(|(p, variant)| !variant && p.exists()), "{libc:?}");
    // a name is matched whole, not as the start of a longer one
    assert!(cache.lookup("libc.so").is_empty());
}

#[test]
fn the_cache_format_is_read_with_and_without_the_old_table() {
    // glibc-ld.so.cache1.1: 48-byte header, 24-byte entries, then strings;
    // string offsets count from the start of the new header
    fn new_table(entries: &[(u32, &str, &str, u64)]) -> Vec<u8> {
        let mut strings = Vec::new();
        let base = 48 + entries.len() * 24;
        let mut offsets = Vec::new();
        for (_, k, v, _) in entries {
            let ko = base + strings.len();
            strings.extend_from_slice(k.as_bytes());
            strings.push(0);
            let vo = base + strings.len();
            strings.extend_from_slice(v.as_bytes());
            strings.push(0);
            offsets.push((ko as u32, vo as u32));
        }
        let mut b = b"glibc-ld.so.cache1.1".to_vec();
        b.extend_from_slice(&(entries.len() as u32).to_ne_bytes());
        b.extend_from_slice(&(strings.len() as u32).to_ne_bytes());
        b.extend_from_slice(&[2, 0, 0, 0]); // little-endian flag, padding
        b.extend_from_slice(&[0; 16]); // extension offset, unused
        for ((flags, _, _, hwcap), (k, v)) in entries.iter().zip(offsets) {
            b.extend_from_slice(&flags.to_ne_bytes());
            b.extend_from_slice(&k.to_ne_bytes());
            b.extend_from_slice(&v.to_ne_bytes());
            b.extend_from_slice(&0u32.to_ne_bytes());
            b.extend_from_slice(&hwcap.to_ne_bytes());
        }
        b.extend_from_slice(&strings);
        b
    }
    let entries = [
        (0x0303, "libx.so.1", "/l/glibc-hwcaps/x86-64-v3/libx.so.1", 1u64 << 62),
        (0x0303, "libx.so.1", "/l/libx.so.1", 0),
        (0x0003, "liby.so.2", "/l32/liby.so.2", 0),
        (0x0000, "libold.so", "/l/libold.so", 0), // libc4: not for this loader
    ];
    let table = new_table(&entries);
    let names = ["libx.so.1", "liby.so.2", "libold.so"];
    let lookups = |cache: LdCache| names.map(|name| cache.lookup(name));
    let found = lookups(LdCache::new(table.clone()));
    assert_eq!(
        found[0],
        [("/l/glibc-hwcaps/x86-64-v3/libx.so.1".into(), true), ("/l/libx.so.1".into(), false)]
    );
    assert_eq!(found[1], [("/l32/liby.so.2".into(), false)]);
    assert!(found[2].is_empty());
    // the old format first: 11-byte magic padded to 12, count, 12-byte entries
    let mut old = b"ld.so-1.7.0\0".to_vec();
    old.extend_from_slice(&1u32.to_ne_bytes());
    old.extend_from_slice(&[0; 12]);
    old.resize(old.len().next_multiple_of(8), 0);
    old.extend_from_slice(&table);
    assert_eq!(lookups(LdCache::new(old)), found);
    // garbage and truncation: nothing, never a panic
    assert!(lookups(LdCache::new(b"nonsense".to_vec())).iter().all(Vec::is_empty));
    for len in [0, 20, 47, 60, table.len() - 3] {
        let _ = lookups(LdCache::new(table[..len].to_vec()));
    }
}

#[test]
fn tokens_expand_as_glibc_expands_them() {
    let main = Elf::read(Path::new("/bin/sh")).unwrap();
    let interp = Path::new("/lib64/ld-linux-x86-64.so.2");
    let s = Search::new(Flavour::Glibc, main, "/opt/app/bin".into(), interp);
    assert_eq!(s.expand("$ORIGIN/../lib", 0).unwrap(), "/opt/app/bin/../lib");
    assert_eq!(s.expand("${ORIGIN}/x:$ORIGINAL", 0).unwrap(), "/opt/app/bin/x:$ORIGINAL");
    assert_eq!(s.expand("/a/$LIB/b", 0).unwrap(), format!("/a/{}/b", s.lib));
    assert!(!s.lib.is_empty() && !s.lib.starts_with('/'), "{}", s.lib);
    if let Some(p) = platform() {
        assert_eq!(s.expand("/x/${PLATFORM}", 0).unwrap(), format!("/x/{p}"));
    }
    assert!(is_musl_builtin("libc.musl-x86_64.so.1") && is_musl_builtin("libpthread.so.0"));
    assert!(!is_musl_builtin("libcrypto.so.3") && !is_musl_builtin("libssl.so.3"));
}

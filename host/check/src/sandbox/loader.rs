//! What the dynamic loader opens to start a binary: its interpreter
//! (`PT_INTERP`) and the `DT_NEEDED` closure, found the way glibc's
//! `ld.so` (or musl's) finds it, so Landlock can grant exactly those files.
//!
//! Granting directories instead breaks binaries whose libraries live
//! elsewhere (a self-built haproxy with a `RUNPATH`, `/opt`, `/usr/local`)
//! and, worse, can make the loader silently take the system copy of a
//! library the binary has its own copy of: glibc skips a file it may not
//! open (`EACCES`) and goes on searching. So the search here follows
//! glibc's `_dl_map_object`, breadth first like `_dl_map_object_deps`:
//! for a name without `/`, the `DT_RPATH`s of the requesting object and of
//! the objects that loaded it, up to the executable (only when the
//! requester has no `DT_RUNPATH`); no `LD_LIBRARY_PATH` (checks run with an
//! empty environment); the requester's `DT_RUNPATH`; `/etc/ld.so.cache`;
//! the default directories (both skipped under `DF_1_NODEFLIB`). `$ORIGIN`,
//! `$LIB` and `$PLATFORM` are expanded. `/etc/ld.so.preload` is honoured.
//!
//! What is not modelled exactly: which `glibc-hwcaps` (or legacy hwcap)
//! subdirectory the CPU selects. Every variant of a library found next to
//! the plain one is granted, so the loader picks what it would pick
//! anyway. Relative search directories (relative to the check directory at
//! run time) are skipped.

use std::collections::HashSet;
use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// glibc's loader cache.
pub const LD_SO_CACHE: &str = "/etc/ld.so.cache";
/// Libraries glibc's loader loads into every program.
pub const LD_SO_PRELOAD: &str = "/etc/ld.so.preload";

/// Bounds against a malformed or hostile file: nothing real comes close.
const MAX_PHNUM: usize = 4096;
const MAX_DYNAMIC: u64 = 1 << 20;
const MAX_STRTAB: u64 = 16 << 20;
/// Read past the last name's start: a name is rarely longer.
const NAME_SPAN: u64 = 4096;
const MAX_OBJECTS: usize = 1024;
const MAX_CACHE: u64 = 64 << 20;

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_STRSZ: u64 = 10;
const DT_SONAME: u64 = 14;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;
const DT_FLAGS_1: u64 = 0x6fff_fffb;
const DF_1_NODEFLIB: u64 = 0x800;

/// What one ELF file tells the loader.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Elf {
    pub class64: bool,
    pub big_endian: bool,
    pub machine: u16,
    pub interpreter: Option<PathBuf>,
    pub needed: Vec<String>,
    pub soname: Option<String>,
    pub rpath: Option<String>,
    pub runpath: Option<String>,
    pub nodeflib: bool,
}

/// Fixed-width reads at any offset of the file, in the file's byte order.
struct Reader<'a> {
    file: &'a File,
    len: u64,
    big: bool,
    class64: bool,
}

impl Reader<'_> {
    fn bytes(&self, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(bad("a read past the end of the file"));
        }
        let mut buf = vec![0u8; len as usize];
        self.file.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }

    /// A field of `n` bytes at `at` in `b`.
    fn field(&self, b: &[u8], at: usize, n: usize) -> u64 {
        let bytes = b[at..at + n].iter();
        let push = |v: u64, x: &u8| v << 8 | u64::from(*x);
        if self.big { bytes.fold(0, push) } else { bytes.rev().fold(0, push) }
    }

    /// An address-sized field (4 or 8 bytes) at the ELF64 or ELF32 offset.
    fn word(&self, b: &[u8], at64: usize, at32: usize) -> u64 {
        if self.class64 { self.field(b, at64, 8) } else { self.field(b, at32, 4) }
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("not a usable ELF file: {what}"))
}

/// One program header, the fields the loader reads.
#[derive(Clone, Copy, Debug)]
struct Segment {
    kind: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

impl Elf {
    /// Reads the headers of `path`: program headers wherever they are in
    /// the file, `PT_INTERP`, and `PT_DYNAMIC` with its strings found
    /// through the load segments.
    pub fn read(path: &Path) -> io::Result<Elf> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        let mut ident = [0u8; 64];
        let head = len.min(64) as usize;
        file.read_exact_at(&mut ident[..head], 0)?;
        if head < 52 || &ident[..4] != b"\x7fELF" {
            return Err(bad("no ELF header"));
        }
        let class64 = match ident[4] {
            1 => false,
            2 => true,
            _ => return Err(bad("unknown class")),
        };
        let big = match ident[5] {
            1 => false,
            2 => true,
            _ => return Err(bad("unknown byte order")),
        };
        if class64 && head < 64 {
            return Err(bad("short header"));
        }
        let r = Reader { file: &file, len, big, class64 };
        let machine = r.field(&ident, 18, 2) as u16;
        let phoff = r.word(&ident, 0x20, 0x1c);
        let ph = if class64 { 0x36 } else { 0x2a }; // e_phentsize, then e_phnum
        let (phentsize, phnum) = (r.field(&ident, ph, 2), r.field(&ident, ph + 2, 2));
        let min_entry = if class64 { 56 } else { 32 };
        if phnum as usize > MAX_PHNUM || (phnum > 0 && phentsize < min_entry) {
            return Err(bad("program headers"));
        }
        let table = r.bytes(phoff, phentsize * phnum)?;
        let segments: Vec<Segment> = table
            .chunks_exact(phentsize as usize)
            .map(|p| Segment {
                kind: r.field(p, 0, 4) as u32,
                offset: r.word(p, 8, 4),
                vaddr: r.word(p, 16, 8),
                filesz: r.word(p, 32, 16),
            })
            .collect();
        let mut elf = Elf { class64, big_endian: big, machine, ..Elf::default() };
        if let Some(interp) = segments.iter().find(|s| s.kind == PT_INTERP) {
            let raw = r.bytes(interp.offset, interp.filesz.min(4096))?;
            let name = raw.split(|&b| b == 0).next().unwrap_or_default();
            elf.interpreter = Some(PathBuf::from(OsStr::from_bytes(name)));
        }
        let Some(dynamic) = segments.iter().find(|s| s.kind == PT_DYNAMIC) else {
            return Ok(elf); // static: nothing to load
        };
        let entries = r.bytes(dynamic.offset, dynamic.filesz.min(MAX_DYNAMIC))?;
        let tags: Vec<(u64, u64)> = entries
            .chunks_exact(if class64 { 16 } else { 8 })
            .map(|e| (r.word(e, 0, 0), r.word(e, 8, 4)))
            .take_while(|(tag, _)| *tag != DT_NULL)
            .collect();
        let find = |t: u64| tags.iter().find(|(tag, _)| *tag == t).map(|(_, v)| *v);
        elf.nodeflib = find(DT_FLAGS_1).is_some_and(|f| f & DF_1_NODEFLIB != 0);
        let Some(strtab) = find(DT_STRTAB) else {
            return Ok(elf);
        };
        // DT_STRTAB is an address: the load segment holding it gives the offset
        let at = segments
            .iter()
            .filter(|s| s.kind == PT_LOAD)
            .find(|s| strtab >= s.vaddr && strtab - s.vaddr < s.filesz)
            .map(|s| s.offset + (strtab - s.vaddr))
            .ok_or_else(|| bad("DT_STRTAB outside every load segment"))?;
        let strsz = find(DT_STRSZ).unwrap_or(0).min(MAX_STRTAB).min(len.saturating_sub(at));
        // Only the span holding the names asked for is read: a string table
        // is mostly symbol names (libstdc++'s is 300 KB), the names few and
        // near each other. A name running past the span reads the rest.
        let named = |t: &u64| matches!(*t, DT_NEEDED | DT_SONAME | DT_RPATH | DT_RUNPATH);
        let offsets = tags.iter().filter(|(t, _)| named(t)).map(|(_, v)| *v);
        let (low, high) = offsets.fold((strsz, 0), |(l, h), v| (l.min(v), h.max(v)));
        // no name asked for: an empty span
        let end = high.saturating_add(NAME_SPAN).min(strsz).max(low);
        let mut span = r.bytes(at + low, end - low)?;
        let string = |off: u64, span: &mut Vec<u8>| -> Option<String> {
            let from = off.checked_sub(low)? as usize;
            if !span.get(from..)?.contains(&0) && (low + span.len() as u64) < strsz {
                *span = r.bytes(at + low, strsz - low).ok()?;
            }
            let tail = span.get(from..)?;
            let end = memchr::memchr(0, tail)?;
            Some(String::from_utf8_lossy(&tail[..end]).into_owned())
        };
        for (tag, val) in &tags {
            match *tag {
                DT_NEEDED => elf.needed.extend(string(*val, &mut span)),
                DT_SONAME => elf.soname = string(*val, &mut span),
                DT_RPATH => elf.rpath = string(*val, &mut span),
                DT_RUNPATH => elf.runpath = string(*val, &mut span),
                _ => {}
            }
        }
        Ok(elf)
    }
}

/// The files the loader opens to start a binary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Closure {
    /// `PT_INTERP`; `None` for a static binary.
    pub interpreter: Option<PathBuf>,
    /// Every shared object of the `DT_NEEDED` closure (and of
    /// `/etc/ld.so.preload`), with the hwcap variants found beside them.
    pub libraries: Vec<PathBuf>,
    /// Files the loader reads that are not code (its cache, its preload
    /// list, musl's path file), when they exist.
    pub data: Vec<PathBuf>,
    /// Needed names found nowhere: the binary will not start, sandboxed or not.
    pub unresolved: Vec<String>,
    /// Some object's run path names `$ORIGIN`: the loader reads
    /// `/proc/self/exe` to expand it, so the check's world must show it.
    pub uses_origin: bool,
}

/// Resolves what starting `binary` loads. Errors when `binary` is not an
/// ELF file this module can read.
pub fn closure(binary: &Path) -> io::Result<Closure> {
    let main = Elf::read(binary)?;
    let Some(interp) = main.interpreter.clone() else {
        return Ok(Closure::default());
    };
    let musl = interp.file_name().is_some_and(|n| n.as_bytes().starts_with(b"ld-musl-"));
    let flavour = if musl { Flavour::Musl } else { Flavour::Glibc };
    // $ORIGIN of the executable: the kernel's (resolved) path, as /proc/self/exe gives it
    let origin = std::fs::canonicalize(binary)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| binary.parent().unwrap_or(Path::new("/")).to_path_buf());
    let mut search = Search::new(flavour, main, origin, &interp);
    // the loader itself is loaded already: its names are taken
    if let Ok(elf) = Elf::read(&interp) {
        search.names.insert(interp.to_string_lossy().into_owned());
        search.names.extend(elf.soname);
    }
    if flavour == Flavour::Glibc {
        // the names /etc/ld.so.preload lists (separated by blanks or `:`)
        let preload = std::fs::read_to_string(LD_SO_PRELOAD).unwrap_or_default();
        for name in preload.split([' ', '\t', '\n', ':']).filter(|s| !s.is_empty()) {
            search.load(name, 0);
        }
    }
    // breadth first, as glibc maps dependencies: each object's needed names
    // in order, objects in the order they were found
    let mut next = 0;
    while let Some(object) = search.objects.get(next) {
        for name in object.elf.needed.clone() {
            search.load(&name, next);
        }
        next += 1;
    }
    search.out.uses_origin = search.objects.iter().any(|o| {
        [&o.elf.rpath, &o.elf.runpath]
            .into_iter()
            .flatten()
            .any(|path| path.contains("$ORIGIN") || path.contains("${ORIGIN}"))
    });
    search.out.interpreter = Some(interp);
    Ok(search.out)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavour {
    Glibc,
    Musl,
}

struct Object {
    elf: Elf,
    /// `$ORIGIN`: the directory of the path the object was found at.
    origin: PathBuf,
    /// Index of the object whose `DT_NEEDED` brought this one in; `None`
    /// for the executable, the first object.
    loader: Option<usize>,
}

/// One closure computation.
struct Search {
    flavour: Flavour,
    objects: Vec<Object>,
    /// Every name an object is known by (the name asked for, its soname).
    names: HashSet<String>,
    cache: Option<LdCache>,
    default_dirs: Vec<PathBuf>,
    lib: String,
    platform: Option<String>,
    out: Closure,
}

impl Search {
    /// The search from the executable `main`, found in `origin`.
    fn new(flavour: Flavour, main: Elf, origin: PathBuf, interp: &Path) -> Search {
        let mut out = Closure::default();
        let mut cache = None;
        let default_dirs = match flavour {
            Flavour::Glibc => {
                let mut bytes = Vec::new();
                let file = File::open(LD_SO_CACHE);
                if file.and_then(|f| f.take(MAX_CACHE).read_to_end(&mut bytes)).is_ok() {
                    out.data.push(LD_SO_CACHE.into());
                    cache = Some(LdCache::new(bytes));
                }
                if Path::new(LD_SO_PRELOAD).exists() {
                    out.data.push(LD_SO_PRELOAD.into());
                }
                glibc_default_dirs(&main)
            }
            Flavour::Musl => {
                // /etc/ld-musl-<arch>.path, named after the loader
                let arch = interp
                    .file_name()
                    .and_then(|n| n.to_str()?.strip_prefix("ld-musl-")?.split(".so").next())
                    .unwrap_or_default();
                let file = PathBuf::from(format!("/etc/ld-musl-{arch}.path"));
                match std::fs::read_to_string(&file) {
                    Ok(text) => {
                        out.data.push(file);
                        text.split([':', '\n'])
                            .filter(|d| !d.is_empty())
                            .map(PathBuf::from)
                            .collect()
                    }
                    Err(_) => ["/lib", "/usr/local/lib", "/usr/lib"].map(PathBuf::from).to_vec(),
                }
            }
        };
        Search {
            flavour,
            objects: vec![Object { elf: main, origin, loader: None }],
            names: HashSet::new(),
            cache,
            default_dirs,
            lib: dst_lib(interp),
            platform: platform(),
            out,
        }
    }

    /// Finds `name`, needed by object `requester`, unless an object already has it.
    fn load(&mut self, name: &str, requester: usize) {
        // musl's libc is its loader, under whatever name
        let builtin = self.flavour == Flavour::Musl && is_musl_builtin(name);
        if builtin || self.names.contains(name) || self.objects.len() >= MAX_OBJECTS {
            return;
        }
        let found = if name.contains('/') {
            // a path: used as it is (a relative one would be relative to the
            // check directory at run time, where no library is)
            let path = self.expand(name, requester).map(PathBuf::from).filter(|p| p.is_absolute());
            path.and_then(|p| self.candidate(p)).map(|found| vec![found])
        } else {
            self.search(name, requester)
        };
        self.names.insert(name.to_owned());
        let Some(found) = found else {
            self.out.unresolved.push(name.to_owned());
            return;
        };
        for (path, elf) in found {
            self.names.extend(elf.soname.clone());
            self.names.insert(path.to_string_lossy().into_owned());
            if !self.out.libraries.contains(&path) {
                self.out.libraries.push(path.clone());
            }
            let origin = path.parent().unwrap_or(Path::new("/")).to_path_buf();
            self.objects.push(Object { elf, origin, loader: Some(requester) });
        }
    }

    /// The search for a bare name: every file found in the first place
    /// that has it (the plain file first, then hwcap variants).
    fn search(&self, name: &str, requester: usize) -> Option<Vec<(PathBuf, Elf)>> {
        // the requester, the object that loaded it, … up to the executable
        let mut chain = std::iter::successors(Some(requester), |&i| self.objects[i].loader);
        if self.flavour == Flavour::Musl {
            // musl: the run paths of the requester and its loaders, then the system path
            let found = chain.find_map(|i| {
                let elf = &self.objects[i].elf;
                self.in_dirs(name, elf.runpath.as_ref().or(elf.rpath.as_ref())?, i)
            });
            return found.or_else(|| self.default_dirs.iter().find_map(|d| self.in_dir(name, d)));
        }
        let req = &self.objects[requester].elf;
        let found = match &req.runpath {
            // the requester's RPATH, then its loader's, … up to the
            // executable, whose RPATH is ignored when it has a RUNPATH
            None => chain.find_map(|i| {
                let elf = &self.objects[i].elf;
                let rpath = elf.rpath.as_ref().filter(|_| i != 0 || elf.runpath.is_none());
                self.in_dirs(name, rpath?, i)
            }),
            // no LD_LIBRARY_PATH (checks run with an empty environment): the RUNPATH
            Some(runpath) => self.in_dirs(name, runpath, requester),
        };
        if found.is_some() {
            return found;
        }
        let entries = self.cache.as_ref().map(|c| c.lookup(name)).unwrap_or_default();
        let mut from_cache = Vec::new();
        let mut plain_found = false;
        for (path, variant) in entries {
            // under DF_1_NODEFLIB, no cache entry from a default directory;
            // the first plain entry that loads is the one taken
            let nodeflib = req.nodeflib && self.default_dirs.iter().any(|d| path.starts_with(d));
            if nodeflib || (plain_found && !variant) {
                continue;
            }
            if let Some(found) = self.candidate(path) {
                plain_found |= !variant;
                from_cache.push(found);
            }
        }
        if !from_cache.is_empty() {
            return Some(from_cache);
        }
        if req.nodeflib {
            return None;
        }
        self.default_dirs.iter().find_map(|d| self.in_dir(name, d))
    }

    /// The first directory of a `:`-separated run path holding `name`.
    fn in_dirs(&self, name: &str, list: &str, owner: usize) -> Option<Vec<(PathBuf, Elf)>> {
        list.split(':')
            .filter_map(|d| self.expand(d, owner))
            .find_map(|d| self.in_dir(name, Path::new(&d)))
    }

    /// `name` in `dir` (and its hwcap subdirectories), when any is loadable.
    fn in_dir(&self, name: &str, dir: &Path) -> Option<Vec<(PathBuf, Elf)>> {
        if !dir.is_absolute() {
            return None; // relative to the check directory at run time
        }
        let mut dirs = vec![dir.to_path_buf()];
        if self.flavour == Flavour::Glibc {
            // `glibc-hwcaps/*` and the legacy `tls`, `<platform>` subdirectories
            if let Ok(entries) = std::fs::read_dir(dir.join("glibc-hwcaps")) {
                dirs.extend(entries.flatten().map(|e| e.path()));
            }
            dirs.push(dir.join("tls"));
            if let Some(p) = &self.platform {
                dirs.push(dir.join(p));
                dirs.push(dir.join("tls").join(p));
            }
        }
        let found: Vec<_> = dirs.iter().filter_map(|d| self.candidate(d.join(name))).collect();
        (!found.is_empty()).then_some(found)
    }

    /// A file the loader would take: present, ELF, loadable with the
    /// executable (glibc's `open_verify`: same class, byte order and machine).
    fn candidate(&self, path: PathBuf) -> Option<(PathBuf, Elf)> {
        let elf = Elf::read(&path).ok()?;
        let kind = |e: &Elf| (e.class64, e.big_endian, e.machine);
        (kind(&elf) == kind(&self.objects[0].elf)).then_some((path, elf))
    }

    /// A run-path element with `$ORIGIN`, `$LIB` and `$PLATFORM` expanded
    /// (also in `${…}` form); `None` when a token has no value.
    fn expand(&self, element: &str, owner: usize) -> Option<String> {
        let origin = self.objects[owner].origin.to_string_lossy().into_owned();
        let mut out = String::new();
        let mut rest = element;
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            let tail = &rest[at + 1..];
            let (token, len) = if let Some(braced) = tail.strip_prefix('{') {
                match braced.find('}') {
                    Some(end) => (&braced[..end], end + 2),
                    None => ("", 0),
                }
            } else {
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(tail.len());
                (&tail[..end], end)
            };
            let (value, len) = match token {
                "ORIGIN" => (origin.as_str(), len),
                "LIB" if self.flavour == Flavour::Glibc => (self.lib.as_str(), len),
                "PLATFORM" if self.flavour == Flavour::Glibc => (self.platform.as_deref()?, len),
                // not a token glibc knows: kept as written
                _ => ("$", 0),
            };
            out.push_str(value);
            rest = &tail[len..];
        }
        out.push_str(rest);
        Some(out)
    }
}

/// Names musl answers from its own libc, without a file.
fn is_musl_builtin(name: &str) -> bool {
    let builtin = ["c.", "pthread.", "rt.", "m.", "dl.", "util.", "xnet."];
    name.strip_prefix("lib").is_some_and(|rest| builtin.iter().any(|p| rest.starts_with(p)))
}

/// glibc's built-in search directories for this executable's kind. Debian
/// (multiarch) and the lib64 layout of other distributions; directories a
/// host lacks find nothing.
fn glibc_default_dirs(main: &Elf) -> Vec<PathBuf> {
    const EM_386: u16 = 3;
    const EM_X86_64: u16 = 62;
    const EM_AARCH64: u16 = 183;
    let triplet = match (main.machine, main.class64) {
        (EM_X86_64, true) => Some("x86_64-linux-gnu"),
        (EM_X86_64, false) => Some("x86_64-linux-gnux32"),
        (EM_AARCH64, true) => Some("aarch64-linux-gnu"),
        (EM_386, false) => Some("i386-linux-gnu"),
        _ => None,
    };
    let mut dirs = match triplet.filter(|t| Path::new("/usr/lib").join(t).is_dir()) {
        Some(t) => vec![Path::new("/lib").join(t), Path::new("/usr/lib").join(t)],
        None if main.class64 => vec!["/lib64".into(), "/usr/lib64".into()],
        None => Vec::new(),
    };
    dirs.extend(["/lib", "/usr/lib"].map(PathBuf::from));
    dirs
}

/// glibc's `$LIB`: the loader's own library directory below `/` or `/usr`
/// (`lib/x86_64-linux-gnu` on Debian, `lib64` elsewhere).
fn dst_lib(interp: &Path) -> String {
    let real = std::fs::canonicalize(interp).unwrap_or_else(|_| interp.to_path_buf());
    let dir = real.parent().unwrap_or(Path::new("/lib"));
    let rel = dir.strip_prefix("/usr").or_else(|_| dir.strip_prefix("/")).unwrap_or(dir);
    rel.to_string_lossy().into_owned()
}

/// `$PLATFORM`: the kernel's `AT_PLATFORM` string (the same for the check).
fn platform() -> Option<String> {
    // SAFETY: getauxval has no preconditions.
    let p = unsafe { libc::getauxval(libc::AT_PLATFORM) } as *const libc::c_char;
    if p.is_null() {
        return None;
    }
    // SAFETY: AT_PLATFORM points at a NUL-terminated string the kernel put
    // on this process's stack, alive for the whole process.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// glibc's `ld.so.cache`, read: the new-format part (`glibc-ld.so.cache1.1`,
/// alone or after the old `ld.so-1.7.0` table), its entries looked up by
/// name where they lie, rather than a table made of all of them (some
/// thousand, for a score of names). Entries for other architectures are
/// left for `Search::candidate` to refuse, as the loader's `open_verify`
/// would.
pub struct LdCache {
    bytes: Vec<u8>,
    /// Where the new format's header starts (its string offsets count from there).
    start: usize,
    count: usize,
}

impl LdCache {
    /// The cache in `bytes`; one with no entries where they are not a cache.
    pub fn new(bytes: Vec<u8>) -> LdCache {
        const OLD: &[u8] = b"ld.so-1.7.0";
        const NEW: &[u8] = b"glibc-ld.so.cache1.1";
        let mut start = 0;
        if bytes.starts_with(OLD) {
            // old header: magic (padded to 12) and a count, then 12-byte
            // entries; the new table follows, aligned to 8
            start = u32_at(&bytes, 12)
                .map_or(bytes.len(), |n| (16 + n as usize * 12).next_multiple_of(8));
        }
        let cache = bytes.get(start..).unwrap_or_default();
        let count =
            if cache.starts_with(NEW) { u32_at(cache, 20).unwrap_or(0) as usize } else { 0 };
        LdCache { bytes, start, count }
    }

    /// The paths the cache gives for `name`, in its order, each with whether
    /// it is a hwcap variant.
    pub fn lookup(&self, name: &str) -> Vec<(PathBuf, bool)> {
        let cache = self.bytes.get(self.start..).unwrap_or_default();
        // strings are offsets from the start of the new header
        let string = |off: u32| -> Option<&[u8]> {
            let tail = cache.get(off as usize..)?;
            Some(&tail[..memchr::memchr(0, tail)?])
        };
        let named = |off: u32| {
            let tail = cache.get(off as usize..).unwrap_or_default();
            tail.starts_with(name.as_bytes()) && tail.get(name.len()) == Some(&0)
        };
        let mut paths = Vec::new();
        for i in 0..self.count {
            let e = 48 + i * 24;
            let (Some(flags), Some(key), Some(value), Some(hwcap)) = (
                u32_at(cache, e),
                u32_at(cache, e + 4),
                u32_at(cache, e + 8),
                u64_at(cache, e + 16),
            ) else {
                break;
            };
            // FLAG_ELF_LIBC6 in the type byte: the only kind glibc's loader takes
            if flags & 0xff != 3 || !named(key) {
                continue;
            }
            if let Some(path) = string(value) {
                // a variant: a glibc-hwcaps entry (bit 62) or legacy hwcap bits
                paths.push((PathBuf::from(OsStr::from_bytes(path)), hwcap != 0));
            }
        }
        paths
    }
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    bytes.get(at..at + 4).map(|x| u32::from_ne_bytes(x.try_into().unwrap()))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    bytes.get(at..at + 8).map(|x| u64::from_ne_bytes(x.try_into().unwrap()))
}

#[cfg(test)]
mod tests;

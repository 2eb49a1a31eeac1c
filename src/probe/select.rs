//! Which PTX belongs to a loaded kernel, and which launches its probed function may take.
//!
//! A kernel loaded from a cubin (Triton, which keeps each kernel's PTX beside its cubin in
//! its cache) has no PTX in its image, so its PTX is looked up in a directory
//! (`--probe-ptx-dir`). A name is not enough: Triton's autotuner compiles one kernel name
//! several times (say `num_warps` 4 and 8, i.e. `.reqntid 128` and `.reqntid 256`), and the
//! PTX of the wrong variant fails every launch. So [`choose`] takes the candidate whose
//! sibling `.cubin` is byte for byte the image the program loaded ([`ImageId`]); without
//! one, it falls back to the name among the candidates whose thread limits admit the
//! launch's block, and says so.
//!
//! [`ThreadLimits`] reads a kernel's `.reqntid`/`.maxntid`: the driver refuses a launch whose
//! block breaks them, so a probed function is never launched with such a block (the
//! original runs instead and the launch is listed as not probed).

use std::path::{Path, PathBuf};

use super::ptx::{Function, Module};

/// The identity of a loaded image: its length and a hash of its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageId {
    /// Bytes.
    pub len: usize,
    /// The bytes' XXH64 with seed 0 (what `xxhsum -H1` prints for the file): the same in
    /// every run and build, so probe_kernels.csv's `module` can be compared across runs and
    /// matched to a file.
    pub hash: u64,
}

impl ImageId {
    /// The id of `bytes`.
    pub fn of(bytes: &[u8]) -> ImageId {
        ImageId { len: bytes.len(), hash: twox_hash::XxHash64::oneshot(0, bytes) }
    }
}

/// `31240 B #9f1c2a3b4c5d6e7f`: the length and the hash, as probe_kernels.csv's `module`
/// column shows them after the image's kind.
impl std::fmt::Display for ImageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} B #{:016x}", self.len, self.hash)
    }
}

/// A kernel's launch-shape directives: `.reqntid` (the block must be exactly this) and
/// `.maxntid` (the block may have at most this many threads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadLimits {
    /// `.reqntid x, y, z` (missing dimensions are 1).
    pub reqntid: Option<[u32; 3]>,
    /// `.maxntid x, y, z`.
    pub maxntid: Option<[u32; 3]>,
}

fn dims_after(words: &str, directive: &str) -> Option<[u32; 3]> {
    let at = words.find(directive)?;
    let rest = &words[at + directive.len()..];
    let mut dims = [1u32; 3];
    let mut n = 0;
    for part in rest.split(',') {
        let word = part.split_whitespace().next()?;
        dims[n] = word.parse().ok()?;
        n += 1;
        // The list ends at the first part with more than one word (the next directive).
        if n == 3 || part.split_whitespace().nth(1).is_some() {
            break;
        }
    }
    Some(dims)
}

impl ThreadLimits {
    /// The limits in a function's directives (`.reqntid 128` → `[128, 1, 1]`).
    pub fn parse(directives: &str) -> ThreadLimits {
        ThreadLimits { reqntid: dims_after(directives, ".reqntid"), maxntid: dims_after(directives, ".maxntid") }
    }

    /// The limits of a function.
    pub fn of(f: &Function) -> ThreadLimits {
        ThreadLimits::parse(&f.directives)
    }

    /// Whether a launch with this block may run the kernel; the reason if not.
    pub fn check(&self, block: [u32; 3]) -> Result<(), String> {
        let threads = |d: [u32; 3]| d.iter().map(|&x| u64::from(x)).product::<u64>();
        if let Some(r) = self.reqntid {
            if r != block {
                return Err(format!(
                    "the kernel requires .reqntid {} and the launch's block is {}",
                    dims(r),
                    dims(block)
                ));
            }
        }
        if let Some(m) = self.maxntid {
            if threads(block) > threads(m) {
                return Err(format!(
                    "the kernel allows .maxntid {} ({} threads) and the launch's block is {} ({} threads)",
                    dims(m),
                    threads(m),
                    dims(block),
                    threads(block)
                ));
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for ThreadLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.reqntid, self.maxntid) {
            (None, None) => f.write_str("no thread limits"),
            (Some(r), None) => write!(f, ".reqntid {}", dims(r)),
            (None, Some(m)) => write!(f, ".maxntid {}", dims(m)),
            (Some(r), Some(m)) => write!(f, ".reqntid {}, .maxntid {}", dims(r), dims(m)),
        }
    }
}

/// `128x1x1`.
pub fn dims(d: [u32; 3]) -> String {
    format!("{}x{}x{}", d[0], d[1], d[2])
}

/// The thread limits of kernel `kernel` in PTX text `ptx`, the kernel found as the probe
/// engine finds it ([`find_kernel`](super::find_kernel)); `None` when the text does not parse
/// or has no such kernel.
pub fn limits_in(ptx: &str, kernel: &str) -> Option<ThreadLimits> {
    let module = Module::parse(ptx).ok()?;
    let (name, _) = super::find_kernel(&module, kernel)?;
    let limits = module.kernels().find(|f| f.name == name).map(ThreadLimits::of);
    limits
}

/// A `.ptx` file that defines the kernel.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The file.
    pub path: PathBuf,
    /// Its text.
    pub ptx: String,
    /// The id of the `.cubin` beside it (same stem), if there is one.
    pub cubin: Option<ImageId>,
    /// The kernel's thread limits in this PTX.
    pub limits: ThreadLimits,
    /// `num_warps` of the `.json` beside it (Triton's metadata), if there is one.
    pub num_warps: Option<u32>,
}

impl Candidate {
    /// A candidate from a PTX text and what lies beside its file.
    pub fn new(path: PathBuf, ptx: String, kernel: &str) -> Candidate {
        let cubin = std::fs::read(path.with_extension("cubin")).ok().map(|b| ImageId::of(&b));
        let num_warps = std::fs::read_to_string(path.with_extension("json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v.get("num_warps")?.as_u64())
            .and_then(|n| u32::try_from(n).ok());
        let limits = Module::parse(&ptx)
            .ok()
            .and_then(|m| m.kernels().find(|f| f.name == kernel).map(ThreadLimits::of))
            .unwrap_or_default();
        Candidate { path, ptx, cubin, limits, num_warps }
    }
}

/// Every `.ptx` file under `dir` (recursively) that defines kernel `kernel`, sorted by path.
pub fn candidates(dir: &Path, kernel: &str) -> Vec<Candidate> {
    matching(dir, "*.ptx", kernel)
}

/// The files under `dir` (recursively) whose names match the glob `file` and whose PTX
/// defines `kernel`, sorted by path.
fn matching(dir: &Path, file: &str, kernel: &str) -> Vec<Candidate> {
    let Some(pattern) = dir.join("**").join(file).to_str().map(str::to_string) else { return Vec::new() };
    let Ok(paths) = glob::glob(&pattern) else { return Vec::new() };
    let mut found: Vec<Candidate> = paths
        .flatten()
        .filter_map(|p| std::fs::read_to_string(&p).ok().map(|t| (p, t)))
        .filter(|(_, t)| super::host::defines(t, kernel))
        .map(|(p, t)| Candidate::new(p, t, kernel))
        .collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// Every `<kernel>.ptx` under `dir` (recursively), sorted by path: how Triton names a
/// kernel's files in its cache (`<hash>/<kernel>.ptx` beside `<kernel>.cubin` and
/// `<kernel>.json`), so only those files are read.
pub fn named_candidates(dir: &Path, kernel: &str) -> Vec<Candidate> {
    matching(dir, &format!("{}.ptx", glob::Pattern::escape(kernel)), kernel)
}

/// Where Triton and PyTorch Inductor keep compiled kernels, in the order searched:
/// `$TRITON_CACHE_DIR`; Inductor's cache (`$TORCHINDUCTOR_CACHE_DIR`, else
/// `$TMPDIR/torchinductor_<user>` with `/tmp` for an unset `TMPDIR` and the user from
/// `LOGNAME`, `USER`, `LNAME` or `USERNAME`, as Python's `getpass.getuser` reads them), whose
/// Triton kernels lie under `triton/<device>/`; and Triton's default
/// (`$TRITON_HOME/.triton/cache`, else `$HOME/.triton/cache`). `env` reads the environment.
pub fn cache_dirs(env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Vec<PathBuf> {
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    let mut dirs = Vec::new();
    if let Some(d) = set("TRITON_CACHE_DIR") {
        dirs.push(PathBuf::from(d));
    }
    match set("TORCHINDUCTOR_CACHE_DIR") {
        Some(d) => dirs.push(PathBuf::from(d)),
        None => {
            let user = ["LOGNAME", "USER", "LNAME", "USERNAME"].iter().find_map(|k| set(k));
            if let Some(user) = user {
                let tmp = set("TMPDIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
                dirs.push(tmp.join(format!("torchinductor_{}", user.to_string_lossy())));
            }
        }
    }
    if let Some(home) = set("TRITON_HOME").or_else(|| set("HOME")) {
        dirs.push(PathBuf::from(home).join(".triton").join("cache"));
    }
    dirs
}

/// The chosen PTX and how it was chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chosen {
    /// The file.
    pub path: PathBuf,
    /// Its text.
    pub ptx: String,
    /// How it was chosen, for probe_kernels.csv.
    pub how: String,
    /// The kernel's thread limits in it.
    pub limits: ThreadLimits,
}

/// Chooses among `candidates` (from [`candidates`]) the PTX of a kernel loaded from the
/// image `loaded` (`None` when the image was not a cubin gmprof could identify) and first
/// launched with `block`: the candidate whose `.cubin` is that image, else by name among
/// those whose thread limits admit the block (the reason reported); an error when none is
/// fit.
pub fn choose(candidates: &[Candidate], loaded: Option<ImageId>, block: [u32; 3]) -> Result<Chosen, String> {
    let pick = |c: &Candidate, how: String| Chosen { path: c.path.clone(), ptx: c.ptx.clone(), how, limits: c.limits };
    if candidates.is_empty() {
        return Err("no .ptx file in the PTX directory defines the kernel".into());
    }
    if let Some(id) = loaded {
        if let Some(c) = candidates.iter().find(|c| c.cubin == Some(id)) {
            return Ok(pick(c, format!("PTX {}: its .cubin is the image the program loaded", c.path.display())));
        }
    }
    let why = match loaded {
        None => "the loaded image is not a cubin gmprof could identify".to_string(),
        Some(_) => {
            let with_cubin = candidates.iter().filter(|c| c.cubin.is_some()).count();
            format!(
                "no .cubin beside the {} PTX file(s) is the loaded image ({with_cubin} have a .cubin)",
                candidates.len()
            )
        }
    };
    let fit: Vec<&Candidate> = candidates.iter().filter(|c| c.limits.check(block).is_ok()).collect();
    match fit.first() {
        Some(c) => Ok(pick(
            c,
            format!(
                "PTX {} chosen by name: {why}; {} of {} admit the launch's {} block ({})",
                c.path.display(),
                fit.len(),
                candidates.len(),
                dims(block),
                c.limits
            ),
        )),
        None => {
            let limits: Vec<String> = candidates.iter().map(|c| c.limits.to_string()).collect();
            Err(format!("{why}, and none of them admits the launch's {} block ({})", dims(block), limits.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_limits_parse_and_check() {
        let l = ThreadLimits::parse(".reqntid 128");
        assert_eq!(l, ThreadLimits { reqntid: Some([128, 1, 1]), maxntid: None });
        assert!(l.check([128, 1, 1]).is_ok());
        let e = l.check([256, 1, 1]).unwrap_err();
        assert!(e.contains(".reqntid 128x1x1") && e.contains("256x1x1"), "{e}");
        let l = ThreadLimits::parse(".maxntid 16, 16, 1 .minnctapersm 2");
        assert_eq!(l.maxntid, Some([16, 16, 1]));
        assert_eq!(l.reqntid, None);
        assert!(l.check([256, 1, 1]).is_ok());
        assert!(l.check([32, 8, 1]).is_ok());
        assert!(l.check([257, 1, 1]).unwrap_err().contains("256 threads"));
        let l = ThreadLimits::parse(".maxntid 512 .reqntid 32, 4");
        assert_eq!((l.maxntid, l.reqntid), (Some([512, 1, 1]), Some([32, 4, 1])));
        assert_eq!(ThreadLimits::parse(""), ThreadLimits::default());
        assert!(ThreadLimits::default().check([1024, 1, 1]).is_ok());
    }

    #[test]
    fn image_ids_tell_bytes_apart() {
        assert_eq!(ImageId::of(b"abc"), ImageId::of(b"abc"));
        assert_ne!(ImageId::of(b"abc"), ImageId::of(b"abd"));
        assert_eq!(ImageId::of(b"abcd").len, 4);
        // XXH64, seed 0: the reference values of the xxHash specification's test vectors.
        assert_eq!(ImageId::of(b"").hash, 0xef46_db37_51d8_e999);
        assert_eq!(ImageId::of(b"abc").hash, 0x44bc_2cf5_ad77_0999);
        assert_eq!(ImageId::of(b"abc").to_string(), "3 B #44bc2cf5ad770999");
    }

    #[test]
    fn cache_directories_follow_triton_and_inductor() {
        use std::ffi::OsString;
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| OsString::from(v))
        };
        let all = env(&[
            ("TRITON_CACHE_DIR", "/c/triton"),
            ("TORCHINDUCTOR_CACHE_DIR", "/c/inductor"),
            ("USER", "ann"),
            ("HOME", "/home/ann"),
            ("TRITON_HOME", "/th"),
        ]);
        assert_eq!(
            cache_dirs(&all),
            [PathBuf::from("/c/triton"), PathBuf::from("/c/inductor"), PathBuf::from("/th/.triton/cache")]
        );
        // Inductor's default: $TMPDIR (else /tmp)/torchinductor_<user>, LOGNAME first.
        let defaults = env(&[("LOGNAME", "bob"), ("USER", "ann"), ("HOME", "/home/ann")]);
        assert_eq!(
            cache_dirs(&defaults),
            [PathBuf::from("/tmp/torchinductor_bob"), PathBuf::from("/home/ann/.triton/cache")]
        );
        let tmp = env(&[("USER", "ann"), ("TMPDIR", "/scratch"), ("TRITON_CACHE_DIR", "")]);
        assert_eq!(cache_dirs(&tmp), [PathBuf::from("/scratch/torchinductor_ann")]);
        assert!(cache_dirs(&|_| None).is_empty());
    }

    #[test]
    fn limits_are_read_from_ptx_text() {
        let ptx = ".version 8.0\n.target sm_90\n.address_size 64\n\n.visible .entry k()\n.reqntid 128\n{\n\tret;\n}\n";
        assert_eq!(limits_in(ptx, "k").and_then(|l| l.reqntid), Some([128, 1, 1]));
        assert_eq!(limits_in(ptx, "other"), None);
        assert_eq!(limits_in("not ptx", "k"), None);
    }
}

//! The one error type of gmprof.
//!
//! Every CUPTI or CUDA call that fails becomes [`Error::Cupti`] or [`Error::Cuda`], carrying
//! the code's name, the library's own description, the API that failed and what gmprof was
//! doing. Codes with a known remedy (missing privileges, a busy GPU, no driver) get a hint
//! that says what to do. `Display` only formats owned strings, so it cannot panic.

use std::fmt;
use std::path::PathBuf;

/// A specialized `Result` for gmprof.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in gmprof.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A shared library (libcupti or libcuda) could not be loaded from any candidate.
    #[error("{library} could not be loaded; tried:\n{}{hint}", format_attempts(.attempts))]
    LibraryNotFound {
        /// `"libcupti"` or `"libcuda"`.
        library: &'static str,
        /// Every path or name tried, with the loader's reason.
        attempts: Vec<LoadAttempt>,
        /// How to fix it.
        hint: &'static str,
    },

    /// The loaded library lacks a function gmprof needs (an older CUPTI or driver).
    #[error("{library} has no symbol {symbol} (needed while {context}): {reason}. gmprof needs CUDA 12.6 or newer (CUPTI range profiler API); CUDA 13 is tested")]
    MissingSymbol {
        /// The library.
        library: &'static str,
        /// The function.
        symbol: &'static str,
        /// What gmprof was doing.
        context: String,
        /// The loader's message.
        reason: String,
    },

    /// A CUPTI call failed.
    #[error("{api} failed with {code_name} ({code}): {description} (while {context}){}", hint_suffix(.hint))]
    Cupti {
        /// The CUPTI function.
        api: &'static str,
        /// The numeric `CUptiResult`.
        code: u32,
        /// The enum name, e.g. `CUPTI_ERROR_INSUFFICIENT_PRIVILEGES`.
        code_name: String,
        /// CUPTI's `cuptiGetResultString` text.
        description: String,
        /// What gmprof was doing.
        context: String,
        /// What the user can do about it, when gmprof knows.
        hint: Option<&'static str>,
    },

    /// A CUDA driver call failed.
    #[error("{api} failed with {code_name} ({code}): {description} (while {context}){}", hint_suffix(.hint))]
    Cuda {
        /// The driver function.
        api: &'static str,
        /// The numeric `CUresult`.
        code: u32,
        /// The enum name, e.g. `CUDA_ERROR_NO_DEVICE`.
        code_name: String,
        /// The driver's `cuGetErrorString` text.
        description: String,
        /// What gmprof was doing.
        context: String,
        /// What the user can do about it, when gmprof knows.
        hint: Option<&'static str>,
    },

    /// Metric names the GPU does not know.
    #[error("{}", format_unknown_metrics(.chip, .unknown))]
    UnknownMetrics {
        /// The chip the names were checked against.
        chip: String,
        /// Each unknown name with the closest valid names.
        unknown: Vec<UnknownMetric>,
    },

    /// `pop_range` on a thread with no open range.
    #[error("pop_range on thread {thread} with no open range (pushes and pops must balance per thread)")]
    PopWithoutPush {
        /// The OS thread id.
        thread: u64,
    },

    /// A range guard was dropped on a thread other than the one that pushed it.
    #[error("range '{name}' was pushed on thread {pushed_on} but popped on thread {popped_on}; ranges are per thread")]
    PopFromOtherThread {
        /// The range's name.
        name: String,
        /// The thread that pushed it.
        pushed_on: u64,
        /// The thread that tried to pop it.
        popped_on: u64,
    },

    /// An API was used in the wrong state (e.g. after `finish`, or a second global profiler).
    #[error("{0}")]
    InvalidState(String),

    /// A request the profiler cannot serve as configured (e.g. too few replay passes).
    #[error("{0}")]
    InvalidConfig(String),

    /// Writing an output file failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },

    /// Serializing an output failed.
    #[error("could not serialize {what}: {message}")]
    Serialize {
        /// Which output.
        what: &'static str,
        /// The serializer's message.
        message: String,
    },

    /// A panic was caught inside a CUPTI callback or across the C boundary.
    #[error("internal panic caught in {location}: {message}")]
    Panic {
        /// Where it was caught.
        location: &'static str,
        /// The panic payload, if it was a string.
        message: String,
    },
}

/// One candidate tried while loading a library.
#[derive(Debug, Clone)]
pub struct LoadAttempt {
    /// The path or bare name handed to the dynamic loader.
    pub candidate: String,
    /// Why it failed.
    pub reason: String,
}

/// A metric name the chip does not know, with suggestions.
#[derive(Debug, Clone)]
pub struct UnknownMetric {
    /// The name as given.
    pub name: String,
    /// Valid names closest to it, best first.
    pub suggestions: Vec<String>,
}

fn format_attempts(attempts: &[LoadAttempt]) -> String {
    let mut out = String::new();
    for a in attempts {
        out.push_str("  - ");
        out.push_str(&a.candidate);
        out.push_str(": ");
        out.push_str(&a.reason);
        out.push('\n');
    }
    out
}

fn hint_suffix(hint: &Option<&'static str>) -> String {
    match hint {
        Some(h) => format!(". {h}"),
        None => String::new(),
    }
}

fn format_unknown_metrics(chip: &str, unknown: &[UnknownMetric]) -> String {
    let mut out = format!("unknown metric name(s) for chip {chip}:");
    for m in unknown {
        out.push_str(&format!("\n  - {}", m.name));
        if !m.suggestions.is_empty() {
            out.push_str(&format!(" (did you mean {}?)", m.suggestions.join(", ")));
        }
    }
    out.push_str("\nrun `gmprof metrics --filter WORD` to list the metrics this GPU supports");
    out
}

/// Remedies for CUPTI result codes, keyed by the code's enum name.
pub(crate) fn cupti_hint(code_name: &str) -> Option<&'static str> {
    Some(match code_name {
        "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES" => {
            "GPU performance counters are restricted to admin users. Run as root, or allow \
             everyone: create /etc/modprobe.d/nvidia-profiling.conf containing \
             'options nvidia NVreg_RestrictProfilingToAdminUsers=0' and reload the driver \
             (reboot); in containers, start with --cap-add=SYS_ADMIN. See \
             https://developer.nvidia.com/ERR_NVGPUCTRPERM"
        }
        "CUPTI_ERROR_HARDWARE_BUSY" | "CUPTI_ERROR_HARDWARE" => {
            "another profiler holds the GPU's counters: stop nsys/ncu sessions, other CUPTI \
             clients, and DCGM profiling (`dcgmi profile --pause`, or stop nv-hostengine/dcgm-exporter)"
        }
        "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" => {
            "another CUPTI client is subscribed in this process (a second gmprof profiler, \
             Nsight Systems, PyTorch's Kineto profiler or an injected tool): only one may \
             subscribe at a time"
        }
        "CUPTI_ERROR_NOT_INITIALIZED" => {
            "CUPTI could not initialize: check `nvidia-smi` and that the driver is loaded; for \
             the profiler host API, libnvperf_host.so must sit next to libcupti or on LD_LIBRARY_PATH"
        }
        "CUPTI_ERROR_INVALID_DEVICE" => "no usable NVIDIA GPU: check `nvidia-smi` and CUDA_VISIBLE_DEVICES",
        "CUPTI_ERROR_NOT_COMPATIBLE" | "CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE" => {
            "this CUPTI does not match the installed driver: use the CUPTI of the CUDA \
             toolkit that matches the driver (set GMPROF_CUPTI_LIB), or update the driver"
        }
        "CUPTI_ERROR_NOT_SUPPORTED"
        | "CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED"
        | "CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED"
        | "CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED"
        | "CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED"
        | "CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED"
        | "CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED"
        | "CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED" => {
            "this GPU or configuration does not support the CUPTI range profiler: it needs a \
             Turing-or-newer GPU, not a MIG slice, CMP part or vGPU without profiling enabled"
        }
        "CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED" => {
            "another tool in this process initialized CUPTI's legacy event/metric API, which \
             cannot be used together with the range profiler"
        }
        "CUPTI_ERROR_INVALID_METRIC_NAME" => "run `gmprof metrics --filter WORD` to list valid metric names",
        "CUPTI_ERROR_OUT_OF_MEMORY" => "host or device memory ran out while profiling",
        _ => return None,
    })
}

/// Remedies for CUDA driver result codes.
pub(crate) fn cuda_hint(code_name: &str) -> Option<&'static str> {
    Some(match code_name {
        "CUDA_ERROR_NO_DEVICE" => "no CUDA-capable GPU is visible: check `nvidia-smi` and CUDA_VISIBLE_DEVICES",
        "CUDA_ERROR_INSUFFICIENT_DRIVER" => {
            "the NVIDIA driver is older than this CUDA release needs: update the driver"
        }
        "CUDA_ERROR_NOT_INITIALIZED" | "CUDA_ERROR_DEINITIALIZED" => {
            "the CUDA driver is not initialized (or already shut down)"
        }
        "CUDA_ERROR_INVALID_DEVICE" => "the requested device ordinal does not exist",
        _ => return None,
    })
}

impl Error {
    /// True when the error means the GPU's counters are held by another profiler.
    pub fn is_profiler_busy(&self) -> bool {
        matches!(self, Error::Cupti { code_name, .. }
            if code_name == "CUPTI_ERROR_HARDWARE_BUSY"
                || code_name == "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
    }

    /// True when the error means the library or driver is missing.
    pub fn is_library_missing(&self) -> bool {
        matches!(self, Error::LibraryNotFound { .. } | Error::MissingSymbol { .. })
    }

    /// Builds [`Error::Io`].
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    /// Builds [`Error::Panic`] from a caught panic payload (for FFI boundaries).
    pub fn from_panic(location: &'static str, payload: &(dyn std::any::Any + Send)) -> Self {
        Error::Panic { location, message: panic_message(payload) }
    }
}

/// The text of a panic payload, when it has one.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// The CUPTI and driver calls a text names as failed: `(function, code name)` for each
/// [`Error::Cupti`] and [`Error::Cuda`] in it as their `Display` writes them
/// (`cuptiRangeProfilerPushRange failed with CUPTI_ERROR_UNKNOWN (999): ...`), in order. A
/// report's warnings carry the errors of the calls that failed while profiling; the summary
/// names those calls from them.
pub fn failed_calls(text: &str) -> Vec<(&str, &str)> {
    const SEP: &str = " failed with ";
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(SEP) {
        let before = &rest[..at];
        let api = &before[before.rfind(|c: char| !word(c)).map_or(0, |i| i + 1)..];
        let after = &rest[at + SEP.len()..];
        let code = &after[..after.find(|c: char| !word(c)).unwrap_or(after.len())];
        let is_code = code.starts_with("CUPTI_ERROR_") || code.starts_with("CUDA_ERROR_");
        if is_code && (api.starts_with("cu") && api.len() > 2) {
            out.push((api, code));
        }
        rest = after;
    }
    out
}

impl fmt::Display for LoadAttempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.candidate, self.reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privileges_error_says_how_to_fix_it() {
        let e = Error::Cupti {
            api: "cuptiRangeProfilerEnable",
            code: 35,
            code_name: "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES".into(),
            description: "insufficient privileges".into(),
            context: "enabling the range profiler".into(),
            hint: cupti_hint("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"),
        };
        let text = e.to_string();
        assert!(text.contains("cuptiRangeProfilerEnable failed with CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35)"));
        assert!(text.contains("NVreg_RestrictProfilingToAdminUsers=0"));
        assert!(text.contains("while enabling the range profiler"));
    }

    #[test]
    fn busy_codes_are_recognised() {
        for name in ["CUPTI_ERROR_HARDWARE_BUSY", "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"] {
            let e = Error::Cupti {
                api: "x",
                code: 1,
                code_name: name.into(),
                description: String::new(),
                context: String::new(),
                hint: cupti_hint(name),
            };
            assert!(e.is_profiler_busy());
            assert!(e.to_string().contains("another"), "{e}");
        }
        assert!(cupti_hint("CUPTI_ERROR_HARDWARE_BUSY").unwrap().contains("DCGM"));
    }

    #[test]
    fn library_not_found_lists_every_attempt() {
        let e = Error::LibraryNotFound {
            library: "libcupti",
            attempts: vec![
                LoadAttempt { candidate: "/nonexistent".into(), reason: "no such file".into() },
                LoadAttempt { candidate: "libcupti.so.13".into(), reason: "not found".into() },
            ],
            hint: "set GMPROF_CUPTI_LIB",
        };
        let text = e.to_string();
        assert!(text.contains("/nonexistent: no such file"));
        assert!(text.contains("libcupti.so.13: not found"));
        assert!(text.ends_with("set GMPROF_CUPTI_LIB"));
        assert!(e.is_library_missing());
    }

    #[test]
    fn unknown_metric_suggests() {
        let e = Error::UnknownMetrics {
            chip: "GH100".into(),
            unknown: vec![UnknownMetric {
                name: "dram__bytez_read.sum".into(),
                suggestions: vec!["dram__bytes_read.sum".into()],
            }],
        };
        let text = e.to_string();
        assert!(text.contains("dram__bytez_read.sum (did you mean dram__bytes_read.sum?)"), "{text}");
    }

    #[test]
    fn failed_calls_are_read_back_from_their_errors() {
        let cupti = Error::Cupti {
            api: "cuptiRangeProfilerPushRange",
            code: 999,
            code_name: "CUPTI_ERROR_UNKNOWN".into(),
            description: "CUPTI_ERROR_UNKNOWN".into(),
            context: "pushing a CUPTI range".into(),
            hint: None,
        };
        let cuda = Error::Cuda {
            api: "cuCtxSynchronize",
            code: 700,
            code_name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
            description: "an illegal memory access was encountered".into(),
            context: "synchronizing the CUDA context".into(),
            hint: None,
        };
        let warning = format!("range 'step' has no counters: {cupti}; then {cuda}");
        assert_eq!(
            failed_calls(&warning),
            [
                ("cuptiRangeProfilerPushRange", "CUPTI_ERROR_UNKNOWN"),
                ("cuCtxSynchronize", "CUDA_ERROR_ILLEGAL_ADDRESS")
            ]
        );
        assert!(failed_calls("the build failed with an error").is_empty());
        assert!(failed_calls("1 launch(es) have no kernel activity record").is_empty());
        assert!(failed_calls(" failed with CUPTI_ERROR_UNKNOWN").is_empty(), "no function named");
    }

    #[test]
    fn panic_payloads_are_read() {
        let p: Box<dyn std::any::Any + Send> = Box::new("boom");
        assert_eq!(panic_message(p.as_ref()), "boom");
        let p: Box<dyn std::any::Any + Send> = Box::new(String::from("bang"));
        assert_eq!(Error::from_panic("cb", p.as_ref()).to_string(), "internal panic caught in cb: bang");
    }
}

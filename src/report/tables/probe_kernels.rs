//! probe_kernels.csv: one row per loaded variant of each kernel the probe engine heard
//! launched, probed or not, and why.
//!
//! A kernel name does not name one kernel: torch.compile's autotuner leaves one Triton cache
//! entry per configuration, all of one name (say one built with `.reqntid 256` and one with
//! `.reqntid 128`), and one name can be loaded from two modules. The probe engine sees
//! loaded functions (a `CUfunction`: one per module and context), each a [`ProbeKernel`].
//! [`KernelTable`] numbers the variants of each kernel name in the order of their first
//! launch, a variant being what the columns `mangled`, `module`, `module_file`, `reqntid`,
//! `maxntid` and `max_threads_per_block` tell apart, and [`KernelTable::rows`] gives one row
//! per variant and outcome: the functions of one variant (the same image loaded in two
//! contexts) are counted in `functions`, their launches and load times summed. Two functions
//! of one variant with different outcomes keep a row each, under the same variant number.
//!
//! A module gmprof did not see loaded has no identity (`module` blank): its functions of one
//! name are one variant unless their thread limits differ.
//!
//! Each selected launch carries its variant ([`ProbedLaunch::variant`](super::probes::ProbedLaunch::variant):
//! probe_launches.csv's `variant`, kernels.csv's `probe_variant`, report.json's
//! `probes[].variant`), so `(kernel, variant)` joins a launch to its row here.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::csv::write_records;
use crate::error::Result;

/// File name of the per-variant kernel table.
pub const PROBE_KERNELS_CSV: &str = "probe_kernels.csv";

/// One loaded kernel function (as the probe engine records it) or one variant (a
/// probe_kernels.csv row). The first six columns are those probe_kernels.csv has always had.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeKernel {
    /// Kernel, demangled.
    pub kernel: String,
    /// Mangled name.
    pub mangled: String,
    /// `probed` or `not probed`.
    pub status: String,
    /// Why not, or how the name matched and what the probes cannot see.
    pub detail: String,
    /// Launches heard while selected.
    pub launches: u64,
    /// Parse + prune + inject + driver JIT, ms (probed kernels), summed over the row's
    /// functions.
    pub load_ms: Option<f64>,
    /// The variant among the rows of this kernel name, from 1 in the order of first launch
    /// (set by [`KernelTable::insert`]).
    pub variant: u32,
    /// The image of the function's module as gmprof saw it loaded: its kind (`PTX`,
    /// `fatbin`, `cubin`), length and hash (`cubin 31240 B #9f1c2a3b4c5d6e7f`); blank when
    /// gmprof did not see the module loaded.
    pub module: Option<String>,
    /// The file the module was loaded from (`cuModuleLoad`, `cuLibraryLoadFromFile`).
    pub module_file: Option<String>,
    /// The kernel's `.reqntid` in the PTX gmprof probed or tried (`256x1x1`); blank when it
    /// has none or no PTX was looked at.
    pub reqntid: Option<String>,
    /// The kernel's `.maxntid`, likewise.
    pub maxntid: Option<String>,
    /// The driver's `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK` of the program's own function.
    pub max_threads_per_block: Option<i32>,
    /// Loaded functions the row covers (one per module and context).
    pub functions: u32,
    /// What counted its launches: `ptx-probe`, `sass-metrics`, or blank (not probed).
    #[serde(default)]
    pub source: Option<String>,
}

/// What tells one variant of a kernel name from another.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Identity {
    mangled: String,
    module: Option<String>,
    module_file: Option<String>,
    reqntid: Option<String>,
    maxntid: Option<String>,
    max_threads_per_block: Option<i32>,
}

impl Identity {
    fn of(k: &ProbeKernel) -> Identity {
        Identity {
            mangled: k.mangled.clone(),
            module: k.module.clone(),
            module_file: k.module_file.clone(),
            reqntid: k.reqntid.clone(),
            maxntid: k.maxntid.clone(),
            max_threads_per_block: k.max_threads_per_block,
        }
    }
}

/// The probe engine's loaded functions by handle, their variants numbered per kernel name
/// (module docs).
#[derive(Debug, Default)]
pub struct KernelTable {
    functions: HashMap<usize, ProbeKernel>,
    variants: HashMap<String, Vec<Identity>>,
}

impl KernelTable {
    /// Whether `function` (a handle) was recorded.
    pub fn contains(&self, function: usize) -> bool {
        self.functions.contains_key(&function)
    }

    /// The row of `function`.
    pub fn get(&self, function: usize) -> Option<&ProbeKernel> {
        self.functions.get(&function)
    }

    /// The row of `function`, to count its launches or add to its detail.
    pub fn get_mut(&mut self, function: usize) -> Option<&mut ProbeKernel> {
        self.functions.get_mut(&function)
    }

    /// Records `function` on its first launch: its variant is the one of an earlier function
    /// of the same name and identity, else the next number of its name. Returns the variant.
    pub fn insert(&mut self, function: usize, mut row: ProbeKernel) -> u32 {
        let identity = Identity::of(&row);
        let known = self.variants.entry(row.kernel.clone()).or_default();
        let at = match known.iter().position(|v| *v == identity) {
            Some(at) => at,
            None => {
                known.push(identity);
                known.len() - 1
            }
        };
        row.variant = at as u32 + 1;
        row.functions = 1;
        let variant = row.variant;
        self.functions.insert(function, row);
        variant
    }

    /// One row per variant and outcome (module docs), by kernel, then variant.
    pub fn rows(&self) -> Vec<ProbeKernel> {
        // By handle, so that sums of load times do not depend on the map's order.
        let mut functions: Vec<(&usize, &ProbeKernel)> = self.functions.iter().collect();
        functions.sort_by_key(|(handle, _)| **handle);
        let mut rows: BTreeMap<(String, u32, String, String), ProbeKernel> = BTreeMap::new();
        for (_, f) in functions {
            let key = (f.kernel.clone(), f.variant, f.status.clone(), f.detail.clone());
            match rows.get_mut(&key) {
                None => {
                    rows.insert(key, f.clone());
                }
                Some(row) => {
                    row.functions += f.functions;
                    row.launches += f.launches;
                    row.load_ms = match (row.load_ms, f.load_ms) {
                        (Some(a), Some(b)) => Some(a + b),
                        (a, b) => a.or(b),
                    };
                }
            }
        }
        rows.into_values().collect()
    }
}

/// Writes probe_kernels.csv (`rows` from [`KernelTable::rows`]) into `dir`.
pub fn write_probe_kernels_csv(dir: &Path, rows: &[ProbeKernel]) -> Result<()> {
    write_records(&dir.join(PROBE_KERNELS_CSV), rows)
}

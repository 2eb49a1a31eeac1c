//! Counts from CUPTI's SASS metrics, for the kernels the PTX probes cannot reach.
//!
//! cuBLAS, cuDNN, NCCL, aten's and the fused attention kernels ship as SASS only: there is
//! no PTX to rewrite. CUPTI's SASS Metrics API patches the SASS itself, and a flush returns
//! per patched instruction the value of each configured metric ([`SassRecord`]). gmprof
//! configures the five metrics of [`METRICS`] and flushes after every launch, so a flush
//! holds one launch's counts; this module turns a flush into those counts:
//!
//! - [`group`] sums each instruction's instances and splits the records by function;
//! - [`attribute`] picks the launched kernel's function out of a flush and keeps the others
//!   apart (kernels gmprof did not hear launched, such as a CUDA graph's, are counted, not
//!   mixed in);
//! - [`KernelCounts::totals`] gives the built-in probes' fields ([`sass_fields`]):
//!   `exec_count` as `instructions` (warp-level SASS instructions executed: ncu's
//!   `smsp__inst_executed.sum`) and `thread_instructions`, `gmem_bytes` as `read_bytes` and
//!   `written_bytes` (32-byte global sectors accessed by reading and by store instructions,
//!   classified by opcode as CUPTI's SASS metrics are: LDG/LD and LDGSTS, the async copies
//!   into shared memory through which cuBLAS and CUTLASS load their tiles, read; STG/ST
//!   write), `other_bytes` (sectors of global atomics and reductions), `loads`, `stores` and
//!   `async_copies` (global load, store and LDGSTS instructions);
//! - [`HotSpots`] keeps each kernel's instructions across launches, for its hottest ones.
//!
//! Pure Rust on plain data: the CPU tests drive it with recorded flushes.

use std::collections::{BTreeMap, HashMap};

pub use crate::model::sass::SassRecord;

/// The SASS metrics gmprof configures, in [`Counter`] order.
pub const METRICS: [&str; 6] = [
    "smsp__sass_inst_executed",
    "smsp__sass_thread_inst_executed",
    "smsp__sass_inst_executed_op_global_ld",
    "smsp__sass_inst_executed_op_global_st",
    "smsp__sass_sectors_mem_global",
    "smsp__sass_inst_executed_op_ldgsts",
];

/// Bytes of one global memory sector.
pub const SECTOR_BYTES: u64 = 32;

/// What one of [`METRICS`] counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Counter {
    /// Warp-level instructions executed.
    Instructions = 0,
    /// Thread-level instructions executed.
    ThreadInstructions = 1,
    /// Global load instructions (LDG, LD to global).
    GlobalLoads = 2,
    /// Global store instructions (STG, ST to global).
    GlobalStores = 3,
    /// Global memory sectors accessed.
    GlobalSectors = 4,
    /// LDGSTS instructions: asynchronous copies from global into shared memory.
    AsyncCopies = 5,
}

impl Counter {
    /// Every counter, in [`METRICS`] order.
    pub const ALL: [Counter; 6] = [
        Counter::Instructions,
        Counter::ThreadInstructions,
        Counter::GlobalLoads,
        Counter::GlobalStores,
        Counter::GlobalSectors,
        Counter::AsyncCopies,
    ];
}

/// The metric ids CUPTI gave [`METRICS`] on a chip, in [`Counter`] order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricIds(pub [u64; 6]);

impl MetricIds {
    /// The counter of a metric id.
    pub fn counter(&self, id: u64) -> Option<Counter> {
        self.0.iter().position(|&m| m == id).map(|i| Counter::ALL[i])
    }
}

/// The fields a built-in probe has when its kernel is counted through SASS metrics; `None`
/// for probes that need PTX (`block_sched`, custom TOML probes).
pub fn sass_fields(probe: &str) -> Option<&'static [&'static str]> {
    match probe {
        "exec_count" => Some(&["instructions", "thread_instructions"]),
        "gmem_bytes" => Some(&["read_bytes", "written_bytes", "other_bytes", "loads", "stores", "async_copies"]),
        _ => None,
    }
}

/// One instruction's counts, summed over instances, in [`Counter`] order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcCounts(pub [u64; 6]);

impl PcCounts {
    /// One counter.
    pub fn get(&self, c: Counter) -> u64 {
        self.0[c as usize]
    }

    fn add(&mut self, other: &PcCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }
}

/// One function's counts in a flush: per instruction offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelCounts {
    /// Mangled name.
    pub function: String,
    /// CUPTI's CRC of its cubin.
    pub cubin_crc: u32,
    /// Counts by instruction offset.
    pub pcs: BTreeMap<u32, PcCounts>,
}

impl KernelCounts {
    /// A counter summed over the instructions.
    pub fn total(&self, c: Counter) -> u64 {
        self.pcs.values().map(|p| p.get(c)).sum()
    }

    /// Bytes of the global sectors accessed by instructions that `is` selects.
    fn sector_bytes(&self, is: impl Fn(&PcCounts) -> bool) -> u64 {
        self.pcs.values().filter(|p| is(p)).map(|p| p.get(Counter::GlobalSectors)).sum::<u64>() * SECTOR_BYTES
    }

    /// Whether an instruction reads global memory: a load or an LDGSTS async copy.
    fn reads(p: &PcCounts) -> bool {
        p.get(Counter::GlobalLoads) > 0 || p.get(Counter::AsyncCopies) > 0
    }

    /// Global bytes read: the sectors of load instructions and LDGSTS async copies.
    pub fn read_bytes(&self) -> u64 {
        self.sector_bytes(Self::reads)
    }

    /// Global bytes written: the sectors of store instructions.
    pub fn written_bytes(&self) -> u64 {
        self.sector_bytes(|p| p.get(Counter::GlobalStores) > 0 && !Self::reads(p))
    }

    /// Global bytes of the other instructions (atomics, reductions).
    pub fn other_bytes(&self) -> u64 {
        self.sector_bytes(|p| !Self::reads(p) && p.get(Counter::GlobalStores) == 0)
    }

    /// A built-in probe's field (see [`sass_fields`]).
    pub fn field(&self, probe: &str, field: &str) -> Option<u64> {
        Some(match (probe, field) {
            ("exec_count", "instructions") => self.total(Counter::Instructions),
            ("exec_count", "thread_instructions") => self.total(Counter::ThreadInstructions),
            ("gmem_bytes", "read_bytes") => self.read_bytes(),
            ("gmem_bytes", "written_bytes") => self.written_bytes(),
            ("gmem_bytes", "other_bytes") => self.other_bytes(),
            ("gmem_bytes", "loads") => self.total(Counter::GlobalLoads),
            ("gmem_bytes", "stores") => self.total(Counter::GlobalStores),
            ("gmem_bytes", "async_copies") => self.total(Counter::AsyncCopies),
            _ => return None,
        })
    }

    /// `(probe, field, total)` for each field of each of `probes` that SASS metrics give.
    pub fn totals<'a>(&self, probes: impl IntoIterator<Item = &'a str>) -> Vec<(String, String, u64)> {
        let mut out = Vec::new();
        for probe in probes {
            for field in sass_fields(probe).unwrap_or(&[]) {
                if let Some(v) = self.field(probe, field) {
                    out.push((probe.to_string(), field.to_string(), v));
                }
            }
        }
        out
    }

    /// Adds `other`'s counts (the same function in another flush) to these.
    pub fn merge(&mut self, other: &KernelCounts) {
        for (pc, c) in &other.pcs {
            self.pcs.entry(*pc).or_default().add(c);
        }
    }
}

/// A flush split by function (and module), in order of first appearance, each instruction's
/// instances summed; and the number of values whose metric id is none of `ids` (counted,
/// never guessed at).
pub fn group(records: &[SassRecord], ids: &MetricIds) -> (Vec<KernelCounts>, u64) {
    let mut order: Vec<KernelCounts> = Vec::new();
    let mut index: HashMap<(&str, u32), usize> = HashMap::new();
    let mut unknown = 0;
    for r in records {
        let i = *index.entry((r.function.as_str(), r.cubin_crc)).or_insert_with(|| {
            order.push(KernelCounts { function: r.function.clone(), cubin_crc: r.cubin_crc, pcs: BTreeMap::new() });
            order.len() - 1
        });
        let pc = order[i].pcs.entry(r.pc_offset).or_default();
        for &(id, value) in &r.values {
            match ids.counter(id) {
                Some(c) => pc.0[c as usize] += value,
                None => unknown += 1,
            }
        }
    }
    (order, unknown)
}

/// A flush taken after one launch, split into that launch's counts and the rest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attribution {
    /// The launched kernel's counts (its function's records, over every module that holds
    /// a function of that name); `None` when the flush has none (the launch failed, or
    /// CUPTI did not patch it).
    pub launch: Option<KernelCounts>,
    /// Functions that ran since the previous flush without a launch gmprof heard (a CUDA
    /// graph's kernels, another thread's launch between the two), or that were not
    /// selected.
    pub others: Vec<KernelCounts>,
    /// Values of metrics gmprof did not configure.
    pub unknown_values: u64,
}

/// Attributes a flush to a launch of `kernel` (mangled name).
pub fn attribute(records: &[SassRecord], ids: &MetricIds, kernel: &str) -> Attribution {
    let (groups, unknown_values) = group(records, ids);
    let mut launch: Option<KernelCounts> = None;
    let mut others = Vec::new();
    for g in groups {
        if g.function == kernel {
            match launch.as_mut() {
                Some(l) => l.merge(&g),
                None => launch = Some(g),
            }
        } else {
            others.push(g);
        }
    }
    Attribution { launch, others, unknown_values }
}

/// One kernel's instructions over every launch counted, for its hottest instructions.
#[derive(Clone, Debug, Default)]
struct KernelHeat {
    launches: u64,
    pcs: BTreeMap<u32, PcCounts>,
}

/// Each kernel's (function and module) counts per instruction, summed over its launches.
#[derive(Clone, Debug, Default)]
pub struct HotSpots {
    kernels: HashMap<(String, u32), KernelHeat>,
}

/// One of a kernel's hottest instructions (sass_hot.csv).
#[derive(Clone, Debug, PartialEq)]
pub struct HotInstruction {
    /// Mangled name.
    pub function: String,
    /// CUPTI's CRC of its cubin.
    pub cubin_crc: u32,
    /// Launches counted.
    pub launches: u64,
    /// 1 for the instruction that executed most.
    pub rank: u32,
    /// Offset in the function, bytes.
    pub pc_offset: u32,
    /// Its counts over the launches.
    pub counts: PcCounts,
    /// Its share of the kernel's warp instructions executed.
    pub share: f64,
}

impl HotSpots {
    /// Adds one launch's counts.
    pub fn add(&mut self, k: &KernelCounts) {
        let heat = self.kernels.entry((k.function.clone(), k.cubin_crc)).or_default();
        heat.launches += 1;
        for (pc, c) in &k.pcs {
            heat.pcs.entry(*pc).or_default().add(c);
        }
    }

    /// Kernels held.
    pub fn len(&self) -> usize {
        self.kernels.len()
    }

    /// Whether no kernel was added.
    pub fn is_empty(&self) -> bool {
        self.kernels.is_empty()
    }

    /// Each kernel's `top` instructions by warp instructions executed (ties by offset), the
    /// kernels by total instructions, largest first.
    pub fn top(&self, top: usize) -> Vec<HotInstruction> {
        let mut kernels: Vec<(&(String, u32), &KernelHeat, u64)> = self
            .kernels
            .iter()
            .map(|(k, h)| (k, h, h.pcs.values().map(|p| p.get(Counter::Instructions)).sum()))
            .collect();
        kernels.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(b.0)));
        let mut out = Vec::new();
        for ((function, crc), heat, total) in kernels {
            let mut pcs: Vec<(&u32, &PcCounts)> = heat.pcs.iter().collect();
            pcs.sort_by(|a, b| b.1.get(Counter::Instructions).cmp(&a.1.get(Counter::Instructions)).then(a.0.cmp(b.0)));
            for (rank, (pc, counts)) in pcs.into_iter().take(top).enumerate() {
                let n = counts.get(Counter::Instructions);
                out.push(HotInstruction {
                    function: function.clone(),
                    cubin_crc: *crc,
                    launches: heat.launches,
                    rank: rank as u32 + 1,
                    pc_offset: *pc,
                    counts: *counts,
                    share: if total > 0 { n as f64 / total as f64 } else { 0.0 },
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: MetricIds = MetricIds([10, 11, 12, 13, 14, 15]);

    fn rec(function: &str, crc: u32, pc: u32, values: &[(u64, u64)]) -> SassRecord {
        SassRecord {
            cubin_crc: crc,
            function_index: 0,
            function: function.into(),
            pc_offset: pc,
            values: values.to_vec(),
        }
    }

    #[test]
    fn a_flush_is_split_by_function_and_its_counts_summed() {
        // An axpy-like kernel: a load at 0x40 and 0x50 (4 sectors per warp), a store at 0x70.
        let records = vec![
            rec("k", 1, 0x0, &[(10, 1000)]),
            rec("k", 1, 0x0, &[(11, 32000)]),
            rec("k", 1, 0x40, &[(10, 1000)]),
            rec("k", 1, 0x40, &[(12, 1000)]),
            rec("k", 1, 0x40, &[(14, 4000)]),
            rec("k", 1, 0x50, &[(10, 1000), (10, 0)]),
            rec("k", 1, 0x50, &[(12, 1000)]),
            rec("k", 1, 0x50, &[(14, 4000)]),
            rec("k", 1, 0x70, &[(10, 1000)]),
            rec("k", 1, 0x70, &[(13, 1000)]),
            rec("k", 1, 0x70, &[(14, 4000)]),
            rec("k", 1, 0x80, &[(10, 500)]),
            rec("k", 1, 0x80, &[(14, 100)]),
            rec("k", 1, 0xa0, &[(10, 10)]),
            rec("k", 1, 0xa0, &[(15, 10)]),
            rec("k", 1, 0xa0, &[(14, 40)]),
            rec("graph_kernel", 2, 0x0, &[(10, 7)]),
            rec("k", 1, 0x90, &[(99, 5)]),
        ];
        let a = attribute(&records, &IDS, "k");
        let k = a.launch.unwrap();
        assert_eq!(k.total(Counter::Instructions), 4510);
        assert_eq!(k.total(Counter::ThreadInstructions), 32000);
        assert_eq!(k.field("exec_count", "instructions"), Some(4510));
        assert_eq!(k.read_bytes(), (8000 + 40) * 32);
        assert_eq!(k.field("gmem_bytes", "async_copies"), Some(10));
        assert_eq!(k.written_bytes(), 4000 * 32);
        assert_eq!(k.other_bytes(), 100 * 32);
        assert_eq!((k.total(Counter::GlobalLoads), k.total(Counter::GlobalStores)), (2000, 1000));
        assert_eq!(a.others.len(), 1);
        assert_eq!(a.others[0].function, "graph_kernel");
        assert_eq!(a.others[0].total(Counter::Instructions), 7);
        assert_eq!(a.unknown_values, 1);
        let totals = k.totals(["exec_count", "block_sched", "gmem_bytes"]);
        let names: Vec<String> = totals.iter().map(|(p, f, _)| format!("{p}.{f}")).collect();
        assert_eq!(
            names,
            [
                "exec_count.instructions",
                "exec_count.thread_instructions",
                "gmem_bytes.read_bytes",
                "gmem_bytes.written_bytes",
                "gmem_bytes.other_bytes",
                "gmem_bytes.loads",
                "gmem_bytes.stores",
                "gmem_bytes.async_copies"
            ]
        );
        assert!(attribute(&records, &IDS, "absent").launch.is_none());
    }

    #[test]
    fn one_name_in_two_modules_is_one_launch_and_hot_spots_rank_instructions() {
        let records = vec![rec("k", 1, 0x10, &[(10, 5)]), rec("k", 2, 0x10, &[(10, 7)]), rec("k", 2, 0x20, &[(10, 1)])];
        let k = attribute(&records, &IDS, "k").launch.unwrap();
        assert_eq!(k.pcs[&0x10].get(Counter::Instructions), 12);
        let mut hot = HotSpots::default();
        hot.add(&k);
        hot.add(&k);
        let top = hot.top(1);
        assert_eq!(top.len(), 1);
        assert_eq!((top[0].rank, top[0].pc_offset, top[0].launches), (1, 0x10, 2));
        assert_eq!(top[0].counts.get(Counter::Instructions), 24);
        assert!((top[0].share - 24.0 / 26.0).abs() < 1e-12);
        assert_eq!(hot.top(5).len(), 2);
    }
}

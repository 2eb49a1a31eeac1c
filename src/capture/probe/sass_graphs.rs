//! CUPTI's SASS metrics inside CUDA graphs: kernels captured into a graph and not PTX-probed
//! there (cuBLAS, cuDNN, aten, fused attention: no PTX) are counted at the graph's launches.
//!
//! CUPTI patches a graph's kernels as it patches launched ones (lazily, once collection is
//! on in the context), and their counts wait in CUPTI until a flush. A flush cannot come during
//! a capture (it waits for the GPU), so gmprof flushes right after a graph launch, once the
//! launch is waited for and no capture is in progress: that flush holds the counts of that
//! one graph launch. CUPTI's SASS metrics count *per function*, not per launch, so a flush
//! gives each function's instructions summed over its nodes in the graph:
//!
//! - a node whose function has no other node in its graph gets its own counts per graph
//!   launch (the flushes' sum divided by the graph launches flushed);
//! - a function with several nodes in one graph gets one row, its first node's, with the
//!   sum over its nodes and a status that says how many it sums.
//!
//! Checked on an H100 with `scripts/gpu/sass-graph-experiment.sh` (CUPTI alone, no gmprof):
//! per graph launch, each single-node function's counts equal ncu's `--graph-profiling node`
//! values exactly (a cuBLAS SGEMM, axpy, a kernel launched only inside the graph), and a
//! function with two nodes gets the sum of ncu's two nodes; no flush waited in global, relaxed
//! or thread-local capture modes.
//!
//! Graph launches that could not be flushed alone (a capture in progress elsewhere, over the
//! launch quota, a failed flush) are counted and said; their counts are flushed apart before
//! the next counted launch, never mixed in. [`SassGraphs`] is the bookkeeping, free of CUDA
//! and CUPTI calls (CPU tests drive it); `sass.rs` makes the calls and imports it. Imports
//! `launch`, the report's row and `crate::probe::sass`.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::launch::{launch_record, Launch};
use crate::probe::sass::KernelCounts;
use crate::report::probes::{ProbeTotal, ProbedLaunch as LaunchRecord};

/// A kernel captured into a graph for the SASS path.
pub(super) struct SassNode {
    pub(super) launch: Launch,
    /// Its function's mangled name (how a flush names it).
    pub(super) mangled: String,
    /// The stream whose capture built it (the capture's origin stream).
    pub(super) capture: usize,
    /// The graph its capture returned, once it ended (`Some(0)`: the capture failed).
    pub(super) graph: Option<usize>,
}

/// A graph's counts: graph launches flushed alone, and each function's counts summed over
/// those flushes.
#[derive(Default)]
struct GraphCounts {
    flushed: u64,
    functions: HashMap<String, KernelCounts>,
}

/// The SASS path's graph state.
#[derive(Default)]
pub(super) struct SassGraphs {
    pub(super) nodes: Vec<SassNode>,
    /// Executable graph → the graph it was instantiated from.
    execs: HashMap<usize, usize>,
    counted: HashMap<usize, GraphCounts>,
    /// Launches of graphs with SASS nodes that were not flushed alone, by why.
    pub(super) unflushed: BTreeMap<&'static str, u64>,
}

/// Why a graph launch was not flushed alone.
pub(super) const CAPTURING: &str = "a stream capture was in progress";
pub(super) const OVER_QUOTA: &str = "over the launch quota (--probe-sass-launches)";
pub(super) const FLUSH_FAILED: &str = "its flush failed";
pub(super) const MIXED: &str = "counts of earlier launches were waiting in CUPTI and could not be flushed apart";

impl SassGraphs {
    /// A launch during the capture begun on `capture` becomes a node counted by SASS metrics.
    pub(super) fn captured(&mut self, capture: usize, mangled: String, launch: Launch) {
        self.nodes.push(SassNode { launch, mangled, capture, graph: None });
    }

    /// The capture of `stream` ended with `graph` (`None`: it failed and made none).
    pub(super) fn capture_ended(&mut self, stream: usize, graph: Option<usize>) {
        for node in self.nodes.iter_mut().filter(|n| n.capture == stream && n.graph.is_none()) {
            node.graph = graph.or(Some(0));
        }
    }

    /// `exec` was instantiated from `graph`.
    pub(super) fn instantiated(&mut self, exec: usize, graph: usize) {
        self.execs.insert(exec, graph);
    }

    /// The graph of `exec`, when that graph has nodes counted by SASS metrics.
    pub(super) fn graph_of(&self, exec: usize) -> Option<usize> {
        let graph = *self.execs.get(&exec)?;
        self.nodes.iter().any(|n| n.graph == Some(graph)).then_some(graph)
    }

    /// Whether `graph` has a node of `function` (mangled) counted by SASS metrics.
    pub(super) fn is_node_of(&self, graph: usize, function: &str) -> bool {
        self.nodes.iter().any(|n| n.graph == Some(graph) && n.mangled == function)
    }

    /// Launches of `graph` flushed alone so far.
    pub(super) fn flushed(&self, graph: usize) -> u64 {
        self.counted.get(&graph).map_or(0, |c| c.flushed)
    }

    /// A launch of `graph` (`graph_of`) not flushed alone, and why.
    pub(super) fn not_flushed(&mut self, why: &'static str) {
        *self.unflushed.entry(why).or_default() += 1;
    }

    /// The flush of one launch of `graph`, by function: the counts of its nodes' functions are
    /// the graph's; the others (functions with no SASS node in it) are returned.
    pub(super) fn add_flush(&mut self, graph: usize, functions: Vec<KernelCounts>) -> Vec<KernelCounts> {
        let mine: HashSet<&str> =
            self.nodes.iter().filter(|n| n.graph == Some(graph)).map(|n| n.mangled.as_str()).collect();
        let (ours, others): (Vec<_>, Vec<_>) = functions.into_iter().partition(|k| mine.contains(k.function.as_str()));
        let counts = self.counted.entry(graph).or_default();
        counts.flushed += 1;
        for k in ours {
            match counts.functions.get_mut(&k.function) {
                Some(c) => c.merge(&k),
                None => {
                    counts.functions.insert(k.function.clone(), k);
                }
            }
        }
        others
    }

    /// probe_launches.csv's rows: one per node whose function has no other node in its graph,
    /// one per (graph, function) otherwise. `totals` gives the probe fields of a function's
    /// counts; `ptx_in_graph` says whether a graph also has PTX-probed nodes of a kernel
    /// (demangled name), whose instrumented code CUPTI counts under the same name.
    pub(super) fn records(
        &self,
        totals: impl Fn(&KernelCounts) -> Vec<ProbeTotal>,
        ptx_in_graph: impl Fn(usize, &str) -> bool,
    ) -> Vec<LaunchRecord> {
        let mut seen: HashSet<(usize, &str)> = HashSet::new();
        let mut out = Vec::new();
        for node in &self.nodes {
            let graph = node.graph.unwrap_or(0);
            if graph != 0 && !seen.insert((graph, node.mangled.as_str())) {
                continue;
            }
            let same = self.nodes.iter().filter(|n| n.graph == node.graph && n.mangled == node.mangled).count();
            let mut record =
                LaunchRecord { source: Some(super::launch::SASS_SOURCE.into()), ..launch_record(&node.launch) };
            let flushed = if graph != 0 { self.flushed(graph) } else { 0 };
            record.graph_launches = Some(flushed);
            let counts = self.counted.get(&graph).and_then(|c| c.functions.get(&node.mangled));
            record.status = match (node.graph, flushed, counts) {
                (None, _, _) => "not counted: its stream capture had not ended when the run ended".into(),
                (Some(0), _, _) => "not counted: its stream capture ended without a graph (it failed)".into(),
                (_, 0, _) => "not counted: its CUDA graph was never launched outside a capture and within the quota \
                              (SASS metrics are flushed after a graph launch)"
                    .into(),
                _ if ptx_in_graph(graph, &node.launch.info.kernel) => {
                    "not counted: the graph also runs PTX-probed nodes of this kernel, which CUPTI counts under the \
                     same name"
                        .into()
                }
                (_, _, None) => format!(
                    "not counted: CUPTI counted nothing for its function in {flushed} graph launch(es) (its function \
                     was not patched)"
                ),
                (_, flushed, Some(counts)) => {
                    let all = totals(counts);
                    let uneven: Vec<String> = all
                        .iter()
                        .filter(|t| t.total % flushed != 0)
                        .map(|t| format!("{}.{}", t.probe, t.field))
                        .collect();
                    record.totals = all.into_iter().map(|t| ProbeTotal { total: t.total / flushed, ..t }).collect();
                    let what = if same == 1 {
                        format!("counted by SASS metrics in a CUDA graph: counts per graph launch, over {flushed} launch(es)")
                    } else {
                        format!(
                            "counted by SASS metrics in a CUDA graph: the sum over the {same} nodes of this function in \
                             the graph (CUPTI counts per function), per graph launch, over {flushed} launch(es)"
                        )
                    };
                    if uneven.is_empty() {
                        what
                    } else {
                        format!("{what}; {} does not divide evenly (mean per graph launch)", uneven.join(", "))
                    }
                }
            };
            out.push(record);
        }
        out
    }

    /// Nodes per kernel (demangled name, variant), for the kernel rows.
    pub(super) fn nodes_by_kernel(&self) -> HashMap<(String, Option<u32>), (u64, String)> {
        let mut out: HashMap<(String, Option<u32>), (u64, String)> = HashMap::new();
        for n in &self.nodes {
            let e = out.entry((n.launch.info.kernel.clone(), n.launch.variant)).or_insert((0, n.mangled.clone()));
            e.0 += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::decode::LaunchInfo;
    use crate::probe::sass::{Counter, PcCounts};

    fn launch(kernel: &str, correlation_id: u32) -> Launch {
        Launch { info: LaunchInfo { correlation_id, kernel: kernel.into(), blocks: 132, threads: 256 }, variant: None }
    }

    fn counts(function: &str, instructions: u64) -> KernelCounts {
        let pc = PcCounts([instructions, 0, 0, 0, 0, 0]);
        KernelCounts { function: function.into(), cubin_crc: 7, pcs: [(0x10, pc)].into_iter().collect() }
    }

    fn instructions(k: &KernelCounts) -> Vec<ProbeTotal> {
        vec![ProbeTotal {
            probe: "exec_count".into(),
            field: "instructions".into(),
            total: k.total(Counter::Instructions),
            records: k.pcs.len() as u64,
        }]
    }

    /// The H100 experiment's graph: spin twice (1000 and 500 iterations), axpy, a kernel
    /// launched only in the graph, a cuBLAS SGEMM; CUPTI's counts per graph launch as it
    /// flushed them.
    fn experiment() -> SassGraphs {
        let mut g = SassGraphs::default();
        for (i, (mangled, kernel)) in [
            ("_Z4spinPfi", "spin(float*, int)"),
            ("_Z4axpyPKfPffi", "axpy(float const*, float*, float, int)"),
            ("_Z4spinPfi", "spin(float*, int)"),
            ("_Z10graph_onlyPfi", "graph_only(float*, int)"),
            ("sm80_xmma_gemm", "sm80_xmma_gemm"),
        ]
        .into_iter()
        .enumerate()
        {
            g.captured(0x51, mangled.into(), launch(kernel, 10 + i as u32));
        }
        g.capture_ended(0x51, Some(0x6a));
        g.instantiated(0xe1, 0x6a);
        g
    }

    fn flush() -> Vec<KernelCounts> {
        vec![
            counts("_Z10graph_onlyPfi", 103_752),
            counts("_Z4axpyPKfPffi", 622_592),
            counts("_Z4spinPfi", 1_953_600),
            counts("sm80_xmma_gemm", 41_498_112),
            counts("_Z9unrelatedv", 5),
        ]
    }

    #[test]
    fn a_node_alone_with_its_function_gets_its_counts_per_graph_launch() {
        let mut g = experiment();
        assert_eq!(g.graph_of(0xe1), Some(0x6a));
        assert_eq!(g.graph_of(0xe2), None, "an exec gmprof did not see instantiated");
        for _ in 0..3 {
            let others = g.add_flush(0x6a, flush());
            assert_eq!(others.len(), 1);
            assert_eq!(others[0].function, "_Z9unrelatedv", "a function with no node in the graph is not its");
        }
        assert_eq!(g.flushed(0x6a), 3);
        let rows = g.records(instructions, |_, _| false);
        let got: Vec<(&str, u64, Option<u64>)> =
            rows.iter().map(|r| (r.kernel.as_str(), r.totals[0].total, r.graph_launches)).collect();
        // ncu --graph-profiling node on the same graph (H100): graph_only 103 752, axpy 622 592,
        // SGEMM 41 498 112, spin 1 289 376 + 664 224.
        assert_eq!(
            got,
            vec![
                ("spin(float*, int)", 1_953_600, Some(3)),
                ("axpy(float const*, float*, float, int)", 622_592, Some(3)),
                ("graph_only(float*, int)", 103_752, Some(3)),
                ("sm80_xmma_gemm", 41_498_112, Some(3)),
            ]
        );
        assert!(rows[0].status.contains("the sum over the 2 nodes of this function"), "{}", rows[0].status);
        assert_eq!(
            rows[1].status,
            "counted by SASS metrics in a CUDA graph: counts per graph launch, over 3 launch(es)"
        );
        assert!(rows.iter().all(|r| r.source.as_deref() == Some(super::super::launch::SASS_SOURCE)));
        assert_eq!(rows[1].correlation_id, 11, "the node's capture-time launch");
    }

    #[test]
    fn graphs_not_launched_failed_captures_and_ptx_nodes_say_why() {
        let mut g = experiment();
        g.captured(0x52, "_Z1fv".into(), launch("f()", 30));
        g.capture_ended(0x52, None);
        g.captured(0x53, "_Z1gv".into(), launch("g()", 31));
        let rows = g.records(instructions, |_, _| false);
        assert!(rows.iter().take(4).all(|r| r.status.contains("never launched") && r.totals.is_empty()));
        assert!(rows[4].status.contains("ended without a graph"));
        assert!(rows[5].status.contains("had not ended"));
        g.add_flush(0x6a, vec![counts("_Z4axpyPKfPffi", 10)]);
        let rows = g.records(instructions, |graph, kernel| graph == 0x6a && kernel.starts_with("spin"));
        assert!(rows[0].status.contains("PTX-probed nodes"), "{}", rows[0].status);
        assert!(rows[2].status.contains("CUPTI counted nothing"), "{}", rows[2].status);
        assert_eq!(rows[1].totals[0].total, 10);
    }

    #[test]
    fn counts_that_do_not_divide_evenly_are_a_mean_and_say_so() {
        let mut g = experiment();
        g.add_flush(0x6a, vec![counts("_Z4axpyPKfPffi", 10)]);
        g.add_flush(0x6a, vec![counts("_Z4axpyPKfPffi", 11)]);
        let rows = g.records(instructions, |_, _| false);
        assert_eq!(rows[1].totals[0].total, 10);
        assert!(rows[1].status.contains("exec_count.instructions does not divide evenly"), "{}", rows[1].status);
        g.not_flushed(CAPTURING);
        g.not_flushed(CAPTURING);
        assert_eq!(g.unflushed.get(CAPTURING), Some(&2));
    }
}

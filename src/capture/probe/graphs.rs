//! PTX probes inside CUDA graphs: a kernel launched while its stream captures is built into
//! the graph as its probed function, when its maps can live with the graph.
//!
//! A captured launch runs nothing at the call: its graph runs it later, once per graph launch,
//! and gmprof may not allocate, copy or wait while a capture is in progress (that invalidates
//! the program's capture). So a captured launch is probed only when
//!
//! - its function was already probed outside captures (the probed module is loaded: Inductor
//!   and `torch.cuda.graph` warm each kernel up eagerly before they capture it);
//! - its maps reach it through kernel parameters (`--probe-maps param`, the default: the
//!   driver copies the parameters into the graph node; a map in a global variable would need
//!   a copy at each launch);
//! - the map pool has room: device memory gmprof allocated and zeroed *before* a capture began
//!   (at the enter of the begin call, when no other capture is in progress), in chunks, up to
//!   a limit. A pool chunk is never freed: a graph may run its nodes until the process ends.
//!
//! The maps accumulate over every run of the node (the probes add with atomics), so a node's
//! counts are read once, at the end of the run (no capture in progress, after a context
//! synchronize), and divided by the number of times its graph was launched: its graph is the
//! one the capture's end call returned, its launches are the successful `cuGraphLaunch`es of
//! every executable graph instantiated from it. Everything else is said on the node's row of
//! probe_launches.csv: a capture that ended without a graph, a graph never launched, counts
//! that do not divide evenly (the node did not do the same work each time).
//!
//! [`GraphProbes`] is the bookkeeping, free of driver calls (CPU tests drive it); the engine
//! (`engine.rs`) makes the calls and feeds it. Imports `launch` and the report's row.

use std::collections::HashMap;

use super::launch::{launch_record, Launch};
use crate::report::probes::{ProbeTotal, ProbedLaunch as LaunchRecord};

/// Pool chunks are at least this large (a chunk is allocated before a capture, with room for
/// the kernels it will hold).
pub const POOL_CHUNK_BYTES: usize = 32 << 20;

/// Where a probed graph node's maps are and what it is.
pub(super) struct GraphNode {
    pub(super) launch: Launch,
    /// Each probe's map: device address and bytes, inside a pool chunk.
    pub(super) maps: Vec<(u64, usize)>,
    /// The stream whose capture built it (the capture's origin stream).
    pub(super) capture: usize,
    /// The graph its capture returned, once it ended.
    pub(super) graph: Option<usize>,
}

/// The probe engine's graph state.
#[derive(Default)]
pub(super) struct GraphProbes {
    /// Pool chunks: the context they belong to (a key), base address, bytes, bytes handed
    /// out. A kernel's maps come from a chunk of its own context.
    chunks: Vec<(usize, u64, usize, usize)>,
    /// Bytes the pool may hold in all (0: graph kernels are not probed).
    pub(super) limit: usize,
    pub(super) nodes: Vec<GraphNode>,
    /// Executable graph → the graph it was instantiated from.
    execs: HashMap<usize, usize>,
    /// Graph → successful launches of its executable graphs.
    launches: HashMap<usize, u64>,
    /// Why the pool could not grow, the last time it tried.
    pub(super) pool_error: Option<String>,
}

impl GraphProbes {
    pub(super) fn with_limit(limit: usize) -> Self {
        GraphProbes { limit, ..Default::default() }
    }

    /// Bytes allocated so far.
    pub(super) fn allocated(&self) -> usize {
        self.chunks.iter().map(|c| c.2).sum()
    }

    /// Bytes of context `ctx`'s chunks not handed out.
    pub(super) fn free(&self, ctx: usize) -> usize {
        self.chunks.iter().filter(|c| c.0 == ctx).map(|c| c.2 - c.3).sum()
    }

    /// The contexts the pool has chunks in.
    pub(super) fn contexts(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self.chunks.iter().map(|c| c.0).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// How large a chunk to allocate in context `ctx` before a capture begins: `None` when
    /// its chunks have at least half a chunk's room left or the pool is at its limit.
    pub(super) fn chunk_wanted(&self, ctx: usize) -> Option<usize> {
        if self.limit == 0 || self.free(ctx) >= POOL_CHUNK_BYTES / 2 {
            return None;
        }
        let room = self.limit.saturating_sub(self.allocated());
        (room >= 4096).then(|| room.min(POOL_CHUNK_BYTES))
    }

    /// A chunk of `bytes` at `base` in context `ctx`, zeroed, joined the pool.
    pub(super) fn add_chunk(&mut self, ctx: usize, base: u64, bytes: usize) {
        self.chunks.push((ctx, base, bytes, 0));
    }

    /// Takes room for maps of these sizes (each 256-byte aligned) from one chunk of context
    /// `ctx`; `None` when none has room for them all.
    pub(super) fn take(&mut self, ctx: usize, sizes: &[usize]) -> Option<Vec<(u64, usize)>> {
        let align = |b: usize| b.div_ceil(256) * 256;
        let need: usize = sizes.iter().map(|&b| align(b.max(1))).sum();
        let chunk = self.chunks.iter_mut().find(|c| c.0 == ctx && c.2 - c.3 >= need)?;
        let mut at = chunk.1 + chunk.3 as u64;
        chunk.3 += need;
        Some(
            sizes
                .iter()
                .map(|&b| {
                    let p = at;
                    at += align(b.max(1)) as u64;
                    (p, b)
                })
                .collect(),
        )
    }

    /// The capture of `stream` ended with `graph` (`None`: it failed and made none).
    pub(super) fn capture_ended(&mut self, stream: usize, graph: Option<usize>) {
        for node in self.nodes.iter_mut().filter(|n| n.capture == stream && n.graph.is_none()) {
            // A failed end leaves the node without a graph for good: a later capture on the
            // same stream must not claim it.
            node.graph = graph.or(Some(0));
        }
    }

    /// `exec` was instantiated from `graph`.
    pub(super) fn instantiated(&mut self, exec: usize, graph: usize) {
        self.execs.insert(exec, graph);
    }

    /// `exec` was launched successfully.
    pub(super) fn launched(&mut self, exec: usize) {
        if let Some(&graph) = self.execs.get(&exec) {
            *self.launches.entry(graph).or_default() += 1;
        }
    }

    /// Launches of `graph`'s executable graphs so far.
    pub(super) fn graph_launches(&self, graph: usize) -> u64 {
        self.launches.get(&graph).copied().unwrap_or(0)
    }

    /// The probe_launches.csv row of node `i`, given its maps' field totals over every run
    /// (`totals`: probe, field, total, records), or why they were not read (`unread`).
    pub(super) fn record(&self, i: usize, totals: Result<Vec<ProbeTotal>, String>) -> LaunchRecord {
        let node = &self.nodes[i];
        let mut record = launch_record(&node.launch);
        let runs = node.graph.filter(|&g| g != 0).map(|g| self.graph_launches(g));
        record.graph_launches = Some(runs.unwrap_or(0));
        record.status = match (node.graph, runs, totals) {
            (None, _, _) => "not probed: its stream capture had not ended when the run ended".into(),
            (Some(0), _, _) => "not probed: its stream capture ended without a graph (it failed)".into(),
            (_, Some(0), _) => "not probed: its CUDA graph was never launched".into(),
            (_, _, Err(why)) => format!("failed: {why}"),
            (_, Some(runs), Ok(totals)) => {
                let uneven: Vec<&ProbeTotal> = totals.iter().filter(|t| t.total % runs != 0).collect();
                record.totals = totals.iter().map(|t| ProbeTotal { total: t.total / runs, ..t.clone() }).collect();
                record.source = Some(super::sass::PTX_SOURCE.into());
                if uneven.is_empty() {
                    format!("probed in a CUDA graph: counts per graph launch, over {runs} launch(es)")
                } else {
                    format!(
                        "probed in a CUDA graph: mean counts per graph launch, over {runs} launch(es); {} does \
                         not divide evenly (the node's work changed between launches)",
                        uneven.iter().map(|t| format!("{}.{}", t.probe, t.field)).collect::<Vec<_>>().join(", ")
                    )
                }
            }
            (_, None, _) => unreachable!("a node with a graph other than 0 has a launch count"),
        };
        record
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::decode::LaunchInfo;

    fn node(capture: usize, correlation_id: u32) -> GraphNode {
        GraphNode {
            launch: Launch {
                info: LaunchInfo { correlation_id, kernel: "triton_poi_fused_add_0".into(), blocks: 96, threads: 128 },
                variant: Some(0),
            },
            maps: Vec::new(),
            capture,
            graph: None,
        }
    }

    fn total(n: u64) -> ProbeTotal {
        ProbeTotal { probe: "exec_count".into(), field: "instructions".into(), total: n, records: 384 }
    }

    #[test]
    fn the_pool_grows_in_chunks_up_to_its_limit_and_hands_out_aligned_room() {
        let mut g = GraphProbes::with_limit(40 << 20);
        assert_eq!(g.chunk_wanted(1), Some(POOL_CHUNK_BYTES));
        g.add_chunk(1, 0x7f00_0000_0000, POOL_CHUNK_BYTES);
        assert_eq!(g.chunk_wanted(1), None, "a fresh chunk has room");
        let maps = g.take(1, &[3072, 100]).unwrap();
        assert_eq!(maps, vec![(0x7f00_0000_0000, 3072), (0x7f00_0000_0000 + 3072, 100)]);
        let next = g.take(1, &[8]).unwrap();
        assert_eq!(next[0].0, 0x7f00_0000_0000 + 3072 + 256, "each map starts 256-byte aligned");
        assert!(g.take(1, &[POOL_CHUNK_BYTES]).is_none(), "no chunk has room");
        g.take(1, &[POOL_CHUNK_BYTES - 8192]).unwrap();
        // Under half a chunk left: the next capture adds the 8 MiB the limit allows.
        assert_eq!(g.chunk_wanted(1), Some(8 << 20));
        g.add_chunk(1, 0x7f10_0000_0000, 8 << 20);
        assert_eq!(g.allocated(), 40 << 20);
        g.take(1, &[(8 << 20) - 4096]).unwrap();
        assert_eq!(g.chunk_wanted(1), None, "the limit is reached");
        assert_eq!(GraphProbes::with_limit(0).chunk_wanted(1), None, "limit 0: graph kernels are not probed");
        // Another context (GPU) takes nothing from these chunks.
        assert!(g.take(2, &[8]).is_none());
        assert_eq!(g.contexts(), vec![1]);
    }

    #[test]
    fn counts_are_divided_by_the_launches_of_every_exec_of_the_nodes_graph() {
        let mut g = GraphProbes::with_limit(1 << 30);
        g.nodes.extend([node(0x10, 5), node(0x10, 6), node(0x20, 7), node(0x30, 8)]);
        g.capture_ended(0x10, Some(0xaaa));
        g.capture_ended(0x20, None);
        g.instantiated(0xe1, 0xaaa);
        g.instantiated(0xe2, 0xaaa);
        for exec in [0xe1, 0xe1, 0xe2, 0xe9] {
            g.launched(exec);
        }
        assert_eq!(g.graph_launches(0xaaa), 3);
        let r = g.record(0, Ok(vec![total(3 * 4510)]));
        assert_eq!(r.status, "probed in a CUDA graph: counts per graph launch, over 3 launch(es)");
        assert_eq!((r.totals[0].total, r.totals[0].records, r.correlation_id), (4510, 384, 5));
        assert_eq!(r.graph_launches, Some(3));
        assert_eq!(r.source.as_deref(), Some(super::super::sass::PTX_SOURCE));
        let r = g.record(1, Ok(vec![total(10)]));
        assert!(r.status.contains("exec_count.instructions does not divide evenly"), "{}", r.status);
        assert_eq!(r.totals[0].total, 3);
        assert_eq!(g.record(2, Ok(vec![])).status, "not probed: its stream capture ended without a graph (it failed)");
        assert!(g.record(3, Ok(vec![])).status.contains("had not ended"));
        // A later capture on 0x20 does not claim the failed one's node.
        g.capture_ended(0x20, Some(0xbbb));
        assert_eq!(g.nodes[2].graph, Some(0));
        let r = g.record(0, Err("the context synchronize failed: CUDA_ERROR_LAUNCH_FAILED".into()));
        assert!(r.status.starts_with("failed: the context synchronize failed") && r.totals.is_empty());
    }

    #[test]
    fn a_graph_never_launched_says_so() {
        let mut g = GraphProbes::with_limit(1 << 30);
        g.nodes.push(node(0x10, 5));
        g.capture_ended(0x10, Some(0xccc));
        g.instantiated(0xe1, 0xccc);
        assert_eq!(g.record(0, Ok(vec![total(0)])).status, "not probed: its CUDA graph was never launched");
    }
}

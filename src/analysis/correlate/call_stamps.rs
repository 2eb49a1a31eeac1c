//! API call stamps: when a launch, memcpy or memset call returned (and when a memcpy or memset
//! call was made), on the CUPTI clock, for the rows that carry them
//! ([`KernelRow::launch_end_ns`], [`TransferRow::call_ns`], [`TransferRow::call_end_ns`]).
//!
//! Capture takes these stamps only when asked (`ProfilerBuilder::time_api_calls`, which the
//! Kineto form of `trace.json` turns on): a launch's own stamp at its entry
//! ([`LaunchRecord::launch_ns`](crate::model::LaunchRecord::launch_ns)) is taken in every
//! session, the rest are not. They arrive by correlation id, apart from the launch and call
//! records ([`Correlator::note_call_start`], [`Correlator::note_call_end`]), appended to a log
//! (the launch path pays a push, no hashing), and are joined onto the rows by id once the
//! rows are built ([`apply`]).
//!
//! Imports `correlator` (the state it adds to), `store` (where [`CallStamps`] and the log are
//! defined, for the correlator to hold) and `rows`; `join` and `drain` use it.

use super::correlator::Correlator;
use super::rows::{KernelRow, TransferRow};
use super::store::{CallStamps, StampLog};

impl Correlator {
    /// The memcpy or memset call `correlation_id` was made at `ns` (CUPTI clock).
    pub fn note_call_start(&mut self, correlation_id: u32, ns: u64) {
        self.call_stamps.starts.push((correlation_id, ns));
    }

    /// The launch, memcpy or memset call `correlation_id` returned at `ns` (CUPTI clock).
    pub fn note_call_end(&mut self, correlation_id: u32, ns: u64) {
        self.call_stamps.ends.push((correlation_id, ns));
    }

    /// The stamps held of call `correlation_id` (a search: for tests and tools).
    pub fn call_stamps(&self, correlation_id: u32) -> Option<CallStamps> {
        let last = |log: &[(u32, u64)]| log.iter().rev().find(|(id, _)| *id == correlation_id).map(|(_, ns)| *ns);
        let s = CallStamps { start_ns: last(&self.call_stamps.starts), end_ns: last(&self.call_stamps.ends) };
        (s != CallStamps::default()).then_some(s)
    }

    /// How many call stamps are held.
    pub fn call_stamp_count(&self) -> usize {
        self.call_stamps.len()
    }
}

/// Puts the stamps on the rows of their calls: a kernel row gets its launch's end (a row
/// with a launch record: the kernels of one graph launch all get it), a transfer row its
/// call's start and end (rows with a call of their own, status `ok`). An end before its
/// start (a clock that went back) is left out.
pub(super) fn apply(log: &StampLog, kernels: &mut [KernelRow], transfers: &mut [TransferRow]) {
    if log.is_empty() {
        return;
    }
    let stamps = log.by_id();
    for row in kernels.iter_mut().filter(|r| r.thread.is_some()) {
        if let Some(s) = stamps.get(&row.correlation_id) {
            row.launch_end_ns = s.end_ns.filter(|end| row.launch_ns.is_none_or(|start| *end >= start));
        }
    }
    for row in transfers.iter_mut().filter(|r| r.status == super::rows::TransferStatus::Ok && r.thread.is_some()) {
        if let Some(s) = stamps.get(&row.correlation_id) {
            row.call_ns = s.start_ns;
            row.call_end_ns = s.end_ns.filter(|end| s.start_ns.is_none_or(|start| *end >= start));
        }
    }
}

/// Moves the stamps of `drained` calls into `chunk` and drops those of calls the correlator
/// no longer holds (`held`: an end that came after its call was drained, or of a call that
/// was never recorded), so a streamed session holds only the stamps of calls in flight.
pub(super) fn drain(
    log: &mut StampLog,
    chunk: &mut StampLog,
    drained: impl Fn(u32) -> bool,
    held: impl Fn(u32) -> bool,
) {
    for (from, to) in [(&mut log.starts, &mut chunk.starts), (&mut log.ends, &mut chunk.ends)] {
        if from.is_empty() {
            continue;
        }
        let mut kept = Vec::new();
        for (id, ns) in std::mem::take(from) {
            if drained(id) {
                to.push((id, ns));
            } else if held(id) {
                kept.push((id, ns));
            }
        }
        *from = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{activity, launch, metrics, transfer_call};
    use super::*;
    use crate::model::session::SessionTree;
    use crate::model::{LaunchRecord, ProfilingMode, TransferActivity, TransferKind};

    fn copy(correlation_id: u32) -> TransferActivity {
        TransferActivity {
            correlation_id,
            kind: TransferKind::MemcpyHtoD,
            bytes: 64,
            start_ns: 500,
            end_ns: 600,
            stream_id: 7,
            context_id: 1,
            device_id: 0,
            graph_id: 0,
            graph_node_id: 0,
        }
    }

    #[test]
    fn stamps_reach_the_rows_of_their_calls_and_a_backward_end_is_left_out() {
        let mut c = Correlator::new();
        for id in [1, 2] {
            c.add_launch(LaunchRecord { launch_ns: Some(100), ..launch(id, 0, id, None) });
            c.add_activity(activity(id, "k"));
        }
        c.note_call_end(1, 130);
        c.note_call_end(2, 90); // before its start: not a duration
        c.add_transfer_call(transfer_call(3, 1, None, "cudaMemcpyAsync"));
        c.add_transfer_activity(copy(3));
        c.note_call_start(3, 200);
        c.note_call_end(3, 260);
        c.note_call_end(99, 1); // no call of the session
                                // A checkpoint's copy carries them.
        let (copy, _) = c.checkpoint(ProfilingMode::Trace, None);
        assert_eq!(copy.call_stamps(3), Some(CallStamps { start_ns: Some(200), end_ns: Some(260) }));
        let corr = c.finish(&SessionTree::new(), &metrics(), ProfilingMode::Trace);
        let ends: Vec<Option<u64>> = corr.rows.iter().map(|k| k.launch_end_ns).collect();
        assert_eq!(ends, [Some(130), None]);
        assert_eq!((corr.transfers[0].call_ns, corr.transfers[0].call_end_ns), (Some(200), Some(260)));
    }

    #[test]
    fn a_drain_takes_the_stamps_of_the_calls_it_takes_and_drops_those_of_no_call() {
        let mut c = Correlator::new();
        for id in [1, 2] {
            c.add_launch(launch(id, 0, id, None));
            c.note_call_end(id, 10 * u64::from(id));
        }
        c.add_activity(activity(1, "k")); // launch 1 is complete; 2 waits for its record
        c.note_call_end(99, 1);
        let (chunk, _) = c.drain_complete(ProfilingMode::Trace, None, None);
        assert_eq!(chunk.call_stamps(1).and_then(|s| s.end_ns), Some(10));
        assert_eq!(c.call_stamps(1), None, "drained with its launch");
        assert_eq!(c.call_stamps(2).and_then(|s| s.end_ns), Some(20), "in flight: kept");
        assert_eq!((chunk.call_stamps(99), c.call_stamps(99)), (None, None), "no call holds it");
    }
}

//! Every CUDA context of an injected process: one profiler each, one report for all.
//!
//! Layer 3, for [`crate::ways_in::injection`]. A process may drive several GPUs (a model
//! split over two devices, `nn.DataParallel`, JAX with every local device) and may create a
//! context late (the first `.to("cuda:1")` after many steps). Each context gets its own
//! [`Profiler`] (range profiler, counter cycles, replay of its own; the activity stream and
//! the callback subscriber are shared through the capture hub), kept in a slot whose index
//! is its bit in the NVTX stack's [`ProfilerMask`]. Ranges are process-wide: a push goes to
//! every profiler live at that moment, and its pop to the same ones.
//!
//! When one context is destroyed, its profiler finishes and its report waits here; the
//! others go on. The process's outputs are written once, when the last live profiler
//! finishes (or at exit, a signal, a crash), from [`crate::report::devices::combine`] of
//! every context's report. Checkpoints combine the live profilers' checkpoints with the
//! finished reports.

use parking_lot::Mutex;

use crate::capture::profiler::{Profiler, Teardown};
use crate::checked::driver::Context;
use crate::error::Result;
use crate::model::RunEnd;
use crate::report::devices::{self, ContextReport};
use crate::report::Report;
use crate::ways_in::nvtx_stack::ProfilerMask;

/// The most contexts profiled at once in one process (one bit each in a [`ProfilerMask`]).
pub const MAX_PROFILED_CONTEXTS: usize = 64;

/// One context's profiler, or its report once finished.
struct Slot {
    ctx: Context,
    device_id: u32,
    context_id: u32,
    profiler: Option<Profiler>,
    report: Option<Report>,
}

/// A context gmprof could not profile, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The device ordinal, when known.
    pub device_id: Option<u32>,
    /// Why the profiler did not start.
    pub why: String,
}

/// The profilers of one process's contexts.
#[derive(Default)]
pub struct ContextProfilers {
    slots: Mutex<Vec<Slot>>,
    refused: Mutex<Vec<Refused>>,
}

impl std::fmt::Debug for ContextProfilers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextProfilers").field("slots", &self.slots.lock().len()).finish_non_exhaustive()
    }
}

impl ContextProfilers {
    /// Whether another context can get a slot.
    pub fn has_room(&self) -> bool {
        self.slots.lock().len() < MAX_PROFILED_CONTEXTS
    }

    /// Adds `profiler` of `ctx`; returns its slot (its bit in a [`ProfilerMask`]).
    pub fn add(&self, ctx: Context, profiler: Profiler) -> u32 {
        let mut slots = self.slots.lock();
        let slot = Slot {
            ctx,
            device_id: profiler.device_id().unwrap_or(slots.len() as u32),
            context_id: profiler.context_id(),
            profiler: Some(profiler),
            report: None,
        };
        slots.push(slot);
        (slots.len() - 1) as u32
    }

    /// Records a context whose profiler did not start.
    pub fn refuse(&self, device_id: Option<u32>, why: String) {
        self.refused.lock().push(Refused { device_id, why });
    }

    /// Contexts whose profiler did not start.
    pub fn refused(&self) -> Vec<Refused> {
        self.refused.lock().clone()
    }

    /// Profilers started (live or finished).
    pub fn count(&self) -> usize {
        self.slots.lock().len()
    }

    /// Whether any profiler ever ran.
    pub fn any(&self) -> bool {
        !self.slots.lock().is_empty()
    }

    /// The live profilers, as a mask and handles.
    pub fn live(&self) -> (ProfilerMask, Vec<(u32, Profiler)>) {
        let slots = self.slots.lock();
        let mut mask = 0;
        let mut live = Vec::new();
        for (i, s) in slots.iter().enumerate() {
            if let Some(p) = &s.profiler {
                mask |= 1 << i;
                live.push((i as u32, p.clone()));
            }
        }
        (mask, live)
    }

    /// The live profilers among `mask`.
    pub fn in_mask(&self, mask: ProfilerMask) -> Vec<Profiler> {
        let slots = self.slots.lock();
        slots.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).filter_map(|(_, s)| s.profiler.clone()).collect()
    }

    /// Whether `ctx` has a live profiler.
    pub fn profiles(&self, ctx: Context) -> bool {
        self.slots.lock().iter().any(|s| s.ctx == ctx && s.profiler.is_some())
    }

    /// `ctx` is being destroyed: its profiler finishes (releasing its CUPTI objects) and its
    /// report is kept for the process's outputs. Returns how many profilers are still live,
    /// or the error of finishing.
    pub fn finish_context(&self, ctx: Context, run_end: RunEnd) -> Result<usize> {
        let taken = {
            let mut slots = self.slots.lock();
            slots.iter_mut().find(|s| s.ctx == ctx).and_then(|s| s.profiler.take())
        };
        if let Some(profiler) = taken {
            let report = profiler.finish_with(run_end, Teardown::Release, |_| {})?;
            let mut slots = self.slots.lock();
            if let Some(s) = slots.iter_mut().find(|s| s.ctx == ctx) {
                s.report = Some(report);
            }
        }
        Ok(self.slots.lock().iter().filter(|s| s.profiler.is_some()).count())
    }

    /// Finishes every live profiler and hands the process's report (every context's,
    /// combined) to `write` before the last one's CUPTI objects are released. Returns whether
    /// a report was written, and the errors of finishing.
    pub fn finish_all(
        &self,
        run_end: RunEnd,
        teardown: Teardown,
        write: impl FnOnce(&mut Report),
    ) -> (bool, Vec<String>) {
        let mut live: Vec<(usize, Profiler)> = {
            let mut slots = self.slots.lock();
            slots.iter_mut().enumerate().filter_map(|(i, s)| s.profiler.take().map(|p| (i, p))).collect()
        };
        let mut errors = Vec::new();
        let mut write = Some(write);
        let mut write_once = |r: &mut Report| {
            if let Some(w) = write.take() {
                w(r);
            }
        };
        let Some((last_index, last)) = live.pop() else {
            // Every context was destroyed before: their reports wait here.
            let mut report = self.combined(Vec::new(), true);
            report.as_mut().map(&mut write_once);
            return (report.is_some(), errors);
        };
        for (i, profiler) in live {
            match profiler.finish_with(run_end.clone(), teardown, |_| {}) {
                Ok(report) => self.slots.lock()[i].report = Some(report),
                Err(e) => errors.push(format!("device {}: {e}", self.slots.lock()[i].device_id)),
            }
        }
        let mut written = false;
        let result = last.finish_with(run_end, teardown, |report| {
            written = true;
            if self.slots.lock().iter().all(|s| s.report.is_none()) {
                // One context (the usual run): its report as it is, not copied.
                self.note_refused(report);
                write_once(report);
            } else if let Some(mut r) = self.combined(vec![(last_index, report.clone())], true) {
                write_once(&mut r);
            }
        });
        if let Err(e) = result {
            errors.push(format!("device {}: {e}", self.slots.lock()[last_index].device_id));
            if !written {
                // The last profiler failed: what the others finished is still written.
                let mut report = self.combined(Vec::new(), true);
                report.as_mut().map(&mut write_once);
                written = report.is_some();
            }
        }
        (written, errors)
    }

    /// A checkpoint of every context: live profilers' checkpoints and finished reports.
    pub fn checkpoint(&self, reason: &str) -> Result<Option<Report>> {
        let (_, live) = self.live();
        let mut now = Vec::new();
        for (slot, profiler) in live {
            now.push((slot as usize, profiler.checkpoint(reason)?));
        }
        Ok(self.combined(now, false))
    }

    /// The finished reports, taken out of their slots (`take`, at the end) or copied, with
    /// `extra` (slot, report) in their slots, combined.
    fn combined(&self, mut extra: Vec<(usize, Report)>, take: bool) -> Option<Report> {
        let mut slots = self.slots.lock();
        let mut parts = Vec::new();
        for (i, s) in slots.iter_mut().enumerate() {
            let report = match extra.iter().position(|(j, _)| *j == i) {
                Some(k) => Some(extra.swap_remove(k).1),
                None if take => s.report.take(),
                None => s.report.clone(),
            };
            if let Some(report) = report {
                parts.push(ContextReport { device_id: s.device_id, context_id: Some(s.context_id), report });
            }
        }
        drop(slots);
        let mut report = devices::combine(parts)?;
        self.note_refused(&mut report);
        Some(report)
    }

    /// Names the contexts whose profiler did not start, with why, in `report`.
    fn note_refused(&self, report: &mut Report) {
        for r in self.refused() {
            let device = r.device_id.map_or_else(|| "a device".to_owned(), |d| format!("device {d}"));
            report.meta.warnings.push(format!("{device} was not profiled: {}", r.why));
            if let Some(c) = report.meta.unprofiled_contexts.iter_mut().find(|c| c.device_id == r.device_id) {
                c.why.get_or_insert(r.why);
            }
        }
    }
}

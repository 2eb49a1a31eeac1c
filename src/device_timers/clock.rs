//! `%globaltimer` to the CUPTI clock, from the launches' own brackets.
//!
//! A kernel's activity record gives its start and end on the CUPTI clock; its device
//! records all lie between them on the `%globaltimer` clock. Each launch therefore bounds
//! the offset `cupti − globaltimer` to `[start − first record, end − last record]`, a clock
//! pair with an error bar. [`DeviceClock::fit`] intersects the brackets of a set of
//! launches: when they agree, one offset (the middle of the intersection) places every one
//! and [`DeviceClock::slack_ns`] is its uncertainty.
//!
//! Over seconds the two clocks drift apart by more than a bracket is wide (on an H100 the
//! brackets are about 1.2 µs wide, and a session with a 5.5 s kernel did not fit one offset),
//! so [`DeviceClock::fit_runs`] fits runs of consecutive launches instead: each run is as
//! long as its brackets still intersect. A launch with few records (a wide bracket of its
//! own) is then placed by its neighbours' tighter brackets.

use serde::{Deserialize, Serialize};

/// One launch's bracket: its kernel's activity times and the span of its device records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bracket {
    /// Kernel start, CUPTI ns.
    pub kernel_start_ns: u64,
    /// Kernel end, CUPTI ns.
    pub kernel_end_ns: u64,
    /// Earliest device record, `%globaltimer` ns.
    pub first_ns: u64,
    /// Latest device record, `%globaltimer` ns.
    pub last_ns: u64,
}

impl Bracket {
    /// The offsets that put every record of the launch inside its kernel: `(lo, hi)`,
    /// empty when `lo > hi` (records span longer than the kernel).
    pub fn offsets(&self) -> (i128, i128) {
        (self.kernel_start_ns as i128 - self.first_ns as i128, self.kernel_end_ns as i128 - self.last_ns as i128)
    }
}

/// How `%globaltimer` maps to the CUPTI clock: `cupti = globaltimer + offset_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceClock {
    /// The offset, ns.
    pub offset_ns: i64,
    /// Width of the interval of offsets every bracket allows, ns: the placement's uncertainty.
    pub slack_ns: u64,
    /// Launches whose brackets the offset satisfies.
    pub launches: u32,
}

impl DeviceClock {
    /// The one offset all `brackets` agree on, or `None` when there are none or their
    /// intervals do not intersect.
    pub fn fit(brackets: &[Bracket]) -> Option<DeviceClock> {
        let mut lo = i128::MIN;
        let mut hi = i128::MAX;
        for b in brackets {
            let (l, h) = b.offsets();
            lo = lo.max(l);
            hi = hi.min(h);
        }
        if brackets.is_empty() || lo > hi {
            return None;
        }
        let offset = lo + (hi - lo) / 2;
        Some(DeviceClock {
            offset_ns: i64::try_from(offset).ok()?,
            slack_ns: u64::try_from(hi - lo).ok()?,
            launches: brackets.len() as u32,
        })
    }

    /// One clock per bracket, from runs of consecutive brackets (in kernel start order)
    /// that still intersect; see the module docs.
    pub fn fit_runs(brackets: &[Bracket]) -> Vec<DeviceClock> {
        let mut order: Vec<usize> = (0..brackets.len()).collect();
        order.sort_by_key(|&i| brackets[i].kernel_start_ns);
        let mut out = vec![None; brackets.len()];
        let mut run: Vec<usize> = Vec::new();
        let (mut lo, mut hi) = (i128::MIN, i128::MAX);
        let close = |run: &mut Vec<usize>, out: &mut Vec<Option<DeviceClock>>| {
            let members: Vec<Bracket> = run.iter().map(|&i| brackets[i]).collect();
            let clock = DeviceClock::fit(&members);
            for &i in run.iter() {
                out[i] = clock.or_else(|| Some(DeviceClock::single(&brackets[i])));
            }
            run.clear();
        };
        for i in order {
            let (l, h) = brackets[i].offsets();
            if !run.is_empty() && lo.max(l) > hi.min(h) {
                close(&mut run, &mut out);
                (lo, hi) = (i128::MIN, i128::MAX);
            }
            lo = lo.max(l);
            hi = hi.min(h);
            run.push(i);
        }
        close(&mut run, &mut out);
        out.into_iter().map(|c| c.expect("every bracket is in a run")).collect()
    }

    /// A launch placed on its own: the middle of its bracket, or, when the bracket is
    /// empty, its first record at the kernel's start.
    pub fn single(bracket: &Bracket) -> DeviceClock {
        DeviceClock::fit(std::slice::from_ref(bracket)).unwrap_or(DeviceClock {
            offset_ns: (bracket.kernel_start_ns as i128 - bracket.first_ns as i128) as i64,
            slack_ns: 0,
            launches: 0,
        })
    }

    /// A `%globaltimer` stamp on the CUPTI clock.
    pub fn to_cupti_ns(&self, globaltimer_ns: u64) -> u64 {
        (globaltimer_ns as i128 + i128::from(self.offset_ns)).clamp(0, i128::from(u64::MAX)) as u64
    }
}

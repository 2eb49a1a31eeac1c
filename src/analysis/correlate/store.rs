//! Storage for the join: the id hasher of its hash maps, the claim-once activity store, and
//! the call stamps' record.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::model::KernelActivity;

/// A fast hasher for the small integer keys of analysis (correlation ids, cycles, range
/// ids). The keys come from CUPTI and gmprof, not from an adversary, so SipHash's DoS
/// resistance buys nothing and costs a large share of a million-kernel join.
///
/// The low 57 bits of the hash are the key itself (folded, for multi-word keys): hash tables
/// pick the bucket from the low bits, so consecutive correlation ids land in neighbouring
/// buckets and a join in launch order walks the table sequentially instead of missing the
/// cache on every lookup. The top 7 bits, which the table uses as a tag to tell keys of one
/// probe group apart, come from a multiplicative mix.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher {
    folded: u64,
    mixed: u64,
}

const ID_HASH_MULTIPLIER: u64 = 0x517c_c1b7_2722_0a95;
const ID_HASH_LOW_BITS: u64 = (1 << 57) - 1;

impl IdHasher {
    fn mix(&mut self, word: u64) {
        self.folded = self.folded.rotate_left(7) ^ word;
        self.mixed = (self.mixed.rotate_left(5) ^ word).wrapping_mul(ID_HASH_MULTIPLIER);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.mix(u64::from(b));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }
    fn finish(&self) -> u64 {
        (self.folded & ID_HASH_LOW_BITS) | (self.mixed & !ID_HASH_LOW_BITS)
    }
}

/// A `HashMap` keyed by ids, hashed with [`IdHasher`].
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// The stamps of one call, ns on the CUPTI clock; `None` where none was taken (see
/// `call_stamps`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallStamps {
    /// When the call was made (memcpy and memset calls; a launch has its own
    /// [`LaunchRecord::launch_ns`](crate::model::LaunchRecord::launch_ns)).
    pub start_ns: Option<u64>,
    /// When it returned.
    pub end_ns: Option<u64>,
}

/// Call stamps as they arrive, (correlation id, ns) in order: appended on the launch path
/// (no hashing there), joined by id only when rows are built.
#[derive(Clone, Debug, Default)]
pub(super) struct StampLog {
    /// When memcpy and memset calls were made.
    pub(super) starts: Vec<(u32, u64)>,
    /// When calls returned.
    pub(super) ends: Vec<(u32, u64)>,
}

impl StampLog {
    /// Stamps held.
    pub(super) fn len(&self) -> usize {
        self.starts.len() + self.ends.len()
    }

    /// Whether none is held.
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stamps by correlation id (the later of two for one call wins).
    pub(super) fn by_id(&self) -> IdMap<u32, CallStamps> {
        let mut map: IdMap<u32, CallStamps> = IdMap::default();
        for &(id, ns) in &self.starts {
            map.entry(id).or_default().start_ns = Some(ns);
        }
        for &(id, ns) in &self.ends {
            map.entry(id).or_default().end_ns = Some(ns);
        }
        map
    }
}

/// Where the activity records of one correlation id are.
pub(super) enum ActivitySlots {
    One(u32),
    Many(Vec<u32>),
}

impl ActivitySlots {
    /// How many records share the correlation id.
    pub(super) fn len(&self) -> u32 {
        match self {
            ActivitySlots::One(_) => 1,
            ActivitySlots::Many(list) => list.len() as u32,
        }
    }
}

/// The activity records of a session; each can be claimed by one row only.
///
/// A claimed record is swapped for an empty one (no allocation) and marked, rather than the
/// whole list being rewrapped in `Option`s: that copy of a million records was a tenth of a
/// large join.
pub(super) struct ActivityStore {
    pub(super) records: Vec<KernelActivity>,
    pub(super) claimed: Vec<bool>,
}

impl ActivityStore {
    pub(super) fn new(records: Vec<KernelActivity>) -> Self {
        let claimed = vec![false; records.len()];
        Self { records, claimed }
    }

    /// The record at `index`, unless it was claimed before (or does not exist).
    pub(super) fn take(&mut self, index: u32) -> Option<KernelActivity> {
        let index = index as usize;
        let claimed = self.claimed.get_mut(index)?;
        if *claimed {
            return None;
        }
        *claimed = true;
        let record = self.records.get_mut(index)?;
        Some(std::mem::replace(record, vacant_activity()))
    }

    /// The records no row claimed, in their original order.
    pub(super) fn into_unclaimed(self) -> Vec<KernelActivity> {
        self.records.into_iter().zip(self.claimed).filter(|(_, claimed)| !claimed).map(|(r, _)| r).collect()
    }
}

/// The placeholder left where a claimed activity record was.
pub(super) fn vacant_activity() -> KernelActivity {
    KernelActivity {
        correlation_id: 0,
        name: String::new(),
        grid: [0; 3],
        block: [0; 3],
        registers_per_thread: 0,
        static_shared_memory: 0,
        dynamic_shared_memory: 0,
        stream_id: 0,
        context_id: 0,
        device_id: 0,
        graph_id: 0,
        graph_node_id: 0,
        start_ns: 0,
        end_ns: 0,
    }
}

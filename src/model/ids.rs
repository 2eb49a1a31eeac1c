//! The keys the records and the session tree share: [`ThreadId`] and [`RangeId`].
//!
//! Imports nothing of gmprof's; `session` (the range tree) names them through
//! `model/mod.rs`'s re-export, as the rest of the crate does (`crate::model::RangeId`).

use serde::{Deserialize, Serialize};

/// The OS thread id (Linux `gettid`) of the thread that pushed a range or launched a kernel.
pub type ThreadId = u64;

/// A range instance's key: a slab slot plus the generation of that slot, so a reused slot is
/// never mistaken for the range that held it before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RangeId {
    /// Slot in the session tree's slab.
    pub slot: u32,
    /// Generation of the slot when this range was created.
    pub generation: u32,
}

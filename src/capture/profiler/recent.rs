//! The kernel names of the last launches. A kernel's name reaches gmprof with its activity
//! record, which comes only once the kernel completed; when the program's own CUDA error
//! fails the context, the kernels in flight never complete. So the launch callback keeps
//! the name CUPTI gives it (`symbolName`) for the last [`KEPT`] kernel launches, in slots
//! reused in turn (no allocation once a slot holds its longest name), and a report of a
//! failed context names the launches that never completed.

/// How many launches' names are kept.
pub(super) const KEPT: usize = 16;

/// The last [`KEPT`] kernel launches' names, by correlation id.
#[derive(Debug, Default)]
pub(super) struct RecentLaunches {
    slots: Vec<(u32, Vec<u8>)>,
    next: usize,
}

impl RecentLaunches {
    /// Keeps `name` (a C string's bytes, without the NUL) for launch `correlation_id`, in
    /// place of the oldest kept.
    pub(super) fn note(&mut self, correlation_id: u32, name: &[u8]) {
        match self.slots.get_mut(self.next) {
            Some((id, kept)) => {
                *id = correlation_id;
                kept.clear();
                kept.extend_from_slice(name);
            }
            None => self.slots.push((correlation_id, name.to_vec())),
        }
        self.next = (self.next + 1) % KEPT;
    }

    /// The names kept, oldest first.
    pub(super) fn names(&self) -> Vec<(u32, String)> {
        let (newer, older) = self.slots.split_at(self.next.min(self.slots.len()));
        older.iter().chain(newer).map(|(id, name)| (*id, String::from_utf8_lossy(name).into_owned())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_launches_are_kept_oldest_first() {
        let mut recent = RecentLaunches::default();
        assert!(recent.names().is_empty());
        recent.note(3, b"_Z6reducePfi");
        recent.note(5, b"triton_poi_fused_add_0");
        assert_eq!(recent.names(), [(3, "_Z6reducePfi".to_owned()), (5, "triton_poi_fused_add_0".to_owned())]);
        for id in 0..KEPT as u32 + 2 {
            recent.note(100 + id, format!("kernel_{id}").as_bytes());
        }
        let names = recent.names();
        assert_eq!(names.len(), KEPT);
        assert_eq!(names[0], (102, "kernel_2".to_owned()));
        assert_eq!(names[KEPT - 1], (100 + KEPT as u32 + 1, format!("kernel_{}", KEPT + 1)));
    }
}

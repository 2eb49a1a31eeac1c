//! The session manager: the tree of range instances a profiling session pushed and popped.
//!
//! Layer 3 (the safe profiler). The capture side calls [`SessionTree::push`] and
//! [`SessionTree::pop`] (or [`SessionTree::pop_id`] from RAII guards) as the program enters
//! and leaves ranges, and asks [`SessionTree::current`] for the innermost open range of the
//! launching thread when a kernel is launched; that [`RangeId`] travels in the
//! [`LaunchRecord`](crate::model::LaunchRecord). Analysis ([`crate::analysis::correlate`],
//! [`crate::analysis::aggregate`]) later reads the tree to give every kernel a range path and to roll
//! per-kernel values up to parents.
//!
//! Every push creates a new node (one per range *instance*), stored in a [`slab::Slab`] and
//! keyed by a [`RangeId`]: the slab slot plus that slot's generation. Nodes are never removed
//! during a session, so slots are dense and in push order. [`SessionTree::reset`] empties
//! the tree for a new session and bumps the generation of every used slot, so an id kept
//! from the previous session is rejected by [`SessionTree::get`] instead of silently naming
//! a different range.
//!
//! Kernels launched outside any range are not lost: analysis attributes them to a root row
//! named [`ROOT_PATH`], which has no node in the tree (its range id is `None`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use slab::Slab;

use crate::error::{Error, Result};
use crate::model::{RangeId, ThreadId};

/// Path (and name) of the row that holds kernels launched outside any range.
///
/// The angle brackets keep it apart from ordinary range names, but nothing stops a user from
/// naming a range `<root>`; rows of the real root are told apart by a `None` range id.
pub const ROOT_PATH: &str = "<root>";

/// Separator between range names in a [`RangeNode::path`].
///
/// Range names may themselves contain `/`; the path is then ambiguous to read, but the tree
/// itself (parent links) is not, and grouping by path only merges such look-alikes.
pub const PATH_SEPARATOR: char = '/';

/// One range instance: one `push_range` and its matching pop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeNode {
    /// This node's key.
    pub id: RangeId,
    /// The name given to `push_range`.
    pub name: String,
    /// Names from the outermost range down to this one, joined with [`PATH_SEPARATOR`].
    pub path: String,
    /// The enclosing range on the same thread, `None` for a top-level range.
    pub parent: Option<RangeId>,
    /// 0 for a top-level range, parent's depth + 1 otherwise.
    pub depth: u32,
    /// How many earlier nodes of this session have the same path (0 for the first).
    pub instance: u32,
    /// The thread that pushed it; only that thread may pop it.
    pub thread: ThreadId,
    /// Push timestamp, ns, as given by the caller.
    pub push_ns: u64,
    /// Pop timestamp, ns; `None` while the range is open.
    pub pop_ns: Option<u64>,
    /// Ranges pushed while this one was the innermost open range of its thread, in push order.
    pub children: Vec<RangeId>,
}

impl RangeNode {
    /// True until the range is popped (or closed by [`SessionTree::close_all_open`]).
    pub fn is_open(&self) -> bool {
        self.pop_ns.is_none()
    }

    /// Pop minus push, when the range is closed and the timestamps are ordered.
    pub fn wall_ns(&self) -> Option<u64> {
        self.pop_ns.and_then(|pop| pop.checked_sub(self.push_ns))
    }
}

/// Ranges taken out of a [`SessionTree`] by [`SessionTree::remove_all`], held until dropped.
#[derive(Debug, Default)]
#[must_use = "dropping the removed ranges frees them: keep them to free them outside a lock"]
pub struct RemovedRanges(Vec<Arc<RangeNode>>);

impl RemovedRanges {
    /// How many ranges were removed.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when none was.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The range instances of one profiling session, with a stack of open ranges per thread.
#[derive(Clone, Debug, Default)]
pub struct SessionTree {
    /// The nodes; never removed during a session, so slots are dense and in push order.
    /// Shared with the [`SessionTree::snapshot`]s a streamed drain joins against outside the
    /// session's lock: a copy is a count per node, not its strings, and a node changed while
    /// a copy holds it (a pop, a child) is copied then ([`Arc::make_mut`]).
    nodes: Slab<Arc<RangeNode>>,
    /// Generation per slot ever used. Survives [`SessionTree::reset`], which bumps it.
    generations: Vec<u32>,
    /// Open ranges per thread, innermost last.
    stacks: BTreeMap<ThreadId, Vec<RangeId>>,
    /// Number of nodes created so far per path, for [`RangeNode::instance`], and the push
    /// (its number in [`SessionTree::pushes`]) that last used the path.
    instances: HashMap<String, (u32, u64)>,
    /// Ranges pushed so far.
    pushes: u64,
}

impl SessionTree {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens a range named `name` on `thread` at `timestamp_ns`, nested in that thread's
    /// innermost open range, and returns its id.
    pub fn push(&mut self, name: &str, thread: ThreadId, timestamp_ns: u64) -> RangeId {
        let parent = self.current(thread);
        self.push_under(parent, name, thread, timestamp_ns)
    }

    /// As [`SessionTree::push`], but a thread with no open range of its own nests the
    /// range under [`SessionTree::latest_open`], the newest range open on any thread.
    ///
    /// The process range scope: PyTorch's autograd thread pushes the backward's ranges
    /// while the training loop's thread waits inside its step range; they belong in it.
    pub fn push_in_process(&mut self, name: &str, thread: ThreadId, timestamp_ns: u64) -> RangeId {
        let parent = self.current(thread).or_else(|| self.latest_open());
        self.push_under(parent, name, thread, timestamp_ns)
    }

    fn push_under(&mut self, parent: Option<RangeId>, name: &str, thread: ThreadId, timestamp_ns: u64) -> RangeId {
        let (path, depth) = match parent.and_then(|p| self.get(p)) {
            Some(p) => {
                let mut path = String::with_capacity(p.path.len() + 1 + name.len());
                path.push_str(&p.path);
                path.push(PATH_SEPARATOR);
                path.push_str(name);
                (path, p.depth + 1)
            }
            None => (name.to_owned(), 0),
        };
        self.pushes += 1;
        let instance = match self.instances.get_mut(&path) {
            Some((count, last)) => {
                let instance = *count;
                *count += 1;
                *last = self.pushes;
                instance
            }
            None => {
                self.instances.insert(path.clone(), (1, self.pushes));
                0
            }
        };

        let entry = self.nodes.vacant_entry();
        let slot = entry.key();
        if slot >= self.generations.len() {
            self.generations.resize(slot + 1, 0);
        }
        let id = RangeId {
            // A session with more than 4 billion ranges would have exhausted memory long
            // before; saturate rather than wrap so ids stay distinct from low slots.
            slot: u32::try_from(slot).unwrap_or(u32::MAX),
            generation: self.generations[slot],
        };
        entry.insert(Arc::new(RangeNode {
            id,
            name: name.to_owned(),
            path,
            parent,
            depth,
            instance,
            thread,
            push_ns: timestamp_ns,
            pop_ns: None,
            children: Vec::new(),
        }));
        if let Some(p) = parent.and_then(|p| self.get_mut(p)) {
            p.children.push(id);
        }
        self.stacks.entry(thread).or_default().push(id);
        id
    }

    /// Closes the innermost open range of `thread` at `timestamp_ns` and returns its id.
    ///
    /// With nothing open on `thread` this is [`Error::PopWithoutPush`] and the tree is left
    /// as it was.
    pub fn pop(&mut self, thread: ThreadId, timestamp_ns: u64) -> Result<RangeId> {
        let id = self.stacks.get_mut(&thread).and_then(Vec::pop).ok_or(Error::PopWithoutPush { thread })?;
        if let Some(node) = self.get_mut(id) {
            node.pop_ns = Some(timestamp_ns);
        }
        Ok(id)
    }

    /// Closes the range `id` on behalf of an RAII guard dropped on `thread`.
    ///
    /// - An id this tree does not know (stale, or from another tree) is
    ///   [`Error::InvalidState`].
    /// - A range pushed on another thread is [`Error::PopFromOtherThread`]; nothing changes.
    /// - If `id` is not the innermost open range of its thread (guards dropped out of order,
    ///   or an inner guard leaked), the ranges above it are closed too, at the same
    ///   timestamp, with a warning: their kernels stay attributed to them.
    /// - A range already closed (by an outer guard, or by [`SessionTree::close_all_open`]) is
    ///   left alone and its id returned, so a late guard drop is harmless.
    pub fn pop_id(&mut self, id: RangeId, thread: ThreadId, timestamp_ns: u64) -> Result<RangeId> {
        let node = self.get(id).ok_or_else(|| {
            Error::InvalidState(format!(
                "pop of unknown range id (slot {}, generation {}): it belongs to another \
                 session or profiler",
                id.slot, id.generation
            ))
        })?;
        if node.thread != thread {
            return Err(Error::PopFromOtherThread {
                name: node.path.clone(),
                pushed_on: node.thread,
                popped_on: thread,
            });
        }
        if !node.is_open() {
            tracing::debug!(path = %node.path, "range already closed; late guard drop ignored");
            return Ok(id);
        }
        let path = node.path.clone();
        let not_on_stack = || Error::InvalidState(format!("range '{path}' is open but not on its thread's stack"));
        let stack = self.stacks.get_mut(&thread).ok_or_else(not_on_stack)?;
        let position = stack.iter().rposition(|open| *open == id).ok_or_else(not_on_stack)?;
        let closed: Vec<RangeId> = stack.drain(position..).collect();
        for above in closed.iter().skip(1) {
            if let Some(n) = self.get(*above) {
                tracing::warn!(
                    closed = %n.path,
                    by = %path,
                    "range was still open when an enclosing range was popped; closing it too"
                );
            }
        }
        for closed_id in closed {
            if let Some(n) = self.get_mut(closed_id) {
                n.pop_ns = Some(timestamp_ns);
            }
        }
        Ok(id)
    }

    /// The innermost open range of `thread`, if any.
    pub fn current(&self, thread: ThreadId) -> Option<RangeId> {
        self.stacks.get(&thread).and_then(|s| s.last().copied())
    }

    /// The most recently pushed range still open on any thread.
    ///
    /// For work a program does on helper threads that push no ranges of their own, such as
    /// PyTorch's autograd engine, which runs the backward pass on a worker thread while the
    /// main thread waits inside its `backward` range.
    pub fn latest_open(&self) -> Option<RangeId> {
        self.stacks
            .values()
            .filter_map(|stack| stack.last().copied())
            .filter_map(|id| self.get(id).map(|node| (node.push_ns, id)))
            .max_by_key(|(push_ns, id)| (*push_ns, id.slot))
            .map(|(_, id)| id)
    }

    /// Closes every range still open, at `timestamp_ns`, and returns one warning per range.
    ///
    /// Called when a session finishes: an unbalanced push would otherwise leave a node
    /// without a pop time. Its kernels are kept; only its wall time is cut at `timestamp_ns`.
    pub fn close_all_open(&mut self, timestamp_ns: u64) -> Vec<String> {
        let mut open: Vec<RangeId> = std::mem::take(&mut self.stacks).into_values().flatten().collect();
        open.sort_unstable();
        let mut warnings = Vec::with_capacity(open.len());
        for id in open {
            if let Some(node) = self.get_mut(id) {
                node.pop_ns = Some(timestamp_ns);
                let text = format!(
                    "range '{}' (instance {}, thread {}) was still open when profiling finished; \
                     closed at the finish time",
                    node.path, node.instance, node.thread
                );
                tracing::warn!("{text}");
                warnings.push(text);
            }
        }
        warnings
    }

    /// The node `id` names, or `None` when the id is stale (its slot was reused after a
    /// [`SessionTree::reset`]) or was never handed out by this tree.
    pub fn get(&self, id: RangeId) -> Option<&RangeNode> {
        self.nodes.get(id.slot as usize).map(|node| &**node).filter(|node| node.id.generation == id.generation)
    }

    fn get_mut(&mut self, id: RangeId) -> Option<&mut RangeNode> {
        self.nodes.get_mut(id.slot as usize).filter(|node| node.id.generation == id.generation).map(Arc::make_mut)
    }

    /// A dense index (`0..len()`) for a valid id, for per-range arrays in analysis.
    ///
    /// Nodes are never removed within a session, so the slot itself is that index.
    pub fn dense_index(&self, id: RangeId) -> Option<usize> {
        self.get(id).map(|_| id.slot as usize)
    }

    /// Number of range instances.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// What the tree holds, by collection (a streamed run's per-drain memory census).
    pub fn census(&self) -> [(&'static str, usize); 4] {
        [
            ("tree.nodes", self.nodes.len()),
            ("tree.slots", self.nodes.capacity().max(self.generations.len())),
            ("tree.paths", self.instances.len()),
            ("tree.threads", self.stacks.len()),
        ]
    }

    /// True when no range was pushed.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The nodes in push order (dense-index order).
    pub fn nodes(&self) -> impl Iterator<Item = &RangeNode> {
        self.nodes.iter().map(|(_, node)| &**node)
    }

    /// Top-level ranges (depth 0) in push order.
    pub fn top_level(&self) -> impl Iterator<Item = &RangeNode> {
        self.nodes().filter(|n| n.parent.is_none())
    }

    /// True while any thread has an open range.
    pub fn has_open_ranges(&self) -> bool {
        self.stacks.values().any(|s| !s.is_empty())
    }

    /// Removes the closed range `id` once everything about it was reported (the streamed
    /// outputs' range instances, in `analysis::online`), so a run's tree
    /// holds only the ranges open or in flight. Its slot's generation is bumped: the id is
    /// rejected from then on, and [`SessionTree::dense_index`] no longer covers removed ranges
    /// (the whole-session aggregation needs a tree nothing was removed from). A path with a
    /// number in it (`Train step 12`) that had one instance is forgotten with it, so numbered
    /// paths cost no memory once done. Returns false for
    /// an open or unknown range (nothing changes).
    pub fn remove(&mut self, id: RangeId) -> bool {
        self.take_node(id).is_some()
    }

    /// As [`SessionTree::remove`], handing the removed node back.
    fn take_node(&mut self, id: RangeId) -> Option<Arc<RangeNode>> {
        if self.get(id).is_none_or(RangeNode::is_open) {
            return None;
        }
        let node = self.nodes.remove(id.slot as usize);
        if let Some(generation) = self.generations.get_mut(id.slot as usize) {
            *generation = generation.wrapping_add(1);
        }
        if let Some(parent) = node.parent.and_then(|p| self.get_mut(p)) {
            // Ids are unique among a parent's children. Searched from the end: a child removed
            // soon after it closed is among the newest. (`remove_all` removes parents first,
            // so its children skip this.)
            if let Some(i) = parent.children.iter().rposition(|c| *c == id) {
                parent.children.remove(i);
            }
        }
        if node.path.bytes().any(|b| b.is_ascii_digit()) && self.instances.get(&node.path).is_some_and(|e| e.0 == 1) {
            self.instances.remove(&node.path);
        }
        Some(node)
    }

    /// Removes the closed ranges `ids` as [`SessionTree::remove`] does, from the last id to
    /// the first, and hands them back: dropping them frees their names, paths and child
    /// lists, which a caller holding a lock does after letting it go. Given children before
    /// their parents (as a streamed drain completes them, deepest first), each parent goes
    /// first and its children need not update it. Open and unknown ids are skipped.
    pub fn remove_all(&mut self, ids: &[RangeId]) -> RemovedRanges {
        RemovedRanges(ids.iter().rev().filter_map(|id| self.take_node(*id)).collect())
    }

    /// Ranges pushed so far (a clock for [`SessionTree::forget_numbered_paths`]).
    pub fn pushes(&self) -> u64 {
        self.pushes
    }

    /// Forgets the instance counts of paths with a number in them (`Train step 12/Layer 3/
    /// matmul`) that no push has used since push number `since`: a streamed run's tree would
    /// otherwise keep a count for every path of every step it ever ran (llm.c: hundreds a
    /// step, its memory and every drain's copy of the tree growing with the run). Such a path
    /// pushed again later starts again at instance 0. Paths under a top-level range still
    /// open are kept (its later ranges may use them again). Returns how many were forgotten.
    pub fn forget_numbered_paths(&mut self, since: u64) -> usize {
        let open_tops: Vec<String> = self
            .stacks
            .values()
            .filter_map(|stack| stack.first())
            .filter_map(|id| self.get(*id))
            .map(|n| format!("{}{PATH_SEPARATOR}", n.path))
            .collect();
        let before = self.instances.len();
        self.instances.retain(|path, (_, last)| {
            *last > since
                || !path.bytes().any(|b| b.is_ascii_digit())
                || open_tops.iter().any(|top| path.starts_with(top.as_str()) || path == &top[..top.len() - 1])
        });
        before - self.instances.len()
    }

    /// A copy of the tree's ranges (nodes, open stacks), without the per-path instance
    /// counts, which only pushes need: what a streamed drain joins against with the
    /// session's lock let go.
    pub fn snapshot(&self) -> SessionTree {
        SessionTree {
            nodes: self.nodes.clone(),
            generations: self.generations.clone(),
            stacks: self.stacks.clone(),
            instances: HashMap::new(),
            pushes: self.pushes,
        }
    }

    /// Empties the tree for a new session in the same process.
    ///
    /// Every used slot's generation is bumped, so ids from before the reset are rejected by
    /// [`SessionTree::get`] even once their slots hold new ranges.
    pub fn reset(&mut self) {
        for (slot, _) in self.nodes.iter() {
            if let Some(generation) = self.generations.get_mut(slot) {
                *generation = generation.wrapping_add(1);
            }
        }
        self.nodes.clear();
        self.stacks.clear();
        self.instances.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_paths_no_push_used_since_are_forgotten_unless_under_an_open_top() {
        let mut tree = SessionTree::new();
        let mut t = 0;
        let mut step = |tree: &mut SessionTree, n: u32| {
            t += 10;
            tree.push(&format!("Train step {n}"), 1, t);
            for _ in 0..2 {
                // The same numbered path twice a step (llm.c's matmul_cublaslt in a layer).
                let op = tree.push("Layer 0", 1, t + 1);
                tree.pop(1, t + 2).unwrap();
                assert!(tree.get(op).is_some());
            }
        };
        step(&mut tree, 1);
        tree.pop(1, 100).unwrap();
        let since = tree.pushes();
        step(&mut tree, 2);
        // Step 1's paths were not pushed since: forgotten; step 2 is open, so its paths
        // ("Train step 2/Layer 0") are kept.
        let forgotten = tree.forget_numbered_paths(since);
        assert_eq!(forgotten, 2, "Train step 1 and Train step 1/Layer 0");
        let again = tree.push("Layer 0", 1, 200);
        assert_eq!(tree.get(again).map(|n| n.instance), Some(2), "step 2's count kept while it is open");
        tree.pop(1, 201).unwrap();
        tree.pop(1, 202).unwrap();
        let since = tree.pushes();
        tree.push("optimizer", 1, 300);
        tree.pop(1, 301).unwrap();
        assert_eq!(tree.forget_numbered_paths(since), 2, "step 2 closed and not pushed since");
        assert_eq!(tree.forget_numbered_paths(0), 0, "optimizer has no number: kept");
        let snapshot = tree.snapshot();
        assert_eq!(snapshot.len(), tree.len());
    }

    #[test]
    fn a_snapshot_keeps_the_tree_as_it_was_while_the_tree_goes_on() {
        let mut tree = SessionTree::new();
        let step = tree.push("step", 1, 10);
        let fwd = tree.push("fwd", 1, 20);
        let snap = tree.snapshot();
        // Pops and a new child after the copy change the tree, not the copy.
        tree.pop(1, 30).unwrap();
        let bwd = tree.push("bwd", 1, 40);
        tree.pop(1, 50).unwrap();
        tree.pop(1, 60).unwrap();
        assert_eq!(snap.get(fwd).unwrap().pop_ns, None);
        assert_eq!(snap.get(step).unwrap().children, vec![fwd]);
        assert!(snap.get(bwd).is_none());
        assert_eq!(snap.len(), 2);
        assert_eq!(tree.get(fwd).unwrap().pop_ns, Some(30));
        assert_eq!(tree.get(step).unwrap().children, vec![fwd, bwd]);
        assert_eq!(tree.get(step).unwrap().pop_ns, Some(60));
        assert_eq!(tree.get(bwd).unwrap().path, "step/bwd");
        // Removing from the tree leaves the copy whole.
        assert!(tree.remove(fwd));
        assert_eq!(tree.get(step).unwrap().children, vec![bwd]);
        assert_eq!(snap.get(fwd).unwrap().path, "step/fwd");
    }

    #[test]
    fn remove_all_takes_parents_before_children_and_skips_open_and_unknown_ids() {
        let mut tree = SessionTree::new();
        let mut done = Vec::new();
        for s in 0..3u64 {
            let step = tree.push(&format!("step {s}"), 1, 100 * s);
            let mut kids = Vec::new();
            for k in 0..4u64 {
                kids.push(tree.push("op", 1, 100 * s + k + 1));
                tree.pop(1, 100 * s + k + 2).unwrap();
            }
            tree.pop(1, 100 * s + 50).unwrap();
            // As a drain completes them: deepest first, then the step.
            done.extend(kids);
            done.push(step);
        }
        let open = tree.push("step 3", 1, 300);
        let stale = done[0];
        let mut ids = done.clone();
        ids.push(open);
        let removed = tree.remove_all(&ids);
        assert_eq!(removed.len(), 15);
        assert_eq!(tree.len(), 1);
        assert!(tree.get(open).is_some_and(RangeNode::is_open));
        // Ids already removed are skipped.
        assert!(tree.remove_all(&[stale]).is_empty());
        // The numbered top-level paths were forgotten with their one instance: a new push
        // of one starts again at 0.
        tree.pop(1, 310).unwrap();
        let again = tree.push("step 1", 1, 400);
        assert_eq!(tree.get(again).unwrap().instance, 0);
    }

    #[test]
    fn nested_paths_depths_and_instances() {
        let mut tree = SessionTree::new();
        for step in 0..3u64 {
            let t = step * 100;
            let s = tree.push("train_step", 7, t);
            let f = tree.push("forward", 7, t + 1);
            assert_eq!(tree.current(7), Some(f));
            assert_eq!(tree.pop(7, t + 2).ok(), Some(f));
            let b = tree.push("backward", 7, t + 3);
            assert_eq!(tree.pop(7, t + 4).ok(), Some(b));
            assert_eq!(tree.pop(7, t + 5).ok(), Some(s));
            let node = tree.get(f).expect("forward exists");
            assert_eq!(node.path, "train_step/forward");
            assert_eq!(node.depth, 1);
            assert_eq!(node.instance, step as u32);
            assert_eq!(node.parent, Some(s));
            assert_eq!(node.wall_ns(), Some(1));
            assert_eq!(tree.get(s).map(|n| n.children.clone()), Some(vec![f, b]));
        }
        assert_eq!(tree.len(), 9);
        assert_eq!(tree.top_level().count(), 3);
        assert!(!tree.has_open_ranges());
    }

    #[test]
    fn pop_without_push_is_an_error_and_changes_nothing() {
        let mut tree = SessionTree::new();
        let a = tree.push("a", 1, 0);
        assert!(matches!(tree.pop(2, 5), Err(Error::PopWithoutPush { thread: 2 })));
        assert_eq!(tree.current(1), Some(a));
        assert!(tree.get(a).is_some_and(RangeNode::is_open));
        tree.pop(1, 9).expect("balanced pop");
        assert!(matches!(tree.pop(1, 10), Err(Error::PopWithoutPush { thread: 1 })));
        assert_eq!(tree.get(a).and_then(|n| n.pop_ns), Some(9));
    }

    #[test]
    fn pop_id_from_other_thread_is_rejected() {
        let mut tree = SessionTree::new();
        let a = tree.push("a", 1, 0);
        let err = tree.pop_id(a, 2, 5).expect_err("other thread");
        assert!(matches!(err, Error::PopFromOtherThread { pushed_on: 1, popped_on: 2, .. }));
        assert!(tree.get(a).is_some_and(RangeNode::is_open));
        assert_eq!(tree.current(1), Some(a));
    }

    #[test]
    fn pop_id_out_of_order_closes_inner_ranges_too() {
        let mut tree = SessionTree::new();
        let outer = tree.push("outer", 1, 0);
        let inner = tree.push("inner", 1, 1);
        assert_eq!(tree.pop_id(outer, 1, 10).ok(), Some(outer));
        assert_eq!(tree.get(inner).and_then(|n| n.pop_ns), Some(10));
        assert_eq!(tree.get(outer).and_then(|n| n.pop_ns), Some(10));
        assert_eq!(tree.current(1), None);
        // The inner guard dropping late is harmless.
        assert_eq!(tree.pop_id(inner, 1, 11).ok(), Some(inner));
        assert_eq!(tree.get(inner).and_then(|n| n.pop_ns), Some(10));
    }

    #[test]
    fn stale_ids_are_rejected_after_reset() {
        let mut tree = SessionTree::new();
        let old = tree.push("a", 1, 0);
        tree.pop(1, 1).expect("pop");
        tree.reset();
        assert!(tree.get(old).is_none());
        assert!(tree.is_empty());
        let new = tree.push("b", 1, 2);
        assert_eq!(new.slot, old.slot, "slot is reused");
        assert_ne!(new.generation, old.generation);
        assert!(tree.get(old).is_none());
        assert_eq!(tree.get(new).map(|n| n.name.as_str()), Some("b"));
        assert_eq!(tree.get(new).map(|n| n.instance), Some(0), "instances restart");
        assert!(matches!(tree.pop_id(old, 1, 3), Err(Error::InvalidState(_))));
        assert!(tree.get(RangeId { slot: 99, generation: 0 }).is_none());
    }

    #[test]
    fn close_all_open_warns_per_range() {
        let mut tree = SessionTree::new();
        tree.push("a", 1, 0);
        tree.push("b", 1, 1);
        tree.push("c", 2, 1);
        let warnings = tree.close_all_open(50);
        assert_eq!(warnings.len(), 3);
        assert!(warnings[1].contains("'a/b'"), "{warnings:?}");
        assert!(tree.nodes().all(|n| n.pop_ns == Some(50)));
        assert!(!tree.has_open_ranges());
    }

    #[test]
    fn latest_open_is_the_newest_innermost_range_of_any_thread() {
        let mut tree = SessionTree::new();
        assert_eq!(tree.latest_open(), None);
        let step = tree.push("step", 1, 10);
        let loader = tree.push("loader", 2, 15);
        let backward = tree.push("backward", 1, 20);
        assert_eq!(tree.latest_open(), Some(backward));
        tree.pop(1, 30).unwrap();
        assert_eq!(tree.latest_open(), Some(loader), "loader (15) is newer than step (10)");
        tree.pop(2, 31).unwrap();
        assert_eq!(tree.latest_open(), Some(step));
        tree.pop(1, 32).unwrap();
        assert_eq!(tree.latest_open(), None);
    }

    #[test]
    fn push_in_process_nests_a_threads_first_range_under_the_latest_open_one() {
        let mut tree = SessionTree::new();
        // A thread with nothing open anywhere starts a top-level range.
        let step = tree.push_in_process("step", 1, 10);
        let backward = tree.push_in_process("backward", 1, 11);
        // The autograd thread's first range nests under the main thread's innermost.
        let module = tree.push_in_process("GPT", 2, 12);
        let inner = tree.push_in_process("attn", 2, 13);
        let node = |id| tree.get(id).map(|n| (n.path.clone(), n.depth, n.parent, n.thread));
        assert_eq!(node(module), Some(("step/backward/GPT".to_owned(), 2, Some(backward), 2)));
        assert_eq!(node(inner), Some(("step/backward/GPT/attn".to_owned(), 3, Some(module), 2)));
        assert_eq!(tree.get(backward).map(|n| n.children.clone()), Some(vec![module]));
        // Stacks stay per thread: thread 2 pops its own ranges, thread 1 then its own.
        assert_eq!(tree.pop(2, 14).ok(), Some(inner));
        assert_eq!(tree.pop(2, 15).ok(), Some(module));
        assert_eq!(tree.current(2), None);
        assert_eq!(tree.pop(1, 16).ok(), Some(backward));
        assert_eq!(tree.pop(1, 17).ok(), Some(step));
        // Plain push keeps thread nesting: a thread's first range is top-level.
        let outer = tree.push("outer", 1, 20);
        let other = tree.push("other", 2, 21);
        assert_eq!(tree.get(other).map(|n| (n.depth, n.parent)), Some((0, None)));
        assert_eq!(tree.get(outer).map(|n| n.children.len()), Some(0));
    }

    #[test]
    fn threads_have_separate_stacks() {
        let mut tree = SessionTree::new();
        let a = tree.push("a", 1, 0);
        let b = tree.push("b", 2, 0);
        let a2 = tree.push("x", 1, 1);
        let b2 = tree.push("x", 2, 1);
        assert_eq!(tree.get(a2).map(|n| n.path.as_str()), Some("a/x"));
        assert_eq!(tree.get(b2).map(|n| n.path.as_str()), Some("b/x"));
        assert_eq!(tree.current(1), Some(a2));
        assert_eq!(tree.current(2), Some(b2));
        assert_eq!(tree.pop(2, 3).ok(), Some(b2));
        assert_eq!(tree.current(1), Some(a2));
        assert_eq!(tree.get(b).map(|n| n.children.len()), Some(1));
        assert_eq!(tree.get(a).map(|n| n.depth), Some(0));
    }
}

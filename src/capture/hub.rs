//! The process-wide capture hub.
//!
//! Layer 3. CUPTI allows one callback subscriber and one pair of activity buffer callbacks
//! per process, but gmprof allows a profiler per CUDA context (one per GPU) and profilers
//! one after another. The hub owns the subscriber and the activity registration while any
//! session is live, and routes each API callback and each activity record to the session of
//! its CUDA context. The last session to leave tears both down, so the next session starts
//! from a clean registration and no record of an old session reaches a new one.
//!
//! An injected gmprof (see the `injection` module) pins the subscriber for the life of
//! the process: it must hear NVTX ranges and context creation before any session exists.
//! Then only the activity registration comes and goes with the sessions. An on-demand gmprof
//! also turns the launch callbacks off while no capture runs ([`set_launch_callbacks`]), and
//! may start a capture inside the next launch it hears ([`set_launch_hook`]).

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};

use crate::capture::stream_capture;
use crate::checked::activity::{self, ActivityKinds, ActivityRecord, ActivityStats, ActivityTracing};
use crate::checked::callback::{
    ApiCallback, CallbackSite, ContextHandler, DriverHook, GraphEvent, NvtxHandler, ProfilerApiHandler, Subscriber,
};
use crate::checked::Cupti;
use crate::error::{Error, Result};
use crate::model::{CapturedNode, UnprofiledContext};
use crate::sys::cupti::CUpti_driver_api_trace_cbid_enum as DriverCbid;

/// Activity buffers allocated when the hub starts.
const PREALLOCATED_ACTIVITY_BUFFERS: usize = 8;

/// A live profiling session, as the hub sees it.
pub(crate) trait CaptureSession: Send + Sync {
    /// Handles the enter callback of a launch or transfer call of this session's context.
    /// Runs inside the application's CUDA call. `nested` is set for a call made inside
    /// another one on the same thread (the runtime calls the driver inside).
    fn on_call_enter(&self, cb: &ApiCallback<'_>, nested: bool);
    /// Handles the exit callback of an outermost call whose enter asked for it
    /// ([`want_exit`]) or that created graph nodes (`created`, made while its stream was
    /// capturing). Every other exit stays in the hub: a plain launch reaches the session once.
    fn on_call_exit(&self, cb: &ApiCallback<'_>, created: Vec<CapturedNode>);
    /// Receives activity records of this session's context. Runs on CUPTI's thread or on a
    /// flushing thread; must only queue.
    fn on_records(&self, records: Vec<ActivityRecord>);
}

struct Route {
    context_id: u32,
    session: Weak<dyn CaptureSession>,
}

struct Registration {
    subscriber: Subscriber,
    /// Present while any session is live.
    activity: Option<ActivityTracing>,
    /// Kept with no session (injection).
    pinned: bool,
}

/// Sessions by CUDA context id. Read in every callback; written on join and leave.
static ROUTES: RwLock<Vec<Route>> = RwLock::new(Vec::new());
/// The CUPTI registration, present while any session is live.
static REGISTRATION: Mutex<Option<Registration>> = Mutex::new(None);

/// Contexts whose launches or kernel records found no session, by context id: what the
/// reports of the sessions that did profile say was not measured.
static UNPROFILED: Mutex<Vec<UnprofiledContext>> = Mutex::new(Vec::new());

/// Counts a kernel launch call (`launches`) or kernel record (`kernels`, with its device) of
/// a context no session profiles. Context id 0 (a call made before any context exists) is
/// not a context.
fn note_unprofiled(context_id: u32, launches: u64, kernels: u64, device_id: Option<u32>) {
    if context_id == 0 {
        return;
    }
    let mut table = UNPROFILED.lock();
    let entry = match table.iter().position(|c| c.context_id == context_id) {
        Some(i) => &mut table[i],
        None => {
            table.push(UnprofiledContext { context_id, ..UnprofiledContext::default() });
            table.last_mut().expect("just pushed")
        }
    };
    entry.launches += launches;
    entry.kernels += kernels;
    entry.device_id = entry.device_id.or(device_id);
}

/// The contexts other than `own` whose launches or kernels no session took, so far.
pub(crate) fn unprofiled_contexts(own: u32) -> Vec<UnprofiledContext> {
    UNPROFILED.lock().iter().filter(|c| c.context_id != own).cloned().collect()
}

/// Bumped by every change of [`ROUTES`], under its write lock.
static ROUTES_GENERATION: AtomicU64 = AtomicU64::new(1);

/// A thread's last route lookup, valid while [`ROUTES_GENERATION`] has not moved.
struct CachedRoute {
    generation: u64,
    context_id: u32,
    session: Option<Weak<dyn CaptureSession>>,
}

thread_local! {
    static ROUTE_CACHE: RefCell<CachedRoute> =
        const { RefCell::new(CachedRoute { generation: 0, context_id: 0, session: None }) };
}

/// Changes the route table: the only way to write it, so every change moves the generation
/// that the threads' cached lookups are checked against.
fn change_routes<R>(change: impl FnOnce(&mut Vec<Route>) -> R) -> R {
    let mut routes = ROUTES.write();
    let result = change(&mut routes);
    SEVERAL_ROUTES.store(routes.len() > 1, Ordering::Release);
    ROUTES_GENERATION.fetch_add(1, Ordering::Release);
    result
}

/// Whether more than one session is routed (a process profiling several contexts).
static SEVERAL_ROUTES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Memcpy and memset calls heard while several sessions are routed: correlation id → the
/// context the call was made in. A copy between two GPUs is called in one context and its
/// activity record may carry the other's id (PyTorch's `.to("cuda:1")`, seen on two H100s);
/// the record goes to the session that heard the call, which attributes it to the call's
/// range.
static TRANSFER_CALLS: Mutex<TransferCalls> = Mutex::new(TransferCalls::new());

/// [`TRANSFER_CALLS`]: bounded, the oldest calls forgotten first.
struct TransferCalls {
    owner: Option<std::collections::HashMap<u32, u32>>,
    order: std::collections::VecDeque<u32>,
}

impl TransferCalls {
    /// Calls remembered at most: far more than are ever in flight between two flushes.
    const CAPACITY: usize = 1 << 16;

    const fn new() -> Self {
        TransferCalls { owner: None, order: std::collections::VecDeque::new() }
    }

    fn note(&mut self, correlation_id: u32, context_id: u32) {
        let owner = self.owner.get_or_insert_with(Default::default);
        if owner.insert(correlation_id, context_id).is_none() {
            self.order.push_back(correlation_id);
        }
        while self.order.len() > Self::CAPACITY {
            if let Some(old) = self.order.pop_front() {
                owner.remove(&old);
            }
        }
    }

    fn owner(&self, correlation_id: u32) -> Option<u32> {
        self.owner.as_ref()?.get(&correlation_id).copied()
    }
}

/// The context whose session gets `record`: its own, or for a transfer, the context of the
/// call that made it.
fn route_key(record: &ActivityRecord, calls: Option<&TransferCalls>) -> u32 {
    match (record, calls) {
        (ActivityRecord::Transfer(t), Some(calls)) => calls.owner(t.correlation_id).unwrap_or(t.context_id),
        _ => record.context_id(),
    }
}

fn session_for(context_id: u32) -> Option<Arc<dyn CaptureSession>> {
    // The lock is released before the session runs: a session may block (the kernel-replay
    // launch gate), and join/leave must never wait on it while holding the table.
    let lookup = || ROUTES.read().iter().find(|r| r.context_id == context_id).map(|r| r.session.clone());
    // Each thread keeps its last lookup while the table is unchanged: a launch then pays an
    // atomic load instead of the table's read lock. The session itself is still upgraded
    // from a weak reference, so one that left and was dropped is never called.
    let generation = ROUTES_GENERATION.load(Ordering::Acquire);
    let cached = ROUTE_CACHE.try_with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.generation != generation || cache.context_id != context_id {
            *cache = CachedRoute { generation, context_id, session: lookup() };
        }
        cache.session.as_ref().and_then(Weak::upgrade)
    });
    // During the thread's teardown its cache is gone: look the session up directly.
    cached.unwrap_or_else(|_| lookup().and_then(|w| w.upgrade()))
}

/// Routes a launch or transfer callback. The hub keeps each thread's depth of calls that
/// reached a session, and the graph nodes its outermost such call creates, so an exit
/// reaches the session only when the session asked for it at the enter or the call built a
/// graph: finding the session costs atomic operations, which a plain launch's exit then does
/// not pay.
///
/// Depth counts only calls whose enter reached a session. A runtime call can create the
/// context it runs in (the primary context, lazily): its enter finds no session, and the
/// driver call inside it, made once the session has joined, is then the session's outermost
/// call, as if the runtime call had not been heard.
fn route_callback(cb: &ApiCallback<'_>) {
    forget_calls_of_an_earlier_epoch();
    match cb.site {
        CallbackSite::Enter => {
            if LAUNCH_HOOK_SET.load(Ordering::Acquire) && CALL_DEPTH.with(Cell::get) == 0 {
                if stream_capture::any() {
                    defer_launch_hook();
                } else {
                    run_launch_hook(cb.context_uid);
                }
            }
            let depth = CALL_DEPTH.with(|d| {
                d.set(d.get() + 1);
                d.get()
            });
            let Some(bit) = depth_bit(depth) else { return };
            let Some(session) = session_for(cb.context_uid) else {
                // Never silent: a kernel launched on a context no session profiles is counted
                // (the outermost call only: a runtime launch calls the driver inside).
                if depth == 1 && cb.launch == crate::checked::callback::LaunchKind::Kernel {
                    note_unprofiled(cb.context_uid, 1, 0, None);
                }
                return;
            };
            if cb.launch == crate::checked::callback::LaunchKind::Transfer && SEVERAL_ROUTES.load(Ordering::Acquire) {
                TRANSFER_CALLS.lock().note(cb.correlation_id, cb.context_uid);
            }
            let routed = ROUTED_LEVELS.with(|r| {
                r.set(r.get() | bit);
                r.get().count_ones()
            });
            if routed == 1 {
                IN_CALL.with(|c| c.set(true));
                EXIT_WANTED.with(|w| w.set(false));
                CREATED_NODES.with(|n| n.borrow_mut().clear());
            }
            session.on_call_enter(cb, routed > 1);
        }
        CallbackSite::Exit => {
            let depth = CALL_DEPTH.with(|d| {
                let depth = d.get();
                d.set(depth.saturating_sub(1));
                depth
            });
            let Some(bit) = depth_bit(depth).filter(|bit| ROUTED_LEVELS.with(Cell::get) & bit != 0) else {
                return;
            };
            let routed = ROUTED_LEVELS.with(|r| {
                r.set(r.get() & !bit);
                r.get().count_ones()
            });
            if routed > 0 {
                return;
            }
            IN_CALL.with(|c| c.set(false));
            let created = CREATED_NODES.with(|n| std::mem::take(&mut *n.borrow_mut()));
            if !EXIT_WANTED.with(|w| w.replace(false)) && created.is_empty() {
                return;
            }
            if let Some(session) = session_for(cb.context_uid) {
                session.on_call_exit(cb, created);
            }
        }
    }
}

/// Bumped each time the launch callbacks are turned on ([`set_launch_callbacks`]).
static LAUNCH_EPOCH: AtomicU64 = AtomicU64::new(0);

/// A thread that was inside a call when the callbacks were turned off never heard its exit:
/// its depth and routing bits are stale once they are on again, so the first callback of a
/// new epoch starts the thread's bookkeeping afresh.
fn forget_calls_of_an_earlier_epoch() {
    let epoch = LAUNCH_EPOCH.load(Ordering::Relaxed);
    if SEEN_EPOCH.with(Cell::get) == epoch {
        return;
    }
    SEEN_EPOCH.with(|e| e.set(epoch));
    CALL_DEPTH.with(|d| d.set(0));
    ROUTED_LEVELS.with(|r| r.set(0));
    IN_CALL.with(|c| c.set(false));
    EXIT_WANTED.with(|w| w.set(false));
    CREATED_NODES.with(|n| n.borrow_mut().clear());
}

/// What runs at the entry of the next outermost launch or transfer call: an on-demand capture
/// that starts "at the next CUDA call" starts there, on the launching thread, before the hub
/// looks the call's session up (so the call is already the new session's). Not while a
/// stream of the program captures: then at the first such call after the capture ended. Given the
/// call's context id; it clears itself ([`set_launch_hook`] with `None`) once it has run.
pub(crate) type LaunchHook = Arc<dyn Fn(u32) + Send + Sync>;

static LAUNCH_HOOK: Mutex<Option<LaunchHook>> = Mutex::new(None);
/// Whether [`LAUNCH_HOOK`] is set: the only cost to a call while none is.
static LAUNCH_HOOK_SET: AtomicBool = AtomicBool::new(false);

/// Sets (or clears, with `None`) the hook run at the next outermost launch or transfer call.
pub(crate) fn set_launch_hook(hook: Option<LaunchHook>) {
    let mut slot = LAUNCH_HOOK.lock();
    if hook.is_some() {
        LAUNCH_HOOK_DEFERRED.store(0, Ordering::Relaxed);
    }
    LAUNCH_HOOK_SET.store(hook.is_some(), Ordering::Release);
    *slot = hook;
}

/// Calls at which the launch hook did not run because a stream captured, since it was set.
static LAUNCH_HOOK_DEFERRED: AtomicU64 = AtomicU64::new(0);

/// The launch hook waits for a call made while no stream captures: what it starts (a
/// session) turns on CUPTI's collection, which would invalidate the program's capture. Said
/// once per hook.
fn defer_launch_hook() {
    if LAUNCH_HOOK_DEFERRED.fetch_add(1, Ordering::Relaxed) == 0 {
        tracing::warn!(
            "gmprof: a CUDA stream capture is in progress: the capture armed for the next CUDA call starts at the \
             first call after it ends"
        );
    }
}

/// Calls at which the hook set last did not run because a stream captured.
#[cfg(test)]
pub(crate) fn launch_hook_deferred() -> u64 {
    LAUNCH_HOOK_DEFERRED.load(Ordering::Relaxed)
}

fn run_launch_hook(context_uid: u32) {
    // Not held while the hook runs: it starts a session, which joins the hub.
    let hook = LAUNCH_HOOK.lock().clone();
    if let Some(hook) = hook {
        hook(context_uid);
    }
}

/// Turns the pinned subscriber's launch, transfer and graph node callbacks on or off (an
/// on-demand gmprof: off while idle). Needs [`pin`].
pub(crate) fn set_launch_callbacks(on: bool) -> Result<()> {
    let registration = REGISTRATION.lock();
    let reg = registration
        .as_ref()
        .filter(|r| r.pinned)
        .ok_or_else(|| Error::InvalidState("launch callbacks are switched only by an injected gmprof".into()))?;
    if on {
        LAUNCH_EPOCH.fetch_add(1, Ordering::AcqRel);
    }
    reg.subscriber.set_launch_callbacks(on)
}

/// Hears the program's `cuProfilerStart`/`cuProfilerStop` on the pinned registration.
pub(crate) fn watch_profiler_api(handler: ProfilerApiHandler) -> Result<()> {
    let registration = REGISTRATION.lock();
    let reg = registration
        .as_ref()
        .filter(|r| r.pinned)
        .ok_or_else(|| Error::InvalidState("the profiler API is heard only by an injected gmprof".into()))?;
    reg.subscriber.watch_profiler_api(handler)
}

/// The bit of [`ROUTED_LEVELS`] for call depth `depth` (1-based); none past 64 levels, whose
/// calls are then not routed to a session.
fn depth_bit(depth: u32) -> Option<u64> {
    (1..=64).contains(&depth).then(|| 1u64 << (depth - 1))
}

/// A route to a session with no CUPTI registration behind it, removed on drop: the launch-path
/// benchmark's session hears callbacks through [`route_callback`] as a joined one does.
#[cfg(any(test, feature = "bench-internals"))]
pub(crate) struct BenchRoute(Weak<dyn CaptureSession>);

#[cfg(any(test, feature = "bench-internals"))]
impl BenchRoute {
    pub(crate) fn add(context_id: u32, session: Weak<dyn CaptureSession>) -> BenchRoute {
        change_routes(|routes| routes.push(Route { context_id, session: session.clone() }));
        BenchRoute(session)
    }

    /// The handler the hub's subscriber gives CUPTI: routes a callback to its session.
    pub(crate) fn handler() -> crate::checked::callback::ApiHandler {
        Arc::new(route_callback)
    }
}

#[cfg(any(test, feature = "bench-internals"))]
impl Drop for BenchRoute {
    fn drop(&mut self) {
        change_routes(|routes| routes.retain(|r| !r.session.ptr_eq(&self.0)));
    }
}

fn route_records(records: Vec<ActivityRecord>) {
    let several =
        SEVERAL_ROUTES.load(Ordering::Acquire) && records.iter().any(|r| matches!(r, ActivityRecord::Transfer(_)));
    let calls = several.then(|| TRANSFER_CALLS.lock());
    let mut records: Vec<(u32, ActivityRecord)> =
        records.into_iter().map(|r| (route_key(&r, calls.as_deref()), r)).collect();
    drop(calls);
    while let Some((ctx, _)) = records.first() {
        let ctx = *ctx;
        let (mine, rest): (Vec<_>, Vec<_>) = records.into_iter().partition(|(key, _)| *key == ctx);
        let mine: Vec<ActivityRecord> = mine.into_iter().map(|(_, r)| r).collect();
        if let Some(session) = session_for(ctx) {
            session.on_records(mine);
        } else {
            let kernels: Vec<&ActivityRecord> =
                mine.iter().filter(|r| matches!(r, ActivityRecord::Kernel(_))).collect();
            if let Some(ActivityRecord::Kernel(k)) = kernels.first() {
                note_unprofiled(ctx, 0, kernels.len() as u64, Some(k.device_id));
            }
        }
        records = rest;
    }
}

thread_local! {
    /// Depth of launch, memcpy and memset calls on this thread (the runtime calls the
    /// driver inside).
    static CALL_DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The depths (bit `d - 1` for depth `d`) whose call in flight reached a session; their
    /// number is the depth of routed calls.
    static ROUTED_LEVELS: Cell<u64> = const { Cell::new(0) };
    /// Whether this thread is inside a launch, memcpy or memset call gmprof heard.
    static IN_CALL: Cell<bool> = const { Cell::new(false) };
    /// Whether the session asked for the exit callback of this thread's outermost call.
    static EXIT_WANTED: Cell<bool> = const { Cell::new(false) };
    /// Graph nodes created inside this thread's call in flight: nodes made while the call's
    /// stream was capturing.
    static CREATED_NODES: RefCell<Vec<CapturedNode>> = const { RefCell::new(Vec::new()) };
    /// The [`LAUNCH_EPOCH`] this thread's bookkeeping belongs to.
    static SEEN_EPOCH: Cell<u64> = const { Cell::new(0) };
}

/// Asks for the exit callback of this thread's outermost call in flight
/// ([`CaptureSession::on_call_exit`]). Called from a session's enter handler, before it
/// takes anything its exit must give back.
pub(crate) fn want_exit() {
    EXIT_WANTED.with(|w| w.set(true));
}

/// Graph node events. A node created inside a launch, memcpy or memset call was captured
/// into a graph by that call; nodes made by the graph APIs themselves (adding nodes,
/// cloning, instantiating) are not calls gmprof records.
fn route_graph_event(event: GraphEvent) {
    if let GraphEvent::NodeCreated { graph_id, node_id, node_type } = event {
        if IN_CALL.with(Cell::get) {
            CREATED_NODES.with(|n| n.borrow_mut().push(CapturedNode { graph_id, node_id, node_type }));
        }
    }
}

/// A graph node created on this thread, as CUPTI's resource callback reports one: for the
/// launch-path harness, whose calls then build graphs as a capturing stream's calls do.
#[cfg(any(test, feature = "bench-internals"))]
pub(crate) fn node_created(graph_id: u32, node_id: u64, node_type: u32) {
    route_graph_event(GraphEvent::NodeCreated { graph_id, node_id, node_type });
}

/// The subscriber gmprof needs: launch and transfer callbacks routed to sessions, graph
/// node events for capture awareness, and the begins and ends of the program's stream
/// captures, during which gmprof waits for nothing (`stream_capture`): its first driver
/// watcher, so every other one hears a capture's begin and end after it was noted. These stay
/// on while an on-demand gmprof's launch callbacks are off, so a capture begun while it is
/// idle is known when it starts.
fn subscribe(cupti: &Cupti) -> Result<Subscriber> {
    let subscriber = Subscriber::subscribe_launches(cupti, Arc::new(route_callback), true)?;
    subscriber.watch_graphs(Arc::new(route_graph_event))?;
    subscriber.watch_driver(
        Arc::new(|call| {
            stream_capture::note_call(call);
        }),
        stream_capture::CBIDS,
    )?;
    Ok(subscriber)
}

fn activity_stats(registration: &Option<Registration>) -> ActivityStats {
    registration.as_ref().and_then(|r| r.activity.as_ref()).map(|a| a.stats()).unwrap_or_default()
}

/// The process's activity counters since CUPTI's activity was enabled (every session's: a
/// record CUPTI dropped cannot be attributed to a context); the live metrics read them at
/// each drain. Zero while no session records activity.
pub(crate) fn process_activity_stats() -> ActivityStats {
    activity_stats(&REGISTRATION.lock())
}

/// Subscribes for the rest of the process and routes NVTX range events and context events
/// to the given handlers, in addition to the launch callbacks sessions use. For injection,
/// which must hear a program's first context and NVTX ranges before any session exists.
/// CUPTI takes the subscription before CUDA is initialized (an injected gmprof pins at the
/// program's first NVTX call). A registration this call made is dropped again if the call
/// fails, so a later `pin` starts clean.
pub(crate) fn pin(cupti: &Cupti, nvtx: NvtxHandler, contexts: ContextHandler) -> Result<()> {
    let mut registration = REGISTRATION.lock();
    let created = registration.is_none();
    if created {
        let subscriber = subscribe(cupti)?;
        *registration = Some(Registration { subscriber, activity: None, pinned: false });
    }
    let Some(reg) = registration.as_mut() else {
        return Err(Error::InvalidState("the capture hub lost its registration".into()));
    };
    let watched = reg.subscriber.watch_nvtx(nvtx).and_then(|()| reg.subscriber.watch_contexts(contexts));
    match watched {
        Ok(()) => {
            reg.pinned = true;
            Ok(())
        }
        Err(e) => {
            if created {
                // Dropping the subscriber unsubscribes it.
                *registration = None;
            }
            Err(e)
        }
    }
}

/// Hooks `cbids` of the driver API for the probe engine, on the pinned registration (an
/// injected gmprof: see [`pin`], which must have run). It hears a stream capture's begin and
/// end after the hub's own watcher has noted it.
pub(crate) fn watch_driver(hook: DriverHook, cbids: &[DriverCbid]) -> Result<()> {
    let registration = REGISTRATION.lock();
    let reg = registration
        .as_ref()
        .filter(|r| r.pinned)
        .ok_or_else(|| Error::InvalidState("probes need gmprof run (an injected gmprof)".into()))?;
    reg.subscriber.watch_driver(hook, cbids)
}

/// Hands the cubin of every module loaded from now on to `handler`, on the pinned
/// registration (an injected gmprof).
pub(crate) fn watch_modules(handler: crate::checked::callback::ModuleHandler) -> Result<()> {
    let registration = REGISTRATION.lock();
    let reg = registration
        .as_ref()
        .filter(|r| r.pinned)
        .ok_or_else(|| Error::InvalidState("SASS source lines need gmprof run (an injected gmprof)".into()))?;
    reg.subscriber.watch_modules(handler)
}

/// Membership of one session; leaving happens in [`HubMembership::leave`] or on drop.
#[must_use = "dropping the membership detaches the session from CUPTI"]
pub(crate) struct HubMembership {
    cupti: Cupti,
    context_id: u32,
    stats_at_join: ActivityStats,
    left: bool,
}

impl std::fmt::Debug for HubMembership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubMembership").field("context_id", &self.context_id).finish_non_exhaustive()
    }
}

/// Attaches `session` for CUDA context `context_id`, starting CUPTI's callbacks and
/// activity tracing if it is the first session.
pub(crate) fn join(
    cupti: &Cupti,
    context_id: u32,
    session: Weak<dyn CaptureSession>,
    kinds: ActivityKinds,
) -> Result<HubMembership> {
    let mut registration = REGISTRATION.lock();
    change_routes(|routes| {
        routes.retain(|r| r.session.strong_count() > 0);
        if routes.iter().any(|r| r.context_id == context_id) {
            return Err(Error::InvalidState(format!(
                "a gmprof profiler is already attached to CUDA context {context_id}; finish it first"
            )));
        }
        routes.push(Route { context_id, session });
        Ok(())
    })?;
    let started = (|| {
        if registration.is_none() {
            let subscriber = subscribe(cupti)?;
            *registration = Some(Registration { subscriber, activity: None, pinned: false });
        }
        if let Some(reg) = registration.as_mut().filter(|r| r.activity.is_none()) {
            reg.activity =
                Some(ActivityTracing::start(cupti, kinds, PREALLOCATED_ACTIVITY_BUFFERS, Arc::new(route_records))?);
        } else if let Some(activity) = registration.as_mut().and_then(|r| r.activity.as_mut()) {
            crate::checked::activity::grow_pool(PREALLOCATED_ACTIVITY_BUFFERS * ROUTES.read().len().max(1));
            // One set of kinds per process: the newest profiler's (kernel replay must not
            // have memset records; see ActivityKinds::KernelsAndMemcpy).
            if activity.kinds() != kinds {
                activity.set_kinds(kinds)?;
            }
        }
        Ok::<_, Error>(())
    })();
    if let Err(e) = started {
        change_routes(|routes| routes.retain(|r| r.context_id != context_id));
        if registration.as_ref().is_some_and(|r| !r.pinned && r.activity.is_none()) {
            if let Some(reg) = registration.take() {
                let _ = reg.subscriber.shutdown();
                stream_capture::unfollowed();
            }
        }
        return Err(e);
    }
    let stats_at_join = activity_stats(&registration);
    Ok(HubMembership { cupti: *cupti, context_id, stats_at_join, left: false })
}

impl HubMembership {
    /// Delivers every buffered activity record to its session now.
    pub(crate) fn flush(&self) -> Result<()> {
        activity::flush_all(&self.cupti, true)
    }

    /// Activity counters since this session joined (they are process-wide: a record CUPTI
    /// dropped cannot be attributed to a context).
    /// The other contexts of the process that no session profiled (see [`unprofiled_contexts`]).
    pub(crate) fn unprofiled_contexts(&self) -> Vec<UnprofiledContext> {
        unprofiled_contexts(self.context_id)
    }

    pub(crate) fn stats(&self) -> ActivityStats {
        let registration = REGISTRATION.lock();
        let live = registration.as_ref().is_some_and(|r| r.activity.is_some());
        let now = if live { activity_stats(&registration) } else { self.stats_at_join };
        ActivityStats {
            records_dropped: now.records_dropped.saturating_sub(self.stats_at_join.records_dropped),
            buffers_allocated_late: now
                .buffers_allocated_late
                .saturating_sub(self.stats_at_join.buffers_allocated_late),
            callback_panics: now.callback_panics.saturating_sub(self.stats_at_join.callback_panics),
            buffers_cut_short: now.buffers_cut_short.saturating_sub(self.stats_at_join.buffers_cut_short),
            dropped_counts_unread: now.dropped_counts_unread.saturating_sub(self.stats_at_join.dropped_counts_unread),
        }
    }

    /// Flushes this session's records to it, detaches it, and tears CUPTI's registration
    /// down when it was the last session.
    pub(crate) fn leave(mut self) -> Result<()> {
        self.detach()
    }

    fn detach(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.left, true) {
            return Ok(());
        }
        let flushed = self.flush();
        let mut registration = REGISTRATION.lock();
        let empty = change_routes(|routes| {
            routes.retain(|r| r.context_id != self.context_id && r.session.strong_count() > 0);
            routes.is_empty()
        });
        let mut result = flushed;
        if empty {
            if registration.as_ref().is_some_and(|r| r.pinned) {
                if let Some(act) = registration.as_mut().and_then(|r| r.activity.take()) {
                    result = result.and(act.shutdown());
                }
            } else if let Some(reg) = registration.take() {
                let sub = reg.subscriber.shutdown();
                stream_capture::unfollowed();
                let act = reg.activity.map_or(Ok(()), ActivityTracing::shutdown);
                result = result.and(sub).and(act);
            }
        }
        result
    }
}

impl Drop for HubMembership {
    fn drop(&mut self) {
        if let Err(e) = self.detach() {
            tracing::warn!("gmprof: {e}");
        }
    }
}

#[cfg(test)]
#[path = "hub_tests.rs"]
mod tests;

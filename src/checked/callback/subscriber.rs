//! The CUPTI callback subscriber ([`Subscriber`]): subscribes the trampoline, enables the
//! callbacks each `watch_*` asks for, and unsubscribes on drop.
//!
//! Imports `dispatch` (the trampoline and its handler box), `events` (the handler types) and
//! `ids`; `callback/mod.rs` re-exports it.

use std::os::raw::c_void;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use super::dispatch::{trampoline, DriverHooks, HandlerBox, MAX_DRIVER_WATCHERS};
use super::events::{
    ApiHandler, ContextHandler, DriverHook, GraphHandler, ModuleHandler, NvtxHandler, ProfilerApiHandler,
};
use super::ids::{
    transfer_cbids, DRIVER_GRAPH_LAUNCHES, DRIVER_KERNEL_LAUNCHES, GRAPH_NODE_CBIDS, NVTX_RANGE_CALLBACKS,
    PROFILER_API_CBIDS, RUNTIME_GRAPH_LAUNCHES, RUNTIME_KERNEL_LAUNCHES,
};
use crate::checked::library::Cupti;
use crate::error::{Error, Result};
use crate::sys::cupti::{
    CUpti_CallbackDomain, CUpti_CallbackIdResource, CUpti_SubscriberHandle,
    CUpti_driver_api_trace_cbid_enum as DriverCbid, CUpti_runtime_api_trace_cbid_enum as RuntimeCbid,
};

/// A CUPTI callback subscriber; unsubscribed on drop. Only one may exist per process
/// (CUPTI refuses a second with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED).
#[must_use = "dropping it unsubscribes"]
pub struct Subscriber {
    cupti: Cupti,
    handle: CUpti_SubscriberHandle,
    userdata: *mut HandlerBox,
    /// The launch and transfer callbacks [`Subscriber::subscribe_launches`] enabled, which
    /// [`Subscriber::set_launch_callbacks`] turns off and on again.
    launch_cbids: Vec<(CUpti_CallbackDomain, u32)>,
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Subscriber")
    }
}

// SAFETY: the handle is an opaque CUPTI token usable from any thread; the handler box is
// `Send + Sync` (its handler is).
unsafe impl Send for Subscriber {}
// SAFETY: as above; &Subscriber exposes no mutation.
unsafe impl Sync for Subscriber {}

impl Subscriber {
    /// Subscribes `handler` and enables the kernel and graph launch callbacks of the driver
    /// and runtime APIs, and, with `transfers`, their memcpy and memset callbacks.
    pub fn subscribe_launches(cupti: &Cupti, handler: ApiHandler, transfers: bool) -> Result<Subscriber> {
        let (driver_transfers, runtime_transfers) = if transfers {
            (
                transfer_cbids(
                    cupti,
                    CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
                    DriverCbid::CUPTI_DRIVER_TRACE_CBID_SIZE.0,
                ),
                transfer_cbids(
                    cupti,
                    CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API,
                    RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_SIZE.0,
                ),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let userdata = Box::into_raw(Box::new(HandlerBox::new(*cupti, handler, &driver_transfers, &runtime_transfers)));
        let mut handle: CUpti_SubscriberHandle = std::ptr::null_mut();
        let subscribed = call_cupti!(cupti, cuptiSubscribe, "subscribing to CUPTI callbacks", |f| {
            // SAFETY: the trampoline never unwinds; `userdata` stays valid until unsubscribe.
            unsafe { f(&mut handle, Some(trampoline), userdata as *mut c_void) }
        });
        if let Err(e) = subscribed {
            // SAFETY: CUPTI did not take the pointer; reclaim it once.
            drop(unsafe { Box::from_raw(userdata) });
            return Err(e);
        }
        let driver = CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API;
        let runtime = CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API;
        let launch_cbids = DRIVER_KERNEL_LAUNCHES
            .iter()
            .chain(DRIVER_GRAPH_LAUNCHES)
            .map(|c| (driver, c.0))
            .chain(RUNTIME_KERNEL_LAUNCHES.iter().chain(RUNTIME_GRAPH_LAUNCHES).map(|c| (runtime, c.0)))
            .chain(driver_transfers.iter().map(|&c| (driver, c)))
            .chain(runtime_transfers.iter().map(|&c| (runtime, c)))
            .collect();
        let sub = Subscriber { cupti: *cupti, handle, userdata, launch_cbids };
        sub.set_launch_callbacks(true)?;
        Ok(sub)
    }

    /// Calls `handler` for every default-domain NVTX range push and pop. Set once per
    /// subscriber.
    pub fn watch_nvtx(&self, handler: NvtxHandler) -> Result<()> {
        let cbids: Vec<u32> = NVTX_RANGE_CALLBACKS.iter().map(|c| c.0).collect();
        self.watch(|b| &b.nvtx, handler, "NVTX callbacks", CUpti_CallbackDomain::CUPTI_CB_DOMAIN_NVTX, &cbids)
    }

    /// Calls `handler` when a context is created and when one starts being destroyed. Set
    /// once per subscriber.
    pub fn watch_contexts(&self, handler: ContextHandler) -> Result<()> {
        let cbids = [
            CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_CONTEXT_CREATED.0,
            CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING.0,
        ];
        self.watch(|b| &b.contexts, handler, "context events", CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE, &cbids)
    }

    /// Calls `handler` when a CUDA graph node is created or cloned. Set once per subscriber.
    pub fn watch_graphs(&self, handler: GraphHandler) -> Result<()> {
        let cbids = GRAPH_NODE_CBIDS.map(|c| c.0);
        self.watch(|b| &b.graphs, handler, "graph events", CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE, &cbids)
    }

    /// Calls `handler` with the cubin of every module loaded from now on. Set once per
    /// subscriber.
    pub fn watch_modules(&self, handler: ModuleHandler) -> Result<()> {
        let cbids = [CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_MODULE_LOADED.0];
        self.watch(|b| &b.modules, handler, "module loads", CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE, &cbids)
    }

    /// Sets one of the subscriber's handlers (once) and enables its callbacks.
    fn watch<T>(
        &self,
        slot: impl Fn(&HandlerBox) -> &OnceLock<T>,
        handler: T,
        what: &str,
        domain: CUpti_CallbackDomain,
        cbids: &[u32],
    ) -> Result<()> {
        // SAFETY: `userdata` lives until `close`, which needs `&mut self`.
        let boxed = unsafe { &*self.userdata };
        slot(boxed).set(handler).map_err(|_| Error::InvalidState(format!("{what} are already watched")))?;
        for &cbid in cbids {
            self.enable(domain, cbid)?;
        }
        Ok(())
    }

    /// Calls `hook` on enter and exit of the driver calls `cbids` (kernel launches, module
    /// loads, stream captures' begins and ends), before the launch handler. Up to
    /// four watchers may be set, once each; they hear a call in the order they were set.
    pub fn watch_driver(&self, hook: DriverHook, cbids: &[DriverCbid]) -> Result<()> {
        // SAFETY: `userdata` lives until `close`, which needs `&mut self`.
        let boxed = unsafe { &*self.userdata };
        let mut ids: Vec<u32> = cbids.iter().map(|c| c.0).collect();
        ids.sort_unstable();
        ids.dedup();
        let launches: Vec<u32> = DRIVER_KERNEL_LAUNCHES.iter().chain(DRIVER_GRAPH_LAUNCHES).map(|c| c.0).collect();
        let hook_only: Vec<u32> = ids.iter().copied().filter(|c| !launches.contains(c)).collect();
        let mut watcher = DriverHooks { hook, cbids: ids.clone(), hook_only };
        let mut set = false;
        for slot in &boxed.driver_hooks {
            match slot.set(watcher) {
                Ok(()) => {
                    set = true;
                    break;
                }
                Err(back) => watcher = back,
            }
        }
        if !set {
            return Err(Error::InvalidState(format!("driver calls already have {MAX_DRIVER_WATCHERS} watchers")));
        }
        for cbid in ids {
            self.enable(CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API, cbid)?;
        }
        Ok(())
    }

    /// Turns the launch and transfer callbacks of [`Subscriber::subscribe_launches`] on or off,
    /// with the graph node callbacks of [`Subscriber::watch_graphs`] when they are watched. An
    /// on-demand gmprof keeps them off while it is idle: a program's CUDA calls then pay for no
    /// callback of gmprof's.
    pub fn set_launch_callbacks(&self, on: bool) -> Result<()> {
        for &(domain, cbid) in &self.launch_cbids {
            self.set_callback(on, domain, cbid)?;
        }
        // SAFETY: `userdata` lives until `close`, which needs `&mut self`.
        if unsafe { &*self.userdata }.graphs.get().is_some() {
            for cbid in GRAPH_NODE_CBIDS {
                self.set_callback(on, CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE, cbid.0)?;
            }
        }
        Ok(())
    }

    /// Calls `handler` on entry of `cuProfilerStart` and `cuProfilerStop` (which
    /// `cudaProfilerStart`/`Stop` call). Set once per subscriber.
    pub fn watch_profiler_api(&self, handler: ProfilerApiHandler) -> Result<()> {
        let cbids: Vec<u32> = PROFILER_API_CBIDS.iter().map(|c| c.0).collect();
        self.watch(
            |b| &b.profiler_api,
            handler,
            "profiler API calls",
            CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
            &cbids,
        )
    }

    fn enable(&self, domain: CUpti_CallbackDomain, cbid: u32) -> Result<()> {
        self.set_callback(true, domain, cbid)
    }

    fn set_callback(&self, on: bool, domain: CUpti_CallbackDomain, cbid: u32) -> Result<()> {
        let handle = self.handle;
        let what = if on { "enabling a callback" } else { "disabling a callback" };
        call_cupti!(self.cupti, cuptiEnableCallback, what, |f| {
            // SAFETY: `handle` is our live subscriber.
            unsafe { f(u32::from(on), handle, domain, cbid) }
        })
    }

    /// Panics caught inside the handler so far.
    pub fn caught_panics(&self) -> u64 {
        // SAFETY: `userdata` lives until `close`, which needs `&mut self`.
        unsafe { &*self.userdata }.panics.load(Ordering::Relaxed)
    }

    /// Unsubscribes, reporting failure.
    pub fn shutdown(mut self) -> Result<()> {
        self.close()
    }

    fn close(&mut self) -> Result<()> {
        if self.handle.is_null() {
            return Ok(());
        }
        let handle = std::mem::replace(&mut self.handle, std::ptr::null_mut());
        let r = call_cupti!(self.cupti, cuptiUnsubscribe, "unsubscribing from CUPTI callbacks", |f| {
            // SAFETY: `handle` is live and unsubscribed once.
            unsafe { f(handle) }
        });
        if r.is_ok() {
            // SAFETY: after cuptiUnsubscribe returns CUPTI no longer calls the trampoline
            // with this userdata, so the box can be freed.
            drop(unsafe { Box::from_raw(self.userdata) });
        }
        // On failure the box is leaked on purpose: a callback might still use it.
        r
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!("{e}");
        }
    }
}

//! The host API of the in-kernel region timers: a device buffer for a launch, and the
//! collection that decodes it and ties it to the launch.
//!
//! ```no_run
//! # fn main() -> gmprof::Result<()> {
//! use gmprof::ways_in::device_timers::DeviceTimerBuffer;
//! let timers = DeviceTimerBuffer::new(1 << 16)?; // 65 536 records, in the current context
//! // launch a kernel built with include/gmprof_device.cuh, passing timers.device_ptr()
//! let names = ["load", "compute", "store"].map(String::from);
//! let launch = timers.collect(&names)?; // synchronizes, decodes, takes the launch's id
//! println!("{} spans, {} records overflowed", launch.spans.spans.len(), launch.overflow());
//! gmprof::device_timers::submit(launch); // into the outputs written at finish
//! timers.reset()?; // ready for the next launch
//! # Ok(()) }
//! ```
//!
//! [`DeviceTimerBuffer::collect`] takes the correlation id of the last kernel launch the
//! profiler recorded on the calling thread ([`crate::capture::last_launch`]): collect on
//! the launching thread, before launching anything else. Launches submitted with
//! [`crate::device_timers::submit`] are attached to the report that the outputs are written
//! from (`gmprof_finish`, a checkpoint, `gmprof run`); with the Rust profiler, attach them
//! yourself with [`Report::attach_device_timers`](crate::Report::attach_device_timers).
//!
//! While a CUDA stream of the program captures (`crate::capture::stream_capture`, heard while
//! gmprof is injected or a profiler runs), every call here that would allocate, copy or
//! synchronize is refused with an error that says so, and a buffer dropped then is freed at
//! the next call made outside a capture: any of them would invalidate the program's capture.

use parking_lot::Mutex;

use crate::capture::last_launch::last_kernel_correlation_id;
use crate::capture::stream_capture;
use crate::checked::device_memory::{self, DevicePtr};
use crate::checked::driver;
use crate::device_timers::format::{buffer_bytes, host_header, HEADER_WORDS};
use crate::device_timers::{TimedLaunch, TrackLayout};
use crate::error::{Error, Result};

/// Buffers dropped while a stream captured: freed at the next call outside a capture.
static FREE_LATER: Mutex<Vec<DevicePtr>> = Mutex::new(Vec::new());

/// An error when a stream captures now (`what` would break the capture); else frees what
/// waited for the capture's end.
fn outside_capture(what: &str) -> Result<()> {
    if stream_capture::any() {
        return Err(Error::InvalidState(format!(
            "device timers: {what} while a CUDA stream captures would invalidate the program's capture \
             (cudaErrorStreamCaptureInvalidated); call it after the capture ends"
        )));
    }
    for ptr in std::mem::take(&mut *FREE_LATER.lock()) {
        // SAFETY: a buffer's allocation, dropped during a capture and freed once, here.
        if let Err(e) = unsafe { device_memory::free(ptr) } {
            tracing::warn!("gmprof: could not free a device timer buffer: {e}");
        }
    }
    Ok(())
}

/// A device buffer for one launch's timer records (freed on drop).
#[derive(Debug)]
pub struct DeviceTimerBuffer {
    ptr: DevicePtr,
    capacity: u32,
}

impl DeviceTimerBuffer {
    /// Allocates room for `capacity` records in the current CUDA context, zeroed, with its
    /// header written.
    pub fn new(capacity: u32) -> Result<Self> {
        if capacity == 0 {
            return Err(Error::InvalidConfig("device timers: a buffer needs room for at least one record".into()));
        }
        outside_capture("allocating a buffer")?;
        let ptr = device_memory::alloc(buffer_bytes(capacity))?;
        let buffer = Self { ptr, capacity };
        // Records are 16-byte stores (the device flags and skips a misaligned base); the
        // driver's allocations are 256-byte aligned, so this only guards against a surprise.
        if ptr % 16 != 0 {
            return Err(Error::InvalidState(format!(
                "device timers: the driver returned {ptr:#x}, not 16-byte aligned"
            )));
        }
        buffer.reset()?;
        Ok(buffer)
    }

    /// The pointer to pass to the kernel (`unsigned long long *`, 16-byte aligned).
    pub fn device_ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Records the buffer holds.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Zeroes the records and rewrites the header, for the next launch.
    pub fn reset(&self) -> Result<()> {
        outside_capture("resetting a buffer")?;
        // SAFETY: the whole range is this buffer's allocation.
        unsafe {
            device_memory::zero(self.ptr, buffer_bytes(self.capacity))?;
            device_memory::write_words(self.ptr, &host_header(self.capacity))
        }
    }

    /// Synchronizes the context and copies the buffer back (header and records).
    pub fn read(&self) -> Result<Vec<u64>> {
        outside_capture("reading a buffer")?;
        driver::synchronize(&crate::checked::library::Driver::load()?)?;
        // SAFETY: the buffer is `HEADER_WORDS + 2 * capacity` words of our allocation.
        unsafe { device_memory::read_words(self.ptr, HEADER_WORDS + 2 * self.capacity as usize) }
    }

    /// Reads and decodes the buffer, tied to the last kernel launch profiled on this thread.
    pub fn collect(&self, region_names: &[String]) -> Result<TimedLaunch> {
        TimedLaunch::from_words(&self.read()?, region_names, last_kernel_correlation_id())
    }

    /// [`collect`](Self::collect), laid out per `tracks` on the timeline, and submitted to
    /// the process's next outputs.
    pub fn collect_and_submit(&self, region_names: &[String], tracks: TrackLayout) -> Result<()> {
        let mut launch = self.collect(region_names)?;
        launch.tracks = tracks;
        crate::device_timers::submit(launch);
        Ok(())
    }
}

impl Drop for DeviceTimerBuffer {
    fn drop(&mut self) {
        if stream_capture::any() {
            FREE_LATER.lock().push(self.ptr);
            return;
        }
        // SAFETY: `ptr` is this buffer's allocation, freed once, here.
        if let Err(e) = unsafe { device_memory::free(self.ptr) } {
            tracing::warn!("gmprof: could not free a device timer buffer: {e}");
        }
    }
}

/// Synchronizes and copies a buffer the caller allocated (a PyTorch tensor, `cudaMalloc`)
/// from `ptr`: `bytes` bytes, header included.
///
/// # Safety
/// `ptr..ptr + bytes` is readable device memory of the current context.
pub unsafe fn read_device_buffer(ptr: DevicePtr, bytes: usize) -> Result<Vec<u64>> {
    outside_capture("reading a buffer")?;
    driver::synchronize(&crate::checked::library::Driver::load()?)?;
    // SAFETY: guaranteed by the caller.
    unsafe { device_memory::read_words(ptr, bytes / 8) }
}

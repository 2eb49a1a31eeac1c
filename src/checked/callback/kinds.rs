//! The three small enums the callback folder and `checked::memset` share: which side of an API
//! call a callback fires on ([`CallbackSite`]), which API it came from ([`ApiDomain`]), and what
//! the call does ([`LaunchKind`]).
//!
//! The bottom of the folder: it imports nothing of gmprof's. `events`, `ids`, `dispatch` and
//! `bench` import it, and `checked::memset` through `callback/mod.rs`'s re-export.

/// Which side of an API call a callback fires on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallbackSite {
    /// Before the call runs.
    Enter,
    /// After it returned.
    Exit,
}

/// The API a callback came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiDomain {
    /// CUDA driver API.
    Driver,
    /// CUDA runtime API.
    Runtime,
}

/// What an API call gmprof listens to does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchKind {
    /// Launches one kernel.
    Kernel,
    /// Launches a CUDA graph: any number of kernels under one correlation id.
    Graph,
    /// A memcpy or memset.
    Transfer,
}

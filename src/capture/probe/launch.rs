//! How the probe engine refers to a launch ([`Launch`]: its kernel, variant and shape) and
//! the probe_launches.csv row it starts ([`launch_record`]).
//!
//! The bottom of the folder with `config`: imports only `crate::probe` and the report's row;
//! `state`, `sass` and `engine` import it.

use crate::probe::decode::LaunchInfo;
use crate::report::probes::ProbedLaunch as LaunchRecord;

/// How to refer to a launch: its kernel, its variant and its shape.
pub(super) struct Launch {
    pub(super) info: LaunchInfo,
    pub(super) variant: Option<u32>,
}

pub(super) fn launch_record(launch: &Launch) -> LaunchRecord {
    let info = &launch.info;
    LaunchRecord {
        correlation_id: info.correlation_id,
        kernel: info.kernel.clone(),
        blocks: info.blocks,
        threads: info.threads,
        variant: launch.variant,
        ..Default::default()
    }
}

/// The `source` of launches and kernels the SASS path counted.
pub const SASS_SOURCE: &str = "sass-metrics";
/// The `source` of launches and kernels the PTX path probed.
pub const PTX_SOURCE: &str = "ptx-probe";

//! How a run ended, as its outputs record it: finished, ended by a signal, a checkpoint of a
//! run that did not finish, or finished with errors while finishing (a CUDA error that
//! failed the context, a CUPTI call that failed), with what failed.

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// How a run ended, as its outputs record it: a reader of a partial directory must be told
/// that it is partial and what may be missing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum RunEnd {
    /// The profiler finished normally (`finish`, the program's exit, or its context's end).
    Finished {
        /// What ended it: `finish`, `process exit`, `context destroyed`.
        by: String,
    },
    /// A signal ended the process; the outputs were written before it took effect.
    Signal {
        /// The signal number (15 for SIGTERM).
        signal: i32,
        /// Its name (`SIGTERM`).
        name: String,
    },
    /// A periodic or on-demand checkpoint of a run still going: what was complete then.
    /// A run whose last outputs say this was killed (SIGKILL, OOM) or crashed after it.
    Checkpoint {
        /// Why it was written: `periodic`, or the signal whose handler the program kept.
        reason: String,
        /// Kernels launched but left out because their counters or activity were not in yet.
        pending_kernels: u64,
    },
    /// The run ended as `ended` says, and steps of finishing failed: typically the program's
    /// own CUDA error (an illegal address or instruction) failed the context, so the final
    /// synchronize returned it. Every later step was still tried and the outputs hold what
    /// was collected; kernels that never completed are rows with status `not_completed`.
    FinishedWithErrors {
        /// How the run ended otherwise ([`RunEnd::Finished`] or [`RunEnd::Signal`]).
        ended: Box<RunEnd>,
        /// The CUDA error a driver call returned while finishing, when one did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cuda_error: Option<CudaError>,
        /// Each step of finishing that failed, in the order they ran.
        failed_steps: Vec<FailedStep>,
    },
}

impl RunEnd {
    /// A one-line account for summaries and `gmprof run`.
    pub fn describe(&self) -> String {
        match self {
            RunEnd::Finished { by } => format!("finished ({by})"),
            RunEnd::Signal { signal, name } => format!("ended by signal {signal} ({name}); outputs written first"),
            RunEnd::Checkpoint { reason, pending_kernels } => format!(
                "partial: last checkpoint ({reason}); the run did not finish after it{}",
                if *pending_kernels > 0 {
                    format!(", and {pending_kernels} kernel(s) launched before it were still pending")
                } else {
                    String::new()
                }
            ),
            RunEnd::FinishedWithErrors { ended, cuda_error, failed_steps } => {
                let cause = match cuda_error {
                    Some(e) => format!("after {}", e.describe()),
                    None => "with errors".to_owned(),
                };
                let steps: Vec<&str> = failed_steps.iter().map(|s| s.step.as_str()).collect();
                format!(
                    "{}, {cause}; failed while finishing: {}; the outputs hold what was collected",
                    ended.describe(),
                    steps.join(", ")
                )
            }
        }
    }

    /// True when the outputs are final (not a checkpoint of a run that went on).
    pub fn is_complete(&self) -> bool {
        match self {
            RunEnd::Checkpoint { .. } => false,
            RunEnd::FinishedWithErrors { ended, .. } => ended.is_complete(),
            RunEnd::Finished { .. } | RunEnd::Signal { .. } => true,
        }
    }

    /// This end with the steps of finishing that failed: unchanged when none did.
    pub fn with_failures(self, cuda_error: Option<CudaError>, failed_steps: Vec<FailedStep>) -> RunEnd {
        if failed_steps.is_empty() && cuda_error.is_none() {
            return self;
        }
        RunEnd::FinishedWithErrors { ended: Box::new(self), cuda_error, failed_steps }
    }

    /// The CUDA error that failed the run's context, when one did.
    pub fn cuda_error(&self) -> Option<&CudaError> {
        match self {
            RunEnd::FinishedWithErrors { cuda_error, .. } => cuda_error.as_ref(),
            _ => None,
        }
    }
}

/// A CUDA driver error, as the driver described it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaError {
    /// The numeric `CUresult`, e.g. 715.
    pub code: u32,
    /// Its enum name, e.g. `CUDA_ERROR_ILLEGAL_INSTRUCTION`.
    pub name: String,
    /// The driver's description (`cuGetErrorString`), e.g. `an illegal instruction was
    /// encountered`.
    pub message: String,
}

impl CudaError {
    /// The CUDA error `error` carries, if it is one.
    pub fn from_error(error: &Error) -> Option<CudaError> {
        match error {
            Error::Cuda { code, code_name, description, .. } => {
                Some(CudaError { code: *code, name: code_name.clone(), message: description.clone() })
            }
            _ => None,
        }
    }

    /// Whether the error leaves the context unusable ("sticky", CUDA's documentation: any
    /// further CUDA work returns the same error until the process ends): an illegal address
    /// (700), a launch timeout (702), a device assert (710), a hardware stack error (714),
    /// an illegal instruction (715), a misaligned address (716), an invalid address space
    /// (717), an invalid PC (718), a failed launch (719), an uncorrectable ECC error (214) and
    /// an unknown error (999).
    pub fn is_sticky(&self) -> bool {
        matches!(self.code, 214 | 700 | 702 | 710 | 714..=719 | 999)
    }

    /// `CUDA_ERROR_ILLEGAL_INSTRUCTION (715): an illegal instruction was encountered`.
    pub fn describe(&self) -> String {
        format!("{} ({}): {}", self.name, self.code, self.message)
    }
}

/// A step of finishing a capture, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishStep {
    /// Making the profiled context current on the finishing thread.
    MakeCurrent,
    /// Waiting for the context's work (`cuCtxSynchronize`): where the program's own
    /// asynchronous CUDA error shows.
    Synchronize,
    /// Reading the CUPTI clock for the session's end.
    Timestamp,
    /// Stopping PM sampling and decoding its last samples.
    PmSamplingStop,
    /// Disabling PC sampling and taking its last records.
    PcSamplingStop,
    /// Closing the range profiler's open ranges and stopping it.
    RangeProfilerStop,
    /// Decoding the last counter cycle's image.
    CounterDecode,
    /// Flushing CUPTI's activity buffers.
    ActivityFlush,
}

impl FinishStep {
    /// The step in words, as summaries and warnings name it.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishStep::MakeCurrent => "make the context current",
            FinishStep::Synchronize => "synchronize",
            FinishStep::Timestamp => "timestamp",
            FinishStep::PmSamplingStop => "PM sampling stop",
            FinishStep::PcSamplingStop => "PC sampling stop",
            FinishStep::RangeProfilerStop => "range profiler stop",
            FinishStep::CounterDecode => "counter decode",
            FinishStep::ActivityFlush => "activity flush",
        }
    }
}

/// One step of finishing that failed, with its error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedStep {
    /// The step.
    pub step: FinishStep,
    /// Its error, as gmprof describes it (the call, the code and what gmprof was doing).
    pub error: String,
}

/// The error a context failed by an illegal instruction returns at the final synchronize (as
/// nanoGPT's did on an H100), for tests.
#[cfg(test)]
pub(crate) fn illegal_instruction() -> Error {
    Error::Cuda {
        api: "cuCtxSynchronize",
        code: 715,
        code_name: "CUDA_ERROR_ILLEGAL_INSTRUCTION".into(),
        description: "an illegal instruction was encountered".into(),
        context: "synchronizing the CUDA context".into(),
        hint: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_finish_says_how_the_run_ended_what_failed_and_why() {
        let error = illegal_instruction();
        let cuda = CudaError::from_error(&error).unwrap();
        assert!(cuda.is_sticky());
        let end = RunEnd::Finished { by: "process exit".into() }.with_failures(
            Some(cuda.clone()),
            vec![
                FailedStep { step: FinishStep::Synchronize, error: error.to_string() },
                FailedStep { step: FinishStep::CounterDecode, error: "decode failed".into() },
            ],
        );
        assert_eq!(
            end.describe(),
            "finished (process exit), after CUDA_ERROR_ILLEGAL_INSTRUCTION (715): an illegal instruction was \
             encountered; failed while finishing: synchronize, counter decode; the outputs hold what was collected"
        );
        assert!(end.is_complete());
        assert_eq!(end.cuda_error(), Some(&cuda));
        let json = serde_json::to_value(&end).unwrap();
        assert_eq!(json["kind"], "finished_with_errors");
        assert_eq!(json["ended"]["kind"], "finished");
        assert_eq!(json["cuda_error"]["code"], 715);
        assert_eq!(json["cuda_error"]["name"], "CUDA_ERROR_ILLEGAL_INSTRUCTION");
        assert_eq!(json["failed_steps"][0]["step"], "synchronize");
        assert_eq!(
            json["failed_steps"][0]["error"],
            "cuCtxSynchronize failed with CUDA_ERROR_ILLEGAL_INSTRUCTION (715): an illegal instruction was \
             encountered (while synchronizing the CUDA context)"
        );
        assert_eq!(serde_json::from_value::<RunEnd>(json).unwrap(), end);
    }

    #[test]
    fn nothing_failed_leaves_the_end_as_it_was() {
        let end = RunEnd::Signal { signal: 15, name: "SIGTERM".into() };
        assert_eq!(end.clone().with_failures(None, Vec::new()), end);
        assert_eq!(end.cuda_error(), None);
        // A CUPTI failure without a CUDA error: no cause named, the step listed.
        let cupti = end.with_failures(
            None,
            vec![FailedStep { step: FinishStep::ActivityFlush, error: "cuptiActivityFlushAll failed".into() }],
        );
        assert_eq!(
            cupti.describe(),
            "ended by signal 15 (SIGTERM); outputs written first, with errors; failed while finishing: activity \
             flush; the outputs hold what was collected"
        );
        let not_sticky =
            CudaError { code: 2, name: "CUDA_ERROR_OUT_OF_MEMORY".into(), message: "out of memory".into() };
        assert!(!not_sticky.is_sticky());
        assert_eq!(CudaError::from_error(&Error::InvalidState("x".into())), None);
    }
}

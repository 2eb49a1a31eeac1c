//! The correlation's warning log: the first few in full, the rest counted.
//!
//! Imports only `rows` ([`MAX_WARNINGS`]); `correlator`, `build` and `join` use it.

use super::rows::MAX_WARNINGS;

/// Collects warnings: keeps the first [`MAX_WARNINGS`], logs them, counts the rest.
#[derive(Clone, Debug, Default)]
pub(crate) struct WarningLog {
    kept: Vec<String>,
    suppressed: u64,
}

impl WarningLog {
    pub(crate) fn push(&mut self, text: String) {
        if self.kept.len() < MAX_WARNINGS {
            tracing::warn!("{text}");
            self.kept.push(text);
        } else {
            self.suppressed += 1;
        }
    }

    pub(crate) fn finish(mut self) -> Vec<String> {
        if self.suppressed > 0 {
            let text = format!("... and {} more warnings like the above", self.suppressed);
            tracing::warn!("{text}");
            self.kept.push(text);
        }
        self.kept
    }
}

//! Text for people: the summary printed at the end of a run ([`summary`]; [`group`] folds
//! numbered range names and sets warm-up apart, [`pc_summary`] writes its PC sampling lines,
//! [`probe_line`] its probe line, [`pm_line`] its PM sampling line, [`endings`] the lines that
//! say a run ended with errors or calls failed),
//! the statistics as a table ([`stats`]), and what every text table formats through
//! ([`format`](mod@format): durations with a unit, the blank of a value not measured, cells).
//!
//! May import [`tables`](crate::report::tables) (the statistics and their percentiles) and the
//! [`Report`](crate::report::Report) model; no other folder of `report` (`runs`, `html` and
//! `diff` import it).

pub mod endings;
pub mod format;
pub mod group;
pub mod pc_summary;
pub mod pm_line;
pub mod probe_line;
pub mod rotation;
pub mod stats;
pub mod streamed;
pub mod summary;

pub use self::format::{format_duration_ns, BLANK};

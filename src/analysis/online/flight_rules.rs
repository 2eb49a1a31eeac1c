//! The flight recorder's settings ([`FlightSettings`]) and its trigger rules
//! ([`TriggerRule`]: `3x`, `200ms`; [`SlowStepRule`]: `3x`, `wall:200ms`), parsed with errors
//! that say what to write instead.
//!
//! A leaf of `online`: `flight` reads it.

use std::fmt;
use std::str::FromStr;

/// When a step (or a range group inside one) is judged slow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TriggerRule {
    /// More than this many times the running median (`3x`, `2.5x`).
    TimesMedian(f64),
    /// Above this many ns (`200ms`, `1.5s`, `750us`, `20000ns`); for a range group's jump,
    /// this many ns above its running median.
    AboveNs(u64),
}

impl TriggerRule {
    /// Whether `value` breaks the rule, against the running `median` (`None`: too few steps
    /// seen yet; only an absolute rule of a step judges then).
    pub fn breaks(self, value: u64, median: Option<u64>) -> bool {
        match (self, median) {
            (TriggerRule::TimesMedian(f), Some(m)) => value as f64 > f * m as f64,
            (TriggerRule::TimesMedian(_), None) => false,
            (TriggerRule::AboveNs(ns), _) => value > ns,
        }
    }
}

impl fmt::Display for TriggerRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TriggerRule::TimesMedian(x) => write!(f, "{x}x"),
            TriggerRule::AboveNs(ns) => write!(f, "{ns}ns"),
        }
    }
}

const RULE_HELP: &str = "write a factor of the running median (`3x`, `2.5x`) or a time (`200ms`, `1.5s`, `750us`)";

impl FromStr for TriggerRule {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim().to_ascii_lowercase().replace('_', "");
        if t.is_empty() {
            return Err(format!("an empty rule: {RULE_HELP}"));
        }
        if let Some(factor) = t.strip_suffix('x') {
            return match factor.trim().parse::<f64>() {
                Ok(f) if f.is_finite() && f > 1.0 => Ok(TriggerRule::TimesMedian(f)),
                Ok(f) if f.is_finite() => Err(format!(
                    "`{text}`: a factor of {f} would call every ordinary step slow; use one above 1 (`3x`)"
                )),
                _ => Err(format!("`{text}` is not a factor: {RULE_HELP}")),
            };
        }
        let units = [("ns", 1.0), ("us", 1e3), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)];
        for (unit, scale) in units {
            if let Some(number) = t.strip_suffix(unit) {
                // `ms` and `ns` end in `s` too: the longer units are tried first.
                return match number.trim().parse::<f64>() {
                    Ok(v) if v.is_finite() && v > 0.0 && v * scale < u64::MAX as f64 => {
                        Ok(TriggerRule::AboveNs((v * scale).round() as u64))
                    }
                    _ => Err(format!("`{text}` is not a time above 0: {RULE_HELP}")),
                };
            }
        }
        if t.parse::<f64>().is_ok() {
            return Err(format!("`{text}` has no unit: {RULE_HELP}"));
        }
        Err(format!("`{text}` is not a rule: {RULE_HELP}"))
    }
}

pub use crate::model::StepTime;

/// The slow-step rule: a [`TriggerRule`] on one of the step's times (`3x`, `gpu:3x`,
/// `wall:200ms`; GPU time unless `wall:` says otherwise).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlowStepRule {
    /// The time judged.
    pub time: StepTime,
    /// The rule.
    pub rule: TriggerRule,
}

impl fmt::Display for SlowStepRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.time.as_str(), self.rule)
    }
}

impl FromStr for SlowStepRule {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let (time, rest) = match t.split_once(':') {
            None => (StepTime::Gpu, t),
            Some((q, rest)) => match q.trim().to_ascii_lowercase().as_str() {
                "gpu" => (StepTime::Gpu, rest),
                "wall" => (StepTime::Wall, rest),
                other => {
                    return Err(format!(
                        "`{text}`: `{other}:` is no step time; write `gpu:` (the default) or `wall:` before the rule \
                         (`wall:3x`)"
                    ))
                }
            },
        };
        Ok(SlowStepRule { time, rule: rest.parse()? })
    }
}

/// Default steps the ring holds (the trigger step and those before it).
pub const DEFAULT_RING_STEPS: u32 = 5;
/// Default steps a window holds after its trigger step.
pub const DEFAULT_AFTER_STEPS: u32 = 2;
/// Default least steps between two windows' triggers.
pub const DEFAULT_MIN_GAP_STEPS: u64 = 100;
/// Default most windows of a run.
pub const DEFAULT_MAX_WINDOWS: u32 = 10;
/// Default most rows (kernels, transfers, ranges) the recorder holds at once.
pub const DEFAULT_MAX_ROWS: usize = 100_000;
/// Steps whose times make the running median.
pub const MEDIAN_STEPS: usize = 101;
/// Steps seen before a median rule judges (the first steps warm up).
pub const MIN_HISTORY: usize = 10;
/// Range groups whose running medians are kept (past it, new groups are not judged).
pub const MAX_JUDGED_GROUPS: usize = 256;

/// The flight recorder's settings: every bound on its memory is one of these.
#[derive(Clone, Debug, PartialEq)]
pub struct FlightSettings {
    /// A step is slow when its time (GPU time, or wall time with `wall:`) breaks this rule
    /// (`GMPROF_SLOW_STEP`, `--slow-step`).
    pub slow_step: Option<SlowStepRule>,
    /// A range group inside a step jumps when its GPU time in the step breaks this rule
    /// against its own running median (`GMPROF_GROUP_JUMP`).
    pub group_jump: Option<TriggerRule>,
    /// Steps of full detail the ring holds: the trigger step and the steps before it
    /// (`GMPROF_FLIGHT_STEPS`, default 5).
    pub ring_steps: u32,
    /// Steps after the trigger step a window also holds (`GMPROF_FLIGHT_AFTER`, default 2).
    pub after_steps: u32,
    /// Least steps from one window's trigger to the next (`GMPROF_FLIGHT_GAP`, default 100).
    pub min_gap_steps: u64,
    /// Most windows a run writes (`GMPROF_FLIGHT_MAX`, default 10).
    pub max_windows: u32,
    /// Most rows held at once (default 100 000): past it the oldest steps of the ring lose
    /// their detail first.
    pub max_rows: usize,
}

impl Default for FlightSettings {
    fn default() -> Self {
        Self {
            slow_step: None,
            group_jump: None,
            ring_steps: DEFAULT_RING_STEPS,
            after_steps: DEFAULT_AFTER_STEPS,
            min_gap_steps: DEFAULT_MIN_GAP_STEPS,
            max_windows: DEFAULT_MAX_WINDOWS,
            max_rows: DEFAULT_MAX_ROWS,
        }
    }
}

impl FlightSettings {
    /// Settings with `rule` on the steps' GPU time as the slow-step rule and the defaults
    /// otherwise.
    pub fn slow_step(rule: TriggerRule) -> Self {
        Self::slow_step_rule(SlowStepRule { time: StepTime::Gpu, rule })
    }

    /// Settings with `rule` as the slow-step rule and the defaults otherwise.
    pub fn slow_step_rule(rule: SlowStepRule) -> Self {
        Self { slow_step: Some(rule), ..Self::default() }
    }

    /// One line for the summary and `why.json`.
    pub fn describe(&self) -> String {
        let mut rules = Vec::new();
        if let Some(r) = self.slow_step {
            rules.push(format!("slow step {r}"));
        }
        if let Some(r) = self.group_jump {
            rules.push(format!("range group jump {r}"));
        }
        if rules.is_empty() {
            rules.push("asked for only".to_owned());
        }
        format!(
            "{}; {} steps before and with the trigger, {} after; at least {} steps apart, at most {} windows",
            rules.join(", "),
            self.ring_steps,
            self.after_steps,
            self.min_gap_steps,
            self.max_windows
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_factors_and_times() {
        assert_eq!("3x".parse::<TriggerRule>(), Ok(TriggerRule::TimesMedian(3.0)));
        assert_eq!(" 2.5X ".parse::<TriggerRule>(), Ok(TriggerRule::TimesMedian(2.5)));
        assert_eq!("200ms".parse::<TriggerRule>(), Ok(TriggerRule::AboveNs(200_000_000)));
        assert_eq!("1.5s".parse::<TriggerRule>(), Ok(TriggerRule::AboveNs(1_500_000_000)));
        assert_eq!("750us".parse::<TriggerRule>(), Ok(TriggerRule::AboveNs(750_000)));
        assert_eq!("20_000ns".parse::<TriggerRule>(), Ok(TriggerRule::AboveNs(20_000)));
    }

    #[test]
    fn bad_rules_say_what_to_write() {
        for (bad, says) in [
            ("", "empty"),
            ("3", "no unit"),
            ("0.5x", "above 1"),
            ("1x", "above 1"),
            ("fastx", "not a factor"),
            ("-3ms", "not a time above 0"),
            ("0ms", "not a time above 0"),
            ("3min", "not a rule"),
        ] {
            let e = bad.parse::<TriggerRule>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(e.contains("3x") || e.contains("above 1"), "{bad}: {e}");
        }
    }

    #[test]
    fn slow_step_rules_name_the_time_they_judge() {
        let rule = |t: &str| t.parse::<SlowStepRule>();
        assert_eq!(rule("3x"), Ok(SlowStepRule { time: StepTime::Gpu, rule: TriggerRule::TimesMedian(3.0) }));
        assert_eq!(
            rule("wall:200ms"),
            Ok(SlowStepRule { time: StepTime::Wall, rule: TriggerRule::AboveNs(200_000_000) })
        );
        assert_eq!(rule(" GPU: 2x").map(|r| r.to_string()), Ok("gpu:2x".to_owned()));
        let e = rule("cpu:3x").unwrap_err();
        assert!(e.contains("`cpu:` is no step time") && e.contains("wall:3x"), "{e}");
        assert!(rule("wall:3").unwrap_err().contains("no unit"));
    }

    #[test]
    fn a_rule_judges_against_the_median() {
        let r = TriggerRule::TimesMedian(3.0);
        assert!(r.breaks(301, Some(100)) && !r.breaks(300, Some(100)) && !r.breaks(1_000, None));
        let a = TriggerRule::AboveNs(200);
        assert!(a.breaks(201, None) && !a.breaks(200, Some(1)));
    }
}

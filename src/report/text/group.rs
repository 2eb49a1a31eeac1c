//! Folding range rows into groups people can read: the rows behind the summary table.
//!
//! Layer 3 (the safe profiler), report output. A training program names its ranges with
//! numbers (`Train step 3`, `Layer 11`), so grouping by exact path gives one row per step
//! and per layer: thousands of rows. Here names that differ only in numbers fold into one
//! group ([`fold_numbers`]: `Train step 3/Layer 11` becomes `Train step #/Layer #`), by one of
//! three keys ([`GroupBy`]).
//!
//! # Warm-up
//!
//! The first instances of a repeated range often carry start-up cost (allocator growth,
//! autotuning, lazy module loading). [`warmup_rows`] marks them so that the summary shows
//! them apart and its steady-state statistics leave them out. The unit of repetition is the
//! *repeat root* of a row: the outermost range among the row and its ancestors whose folded
//! path occurs more than once in the session (`Train step #` for
//! `Train step 7/Layer 3/Attention 3`, or `train_step` for unnumbered repeated steps). A row
//! is warm-up when its repeat root is among the first K instances of that root's folded
//! path, in push order: with K = 1, step 0 and everything nested in it. Rows without a
//! repeat root (a range that ran once) and the `<root>` row are never warm-up.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::analysis::aggregate::RangeRow;
use crate::error::{Error, Result};
use crate::model::RangeId;

/// What the summary groups range rows by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// The range's own name, numbers folded: every `Attention #` together, at any depth.
    Name,
    /// The range path, numbers folded: `Train step #/Layer #/Attention #` (the default).
    #[default]
    Path,
    /// No grouping: one row per range instance, labelled by its path (and its instance
    /// number when the path repeats).
    Instance,
}

impl GroupBy {
    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupBy::Name => "name",
            GroupBy::Path => "path",
            GroupBy::Instance => "instance",
        }
    }
}

impl std::str::FromStr for GroupBy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "name" => Ok(GroupBy::Name),
            "path" => Ok(GroupBy::Path),
            "instance" => Ok(GroupBy::Instance),
            other => Err(Error::InvalidConfig(format!("unknown grouping '{other}': use name, path or instance"))),
        }
    }
}

pub use crate::analysis::online::folding::{fold_numbers, NUMBER_MARK};

/// One group of range rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowGroup {
    /// What the summary shows: the folded key, or the exact path or name when every member
    /// has the same one (nothing was folded).
    pub label: String,
    /// Indices of the member rows in `Report::ranges`, in row order.
    pub members: Vec<usize>,
    /// How many different exact paths (or names) the group folds together.
    pub distinct: usize,
}

/// Groups `rows` by `by`, groups in first-seen order.
pub fn group_rows(rows: &[RangeRow], by: GroupBy) -> Vec<RowGroup> {
    if by == GroupBy::Instance {
        let mut per_path: HashMap<&str, u32> = HashMap::new();
        for row in rows {
            *per_path.entry(row.path.as_str()).or_default() += 1;
        }
        return rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let label = if per_path.get(row.path.as_str()).copied().unwrap_or(0) > 1 {
                    format!("{} [{}]", row.path, row.instance)
                } else {
                    row.path.clone()
                };
                RowGroup { label, members: vec![i], distinct: 1 }
            })
            .collect();
    }
    fn exact(row: &RangeRow, by: GroupBy) -> &str {
        match by {
            GroupBy::Name => row.name.as_str(),
            _ => row.path.as_str(),
        }
    }
    struct Building<'a> {
        first: &'a str,
        members: Vec<usize>,
        exact: Vec<&'a str>,
    }
    let mut order: Vec<String> = Vec::new();
    let mut groups: HashMap<String, Building<'_>> = HashMap::new();
    for (i, row) in rows.iter().enumerate() {
        let text = exact(row, by);
        let key = fold_numbers(text).into_owned();
        let group = groups.entry(key).or_insert_with_key(|key| {
            order.push(key.clone());
            Building { first: text, members: Vec::new(), exact: Vec::new() }
        });
        group.members.push(i);
        if group.exact.len() < 2 && !group.exact.contains(&text) {
            group.exact.push(text);
        }
    }
    order
        .into_iter()
        .filter_map(|key| {
            let g = groups.remove(&key)?;
            let distinct = if g.exact.len() < 2 {
                1
            } else {
                let mut all: Vec<&str> = g.members.iter().map(|&i| exact(&rows[i], by)).collect();
                all.sort_unstable();
                all.dedup();
                all.len()
            };
            let label = if distinct == 1 { g.first.to_owned() } else { key };
            Some(RowGroup { label, members: g.members, distinct })
        })
        .collect()
}

/// For each of `rows`, whether it belongs to the first `skip_first` instances of its repeat
/// root (see the [module docs](self)). All false when `skip_first` is 0.
pub fn warmup_rows(rows: &[RangeRow], skip_first: u32) -> Vec<bool> {
    if skip_first == 0 {
        return vec![false; rows.len()];
    }
    let folded: Vec<Cow<'_, str>> = rows.iter().map(|r| fold_numbers(&r.path)).collect();
    let mut occurrences: HashMap<&str, u32> = HashMap::new();
    for (row, key) in rows.iter().zip(&folded) {
        if row.range_id.is_some() {
            *occurrences.entry(key.as_ref()).or_default() += 1;
        }
    }
    let index_of: HashMap<RangeId, usize> =
        rows.iter().enumerate().filter_map(|(i, r)| Some((r.range_id?, i))).collect();
    // Push order: each row's ordinal among the rows of its folded path.
    let mut seen: HashMap<&str, u32> = HashMap::new();
    let ordinal: Vec<u32> = folded
        .iter()
        .map(|key| {
            let n = seen.entry(key.as_ref()).or_default();
            *n += 1;
            *n - 1
        })
        .collect();
    let repeated = |i: usize| occurrences.get(folded[i].as_ref()).copied().unwrap_or(0) > 1;
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            row.range_id?;
            // Walk up to the outermost repeated ancestor-or-self.
            let mut root = repeated(i).then_some(i);
            let mut at = row.parent_id.and_then(|p| index_of.get(&p).copied());
            let mut steps = 0;
            while let Some(parent) = at {
                if repeated(parent) {
                    root = Some(parent);
                }
                at = rows[parent].parent_id.and_then(|p| index_of.get(&p).copied());
                steps += 1;
                if steps > rows.len() {
                    break;
                }
            }
            root.map(|r| ordinal[r] < skip_first)
        })
        .map(|w| w.unwrap_or(false))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_fold_unless_glued_to_a_letter() {
        assert_eq!(fold_numbers("Train step 12"), "Train step #");
        assert_eq!(fold_numbers("Layer 3/Attention 3"), "Layer #/Attention #");
        assert_eq!(fold_numbers("layers.11.mlp"), "layers.#.mlp");
        assert_eq!(fold_numbers("step_7"), "step_#");
        assert_eq!(fold_numbers("lr 0.001"), "lr #.#");
        assert_eq!(fold_numbers("42"), "#");
        assert_eq!(fold_numbers("conv2d"), "conv2d");
        assert_eq!(fold_numbers("gemm_fp16"), "gemm_fp16");
        assert!(matches!(fold_numbers("train_step"), Cow::Borrowed(_)));
        assert_eq!(fold_numbers("étape 3"), "étape #");
    }

    #[test]
    fn group_by_parses() {
        assert_eq!("Path".parse::<GroupBy>().unwrap(), GroupBy::Path);
        assert_eq!("instance".parse::<GroupBy>().unwrap(), GroupBy::Instance);
        assert!("kernel".parse::<GroupBy>().unwrap_err().to_string().contains("name, path or instance"));
    }
}

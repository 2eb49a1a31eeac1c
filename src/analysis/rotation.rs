//! Rotation's analysis: the step templates, the counters per launch position, and the
//! estimates per range group and kernel name that a per_kernel run in rotation
//! ([`ProfilerBuilder::rotate`](crate::profiler::ProfilerBuilder::rotate)) gives.
//!
//! A *step* is an instance of the outermost range (or the outermost one matching the step
//! glob), as capture numbered it ([`step_of`]). A step's *sequence* is its launches in launch
//! order, each as (kernel name, grid, block); steps with the same sequence share a
//! *template*. Positions are matched across the steps of one template only, so a step of
//! another shape (an evaluation step, a different batch shape) is never paired with a
//! training step's positions: it is its own template, measured over its own occurrences.
//!
//! Per position: the launches, how many were measured, the step of its first measurement,
//! and the mean of each metric over its measurements. Per range group of a template (the
//! row's range path, numbers folded, and every enclosing group): the estimate of one step,
//! folded from the positions' means by the metrics' own rules, given only when every
//! position of the group was measured (blank otherwise, with the fraction measured). Per
//! kernel name: the mean over its measured launches.
//!
//! Imports `correlate` (the rows), `aggregate` (the metric rules' fold) and `online::folding`;
//! `report::build` calls [`analyze`].

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::analysis::aggregate::{KernelMetricSums, MetricRule};
use crate::analysis::correlate::{Granularity, KernelRow, KernelStatus};
use crate::analysis::online::fold_numbers;
use crate::model::session::SessionTree;
use crate::model::RangeId;

/// What capture knows of a rotation: its settings and what it decided.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotationRun {
    /// N: each position is measured once every N steps of its template (0: an automatic
    /// rotation that never saw enough steps to pick N).
    pub every: u32,
    /// Whether N was picked from the first steps.
    #[serde(default)]
    pub auto: bool,
    /// B: the consecutive positions one step measures (⌈launches of the second step / N⌉).
    #[serde(default)]
    pub block: u32,
    /// M: one step in M measures (1 unless automatic).
    #[serde(default)]
    pub stride: u32,
    /// How an automatic N was picked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Whether full counter images were cycled mid-run (else measuring stopped when the image
    /// was full).
    #[serde(default)]
    pub cycles: bool,
    /// Launches in their slot left unmeasured because the counter image was full.
    #[serde(default)]
    pub after_full_launches: u64,
    /// The step at which the counter image was full and measuring stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_at_step: Option<u64>,
    /// The step range's name or glob, when one was given (else the outermost ranges).
    pub step_range: Option<String>,
    /// Launches whose per-kernel range was opened.
    pub measured_launches: u64,
    /// Launches left unmeasured.
    pub unmeasured_launches: u64,
    /// Distinct launch prefixes counted.
    pub prefixes: u64,
    /// Launches whose prefix found no room in the table (rotated by steps begun).
    pub untracked_launches: u64,
}

/// One step shape.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Template {
    /// 0, 1, ... in the order of their first step.
    pub template: u32,
    /// The step range's folded path (`Train step #`).
    pub step_path: String,
    /// The exact path of its first step (`Train step 3`).
    #[serde(default)]
    pub first_step_path: String,
    /// Steps with this sequence.
    pub steps: u64,
    /// The step number (0, 1, ... over all steps) of its first step.
    pub first_step: u64,
    /// Launch positions per step.
    pub positions: u32,
    /// Positions measured at least once.
    pub measured_positions: u32,
    /// Positions whose grid varied from step to step.
    #[serde(default)]
    pub varying_grid_positions: u32,
    /// Positions that are CUDA graph launches: CUPTI's per-kernel range measures the whole
    /// graph, so their counters are the graph's, not one kernel node's.
    #[serde(default)]
    pub graph_positions: u32,
    /// Steps of this template it took until every position was measured; `None` while some
    /// never were.
    pub steps_to_cover: Option<u64>,
    /// How it differs from the template with the most steps (the first launch position whose
    /// kernel, grid or block differs); `None` for that template itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub differs: Option<String>,
}

/// One launch position of a template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PositionRow {
    /// Its template.
    pub template: u32,
    /// 0-based position in the step.
    pub position: u32,
    /// The range group it launches in (path, numbers folded).
    pub range_group: String,
    /// Kernel name (demangled).
    pub kernel_name: String,
    /// The grid, when every launch at this position had the same.
    pub grid: Option<[i32; 3]>,
    /// How many distinct grids its launches had (more than 1: the grid follows the data, and
    /// the counters are the mean over the grids measured; 9 stands for more than 8).
    #[serde(default)]
    pub grids: u32,
    /// Block.
    pub block: Option<[i32; 3]>,
    /// Launches at this position (one per step of the template).
    pub launches: u64,
    /// Of them, measured.
    pub measured: u64,
    /// The step number (over all steps) of its first measurement.
    pub first_measured_step: Option<u64>,
    /// Mean kernel time over every launch (activity timestamps), ns.
    pub duration_ns: Option<f64>,
    /// Mean of each metric over its measurements (blank where never measured), in the
    /// report's metric order.
    pub values: Vec<Option<f64>>,
}

/// A range group's estimate for one step of a template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupEstimate {
    /// Its template.
    pub template: u32,
    /// The group's path, numbers folded.
    pub path: String,
    /// Launch positions in it per step.
    pub positions: u32,
    /// Of them, measured at least once.
    pub measured_positions: u32,
    /// Mean kernel time of one step's launches in the group, ns.
    pub gpu_time_ns: Option<f64>,
    /// One step's metrics, folded from the positions' means by each metric's rule; blank
    /// unless every position was measured.
    pub values: Vec<Option<f64>>,
}

/// A kernel name's counters over its measured launches.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelEstimate {
    /// Kernel name (demangled).
    pub kernel_name: String,
    /// Launches in steps.
    pub launches: u64,
    /// Of them, measured.
    pub measured: u64,
    /// Mean kernel time of its launches (activity records), ns.
    #[serde(default)]
    pub duration_ns: Option<f64>,
    /// Mean of each metric over the measured launches.
    pub values: Vec<Option<f64>>,
}

/// The rotation section of a report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RotationReport {
    /// What capture did.
    pub run: RotationRun,
    /// Steps seen.
    pub steps: u64,
    /// Launch rows inside steps, and outside any (those are not positions).
    pub launches_in_steps: u64,
    /// Launch rows outside any step.
    pub launches_outside_steps: u64,
    /// Step shapes, by first step.
    pub templates: Vec<Template>,
    /// Every position of every template.
    pub positions: Vec<PositionRow>,
    /// Range groups per template.
    pub groups: Vec<GroupEstimate>,
    /// Kernel names, by launches.
    pub kernels: Vec<KernelEstimate>,
    /// The template of each step, in step order (the first [`MAX_STEP_TEMPLATES`] steps).
    #[serde(default)]
    pub step_templates: Vec<u32>,
}

/// The steps whose template [`RotationReport::step_templates`] lists.
pub const MAX_STEP_TEMPLATES: usize = 100_000;

impl RotationReport {
    /// Lines for the summary: the rotation, its coverage per template, and why a template is
    /// not covered yet.
    pub fn describe(&self) -> Vec<String> {
        let mut out = vec![format!(
            "rotation 1/{}: {} step(s), {} template(s); {} launch(es) measured, {} unmeasured by design{}",
            self.run.every,
            self.steps,
            self.templates.len(),
            self.run.measured_launches,
            self.run.unmeasured_launches,
            if self.launches_outside_steps > 0 {
                format!("; {} launch(es) outside any step are not positions", self.launches_outside_steps)
            } else {
                String::new()
            }
        )];
        if let Some(why) = &self.run.why {
            out.push(format!("  N = {} ({why})", self.run.every));
        } else if self.run.auto && self.run.every == 0 {
            out.push("  N was never picked: the run ended before its first steps were seen (nothing measured)".into());
        }
        if let Some(step) = self.run.full_at_step {
            out.push(format!(
                "  measuring stopped at step {step}: the counter image was full ({} launch(es) in their slot after it ran \
                 unmeasured), so no counter cycle held the program mid-run; raise GMPROF_RANGES_PER_CYCLE for more, or \
                 set GMPROF_ROTATE_CYCLES=1 to go on measuring with a pause per cycle",
                self.run.after_full_launches
            ));
        }
        for t in self.templates.iter().take(8) {
            let cover = match t.steps_to_cover {
                Some(n) => format!("every position measured after {n} of its steps"),
                None => format!(
                    "{} of {} positions measured ({:.1} %){}",
                    t.measured_positions,
                    t.positions,
                    100.0 * f64::from(t.measured_positions) / f64::from(t.positions.max(1)),
                    if t.steps < u64::from(self.run.every) {
                        format!(": it ran {} of the {} steps a rotation takes", t.steps, self.run.every)
                    } else {
                        String::new()
                    }
                ),
            };
            out.push(format!(
                "  template {} ({}, {} launches a step): {} step(s) from step {}; {cover}",
                t.template, t.step_path, t.positions, t.steps, t.first_step
            ));
            if let Some(d) = &t.differs {
                out.push(format!("    differs {d}"));
            }
            if t.graph_positions > 0 {
                out.push(format!(
                    "    {} position(s) are CUDA graph launches, measured as one range each: their counters are the \
                     whole graph's (its kernel nodes are rows of kernels.csv with their times, without counters)",
                    t.graph_positions
                ));
            }
            if t.varying_grid_positions > 0 {
                let examples: Vec<String> = self
                    .positions
                    .iter()
                    .filter(|p| p.template == t.template && p.grids > 1)
                    .take(3)
                    .map(|p| format!("{} at {} ({} grids)", short_name(&p.kernel_name), p.position, p.grids))
                    .collect();
                out.push(format!(
                    "    {} position(s) launch with a grid that changes from step to step (kept as one position, \
                     counters averaged over the grids measured): {}",
                    t.varying_grid_positions,
                    examples.join(", ")
                ));
            }
        }
        if self.templates.len() > 8 {
            out.push(format!("  ... and {} more template(s) (report.json: rotation)", self.templates.len() - 8));
        }
        if self.run.untracked_launches > 0 {
            out.push(format!(
                "  {} launch(es) found the rotation's table full and rotated by step count",
                self.run.untracked_launches
            ));
        }
        out
    }
}

/// A kernel name without its template arguments and parameter list, for a summary line.
fn short_name(name: &str) -> &str {
    let name = name.strip_prefix("void ").unwrap_or(name);
    let end = name.find(['<', '(']).unwrap_or(name.len());
    &name[..end]
}

/// The step a launch attributed to `range` belongs to: its outermost enclosing range, or the
/// outermost whose name matches `glob`; `None` outside any.
pub fn step_of(tree: &SessionTree, range: Option<RangeId>, glob: Option<&glob::Pattern>) -> Option<RangeId> {
    let mut at = range;
    let mut step = None;
    while let Some(id) = at {
        let Some(node) = tree.get(id) else { break };
        if glob.is_none_or(|g| g.matches(&node.name)) {
            step = Some(id);
        }
        at = node.parent;
    }
    step
}

/// A launch as templates match it: kernel (or graph) and block. The grid is not part of it:
/// a kernel whose grid follows the data (llm.c's `wte_backward_kernel` sizes its grid by the
/// batch's distinct tokens) would make every step a template of its own; a position's grids
/// are counted instead ([`PositionRow::grids`]).
type Signature = (String, Option<[i32; 3]>);

/// The distinct grids a position keeps before it only counts them as many.
const MAX_GRIDS: usize = 8;

/// Sums of one kernel name while the rows are walked.
#[derive(Default)]
struct KernelSums {
    launches: u64,
    measured: u64,
    duration_sum: f64,
    durations: u64,
    sums: Vec<f64>,
    counts: Vec<u64>,
}

/// Sums of one position while the rows are walked.
#[derive(Default)]
struct PositionSums {
    first: Option<usize>,
    grids: Vec<[i32; 3]>,
    more_grids: bool,
    launches: u64,
    measured: u64,
    first_measured_step: Option<u64>,
    duration_sum: f64,
    durations: u64,
    sums: Vec<f64>,
    counts: Vec<u64>,
}

/// The rotation section from a per_kernel run's rows. `rules` are the report's metric rules
/// (their order is the rows' metric order).
pub fn analyze(run: RotationRun, tree: &SessionTree, rows: &[KernelRow], rules: &[MetricRule]) -> RotationReport {
    let glob = run.step_range.as_deref().and_then(|g| glob::Pattern::new(g).ok());
    let metric_count = rules.len();
    // Steps in order of their first launch, each with its launch rows.
    let mut step_index: HashMap<RangeId, usize> = HashMap::new();
    let mut steps: Vec<(RangeId, Vec<usize>)> = Vec::new();
    let mut outside = 0u64;
    for (i, row) in rows.iter().enumerate() {
        if row.granularity == Granularity::GraphNode || row.status == KernelStatus::UnlaunchedActivity {
            continue;
        }
        match step_of(tree, row.range_id, glob.as_ref()) {
            Some(step) => {
                let at = *step_index.entry(step).or_insert_with(|| {
                    steps.push((step, Vec::new()));
                    steps.len() - 1
                });
                steps[at].1.push(i);
            }
            None => outside += 1,
        }
    }
    let signature = |row: &KernelRow| -> Signature {
        let name = match row.granularity {
            Granularity::Graph => format!("graph {}", row.graph_id.map_or(String::new(), |g| g.to_string())),
            _ => row.mangled_name.clone().or_else(|| row.kernel_name.clone()).unwrap_or_default(),
        };
        (name, row.block)
    };
    let mut template_of: HashMap<Vec<Signature>, u32> = HashMap::new();
    let mut signatures: Vec<Vec<Signature>> = Vec::new();
    let mut step_templates: Vec<u32> = Vec::new();
    let mut templates: Vec<Template> = Vec::new();
    let mut sums: Vec<Vec<PositionSums>> = Vec::new();
    let mut kernels: HashMap<String, KernelSums> = HashMap::new();
    for (number, (step, launches)) in steps.iter().enumerate() {
        let number = number as u64;
        let sig: Vec<Signature> = launches.iter().map(|&i| signature(&rows[i])).collect();
        let next = templates.len() as u32;
        let t = match template_of.get(&sig) {
            Some(&t) => t,
            None => {
                template_of.insert(sig.clone(), next);
                signatures.push(sig);
                next
            }
        };
        if t == next {
            let first_step_path = tree.get(*step).map_or(String::new(), |n| n.path.clone());
            templates.push(Template {
                template: t,
                step_path: fold_numbers(&first_step_path).into_owned(),
                first_step_path,
                first_step: number,
                positions: launches.len() as u32,
                ..Template::default()
            });
            sums.push((0..launches.len()).map(|_| PositionSums::default()).collect());
        }
        if step_templates.len() < MAX_STEP_TEMPLATES {
            step_templates.push(t);
        }
        let template = &mut templates[t as usize];
        template.steps += 1;
        for (p, &i) in launches.iter().enumerate() {
            let row = &rows[i];
            let s = &mut sums[t as usize][p];
            s.first.get_or_insert(i);
            if let Some(g) = row.grid {
                if !s.grids.contains(&g) {
                    if s.grids.len() < MAX_GRIDS {
                        s.grids.push(g);
                    } else {
                        s.more_grids = true;
                    }
                }
            }
            s.launches += 1;
            if let Some(d) = row.duration_ns {
                s.duration_sum += d as f64;
                s.durations += 1;
            }
            let name = row.kernel_name.clone().unwrap_or_default();
            let k = kernels.entry(name).or_insert_with(|| KernelSums {
                sums: vec![0.0; metric_count],
                counts: vec![0; metric_count],
                ..KernelSums::default()
            });
            k.launches += 1;
            if let Some(d) = row.duration_ns {
                k.duration_sum += d as f64;
                k.durations += 1;
            }
            let measured = row.status == KernelStatus::Ok && row.metrics.iter().any(Option::is_some);
            if !measured {
                continue;
            }
            k.measured += 1;
            s.measured += 1;
            s.first_measured_step.get_or_insert(number);
            if s.sums.is_empty() {
                s.sums = vec![0.0; metric_count];
                s.counts = vec![0; metric_count];
            }
            for (m, v) in row.metrics.iter().enumerate().take(metric_count) {
                if let Some(v) = v {
                    s.sums[m] += v;
                    s.counts[m] += 1;
                    k.sums[m] += v;
                    k.counts[m] += 1;
                }
            }
        }
        if template.steps_to_cover.is_none() && sums[t as usize].iter().all(|s| s.measured > 0) {
            template.steps_to_cover = Some(template.steps);
        }
    }
    let mean = |sum: &[f64], count: &[u64]| -> Vec<Option<f64>> {
        (0..metric_count)
            .map(|m| match (sum.get(m), count.get(m)) {
                (Some(s), Some(&c)) if c > 0 => Some(s / c as f64),
                _ => None,
            })
            .collect()
    };
    let mut positions = Vec::new();
    let mut groups = Vec::new();
    for (t, template) in templates.iter_mut().enumerate() {
        template.measured_positions = sums[t].iter().filter(|s| s.measured > 0).count() as u32;
        template.varying_grid_positions = sums[t].iter().filter(|s| s.grids.len() > 1 || s.more_grids).count() as u32;
        template.graph_positions =
            sums[t].iter().filter(|s| s.first.is_some_and(|i| rows[i].granularity == Granularity::Graph)).count()
                as u32;
        // Per group: positions, measured positions, mean time, and the positions' means folded.
        let mut by_group: HashMap<String, (u32, u32, f64, KernelMetricSums)> = HashMap::new();
        let mut group_order: Vec<String> = Vec::new();
        for (p, s) in sums[t].iter().enumerate() {
            let Some(first) = s.first.map(|i| &rows[i]) else { continue };
            let values = mean(&s.sums, &s.counts);
            let duration = (s.durations > 0).then(|| s.duration_sum / s.durations as f64);
            let group = fold_numbers(&first.range_path).into_owned();
            positions.push(PositionRow {
                template: t as u32,
                position: p as u32,
                range_group: group.clone(),
                kernel_name: match first.granularity {
                    Granularity::Graph => format!(
                        "CUDA graph {} ({} kernel(s), measured as one range)",
                        first.graph_id.map_or_else(|| "?".to_owned(), |g| g.to_string()),
                        first.graph_kernels.map_or_else(|| "?".to_owned(), |k| k.to_string())
                    ),
                    _ => first.kernel_name.clone().unwrap_or_default(),
                },
                grid: if s.grids.len() == 1 { s.grids.first().copied() } else { None },
                grids: s.grids.len() as u32 + u32::from(s.more_grids),
                block: first.block,
                launches: s.launches,
                measured: s.measured,
                first_measured_step: s.first_measured_step,
                duration_ns: duration,
                values: values.clone(),
            });
            // The position's mean launch, as a row the fold reads.
            let mean_row = KernelRow {
                metrics: values,
                duration_ns: duration.map(|d| d.round() as u64),
                range_duration_ns: None,
                ..first.clone()
            };
            let mut path = group.as_str();
            loop {
                let entry = by_group.entry(path.to_owned()).or_insert_with(|| {
                    group_order.push(path.to_owned());
                    (0, 0, 0.0, KernelMetricSums::default())
                });
                entry.0 += 1;
                entry.1 += u32::from(s.measured > 0);
                entry.2 += duration.unwrap_or(0.0);
                if s.measured > 0 {
                    entry.3.add(&mean_row);
                }
                match path.rfind(crate::model::session::PATH_SEPARATOR) {
                    Some(cut) => path = &path[..cut],
                    None => break,
                }
            }
        }
        for path in group_order {
            let Some((count, measured, time, folded)) = by_group.remove(&path) else { continue };
            let values = if measured == count { folded.values(rules) } else { vec![None; metric_count] };
            groups.push(GroupEstimate {
                template: t as u32,
                path,
                positions: count,
                measured_positions: measured,
                gpu_time_ns: Some(time),
                values,
            });
        }
    }
    describe_differences(&mut templates, &signatures, rows, &steps);
    let mut kernels: Vec<KernelEstimate> = kernels
        .into_iter()
        .map(|(kernel_name, k)| KernelEstimate {
            kernel_name,
            launches: k.launches,
            measured: k.measured,
            duration_ns: (k.durations > 0).then(|| k.duration_sum / k.durations as f64),
            values: mean(&k.sums, &k.counts),
        })
        .collect();
    kernels.sort_by(|a, b| b.launches.cmp(&a.launches).then_with(|| a.kernel_name.cmp(&b.kernel_name)));
    let in_steps = steps.iter().map(|(_, l)| l.len() as u64).sum();
    RotationReport {
        run,
        steps: steps.len() as u64,
        launches_in_steps: in_steps,
        launches_outside_steps: outside,
        templates,
        positions,
        groups,
        kernels,
        step_templates,
    }
}

/// Says how each template differs from the one with the most steps: the first position whose
/// kernel, grid or block differs, or the difference in length.
fn describe_differences(
    templates: &mut [Template],
    signatures: &[Vec<Signature>],
    rows: &[KernelRow],
    steps: &[(RangeId, Vec<usize>)],
) {
    let Some(main) = templates.iter().max_by_key(|t| (t.steps, std::cmp::Reverse(t.template))).map(|t| t.template)
    else {
        return;
    };
    let main_sig = &signatures[main as usize];
    // A row of the main template's first step, to name its kernels.
    let main_rows = &steps[templates[main as usize].first_step as usize].1;
    let name = |row: &KernelRow| {
        format!(
            "{} grid {:?} block {:?}",
            row.kernel_name.as_deref().unwrap_or("?"),
            row.grid.unwrap_or_default(),
            row.block.unwrap_or_default()
        )
    };
    for t in templates.iter_mut().filter(|t| t.template != main) {
        let sig = &signatures[t.template as usize];
        let own_rows = &steps[t.first_step as usize].1;
        let first = sig.iter().zip(main_sig).position(|(a, b)| a != b);
        let length = if sig.len() == main_sig.len() {
            String::new()
        } else {
            format!("{} launches against {}; ", sig.len(), main_sig.len())
        };
        t.differs = Some(match first {
            Some(p) => format!(
                "{length}from template {main} at position {p}: {} where it has {}",
                name(&rows[own_rows[p]]),
                name(&rows[main_rows[p]])
            ),
            None => format!("{length}the same as template {main} up to the shorter's end"),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::aggregate::metric_rules;
    use crate::model::{MetricKind, MetricSet, MetricSpec, ProfilingMode};

    fn row(range: RangeId, path: &str, name: &str, graph: Option<(u32, u32)>, value: Option<f64>) -> KernelRow {
        KernelRow {
            range_id: Some(range),
            range_path: path.into(),
            cycle: Some(0),
            ordinal: None,
            correlation_id: 0,
            kernel_name: graph.is_none().then(|| name.to_owned()),
            mangled_name: graph.is_none().then(|| name.to_owned()),
            grid: Some([4, 1, 1]),
            block: Some([128, 1, 1]),
            registers_per_thread: None,
            shared_memory_bytes: None,
            stream_id: None,
            thread: Some(1),
            launch_ns: None,
            launch_end_ns: None,
            api_name: None,
            device_id: None,
            start_ns: None,
            end_ns: None,
            duration_ns: Some(1_000),
            time_source: crate::analysis::correlate::TimeSource::Activity,
            range_duration_ns: None,
            metrics: vec![value],
            status: if value.is_some() { KernelStatus::Ok } else { KernelStatus::Unmeasured },
            granularity: if graph.is_some() { Granularity::Graph } else { Granularity::Kernel },
            graph_id: graph.map(|g| g.0),
            graph_node_id: None,
            graph_kernels: graph.map(|g| g.1),
        }
    }

    #[test]
    fn a_graph_launch_is_one_position_and_the_summary_says_what_its_counters_are() {
        let mut tree = SessionTree::new();
        let set = MetricSet {
            metrics: vec![MetricSpec {
                name: "dram__bytes_read.sum".into(),
                kind: MetricKind::Counter,
                unit: "byte".into(),
                description: String::new(),
            }],
        };
        let rules = metric_rules(&set, ProfilingMode::PerKernel);
        let mut rows = Vec::new();
        for s in 0..4u64 {
            let step = tree.push(&format!("step {s}"), 1, s * 10);
            rows.push(row(step, &format!("step {s}"), "embed", None, (s == 1).then_some(100.0)));
            rows.push(row(step, &format!("step {s}"), "", Some((7, 12)), (s == 2).then_some(5_000.0)));
            tree.pop(1, s * 10 + 5).unwrap();
        }
        let report = analyze(RotationRun { every: 2, ..RotationRun::default() }, &tree, &rows, &rules);
        assert_eq!(report.templates.len(), 1);
        assert_eq!((report.templates[0].positions, report.templates[0].graph_positions), (2, 1));
        let graph = &report.positions[1];
        assert_eq!(graph.kernel_name, "CUDA graph 7 (12 kernel(s), measured as one range)");
        assert_eq!((graph.launches, graph.measured, graph.values[0]), (4, 1, Some(5_000.0)));
        let lines = report.describe().join("\n");
        assert!(lines.contains("1 position(s) are CUDA graph launches, measured as one range each"), "{lines}");
        // One step: the kernel's and the graph's bytes.
        let step = report.groups.iter().find(|g| g.path == "step #").unwrap();
        assert_eq!(step.values[0], Some(5_100.0));
    }
}

//! The online aggregates and the steps table on recorded runs (an H100: a 6-layer GPT under
//! PyTorch, 30 steps; llm.c's GPT-2, 3 and 4 steps, in trace mode): counts, missing, sums,
//! min and max equal a recomputation from the rows exactly, quantiles are within DDSketch's
//! stated 1 % of the exact value of their rank, windows add up to the whole run, and the
//! steps table has one row per step with the step's own numbers.

#[path = "common/recorded.rs"]
mod recorded;

use std::collections::{BTreeMap, HashMap};

use gmprof::aggregate::RangeRow;
use gmprof::analysis::online::{
    fold_numbers, AggregateQuantity, AggregateRow, AggregateTable, OnlineAggregates, OnlineSettings, NO_NAME,
    QUANTILES, RELATIVE_ERROR,
};
use gmprof::model::RangeId;
use gmprof::Report;

fn load(dir: &str, name: &str) -> Report {
    serde_json::from_str(&recorded::unzstd(dir, name)).expect("a recorded report.json")
}

fn runs() -> Vec<(&'static str, Report)> {
    vec![
        ("torch_gpt_base", load("diff", "torch_gpt_base.json.zst")),
        ("llmc_3steps", load("pc", "h100_llmc_3steps_report.json.zst")),
        ("llmc_4steps_pm", load("pm", "h100_llmc_4steps_trace_pm_20us.json.zst")),
    ]
}

/// The ranges in the order they complete (children before parents), each with its top-level
/// ancestor.
fn completion_order(report: &Report) -> Vec<(&RangeRow, Option<RangeId>)> {
    let parent: HashMap<RangeId, Option<RangeId>> =
        report.ranges.iter().filter_map(|r| Some((r.range_id?, r.parent_id))).collect();
    let top = |mut id: RangeId| {
        while let Some(Some(p)) = parent.get(&id) {
            id = *p;
        }
        id
    };
    let mut rows: Vec<(&RangeRow, Option<RangeId>)> = report.ranges.iter().map(|r| (r, r.range_id.map(top))).collect();
    rows.sort_by_key(|(r, _)| (r.end_ns.unwrap_or(u64::MAX), std::cmp::Reverse(r.depth)));
    rows
}

fn fed(report: &Report, settings: OnlineSettings) -> OnlineAggregates {
    let mut online = OnlineAggregates::new(settings);
    for k in &report.kernels {
        online.add_kernel(k);
    }
    for (row, top) in completion_order(report) {
        online.add_range(row, top);
    }
    online
}

/// Exact count, missing, total, min, max; quantiles within the stated error.
fn check(run: &str, row: &AggregateRow, values: &[Option<u64>]) {
    let mut sorted: Vec<u64> = values.iter().flatten().copied().collect();
    sorted.sort_unstable();
    let what = format!("{run}: {} {} {}", row.table.as_str(), row.quantity.as_str(), row.key);
    let s = &row.summary;
    assert_eq!(s.count, sorted.len() as u64, "{what}: count");
    assert_eq!(s.missing, values.len() as u64 - sorted.len() as u64, "{what}: missing");
    assert_eq!(s.total_ns, (!sorted.is_empty()).then(|| sorted.iter().sum()), "{what}: total");
    assert_eq!(s.min_ns, sorted.first().copied(), "{what}: min");
    assert_eq!(s.max_ns, sorted.last().copied(), "{what}: max");
    for (q, estimate) in QUANTILES.iter().zip([s.p50_ns, s.p90_ns, s.p99_ns]) {
        let Some(estimate) = estimate else {
            assert!(sorted.is_empty(), "{what}: q{q} blank with values");
            continue;
        };
        let exact = sorted[(q * (sorted.len() as f64 - 1.0)) as usize] as f64;
        // The summary rounds to whole ns.
        assert!(
            (estimate as f64 - exact).abs() <= RELATIVE_ERROR * exact + 0.5,
            "{what}: q{q} {estimate} vs exact {exact}"
        );
    }
}

#[test]
fn kernel_aggregates_equal_a_recomputation_from_the_rows() {
    for (run, report) in runs() {
        let online = fed(&report, OnlineSettings::default());
        let mut by_name: BTreeMap<&str, Vec<Option<u64>>> = BTreeMap::new();
        for k in report.kernels.iter().filter(|k| k.granularity.is_kernel_execution()) {
            by_name.entry(k.kernel_name.as_deref().unwrap_or(NO_NAME)).or_default().push(k.duration_ns);
        }
        let rows: Vec<AggregateRow> =
            online.whole_rows().into_iter().filter(|r| r.table == AggregateTable::Kernel).collect();
        assert_eq!(rows.len(), by_name.len(), "{run}: one row per kernel name");
        assert!(rows.len() > 10, "{run}: a realistic mix of kernels");
        for row in &rows {
            check(run, row, &by_name[row.key.as_str()]);
        }
        let total: u64 = rows.iter().map(|r| r.summary.count + r.summary.missing).sum();
        // (The PM run's report.json was recorded with its first 4 960 kernel rows.)
        let kernels = report.kernels.iter().filter(|k| k.granularity.is_kernel_execution()).count() as u64;
        assert_eq!(total, kernels, "{run}: every kernel counted once");
        assert_eq!(online.kernels(), kernels);
    }
}

#[test]
fn range_group_aggregates_equal_a_recomputation_from_the_rows() {
    for (run, report) in runs() {
        let online = fed(&report, OnlineSettings::default());
        let mut gpu: BTreeMap<String, Vec<Option<u64>>> = BTreeMap::new();
        let mut wall: BTreeMap<String, Vec<Option<u64>>> = BTreeMap::new();
        for r in &report.ranges {
            gpu.entry(fold_numbers(&r.path).into_owned()).or_default().push(r.gpu_time_ns);
            wall.entry(fold_numbers(&r.path).into_owned()).or_default().push(r.wall_time_ns);
        }
        let rows = online.whole_rows();
        for (quantity, expected) in [(AggregateQuantity::GpuTimeNs, &gpu), (AggregateQuantity::WallTimeNs, &wall)] {
            let part: Vec<&AggregateRow> =
                rows.iter().filter(|r| r.table == AggregateTable::Range && r.quantity == quantity).collect();
            assert_eq!(part.len(), expected.len(), "{run}: one row per folded path");
            for row in part {
                check(run, row, &expected[&row.key]);
            }
        }
        // Largest total first.
        let totals: Vec<u64> = rows
            .iter()
            .filter(|r| r.quantity == AggregateQuantity::GpuTimeNs)
            .map(|r| r.summary.total_ns.unwrap_or(0))
            .collect();
        assert!(totals.windows(2).all(|w| w[0] >= w[1]), "{run}: sorted by total");
    }
}

#[test]
fn the_steps_table_has_one_row_per_step_with_its_own_numbers() {
    for (run, report, group, steps) in [
        ("torch_gpt_base", load("diff", "torch_gpt_base.json.zst"), "step", 30),
        ("llmc_3steps", load("pc", "h100_llmc_3steps_report.json.zst"), "Train step #", 4),
    ] {
        let mut online = fed(&report, OnlineSettings::default());
        assert_eq!(online.steps().group(), Some(group), "{run}");
        let rows = online.take_steps();
        assert_eq!(rows.len(), steps, "{run}: one row per step");
        let mut instances: Vec<&RangeRow> =
            report.ranges.iter().filter(|r| r.depth == 0 && fold_numbers(&r.path) == group).collect();
        instances.sort_by_key(|r| r.end_ns);
        for (i, (step, range)) in rows.iter().zip(&instances).enumerate() {
            assert_eq!(step.step, i as u64);
            assert_eq!(step.path, range.path);
            assert_eq!((step.start_ns, step.end_ns), (range.start_ns, range.end_ns), "{run} step {i}");
            assert_eq!(step.wall_time_ns, range.wall_time_ns);
            assert_eq!(step.gpu_time_ns, range.gpu_time_ns);
            assert_eq!((step.kernels, step.transfers), (range.kernel_count, range.transfer_count));
            // The step's groups one and two levels down, recomputed from the rows.
            let mut expected: BTreeMap<String, (u64, u64)> = BTreeMap::new();
            let in_step = |r: &RangeRow| {
                let mut id = r.parent_id;
                while let Some(p) = id {
                    if Some(p) == range.range_id {
                        return true;
                    }
                    id = report.ranges.iter().find(|x| x.range_id == Some(p)).and_then(|x| x.parent_id);
                }
                false
            };
            for r in report.ranges.iter().filter(|r| (1..=2).contains(&r.depth) && in_step(r)) {
                let e = expected.entry(fold_numbers(&r.path).into_owned()).or_default();
                e.0 += 1;
                e.1 += r.gpu_time_ns.unwrap_or(0);
            }
            assert!(!step.groups.is_empty(), "{run} step {i}: groups");
            for g in &step.groups {
                assert_eq!(expected.get(&g.path).copied(), Some((g.count, g.gpu_time_ns.unwrap_or(0))), "{run} {i}");
            }
            assert_eq!(step.groups.len(), expected.len().min(16));
        }
        assert!(online.take_steps().is_empty(), "taken once");
    }
}

#[test]
fn windows_add_up_to_the_whole_run() {
    let report = load("pc", "h100_llmc_3steps_report.json.zst");
    // Four steps (a first one with the validation pass, then 3 training steps).
    let settings = OnlineSettings { window_steps: 3, ..OnlineSettings::default() };
    let mut online = fed(&report, settings);
    let whole = online.whole_rows();
    let mut windows = online.take_closed_windows();
    assert_eq!(windows.len(), 1, "steps 0 to 2 closed window 0");
    assert_eq!((windows[0].window, windows[0].first_step, windows[0].steps), (0, 0, 3));
    online.finish_window();
    windows.extend(online.take_closed_windows());
    assert_eq!((windows[1].window, windows[1].first_step, windows[1].steps), (1, 3, 1));
    for row in &whole {
        let (mut count, mut missing, mut total) = (0, 0, 0);
        for w in &windows {
            if let Some(r) =
                w.rows.iter().find(|r| (r.table, r.quantity, &r.key) == (row.table, row.quantity, &row.key))
            {
                count += r.summary.count;
                missing += r.summary.missing;
                total += r.summary.total_ns.unwrap_or(0);
            }
        }
        assert_eq!(
            (count, missing, total),
            (row.summary.count, row.summary.missing, row.summary.total_ns.unwrap_or(0))
        );
    }
    // After the last window, the whole run is its closed windows merged.
    assert_eq!(online.whole_rows(), whole);
}

#[test]
fn a_named_step_range_and_the_other_key_bound() {
    let report = load("diff", "torch_gpt_base.json.zst");
    let settings = OnlineSettings {
        step_range: Some(glob::Pattern::new("st*").unwrap()),
        max_groups: 5,
        ..OnlineSettings::default()
    };
    let online = fed(&report, settings);
    assert_eq!(online.steps().group(), Some("step"));
    let kernels: Vec<AggregateRow> =
        online.whole_rows().into_iter().filter(|r| r.table == AggregateTable::Kernel).collect();
    assert_eq!(kernels.len(), 6, "5 names and <other>");
    let total: u64 = kernels.iter().map(|r| r.summary.count + r.summary.missing).sum();
    assert_eq!(total, report.meta.kernel_count, "nothing lost past the bound");
    assert!(kernels.iter().any(|r| r.key == gmprof::analysis::online::OTHER_KEY));
}

//! Streamed outputs: a synthetic training run played into a session's correlator and range
//! tree, drained while it runs into part files. The parts hold every kernel, transfer and
//! range instance heard, each with the values a whole-session join gives; the aggregates
//! equal a recomputation from the rows; the steps table has one row per step; the session
//! holds only what is in flight after each drain; a part file that exists is complete.

#[path = "common/stream_session.rs"]
mod stream_session;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use gmprof::aggregate::aggregate;
use gmprof::analysis::online::{AggregateQuantity, AggregateTable, OnlineSettings};
use gmprof::correlate::Correlator;
use gmprof::model::{MetricSet, ProfilingMode};
use gmprof::report::parquet::parts::{part_files, PartWriter, SegmentPolicy};
use gmprof::report::parquet::read;
use gmprof::report::parquet::rows::transfer_columns;
use gmprof::report::stream::{StreamMeta, StreamPipeline, StreamSettings, StreamWriter};
use gmprof::session::SessionTree;
use stream_session::{Player, Shape};

fn rows_of(dir: &Path, table: &str) -> u64 {
    part_files(&dir.join(table)).unwrap().iter().map(|p| read::row_count(p).unwrap()).sum()
}

/// (path, instance) -> (kernel_count, gpu_time_ns, transfer_count) of the ranges table's parts.
fn streamed_ranges(dir: &Path) -> HashMap<(String, i64), (i64, Option<i64>, i64)> {
    let mut out = HashMap::new();
    for part in part_files(&dir.join("ranges")).unwrap() {
        for batch in
            read::batches(&part, &["path", "instance", "kernel_count", "gpu_time_ns", "transfer_count"]).unwrap()
        {
            let b = batch.unwrap();
            for r in 0..b.len() {
                let key = (b.text(0, r).unwrap().unwrap().to_owned(), b.int(1, r).unwrap().unwrap());
                let value = (b.int(2, r).unwrap().unwrap(), b.int(3, r).unwrap(), b.int(4, r).unwrap().unwrap());
                assert!(out.insert(key.clone(), value).is_none(), "range {key:?} written twice");
            }
        }
    }
    out
}

/// The streamed `ranges/` rows are the whole-session aggregation's `reference` rows: one per
/// range instance, each with its kernels, GPU time and transfers.
fn assert_ranges_as_the_whole_session(dir: &Path, reference: &[gmprof::aggregate::RangeRow]) {
    let streamed = streamed_ranges(dir);
    assert_eq!(streamed.len(), reference.len(), "one row per range instance");
    for r in reference {
        let got = streamed[&(r.path.clone(), i64::from(r.instance))];
        let want = (r.kernel_count as i64, r.gpu_time_ns.map(|t| t as i64), r.transfer_count as i64);
        assert_eq!(got, want, "{} [{}]", r.path, r.instance);
    }
}

#[test]
fn a_drained_run_streams_every_row_with_the_values_of_a_whole_session_join() {
    let dir = tempfile::tempdir().unwrap();
    let shape = Shape { steps: 60, layers: 4, kernels_per_layer: 9, ops_per_layer: 3 };
    let metrics = MetricSet::default();
    let mode = ProfilingMode::Trace;
    let settings = StreamSettings {
        // Small segments and windows, so the run spans many of each.
        segment: SegmentPolicy { rows: 500, every: Duration::from_secs(3600), row_group: 128 },
        online: OnlineSettings { window_steps: 25, ..OnlineSettings::default() },
        flight: None,
        release_memory: false,
        live: None,
        ..StreamSettings::default()
    };
    let writer = StreamWriter::create(dir.path(), &StreamMeta::new(mode, Vec::new()), settings).unwrap();
    let mut pipeline = StreamPipeline::new(writer, &metrics, mode);

    let (mut tree, mut correlator) = (SessionTree::new(), Correlator::new());
    // The whole-session reference: the same records, never drained.
    let (mut ref_tree, mut ref_correlator) = (SessionTree::new(), Correlator::new());
    let (mut player, mut ref_player) = (Player::new(shape), Player::new(shape));
    let mut most_in_flight = (0, 0);
    for step in 0..shape.steps {
        player.step(&mut tree, &mut correlator, step);
        ref_player.step(&mut ref_tree, &mut ref_correlator, step);
        if step % 3 == 2 {
            pipeline.drain(&mut correlator, &mut tree, &metrics, Instant::now(), None, None).unwrap();
            most_in_flight = (most_in_flight.0.max(tree.len()), most_in_flight.1.max(correlator.launch_count()));
        }
    }
    // At most the ranges and launches of the steps since the last drain, and the step before.
    let per_step_ranges = (shape.layers + 2) as usize;
    assert!(most_in_flight.0 <= 4 * per_step_ranges, "tree after drains: {}", most_in_flight.0);
    assert!(most_in_flight.1 as u64 <= 4 * shape.kernels_per_step(), "launches after drains: {}", most_in_flight.1);
    player.flush(&mut correlator);
    ref_player.flush(&mut ref_correlator);
    let end = pipeline.finish(correlator, &mut tree, &metrics, player.now(), None, None).unwrap();
    assert!(tree.is_empty(), "every range written and removed");

    let reference = ref_correlator.finish(&ref_tree, &metrics, mode);
    let ref_ranges = aggregate(&ref_tree, &reference, &metrics, mode);
    let kernels = shape.steps * shape.kernels_per_step();
    assert_eq!(reference.rows.len() as u64, kernels);
    // Streamed kernels = kernels heard, none flagged (each joined its activity record).
    assert_eq!(rows_of(dir.path(), "kernels"), kernels);
    assert_eq!(end.counts.kernel_rows, kernels);
    assert_eq!(end.counts.flagged_rows, 0, "{:?}", end.warnings);
    assert_eq!(end.counts.launches, reference.counts.launches);
    assert_eq!(rows_of(dir.path(), "transfers"), shape.steps);
    assert!(part_files(&dir.path().join("kernels")).unwrap().len() >= (kernels / 500) as usize);

    // Every range instance, with the values of the whole-session aggregation.
    assert_ranges_as_the_whole_session(dir.path(), &ref_ranges.ranges);

    // The steps table: one row per step.
    assert_eq!(end.written.steps, shape.steps);
    assert_eq!(rows_of(dir.path(), "steps"), shape.steps);
    assert_eq!(end.written.step_group.as_deref(), Some("Train step #"));

    // Aggregates = recomputation from the rows: per kernel name and per folded range group.
    let mut by_name: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for k in &reference.rows {
        let e = by_name.entry(k.kernel_name.as_deref().unwrap()).or_default();
        e.0 += 1;
        e.1 += k.duration_ns.unwrap();
    }
    let kernel_rows: Vec<_> = end.written.aggregates.iter().filter(|r| r.table == AggregateTable::Kernel).collect();
    assert_eq!(kernel_rows.len(), by_name.len());
    for r in kernel_rows {
        assert_eq!((r.summary.count, r.summary.total_ns.unwrap()), by_name[r.key.as_str()], "{}", r.key);
    }
    let mut by_group: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for r in &ref_ranges.ranges {
        let e = by_group.entry(gmprof::analysis::online::fold_numbers(&r.path).into_owned()).or_default();
        e.0 += 1;
        e.1 += r.gpu_time_ns.unwrap_or(0);
    }
    for r in end.written.aggregates.iter().filter(|r| r.quantity == AggregateQuantity::GpuTimeNs) {
        assert_eq!((r.summary.count, r.summary.total_ns.unwrap_or(0)), by_group[&r.key], "{}", r.key);
    }
    // Windows of 25 steps: 0..25, 25..50, 50..60 and the whole run, in the aggregates table.
    let windowed = rows_of(dir.path(), "aggregates");
    assert_eq!(windowed, 4 * end.written.aggregates.len() as u64, "3 windows + whole run, same keys");
}

#[test]
fn a_part_file_that_exists_is_complete_and_the_open_segment_is_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("transfers");
    std::fs::create_dir_all(&table).unwrap();
    std::fs::write(table.join("part-00007.parquet"), b"an earlier run's part").unwrap();
    let policy = SegmentPolicy { rows: 3, every: Duration::from_millis(0), row_group: 2 };
    let mut w = PartWriter::create(&table, "test transfers", transfer_columns(), Vec::new(), policy).unwrap();
    assert!(part_files(&table).unwrap().is_empty(), "an earlier run's parts are removed");
    let row = gmprof::correlate::TransferRow {
        correlation_id: 9,
        kind: gmprof::model::TransferKind::MemcpyHtoD,
        bytes: 64,
        start_ns: Some(10),
        end_ns: Some(20),
        duration_ns: Some(10),
        timing: Default::default(),
        stream_id: Some(7),
        device_id: Some(0),
        range_id: None,
        range_path: "<root>".into(),
        thread: None,
        api_name: None,
        call_ns: None,
        call_end_ns: None,
        status: gmprof::correlate::TransferStatus::Ok,
        graph_id: None,
        graph_node_id: None,
    };
    for _ in 0..4 {
        w.row(|p| gmprof::report::parquet::rows::push_transfer(p, &row)).unwrap();
    }
    // Three rows closed part 0; the fourth is in the open segment, which globs do not see.
    let parts = part_files(&table).unwrap();
    assert_eq!(parts.len(), 1);
    assert_eq!(read::row_count(&parts[0]).unwrap(), 3);
    let hidden: Vec<String> = std::fs::read_dir(&table)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert_eq!(hidden.len(), 1, "the open segment: {hidden:?}");
    assert!(!hidden[0].ends_with(".parquet"));
    // Its time is up: the tick closes it.
    assert!(w.tick(Instant::now()).unwrap());
    assert_eq!(part_files(&table).unwrap().len(), 2);
    // A writer dropped with a segment open (the process dying) leaves parts 0 and 1 whole.
    w.row(|p| gmprof::report::parquet::rows::push_transfer(p, &row)).unwrap();
    drop(w);
    let parts = part_files(&table).unwrap();
    assert_eq!(parts.iter().map(|p| read::row_count(p).unwrap()).sum::<u64>(), 4);
    assert_eq!(read::key_values(&parts[1]).unwrap()["gmprof.part"], "{\"part\": 1, \"first_row\": 3}");
}

/// The profiler removes a drain's completed ranges in batches, letting the session's lock go
/// between them: every range is still written once, with the whole-session values, and the
/// tree ends empty.
#[test]
fn completed_ranges_removed_in_small_batches_leave_the_same_rows_and_an_empty_tree() {
    let dir = tempfile::tempdir().unwrap();
    let shape = Shape { steps: 30, layers: 4, kernels_per_layer: 9, ops_per_layer: 3 };
    let metrics = MetricSet::default();
    let mode = ProfilingMode::Trace;
    let settings = StreamSettings { flight: None, release_memory: false, live: None, ..StreamSettings::default() };
    let writer = StreamWriter::create(dir.path(), &StreamMeta::new(mode, Vec::new()), settings).unwrap();
    let pipeline = StreamPipeline::new(writer, &metrics, mode);
    let (mut tree, mut correlator) = (SessionTree::new(), Correlator::new());
    let (mut ref_tree, mut ref_correlator) = (SessionTree::new(), Correlator::new());
    let (mut player, mut ref_player) = (Player::new(shape), Player::new(shape));
    let (mut drains, mut batches, mut removed_in_all) = (0, 0, 0);
    for step in 0..shape.steps {
        player.step(&mut tree, &mut correlator, step);
        ref_player.step(&mut ref_tree, &mut ref_correlator, step);
        if step % 3 == 2 {
            let handle = pipeline.handle();
            let mut guard = handle.lock();
            let core = guard.as_mut().unwrap();
            let input = core.take(&mut correlator, &mut tree, None, None);
            core.process(input, &metrics, Instant::now()).unwrap();
            drains += 1;
            loop {
                let before = tree.len();
                let (removed, more) = core.remove_completed_up_to(&mut tree, 5);
                assert!(removed.len() <= 5, "a batch of {}", removed.len());
                assert_eq!(tree.len(), before - removed.len());
                removed_in_all += removed.len();
                batches += 1;
                if !more {
                    break;
                }
            }
        }
    }
    // Each drain completes several steps of 4 layers x (1 + 3 ops) + 2 ranges: many batches.
    assert!(batches >= 4 * drains, "{batches} batches in {drains} drains");
    player.flush(&mut correlator);
    ref_player.flush(&mut ref_correlator);
    let end = pipeline.finish(correlator, &mut tree, &metrics, player.now(), None, None).unwrap();
    assert!(tree.is_empty(), "every range written and removed");
    let reference = ref_correlator.finish(&ref_tree, &metrics, mode);
    let ref_ranges = aggregate(&ref_tree, &reference, &metrics, mode);
    assert!(removed_in_all > ref_ranges.ranges.len() / 2, "{removed_in_all} removed in the drains");
    assert_eq!(rows_of(dir.path(), "kernels"), shape.steps * shape.kernels_per_step());
    assert_eq!(end.counts.flagged_rows, 0, "{:?}", end.warnings);
    assert_ranges_as_the_whole_session(dir.path(), &ref_ranges.ranges);
    assert_eq!(end.written.steps, shape.steps);
}

//! Live metrics (issue 45), the endpoint's part without Prometheus: a synthetic training run
//! streamed with its live metrics exported, scraped over HTTP while it runs and after it
//! ends. What a scrape says equals the run's own outputs: the step count and the last step's
//! wall time equal the steps table's, each range group's instances and GPU time the streamed
//! aggregates' (exactly, to the nanosecond), kernels and transfer bytes the rows'. Every
//! series carries the process's labels; range groups are bounded; a port in use is an error
//! the caller can say; the Grafana panel in docs/ names the exported metric; `gmprof run`
//! checks its options before the program starts.

#[path = "common/stream_session.rs"]
mod stream_session;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gmprof::analysis::online::{AggregateQuantity, AggregateTable, OnlineSettings, StepRow};
use gmprof::correlate::Correlator;
use gmprof::model::{MetricSet, ProfilingMode};
use gmprof::report::live::{
    DrainSums, LiveMetrics, MetricsServer, ProcessLabels, CONTENT_TYPE, MAX_RANGE_GROUPS, OTHER_RANGE,
};
use gmprof::report::parquet::parts::{part_files, SegmentPolicy};
use gmprof::report::parquet::read;
use gmprof::report::stream::{StreamMeta, StreamPipeline, StreamSettings, StreamWriter};
use gmprof::session::SessionTree;
use stream_session::{Player, Shape};

/// One sample of a scrape: name, labels, value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// `GET path` on `addr`: status line, headers and body.
fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.to_owned(), body.to_owned())
}

/// Parses OpenMetrics text (labels without commas or quotes in their values).
fn parse(text: &str) -> Vec<Sample> {
    assert!(text.ends_with("# EOF\n"), "{text}");
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.strip_suffix('}').unwrap()),
            None => (series, ""),
        };
        let labels = labels
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap();
                (k.to_owned(), v.trim_matches('"').to_owned())
            })
            .collect();
        out.push(Sample { name: name.to_owned(), labels, value: value.parse().unwrap() });
    }
    out
}

fn scrape(addr: SocketAddr) -> Vec<Sample> {
    let (head, body) = get(addr, "/metrics");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains(&format!("content-type: {}", CONTENT_TYPE.to_ascii_lowercase())),
        "{head}"
    );
    parse(&body)
}

/// The value of `name` whose labels include `with`; `None` when there is no such series.
fn value(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<_> = samples
        .iter()
        .filter(|s| s.name == name && with.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
        .collect();
    assert!(found.len() <= 1, "{name} {with:?}: {found:?}");
    found.first().map(|s| s.value)
}

fn labels() -> ProcessLabels {
    ProcessLabels { rank: Some(3), local_rank: Some(1), world_size: Some(8), host: Some("node7".into()) }
}

#[test]
fn a_scrape_during_and_after_a_streamed_run_equals_its_steps_table_and_aggregates() {
    let dir = tempfile::tempdir().unwrap();
    let live = Arc::new(LiveMetrics::new(&labels()));
    let server = MetricsServer::start("127.0.0.1", 0, Arc::clone(&live)).unwrap();
    assert!(server.addr().ip().is_loopback());
    let addr = server.addr();

    let shape = Shape { steps: 40, layers: 3, kernels_per_layer: 5, ops_per_layer: 2 };
    let metrics = MetricSet::default();
    let mode = ProfilingMode::Trace;
    let settings = StreamSettings {
        segment: SegmentPolicy { rows: 500, every: Duration::from_secs(3600), row_group: 128 },
        online: OnlineSettings::default(),
        flight: None,
        release_memory: false,
        live: Some(live.feed(Some(0))),
        ..StreamSettings::default()
    };
    let writer = StreamWriter::create(dir.path(), &StreamMeta::new(mode, Vec::new()), settings).unwrap();
    let mut pipeline = StreamPipeline::new(writer, &metrics, mode);
    let (mut tree, mut correlator) = (SessionTree::new(), Correlator::new());
    let mut player = Player::new(shape);

    // Before any drain: the build info only, no step series (not measured yet, so absent).
    let before = scrape(addr);
    assert_eq!(value(&before, "gmprof_steps_total", &[]), None);
    assert!(before
        .iter()
        .any(|s| s.name == "gmprof_build_info" && s.labels.get("rank").map(String::as_str) == Some("3")));

    let mut seen_mid_run = Vec::new();
    for step in 0..shape.steps {
        player.step(&mut tree, &mut correlator, step);
        if step % 5 == 4 {
            pipeline.drain(&mut correlator, &mut tree, &metrics, Instant::now(), None, None).unwrap();
            let mid = scrape(addr);
            seen_mid_run.push(value(&mid, "gmprof_steps_total", &[("device", "0")]).unwrap_or(0.0));
        }
    }
    // The steps moved while the run went on, one drain after another.
    assert!(seen_mid_run.windows(2).all(|w| w[0] <= w[1]), "{seen_mid_run:?}");
    assert!(seen_mid_run[0] > 0.0 && *seen_mid_run.last().unwrap() < shape.steps as f64, "{seen_mid_run:?}");
    player.flush(&mut correlator);
    let end = pipeline.finish(correlator, &mut tree, &metrics, player.now(), None, None).unwrap();

    let s = scrape(addr);
    let d = [("device", "0")];
    // Every series carries the process's labels.
    for sample in &s {
        for (k, v) in [("rank", "3"), ("local_rank", "1"), ("world_size", "8"), ("host", "node7")] {
            assert_eq!(sample.labels.get(k).map(String::as_str), Some(v), "{sample:?}");
        }
    }
    // Steps: the steps table's count and last row.
    let table = &end.written.steps_table;
    assert_eq!(end.written.steps, shape.steps);
    assert_eq!(value(&s, "gmprof_steps_total", &d), Some(shape.steps as f64));
    assert_eq!(value(&s, "gmprof_step_wall_seconds_count", &d), Some(table.len() as f64));
    let last = table.last().unwrap();
    assert_eq!(value(&s, "gmprof_last_step", &d), Some(last.step as f64));
    assert_eq!(value(&s, "gmprof_last_step_wall_seconds", &d), Some(last.wall_time_ns.unwrap() as f64 / 1e9));
    assert_eq!(value(&s, "gmprof_last_step_gpu_seconds", &d), Some(last.gpu_time_ns.unwrap() as f64 / 1e9));
    assert_eq!(value(&s, "gmprof_last_step_kernels", &d), Some(last.kernels as f64));
    assert_eq!(value(&s, "gmprof_last_step_transfers", &d), Some(last.transfers as f64));
    assert_eq!(last.transfers, 1);
    let wall_sum: u64 = table.iter().map(|r| r.wall_time_ns.unwrap()).sum();
    let got = value(&s, "gmprof_step_wall_seconds_sum", &d).unwrap();
    assert!((got - wall_sum as f64 / 1e9).abs() < 1e-9, "{got} vs {wall_sum} ns");

    // Range groups: the streamed aggregates' count and total, to the nanosecond.
    let groups: Vec<_> = end
        .written
        .aggregates
        .iter()
        .filter(|a| a.table == AggregateTable::Range && a.quantity == AggregateQuantity::GpuTimeNs)
        .collect();
    assert!(groups.iter().any(|g| g.key == "Train step #/Layer #/matmul_cublaslt"), "{groups:?}");
    for g in &groups {
        let r = [("device", "0"), ("range", g.key.as_str())];
        assert_eq!(value(&s, "gmprof_range_instances_total", &r), Some(g.summary.count as f64), "{}", g.key);
        let ns = value(&s, "gmprof_range_gpu_seconds_total", &r).map(|v| (v * 1e9).round() as u64);
        assert_eq!(ns, g.summary.total_ns, "{}", g.key);
    }
    let exported: BTreeSet<_> =
        s.iter().filter(|x| x.name == "gmprof_range_instances_total").map(|x| x.labels["range"].clone()).collect();
    assert_eq!(exported, groups.iter().map(|g| g.key.clone()).collect::<BTreeSet<_>>());
    // Wall time too.
    for w in end.written.aggregates.iter().filter(|a| a.quantity == AggregateQuantity::WallTimeNs) {
        let r = [("device", "0"), ("range", w.key.as_str())];
        let ns = value(&s, "gmprof_range_wall_seconds_total", &r).map(|v| (v * 1e9).round() as u64);
        assert_eq!(ns, w.summary.total_ns, "{}", w.key);
    }

    // Kernels and transfers: the rows'.
    let kernels: u64 =
        end.written.aggregates.iter().filter(|a| a.table == AggregateTable::Kernel).map(|a| a.summary.count).sum();
    assert_eq!(kernels, shape.steps * shape.kernels_per_step());
    assert_eq!(value(&s, "gmprof_kernels_total", &d), Some(kernels as f64));
    let kernel_ns: u64 = end
        .written
        .aggregates
        .iter()
        .filter(|a| a.table == AggregateTable::Kernel)
        .map(|a| a.summary.total_ns.unwrap())
        .sum();
    let got = value(&s, "gmprof_kernel_gpu_seconds_total", &d).map(|v| (v * 1e9).round() as u64);
    assert_eq!(got, Some(kernel_ns));
    let mut bytes = 0;
    for part in part_files(&dir.path().join("transfers")).unwrap() {
        for batch in read::batches(&part, &["bytes"]).unwrap() {
            let b = batch.unwrap();
            bytes += (0..b.len()).map(|r| b.int(0, r).unwrap().unwrap() as u64).sum::<u64>();
        }
    }
    assert_eq!(bytes, shape.steps * 4096);
    assert_eq!(value(&s, "gmprof_transfer_bytes_total", &d), Some(bytes as f64));
    assert_eq!(value(&s, "gmprof_transfers_total", &d), Some(shape.steps as f64));
    let optimizer = [("device", "0"), ("range", "Train step #/optimizer")];
    assert_eq!(value(&s, "gmprof_range_transfer_bytes_total", &optimizer), Some(bytes as f64));

    // Health: every drain counted, nothing flagged; no PM sampling, no DRAM series.
    assert_eq!(value(&s, "gmprof_drains_total", &d), Some(shape.steps as f64 / 5.0 + 1.0));
    assert_eq!(value(&s, "gmprof_flagged_kernel_rows_total", &d), Some(0.0));
    assert_eq!(value(&s, "gmprof_pm_samples_total", &d), None, "no PM sampling: absent");
    assert_eq!(value(&s, "gmprof_warnings", &d), Some(end.warnings.len() as f64));
    assert!(!s.iter().any(|x| x.name.contains("dram")), "not measured: absent");
    server.stop();
}

#[test]
fn range_groups_past_the_bound_are_exported_as_other() {
    let live = Arc::new(LiveMetrics::new(&ProcessLabels::default()));
    let server = MetricsServer::start("127.0.0.1", 0, Arc::clone(&live)).unwrap();
    let feed = live.feed(Some(1));
    let stream = {
        // A run whose ranges each have their own name: one group per range.
        let dir = tempfile::tempdir().unwrap();
        let settings = StreamSettings { live: Some(feed), ..StreamSettings::default() };
        let mode = ProfilingMode::Trace;
        let metrics = MetricSet::default();
        let writer = StreamWriter::create(dir.path(), &StreamMeta::new(mode, Vec::new()), settings).unwrap();
        let mut pipeline = StreamPipeline::new(writer, &metrics, mode);
        let (mut tree, mut correlator) = (SessionTree::new(), Correlator::new());
        for i in 0..MAX_RANGE_GROUPS as u64 + 10 {
            tree.push(&format!("phase{i}"), 1, 1_000 * i + 1);
            tree.pop(1, 1_000 * i + 500).unwrap();
        }
        pipeline.drain(&mut correlator, &mut tree, &metrics, Instant::now(), None, None).unwrap();
        pipeline.finish(correlator, &mut tree, &metrics, 1_000_000, None, None).unwrap()
    };
    let s = scrape(server.addr());
    let ranges: BTreeSet<_> =
        s.iter().filter(|x| x.name == "gmprof_range_instances_total").map(|x| x.labels["range"].clone()).collect();
    assert_eq!(ranges.len(), MAX_RANGE_GROUPS + 1, "{ranges:?}");
    assert!(ranges.contains("phase0") && !ranges.contains("phase70"));
    assert_eq!(value(&s, "gmprof_range_instances_total", &[("range", OTHER_RANGE)]), Some(10.0));
    // The process's labels, where none is known, are left out.
    assert!(s.iter().all(|x| !x.labels.contains_key("rank") && !x.labels.contains_key("host")));
    assert_eq!(stream.written.steps, 0);
    assert_eq!(value(&s, "gmprof_steps_total", &[]), None, "no step group: no step series");
    server.stop();
}

#[test]
fn the_endpoint_answers_metrics_only_and_a_port_in_use_is_an_error_that_says_so() {
    let live = Arc::new(LiveMetrics::new(&labels()));
    let server = MetricsServer::start("127.0.0.1", 0, Arc::clone(&live)).unwrap();
    let (head, body) = get(server.addr(), "/");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    assert!(body.contains("/metrics"), "{body}");
    // A second server on the same port: an error naming the address, nothing panics.
    let e = MetricsServer::start("127.0.0.1", server.addr().port(), Arc::clone(&live)).unwrap_err().to_string();
    assert!(e.contains("is in use") && e.contains(&server.addr().to_string()), "{e}");
    let e = MetricsServer::start("no such host.invalid", 9, Arc::clone(&live)).unwrap_err().to_string();
    assert!(e.contains("does not resolve"), "{e}");
    // An empty drain: counted, its counts 0 (measured), no time (none measured).
    let feed = live.feed(Some(2));
    let mut empty = DrainSums::new(&[]);
    empty.drains = 1;
    feed.publish(&mut empty);
    feed.set_records_dropped(5);
    feed.set_records_dropped(3);
    feed.set_records_dropped(7);
    let s = scrape(server.addr());
    assert_eq!(value(&s, "gmprof_drains_total", &[("device", "2")]), Some(1.0));
    assert_eq!(value(&s, "gmprof_activity_records_dropped_total", &[("device", "2")]), Some(7.0));
    assert_eq!(value(&s, "gmprof_kernels_total", &[("device", "2")]), Some(0.0));
    assert_eq!(value(&s, "gmprof_kernel_gpu_seconds_total", &[("device", "2")]), None);
    server.stop();
}

/// The Grafana panel the README points at parses and plots the exported step time per rank.
#[test]
fn the_grafana_panel_names_the_exported_step_time_by_rank() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/grafana-step-time.json");
    let panel: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(panel["type"], "timeseries");
    let targets = panel["targets"].as_array().unwrap();
    assert!(!targets.is_empty());
    let live = LiveMetrics::new(&labels());
    let mut sums = DrainSums::new(&[]);
    sums.step(&StepRow { wall_time_ns: Some(5_000_000), ..StepRow::default() });
    live.feed(Some(0)).publish(&mut sums);
    let exported = live.encode().unwrap();
    for t in targets {
        let expr = t["expr"].as_str().unwrap();
        let metric =
            expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).find(|w| w.starts_with("gmprof_")).unwrap();
        let family = metric.trim_end_matches("_sum").trim_end_matches("_count").trim_end_matches("_bucket");
        assert!(exported.contains(&format!("# TYPE {family} ")), "{metric} is not exported:\n{exported}");
        assert!(t["legendFormat"].as_str().unwrap().contains("{{rank}}"), "{t}");
        assert!(expr.contains("rank"), "{expr}");
    }
}

/// `gmprof run`'s options are checked before the program starts.
#[test]
fn gmprof_run_refuses_live_metrics_it_cannot_serve_before_the_program_starts() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gmprof")).arg("run").args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run(&["--metrics-port", "9400", "--mode", "kernel_replay", "--", "true"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--metrics-port needs a mode that streams") && err.contains("not kernel_replay"), "{err}");
    let (code, err) = run(&["--otlp", "https://collector:4318", "--", "true"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--otlp: ") && err.contains("https is not supported"), "{err}");
    let (code, err) = run(&["--otlp", "http://collector:4318", "--mode", "kernel_replay", "--", "true"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--otlp needs a mode that streams"), "{err}");
    let (code, err) = run(&["--otlp-interval", "5", "--", "true"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--otlp"), "{err}");
    let (code, err) = run(&["--metrics-bind", "0.0.0.0", "--", "true"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--metrics-port"), "{err}");
    let (code, err) = run(&["--metrics-port", "0", "--", "true"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("0 is not in 1..=65535"), "{err}");
}

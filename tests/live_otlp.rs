//! Live metrics pushed over OTLP/HTTP (issue 45): a synthetic training run streamed with its
//! live metrics pushed to a test OTLP receiver (a `tiny_http` server that decodes each
//! `ExportMetricsServiceRequest`). The pushes come while the run goes on and once more at its
//! end; the last one equals the run's own outputs (the steps table's count, each range
//! group's instances and GPU time from the streamed aggregates, to the nanosecond, the
//! kernels' count) and carries the process's resource attributes. A collector that refuses
//! connections, or accepts them and never answers, neither blocks nor fails the run: every
//! failed push is counted, in the health metric too.

#[path = "common/stream_session.rs"]
mod stream_session;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gmprof::analysis::online::{AggregateQuantity, AggregateTable, OnlineSettings};
use gmprof::correlate::Correlator;
use gmprof::model::{MetricSet, ProfilingMode};
use gmprof::report::live::{Fam, LiveMetrics, OtlpPusher, OtlpSettings, ProcessLabels, SeriesKey, Value};
use gmprof::report::parquet::parts::SegmentPolicy;
use gmprof::report::stream::{StreamEnd, StreamMeta, StreamPipeline, StreamSettings, StreamWriter};
use gmprof::session::SessionTree;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point, AggregationTemporality, Metric};
use prost::Message;
use stream_session::{Player, Shape};

/// A test OTLP/HTTP receiver: every request's path, content type and decoded body.
struct Receiver {
    url: String,
    server: Arc<tiny_http::Server>,
    got: mpsc::Receiver<(String, String, ExportMetricsServiceRequest)>,
}

impl Receiver {
    fn start() -> Self {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
        let url = format!("http://{}", server.server_addr().to_ip().unwrap());
        let (tx, got) = mpsc::channel();
        let serving = Arc::clone(&server);
        std::thread::spawn(move || {
            for mut request in serving.incoming_requests() {
                let mut body = Vec::new();
                request.as_reader().read_to_end(&mut body).unwrap();
                let kind = request
                    .headers()
                    .iter()
                    .find(|h| h.field.equiv("Content-Type"))
                    .map(|h| h.value.to_string())
                    .unwrap_or_default();
                let decoded = ExportMetricsServiceRequest::decode(&body[..]).expect("an ExportMetricsServiceRequest");
                let _ = tx.send((request.url().to_owned(), kind, decoded));
                let _ = request.respond(tiny_http::Response::empty(200));
            }
        });
        Self { url, server, got }
    }

    fn all(&self) -> Vec<(String, String, ExportMetricsServiceRequest)> {
        self.got.try_iter().collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.unblock();
    }
}

fn labels() -> ProcessLabels {
    ProcessLabels { rank: Some(3), local_rank: Some(1), world_size: Some(8), host: Some("node7".into()) }
}

/// A streamed run of `shape` feeding `live`, a drain every 5 steps and `pause` after each.
fn run(shape: Shape, live: &LiveMetrics, pause: Duration) -> StreamEnd {
    let dir = tempfile::tempdir().unwrap();
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
    for step in 0..shape.steps {
        player.step(&mut tree, &mut correlator, step);
        if step % 5 == 4 {
            let t0 = Instant::now();
            pipeline.drain(&mut correlator, &mut tree, &metrics, Instant::now(), None, None).unwrap();
            // The push is on its own thread: a drain never waits for it.
            assert!(t0.elapsed() < Duration::from_secs(2), "a drain took {:?}", t0.elapsed());
            std::thread::sleep(pause);
        }
    }
    player.flush(&mut correlator);
    pipeline.finish(correlator, &mut tree, &metrics, player.now(), None, None).unwrap()
}

fn attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes.iter().find(|a| a.key == key).and_then(|a| a.value.as_ref()).and_then(|v| v.value.as_ref())
}

fn text(attributes: &[KeyValue], key: &str) -> Option<String> {
    match attr(attributes, key) {
        Some(any_value::Value::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

/// A sum's or gauge's points: attributes (as text) to value (as f64), and whether it is a
/// monotonic cumulative sum.
fn points(m: &Metric) -> (BTreeMap<BTreeMap<String, String>, f64>, Option<bool>) {
    let (pts, monotonic) = match m.data.as_ref().unwrap() {
        Data::Sum(s) => {
            assert_eq!(s.aggregation_temporality, AggregationTemporality::Cumulative as i32, "{}", m.name);
            (&s.data_points, Some(s.is_monotonic))
        }
        Data::Gauge(g) => (&g.data_points, None),
        other => panic!("{}: {other:?}", m.name),
    };
    let out = pts
        .iter()
        .map(|p| {
            let labels =
                p.attributes.iter().filter_map(|a| Some((a.key.clone(), text(&p.attributes, &a.key)?))).collect();
            let v = match p.value.as_ref().unwrap() {
                number_data_point::Value::AsInt(i) => *i as f64,
                number_data_point::Value::AsDouble(d) => *d,
            };
            (labels, v)
        })
        .collect();
    (out, monotonic)
}

/// The value of `name`'s point whose attributes include `with`.
fn value(req: &ExportMetricsServiceRequest, name: &str, with: &[(&str, &str)]) -> Option<f64> {
    let metric = req.resource_metrics[0].scope_metrics[0].metrics.iter().find(|m| m.name == name)?;
    let (pts, _) = points(metric);
    let found: Vec<f64> = pts
        .iter()
        .filter(|(l, _)| with.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v)))
        .map(|(_, v)| *v)
        .collect();
    assert!(found.len() <= 1, "{name} {with:?}: {found:?}");
    found.first().copied()
}

#[test]
fn pushes_come_while_the_run_goes_and_the_last_equals_its_steps_table_and_aggregates() {
    let receiver = Receiver::start();
    let live = Arc::new(LiveMetrics::new(&labels()));
    let settings = OtlpSettings::new(&receiver.url, Duration::from_millis(50)).unwrap();
    assert_eq!(settings.url, format!("{}/v1/metrics", receiver.url));
    let mut pusher = OtlpPusher::start(settings, Arc::clone(&live)).unwrap();
    let shape = Shape { steps: 40, layers: 3, kernels_per_layer: 5, ops_per_layer: 2 };
    let end = run(shape, &live, Duration::from_millis(80));
    let mid_run = receiver.all();
    let (accepted, failed) = pusher.finish();
    let at_end = receiver.all();
    assert_eq!(failed, 0);
    assert_eq!(accepted as usize, mid_run.len() + at_end.len());
    // Pushes while the run went on, their step counts rising; and one more at the end.
    assert!(mid_run.len() >= 3, "{} pushes during the run", mid_run.len());
    let steps: Vec<f64> = mid_run.iter().map(|(_, _, r)| value(r, "gmprof_steps", &[]).unwrap_or(0.0)).collect();
    assert!(steps.windows(2).all(|w| w[0] <= w[1]) && steps[0] < shape.steps as f64, "{steps:?}");
    // The end's push is the last (a periodic one may have been in flight as the run ended).
    let (path, kind, last) = at_end.last().expect("the end's push");
    assert_eq!((path.as_str(), kind.as_str()), ("/v1/metrics", "application/x-protobuf"));

    // The resource: the service, the process's labels, one instance per process.
    let resource = last.resource_metrics[0].resource.as_ref().unwrap();
    assert_eq!(text(&resource.attributes, "service.name").as_deref(), Some("gmprof"));
    assert_eq!(text(&resource.attributes, "host.name").as_deref(), Some("node7"));
    let instance = text(&resource.attributes, "service.instance.id").unwrap();
    assert_eq!(instance, format!("node7:{}", std::process::id()));
    for (key, want) in [("rank", 3), ("local_rank", 1), ("world_size", 8)] {
        assert_eq!(attr(&resource.attributes, key), Some(&any_value::Value::IntValue(want)), "{key}");
    }
    let metrics = &last.resource_metrics[0].scope_metrics[0].metrics;
    // Every point carries the same labels as the Prometheus series, device included.
    for m in metrics.iter().filter(|m| !matches!(m.data, Some(Data::Histogram(_)))) {
        for (labels, _) in points(m).0 {
            assert_eq!(labels.get("rank").map(String::as_str), Some("3"), "{}", m.name);
        }
    }

    // Steps: the steps table's count and last row; counters are monotonic sums.
    let d = [("device", "0")];
    assert_eq!(end.written.steps, shape.steps);
    assert_eq!(value(last, "gmprof_steps", &d), Some(shape.steps as f64));
    let steps_metric = metrics.iter().find(|m| m.name == "gmprof_steps").unwrap();
    assert_eq!(points(steps_metric).1, Some(true));
    assert_eq!(steps_metric.unit, "1");
    let table = &end.written.steps_table;
    let last_row = table.last().unwrap();
    assert_eq!(value(last, "gmprof_last_step", &d), Some(last_row.step as f64));
    assert_eq!(value(last, "gmprof_last_step_wall_seconds", &d), Some(last_row.wall_time_ns.unwrap() as f64 / 1e9));
    // The step time histogram: one observation per step, the wall times' sum, cumulative.
    let Some(Data::Histogram(h)) = &metrics.iter().find(|m| m.name == "gmprof_step_wall_seconds").unwrap().data else {
        panic!("no step histogram")
    };
    let p = &h.data_points[0];
    assert_eq!(p.count, table.len() as u64);
    assert_eq!(p.bucket_counts.iter().sum::<u64>(), p.count);
    assert_eq!(p.bucket_counts.len(), p.explicit_bounds.len() + 1);
    let wall: u64 = table.iter().map(|r| r.wall_time_ns.unwrap()).sum();
    assert!((p.sum.unwrap() - wall as f64 / 1e9).abs() < 1e-9);

    // Range groups: the streamed aggregates' instances and GPU time, to the nanosecond.
    let groups: Vec<_> = end
        .written
        .aggregates
        .iter()
        .filter(|a| a.table == AggregateTable::Range && a.quantity == AggregateQuantity::GpuTimeNs)
        .collect();
    assert!(groups.iter().any(|g| g.key == "Train step #/Layer #/matmul_cublaslt"), "{groups:?}");
    for g in &groups {
        let r = [("device", "0"), ("range", g.key.as_str())];
        assert_eq!(value(last, "gmprof_range_instances", &r), Some(g.summary.count as f64), "{}", g.key);
        let ns = value(last, "gmprof_range_gpu_seconds", &r).map(|v| (v * 1e9).round() as u64);
        assert_eq!(ns, g.summary.total_ns, "{}", g.key);
    }
    let gpu = metrics.iter().find(|m| m.name == "gmprof_range_gpu_seconds").unwrap();
    assert_eq!((gpu.unit.as_str(), points(gpu).1), ("s", Some(true)));
    // Kernels: the rows'.
    let kernels: u64 =
        end.written.aggregates.iter().filter(|a| a.table == AggregateTable::Kernel).map(|a| a.summary.count).sum();
    assert_eq!(kernels, shape.steps * shape.kernels_per_step());
    assert_eq!(value(last, "gmprof_kernels", &d), Some(kernels as f64));
    // Not measured: no point (no PM sampling, no DRAM).
    assert!(!metrics.iter().any(|m| m.name.contains("dram") || m.name == "gmprof_pm_samples"));
    // The push's own health, as the Prometheus endpoint has it: the pushes accepted before
    // this one.
    assert_eq!(value(last, "gmprof_otlp_pushes", &[]), Some((accepted - 1) as f64));
    assert_eq!(value(last, "gmprof_otlp_push_failures", &[]), None, "none failed: no series");
    // The same values as a scrape.
    let scrape = live.encode().unwrap();
    assert!(
        scrape.contains(&format!(
            "gmprof_steps_total{{rank=\"3\",local_rank=\"1\",world_size=\"8\",host=\"node7\",device=\"0\"}} {}\n",
            shape.steps
        )),
        "{scrape}"
    );
}

/// A collector that refuses connections, and one that accepts them and never answers: the
/// run's drains go on as without them, every push fails and is counted, and the end's push
/// waits at most its timeout.
#[test]
fn a_dead_or_silent_collector_neither_blocks_nor_fails_the_run_and_is_counted() {
    let refused = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    // Accepts (the kernel's backlog) and never reads nor answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let shape = Shape { steps: 20, layers: 2, kernels_per_layer: 3, ops_per_layer: 0 };
    for addr in [refused, silent.local_addr().unwrap()] {
        let live = Arc::new(LiveMetrics::new(&labels()));
        let settings = OtlpSettings::new(&format!("http://{addr}"), Duration::from_millis(100)).unwrap();
        assert_eq!(settings.timeout, Duration::from_millis(100));
        let mut pusher = OtlpPusher::start(settings, Arc::clone(&live)).unwrap();
        let end = run(shape, &live, Duration::from_millis(120));
        assert_eq!(end.written.steps, shape.steps, "the run's outputs are whole");
        let t0 = Instant::now();
        let (accepted, failed) = pusher.finish();
        assert!(t0.elapsed() < Duration::from_secs(3), "the end waited {:?}", t0.elapsed());
        assert_eq!(accepted, 0, "{addr}");
        // At least one periodic push and the end's.
        assert!(failed >= 2, "{addr}: {failed} failed pushes counted");
        // Counted in the health metric a scrape (or a later push) sees.
        assert_eq!(live.store().get(Fam::OtlpPushFailures, &SeriesKey::default()), Some(Value::Count(failed)));
        let scrape = live.encode().unwrap();
        assert!(scrape.contains(&format!("gmprof_otlp_push_failures_total{{rank=\"3\",local_rank=\"1\",world_size=\"8\",host=\"node7\"}} {failed}\n")), "{scrape}");
        let warning = gmprof::report::live::push::failures_warning("u", accepted, failed).unwrap();
        assert!(warning.starts_with(&format!("{failed} of {failed} OTLP push(es)")), "{warning}");
    }
    drop(silent);
}

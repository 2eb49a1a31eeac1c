//! The live metrics as an OTLP `ExportMetricsServiceRequest` ([`request`]): the values a
//! scrape gets, read from the same [`Store`], in OpenTelemetry's data model, for the push
//! (`push`). The messages are `opentelemetry-proto`'s (prost types; encoding is
//! `prost::Message::encode_to_vec`).
//!
//! - **Names** are the Prometheus families' (`gmprof_range_gpu_seconds`), without the
//!   `_total` Prometheus adds to counters: a collector that exports to Prometheus (or
//!   Prometheus's own OTLP receiver) adds it back, so a dashboard's queries are the same
//!   whichever way the values came. Units are UCUM (`s`, `By`, `By/s`, `1`).
//! - **Kinds:** a counter is a monotonic cumulative sum (integer where the Prometheus value is
//!   a count, double where it is seconds or bytes from counters), a gauge a gauge, the step
//!   time histogram a cumulative explicit-bucket histogram with the same bounds. Every
//!   cumulative point starts at [`LiveMetrics::started_unix_ns`].
//! - **Resource:** `service.name` (`gmprof`), `service.version`, `service.instance.id`
//!   (`HOST:PID`, one per process, so the ranks of a job stay apart), `host.name`, and
//!   `rank`, `local_rank`, `world_size` where torchrun set them. The data points carry the
//!   same labels as the Prometheus series (the process's, then `device`, `range`, ...), so
//!   the series are the same through a pipeline that drops resource attributes.
//! - `gmprof_build_info` is not pushed: its version is the resource's `service.version`.
//!
//! Imports `store` and `values`.

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use super::store::{Kind, Store, Value};
use super::values::{LiveMetrics, ProcessLabels};

/// The instrumentation scope's name.
pub const SCOPE: &str = "gmprof.live";

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue { key: key.to_owned(), value: Some(AnyValue { value: Some(value) }), ..KeyValue::default() }
}

fn text(key: &str, value: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.to_owned()))
}

/// The resource attributes of a process labelled `labels` (process id `pid`).
pub fn resource(labels: &ProcessLabels, pid: u32) -> Resource {
    let host = labels.host.clone().unwrap_or_else(|| "unknown".to_owned());
    let mut attributes = vec![
        text("service.name", "gmprof"),
        text("service.version", env!("CARGO_PKG_VERSION")),
        text("service.instance.id", &format!("{host}:{pid}")),
    ];
    if let Some(h) = &labels.host {
        attributes.push(text("host.name", h));
    }
    for (key, value) in [("rank", labels.rank), ("local_rank", labels.local_rank), ("world_size", labels.world_size)] {
        if let Some(v) = value {
            attributes.push(kv(key, any_value::Value::IntValue(i64::from(v))));
        }
    }
    Resource { attributes, ..Resource::default() }
}

/// The request that pushes `metrics`' values as they are at `now_unix_ns`.
pub fn request(metrics: &LiveMetrics, now_unix_ns: u64) -> ExportMetricsServiceRequest {
    let start = metrics.started_unix_ns();
    let process: Vec<KeyValue> = metrics.labels().pairs().iter().map(|(k, v)| text(k, v)).collect();
    let out = encode_store(metrics.store(), &process, start, now_unix_ns);
    let scope = InstrumentationScope {
        name: SCOPE.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ..InstrumentationScope::default()
    };
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource(metrics.labels(), std::process::id())),
            scope_metrics: vec![ScopeMetrics { scope: Some(scope), metrics: out, schema_url: String::new() }],
            schema_url: String::new(),
        }],
    }
}

/// Every family with at least one series, as OTLP metrics.
fn encode_store(store: &Store, process: &[KeyValue], start: u64, now: u64) -> Vec<Metric> {
    let mut out = Vec::new();
    let _ = store.visit(|def, series| -> Result<(), ()> {
        if series.is_empty() {
            return Ok(());
        }
        let attributes = |key: &super::store::SeriesKey| -> Vec<KeyValue> {
            process.iter().cloned().chain(key.pairs().iter().map(|(k, v)| text(k, v))).collect()
        };
        let number = |key, value: &Value| NumberDataPoint {
            attributes: attributes(key),
            start_time_unix_nano: start,
            time_unix_nano: now,
            value: Some(match value {
                Value::Count(n) => number_data_point::Value::AsInt(i64::try_from(*n).unwrap_or(i64::MAX)),
                Value::Int(n) => number_data_point::Value::AsInt(*n),
                other => number_data_point::Value::AsDouble(other.as_f64()),
            }),
            ..NumberDataPoint::default()
        };
        let data = match def.kind {
            Kind::Counter => metric::Data::Sum(Sum {
                data_points: series.iter().map(|(k, v)| number(k, v)).collect(),
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            }),
            Kind::Gauge => {
                metric::Data::Gauge(Gauge { data_points: series.iter().map(|(k, v)| number(k, v)).collect() })
            }
            Kind::Histogram => metric::Data::Histogram(Histogram {
                data_points: series
                    .iter()
                    .filter_map(|(k, v)| match v {
                        Value::Histogram(h) => Some(HistogramDataPoint {
                            attributes: attributes(k),
                            start_time_unix_nano: start,
                            time_unix_nano: now,
                            count: h.count,
                            sum: Some(h.sum),
                            bucket_counts: h.counts.clone(),
                            explicit_bounds: h.bounds.to_vec(),
                            ..HistogramDataPoint::default()
                        }),
                        _ => None,
                    })
                    .collect(),
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
            }),
        };
        out.push(Metric {
            name: format!("gmprof_{}", def.name),
            description: def.help.clone(),
            unit: def.unit.to_owned(),
            data: Some(data),
            ..Metric::default()
        });
        Ok(())
    });
    out
}

#!/usr/bin/env python3
"""A minimal OTLP/HTTP metrics receiver for GPU validation runs (issue 45): accepts
`POST /v1/metrics` (protobuf ExportMetricsServiceRequest, as `gmprof run --otlp` pushes),
answers 200 with an empty ExportMetricsServiceResponse, and appends each push to a JSON-lines
file: the time it came, the resource attributes, and every data point as
[metric name, attributes, value] (sums and gauges: the value; histograms: count and sum).

    otlp_receiver.py --port 4318 --out PUSHES.jsonl [--until FILE]

Needs the `opentelemetry-proto` and `protobuf` Python packages. Stops when FILE exists (after
one more second for a last push), or on SIGTERM.
"""

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2


def attrs(kvs):
    out = {}
    for kv in kvs:
        v = kv.value
        kind = v.WhichOneof("value")
        out[kv.key] = getattr(v, kind) if kind else None
    return out


def points(metric):
    kind = metric.WhichOneof("data")
    data = getattr(metric, kind)
    for p in data.data_points:
        a = attrs(p.attributes)
        if kind in ("sum", "gauge"):
            value = p.as_double if p.WhichOneof("value") == "as_double" else p.as_int
            yield [metric.name, a, value]
        elif kind == "histogram":
            yield [metric.name + ".count", a, p.count]
            yield [metric.name + ".sum", a, p.sum]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=4318)
    ap.add_argument("--out", required=True)
    ap.add_argument("--until")
    a = ap.parse_args()
    lock = threading.Lock()
    out = open(a.out, "w")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            req = metrics_service_pb2.ExportMetricsServiceRequest()
            try:
                req.ParseFromString(body)
            except Exception as e:  # noqa: BLE001: answer and keep going
                self.send_response(400)
                self.end_headers()
                self.wfile.write(str(e).encode())
                return
            for rm in req.resource_metrics:
                line = {"t": time.time(), "path": self.path, "resource": attrs(rm.resource.attributes), "points": []}
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        line["points"].extend(points(m))
                with lock:
                    out.write(json.dumps(line) + "\n")
                    out.flush()
            resp = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(resp)))
            self.end_headers()
            self.wfile.write(resp)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    while not (a.until and os.path.exists(a.until)):
        time.sleep(0.2)
    time.sleep(1)
    server.shutdown()
    out.close()


if __name__ == "__main__":
    main()

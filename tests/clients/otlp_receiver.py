"""A small OTLP/HTTP receiver for tests: accepts protobuf exports on
/v1/traces and /v1/metrics, decodes them with the opentelemetry-proto
package and keeps what arrived."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


def _value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attributes(kvs):
    return {kv.key: _value(kv.value) for kv in kvs}


class Receiver:
    """Decoded spans and metric points, as plain dicts."""

    def __init__(self):
        self.spans = []
        self.metrics = []
        self.resources = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/v1/traces":
                    req = trace_service_pb2.ExportTraceServiceRequest()
                    req.ParseFromString(body)
                    receiver._traces(req)
                    reply = trace_service_pb2.ExportTraceServiceResponse()
                elif self.path == "/v1/metrics":
                    req = metrics_service_pb2.ExportMetricsServiceRequest()
                    req.ParseFromString(body)
                    receiver._metrics(req)
                    reply = metrics_service_pb2.ExportMetricsServiceResponse()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                out = reply.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def _traces(self, req):
        with self.lock:
            for rs in req.resource_spans:
                self.resources.append(attributes(rs.resource.attributes))
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append({"name": s.name, "attributes": attributes(s.attributes)})

    def _metrics(self, req):
        with self.lock:
            for rm in req.resource_metrics:
                self.resources.append(attributes(rm.resource.attributes))
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        kind = m.WhichOneof("data")
                        points = getattr(m, kind).data_points if kind else []
                        for p in points:
                            value = p.as_double if p.WhichOneof("value") == "as_double" else p.as_int
                            self.metrics.append({
                                "name": m.name,
                                "kind": kind,
                                "attributes": attributes(p.attributes),
                                "value": value,
                            })

    def snapshot(self):
        with self.lock:
            return list(self.spans), list(self.metrics), list(self.resources)

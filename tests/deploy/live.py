"""Live check of the observability kit against real processes, all on loopback:

    strata testbed  <-  strata (retry policy on)  <-  HTTP POSTs of every outcome
                            ^ /metrics every 1 s     | OTLP/HTTP (spans, metrics)
                        prometheus (rules loaded,    v
                        evaluated every 1 s)       OTLP receiver (here, in Python)

Then every PromQL expression of the Grafana dashboard (panels and template variables) and of
the recording rules is evaluated through Prometheus's HTTP API and must return data; every
rule must evaluate without error; every metric an alert names must exist. The image's
HEALTHCHECK probe is run against the live admin listener too.

strata exports with the OTEL_* environment the collector sidecar's manifest gives it
(deploy/kubernetes/otel-collector/sidecar.yaml, the endpoint moved to the receiver's port).
Each trace link of the dashboard is then followed for every row its panel shows: its TraceQL,
with the row's labels filled in, must match spans strata exported (a small TraceQL evaluator
for the `{ a && b }` form the links use), and strata_telemetry_dropped_total must stay 0.

    live.py --strata target/debug/strata --healthcheck PATH

Bounded: every wait has a deadline, every request a timeout; every process started here is
killed by PID on the way out. Exit 0 when every check passed.
"""

import argparse
import gzip
import http.client
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from dashboard import link_queries

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy/grafana/strata-dashboard.json"
SIDECAR = ROOT / "deploy/kubernetes/otel-collector/sidecar.yaml"
# The downward-API values the sidecar's env refers to, as a pod would have them.
POD_FIELDS = {"metadata.name": "strata-live-0", "metadata.namespace": "deploy-check"}
OTLP_METRICS = {"mcp.server.operation.duration", "mcp.client.operation.duration", "strata.calls"}
RULE_FILES = [ROOT / "deploy/prometheus/rules/strata-recording.yml",
              ROOT / "deploy/prometheus/rules/strata-alerts.yml"]
ALL_OUTCOMES = {
    "CLIENT_CANCELLED", "HTTP_ERROR", "STREAM_INCOMPLETE", "MALFORMED_JSON", "INVALID_ENVELOPE",
    "JSONRPC_ERROR", "INVALID_TOOL_RESULT", "INPUT_REQUIRED", "TOOL_ERROR", "TOOL_SUCCESS",
    "SUCCESS",
}
# One round of traffic: (tool, arguments). One call at least of every outcome; `sse_drip`
# keeps streams open across scrapes; retried and budget-suppressed calls come from
# http_503_then_200 (declared idempotent below).
ROUND = [
    ("ok", {}), ("tool_error", {}), ("jsonrpc_error", {}), ("http_500_success_body", {}),
    ("input_required", {}), ("content_not_array", {}), ("wrong_id", {}),
    ("bad_jsonrpc_version", {}), ("malformed_json", {}), ("wrong_content_type", {}),
    ("sse_progress", {}), ("sse_closed_early", {}), ("sse_final_error", {}),
    ("empty_202", {}), ("json_reset", {}), ("write_flaky", {}),
    ("large_result", {"bytes": 65536}), ("slow", {"ms": 30}),
] + [("http_503_then_200", {})] * 6
STRATA_CONFIG = """\
listen: 127.0.0.1:{listen}
upstream: http://127.0.0.1:{upstream}
admin: 127.0.0.1:{admin}
log: {{format: json, level: warn}}
retry:
  initial_backoff: 5ms
  max_backoff: 20ms
  # A small budget, so the run shows retries and budget_exhausted suppressions both.
  budget: {{ratio: 0.1, min_per_second: 0, window: 10s}}
tools:
  - match: http_503_then_200
    idempotent: true
  - match: "read_*"
    idempotent: true
"""
PROMETHEUS_CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: {rules}
scrape_configs:
  - job_name: strata
    static_configs:
      - targets: ["127.0.0.1:{admin}"]
"""
# Grafana's variables, as "All" would expand them, and its interval macros.
SUBSTITUTIONS = {
    "$__rate_interval": "30s", "$__range": "5m", "$__interval": "1s",
    "$job": ".*", "$instance": ".*", "$method": ".*", "$tool": ".*",
}


class Failed(Exception):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, deadline_s: float, proc: subprocess.Popen) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise Failed(f"{proc.args[0]} exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise Failed(f"{url} not ready within {deadline_s}s")


def mcp_body(i: int, method: str, params: dict) -> bytes:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                       "params": {**params, "_meta": meta}}).encode()


HEADERS = {"content-type": "application/json",
           "accept": "application/json, text/event-stream",
           "mcp-protocol-version": "2026-07-28"}


def post(port: int, body: bytes, timeout: float = 10) -> int:
    """One POST to strata; reads the whole answer (or what the server sends before a reset)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", "/mcp", body, HEADERS)
        r = c.getresponse()
        try:
            r.read()
        except (http.client.IncompleteRead, ConnectionError):
            pass  # json_reset, sse_reset: the point of the scenario
        return r.status
    finally:
        c.close()


def cancel(port: int, body: bytes) -> None:
    """Sends a call and goes away before its answer: CLIENT_CANCELLED."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        head = "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items())
        s.sendall(f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n{head}"
                  f"content-length: {len(body)}\r\n\r\n".encode() + body)
        time.sleep(0.2)


def drive(port: int, seconds: float) -> int:
    """Rounds of every scenario, plus tools/list, ping and a cancelled call, for `seconds`."""
    calls, i, end = 0, 0, time.monotonic() + seconds
    # Two long SSE streams stay open over several scrapes (strata_sse_streams_open > 0).
    drips = [threading.Thread(target=post, args=(port, mcp_body(
        10_000 + k, "tools/call",
        {"name": "sse_drip", "arguments": {"count": 20, "interval_ms": 150}}), 15))
        for k in range(2)]
    for t in drips:
        t.start()
    while time.monotonic() < end:
        for tool, args in ROUND:
            i += 1
            post(port, mcp_body(i, "tools/call", {"name": tool, "arguments": args}))
        for method in ("tools/list", "ping"):
            i += 1
            post(port, mcp_body(i, method, {}))
        i += 1
        cancel(port, mcp_body(i, "tools/call", {"name": "slow", "arguments": {"ms": 2000}}))
        calls += len(ROUND) + 3
    for t in drips:
        t.join(timeout=15)
    return calls + len(drips)


class Prom:
    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path: str, **params) -> dict:
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            body = json.load(e)
        if body.get("status") != "success":
            raise Failed(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list:
        data = self.get("/api/v1/query", query=expr)
        if data["resultType"] in ("scalar", "string"):
            return [data["result"]]
        return data["result"]


class Otlp:
    """An OTLP/HTTP receiver (protobuf): keeps every span, flattened, and metric names."""

    def __init__(self, port: int):
        self.spans: list[dict] = []
        self.metrics: set[str] = set()
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/traces":
                    receiver.take_spans(body)
                    answer = trace_service_pb2.ExportTraceServiceResponse()
                elif self.path == "/v1/metrics":
                    receiver.take_metrics(body)
                    answer = metrics_service_pb2.ExportMetricsServiceResponse()
                else:
                    self.send_error(404)
                    return
                out = answer.SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *_):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def take_spans(self, body: bytes) -> None:
        req = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
        kinds = {trace_pb2.Span.SPAN_KIND_SERVER: "server",
                 trace_pb2.Span.SPAN_KIND_CLIENT: "client"}
        statuses = {trace_pb2.Status.STATUS_CODE_ERROR: "error",
                    trace_pb2.Status.STATUS_CODE_OK: "ok"}
        flat = []
        for rs in req.resource_spans:
            resource = attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    flat.append({"resource": resource, "span": attributes(span.attributes),
                                 "kind": kinds.get(span.kind, "other"),
                                 "status": statuses.get(span.status.code, "unset"),
                                 "name": span.name})
        with self.lock:
            self.spans += flat

    def take_metrics(self, body: bytes) -> None:
        req = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
        names = {m.name for rm in req.resource_metrics for sm in rm.scope_metrics
                 for m in sm.metrics}
        with self.lock:
            self.metrics |= names

    def snapshot(self) -> tuple:
        with self.lock:
            return list(self.spans), set(self.metrics)


def attributes(kvs) -> dict:
    out = {}
    for kv in kvs:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which) if which else None
    return out


def traceql_matches(query: str, span: dict) -> bool:
    """Whether `span` is in the spanset `{ c1 && c2 ... }`, each condition `scope.attr="text"`
    (resource or span), `status=error|ok|unset` or `kind=server|client`: the TraceQL the
    dashboard's links write. Anything else is refused, not guessed at."""
    m = re.fullmatch(r"\{ (.+) \}", query)
    if not m:
        raise Failed(f"TraceQL {query!r}: not one spanset")
    for cond in m.group(1).split(" && "):
        if a := re.fullmatch(r'(resource|span)\.([\w.]+)="([^"\\]*)"', cond):
            if span[a.group(1)].get(a.group(2)) != a.group(3):
                return False
        elif a := re.fullmatch(r"(status|kind)=(\w+)", cond):
            if span[a.group(1)] != a.group(2):
                return False
        else:
            raise Failed(f"TraceQL condition {cond!r}: not supported here")
    return True


def sidecar_env(otlp_port: int) -> dict:
    """strata's OTEL_* environment from the collector sidecar's manifest, as the kubelet would
    expand it, the endpoint moved from the collector to this run's receiver."""
    patch = yaml.safe_load(SIDECAR.read_text())
    strata = next(c for c in patch["spec"]["template"]["spec"]["containers"]
                  if c["name"] == "strata")
    env: dict[str, str] = {}
    for e in strata["env"]:
        if "valueFrom" in e:
            env[e["name"]] = POD_FIELDS[e["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            env[e["name"]] = re.sub(r"\$\((\w+)\)", lambda v: env[v.group(1)], e["value"])
    endpoint = env["OTEL_EXPORTER_OTLP_ENDPOINT"]
    if not re.fullmatch(r"http://127\.0\.0\.1:4318/?", endpoint):
        raise Failed(f"{SIDECAR.name}: strata's endpoint {endpoint!r} is not the collector's")
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{otlp_port}"
    # Sooner than the defaults (5 s, 60 s), so the run need not wait for them.
    env["OTEL_BSP_SCHEDULE_DELAY"] = "200"
    env["OTEL_METRIC_EXPORT_INTERVAL"] = "1000"
    return env


def trace_links() -> list:
    """(panel, link title, link's TraceQL, the panel's PromQL) for every trace link."""
    dash = json.loads(DASHBOARD.read_text())
    textboxes = {v["name"]: v["query"] for v in dash["templating"]["list"]
                 if v["type"] == "textbox"}
    out = []
    for panel in dash["panels"]:
        for link in panel["fieldConfig"]["defaults"].get("links", []):
            _, query = link_queries(link)
            for name, value in textboxes.items():
                query = query.replace("${" + name + "}", value)
            for t in panel["targets"]:
                out.append((panel["title"], link["title"], query, t["expr"]))
    return out


def check_traces(prom: Prom, otlp: Otlp, calls: int) -> list:
    results = []

    def ok(name: str, passed: bool, detail: str = "") -> None:
        results.append((passed, name, detail))
        print(f"  {'ok  ' if passed else 'FAIL'} {name}{(': ' + detail) if detail else ''}")

    spans, metrics = otlp.snapshot()
    servers = [s for s in spans if s["kind"] == "server"]
    ok("strata exported a SERVER span per call to the endpoint the sidecar manifest sets",
       len(servers) == calls, f"{len(servers)} SERVER spans for {calls} calls, "
       f"{len(spans) - len(servers)} others")
    resource = servers[0]["resource"] if servers else {}
    want = {"service.name": "strata", "k8s.pod.name": POD_FIELDS["metadata.name"],
            "k8s.namespace.name": POD_FIELDS["metadata.namespace"]}
    ok("the spans' resource: service.name and the manifest's OTEL_RESOURCE_ATTRIBUTES",
       all(resource.get(k) == v for k, v in want.items()), json.dumps(resource))
    missing = sorted(OTLP_METRICS - metrics)
    ok("OTLP metrics exported", not missing, f"missing {missing}" if missing
       else ", ".join(sorted(OTLP_METRICS)))
    for panel, title, query, expr in trace_links():
        try:
            rows = [r["metric"] for r in prom.query(substitute(expr))]
        except Failed as e:
            ok(f"trace link {title!r} of {panel!r}", False, str(e))
            continue
        unmatched = []
        for labels in rows:
            q = re.sub(r"\$\{__field\.labels\.(\w+)\}", lambda m: labels.get(m.group(1), ""),
                       query)
            if not any(traceql_matches(q, s) for s in spans):
                unmatched.append(q)
        ok(f"trace link {title!r} of {panel!r} finds spans for every row",
           bool(rows) and not unmatched,
           f"{len(rows)} rows" if rows and not unmatched
           else f"{len(unmatched)}/{len(rows)} rows find none, e.g. {unmatched[:1]}")
    dropped = {r["metric"].get("signal"): float(r["value"][1])
               for r in prom.query("strata_telemetry_dropped_total")}
    ok("strata_telemetry_dropped_total is 0 for traces and metrics",
       dropped == {"traces": 0.0, "metrics": 0.0}, json.dumps(dropped))
    return results


def substitute(expr: str) -> str:
    for var in sorted(SUBSTITUTIONS, key=len, reverse=True):
        expr = expr.replace(var, SUBSTITUTIONS[var])
    if "$" in expr:
        raise Failed(f"unsubstituted variable in {expr!r}")
    return expr


def label_values_to_query(definition: str) -> str:
    """Grafana's label_values(selector, label) as a PromQL query with the same answer."""
    m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", definition.strip(), re.S)
    if not m:
        raise Failed(f"unsupported variable query {definition!r}")
    return f"count by ({m.group(2)}) ({m.group(1)})"


def expressions() -> list:
    """(where, PromQL) for every dashboard query, variable query and recording rule."""
    out = []
    dash = json.loads(DASHBOARD.read_text())
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            out.append((f"dashboard variable ${var['name']}",
                        label_values_to_query(var["definition"])))
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            out.append((f"panel {panel['title']!r} {t['refId']}", t["expr"]))
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "record" in rule:
                    out.append((f"recording rule {rule['record']} (expr)", rule["expr"]))
                    out.append((f"recorded series {rule['record']}", rule["record"]))
    return out


def alert_metric_names() -> set:
    names = set()
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    names |= set(re.findall(r"\b(?:[a-z_]+:)?strata_[a-z_]+(?::[a-z0-9_]+)?\b",
                                            rule["expr"]))
                    names |= {"up"} if re.search(r"\bup\{", rule["expr"]) else set()
    return names


def check(prom: Prom, admin: int, healthcheck: str | None, calls: int) -> list:
    results = []

    def ok(name: str, passed: bool, detail: str = "") -> None:
        results.append((passed, name, detail))
        print(f"  {'ok  ' if passed else 'FAIL'} {name}{(': ' + detail) if detail else ''}")

    seen = {r["metric"]["outcome"] for r in prom.query("count by (outcome) (strata_calls_total)")}
    ok("every outcome counted", seen == ALL_OUTCOMES,
       f"{len(seen)}/11" + (f", missing {sorted(ALL_OUTCOMES - seen)}" if seen != ALL_OUTCOMES
                            else f" after {calls} calls"))
    for name, expr in [("retries counted (reason http_503)",
                        'strata_retries_total{reason="http_503"} > 0'),
                       ("budget_exhausted suppressions counted",
                        'strata_retries_suppressed_total{reason="budget_exhausted"} > 0')]:
        ok(name, len(prom.query(expr)) > 0)
    for name, expr in expressions():
        try:
            rows = prom.query(substitute(expr))
            ok(name, len(rows) > 0, f"{len(rows)} series" if rows else "no data")
        except Failed as e:
            ok(name, False, str(e))

    groups = prom.get("/api/v1/rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    expected = sum(len(g["rules"]) for p in RULE_FILES
                   for g in yaml.safe_load(p.read_text())["groups"])
    ok("every rule loaded", len(rules) == expected, f"{len(rules)}/{expected}")
    bad = [f"{r['name']}: {r.get('lastError')}" for r in rules if r.get("health") != "ok"]
    ok("every rule evaluates without error", not bad, "; ".join(bad))

    names = set(prom.get("/api/v1/label/__name__/values"))
    missing = sorted(alert_metric_names() - names)
    ok("every series an alert reads exists", not missing, ", ".join(missing))
    firing = [a["labels"]["alertname"] for a in prom.get("/api/v1/alerts")["alerts"]
              if a["state"] == "firing"]
    ok("StrataDown is not firing while strata is up", "StrataDown" not in firing)

    if healthcheck:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
        run = lambda args, extra: subprocess.run(  # noqa: E731
            [healthcheck, *args], env={**env, **extra}, capture_output=True, timeout=10)
        ok("healthcheck: STRATA_ADMIN=0.0.0.0:PORT reaches /healthz",
           run([], {"STRATA_ADMIN": f"0.0.0.0:{admin}"}).returncode == 0)
        ok("healthcheck: /readyz by argument",
           run([f"127.0.0.1:{admin}", "/readyz"], {}).returncode == 0)
        ok("healthcheck: a 404 path is unhealthy",
           run([f"127.0.0.1:{admin}", "/nope"], {}).returncode == 1)
        ok("healthcheck: nothing listening is unhealthy",
           run([f"127.0.0.1:{free_port()}"], {}).returncode == 1)
    return results


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", required=True)
    ap.add_argument("--healthcheck")
    ap.add_argument("--prometheus", default="prometheus")
    ap.add_argument("--traffic-seconds", type=float, default=6)
    a = ap.parse_args()

    procs: list[subprocess.Popen] = []
    tmp = tempfile.TemporaryDirectory(prefix="strata-live-")
    work = Path(tmp.name)
    otlp = None

    def start(args: list, log: str, env: dict | None = None) -> subprocess.Popen:
        p = subprocess.Popen(args, stdout=open(work / log, "wb"), stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env)
        procs.append(p)
        return p

    def stop_all(*_):
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)

    signal.signal(signal.SIGTERM, lambda *_: (stop_all(), sys.exit(1)))
    try:
        upstream, listen, admin, prom_port, otlp_port = (free_port() for _ in range(5))
        print(f"== live: testbed :{upstream}, strata :{listen} (admin :{admin}), "
              f"prometheus :{prom_port}, OTLP receiver :{otlp_port}")
        otlp = Otlp(otlp_port)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        (work / "strata.yaml").write_text(
            STRATA_CONFIG.format(listen=listen, upstream=upstream, admin=admin))
        (work / "prometheus.yml").write_text(PROMETHEUS_CONFIG.format(
            admin=admin, rules=json.dumps([str(p) for p in RULE_FILES])))

        start([a.strata, "testbed", "--listen", f"127.0.0.1:{upstream}"], "testbed.log")
        strata = start([a.strata, "--config", str(work / "strata.yaml")], "strata.log",
                       {**base_env, **sidecar_env(otlp_port)})
        prom = start([a.prometheus, f"--config.file={work / 'prometheus.yml'}",
                      f"--storage.tsdb.path={work / 'tsdb'}",
                      f"--web.listen-address=127.0.0.1:{prom_port}",
                      "--storage.tsdb.retention.time=1h", "--log.level=warn"], "prometheus.log")
        wait_http(f"http://127.0.0.1:{admin}/readyz", 20, strata)
        wait_http(f"http://127.0.0.1:{prom_port}/-/ready", 60, prom)

        calls = drive(listen, a.traffic_seconds)
        print(f"  sent {calls} calls; waiting for scrapes and rule evaluations")
        p = Prom(prom_port)
        # Scrape, then rules (same 1 s cadence): a few cycles after the last call.
        end = time.monotonic() + 20
        while time.monotonic() < end:
            rows = p.query("job:strata_retries:ratio_rate5m")
            incomplete = p.query('strata_calls_total{outcome="CLIENT_CANCELLED"}')
            if rows and incomplete:
                break
            time.sleep(0.5)
        time.sleep(3)
        # The spans of the last calls: one schedule delay (200 ms) after them, well within.
        end = time.monotonic() + 10
        while time.monotonic() < end and not otlp.snapshot()[0]:
            time.sleep(0.2)
        results = check(p, admin, a.healthcheck, calls) + check_traces(p, otlp, calls)
        failed = [r for r in results if not r[0]]
        print(f"live: {len(results) - len(failed)} passed, {len(failed)} failed")
        if failed:
            for name in ("strata.log", "prometheus.log"):
                tail = (work / name).read_text(errors="replace").splitlines()[-15:]
                print(f"--- {name} (last lines)\n" + "\n".join(tail))
        return 1 if failed else 0
    except Failed as e:
        print(f"live: FAIL: {e}")
        for name in ("testbed.log", "strata.log", "prometheus.log"):
            if (work / name).exists():
                tail = (work / name).read_text(errors="replace").splitlines()[-15:]
                print(f"--- {name} (last lines)\n" + "\n".join(tail))
        return 1
    finally:
        stop_all()
        if otlp is not None:
            otlp.close()
        tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())

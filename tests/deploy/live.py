"""Live check of the observability kit against real processes, all on loopback:

    strata testbed  <-  strata (retry policy on)  <-  HTTP POSTs of every outcome
                            ^ /metrics every 1 s
                        prometheus (deploy/prometheus/rules loaded, evaluated every 1 s)

Then every PromQL expression of the Grafana dashboard (panels and template variables) and of
the recording rules is evaluated through Prometheus's HTTP API and must return data; every
rule must evaluate without error; every metric an alert names must exist. The image's
HEALTHCHECK probe is run against the live admin listener too.

    live.py --strata target/debug/strata --healthcheck PATH

Bounded: every wait has a deadline, every request a timeout; every process started here is
killed by PID on the way out. Exit 0 when every check passed.
"""

import argparse
import http.client
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

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy/grafana/strata-dashboard.json"
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

    def start(args: list, log: str) -> subprocess.Popen:
        p = subprocess.Popen(args, stdout=open(work / log, "wb"), stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
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
        upstream, listen, admin, prom_port = (free_port() for _ in range(4))
        print(f"== live: testbed :{upstream}, strata :{listen} (admin :{admin}), "
              f"prometheus :{prom_port}")
        (work / "strata.yaml").write_text(
            STRATA_CONFIG.format(listen=listen, upstream=upstream, admin=admin))
        (work / "prometheus.yml").write_text(PROMETHEUS_CONFIG.format(
            admin=admin, rules=json.dumps([str(p) for p in RULE_FILES])))

        start([a.strata, "testbed", "--listen", f"127.0.0.1:{upstream}"], "testbed.log")
        strata = start([a.strata, "--config", str(work / "strata.yaml")], "strata.log")
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
        results = check(p, admin, a.healthcheck, calls)
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
        tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())

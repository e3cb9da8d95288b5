"""Builds deploy/grafana/strata-dashboard.json, the Grafana dashboard for strata.

    dashboard.py --write    regenerate the JSON
    dashboard.py --check    exit 1 if the committed JSON differs or breaks a structural rule

The JSON is what ships (Grafana provisioning loads it as is); this file is how it is written,
so that every query uses the same label filters and the live test (live.py) can evaluate each
one against a real Prometheus, and each trace link's TraceQL against the spans strata exports.
Plain stdlib: no Grafana SDK.

From a failing tool to its traces: a data link, not exemplars. strata serves /metrics in the
Prometheus text format 0.0.4, which has no syntax for exemplars (only OpenMetrics does), so no
trace id ever reaches Prometheus beside a sample. What does reach Grafana is the row's labels:
the "Top failing tools" and "Failure share by layer" panels carry data links that open Explore
on the trace data source picked in the `traces` variable (a Tempo data source) with a TraceQL
query built from the row's labels (`tool`, `outcome`, `layer`) and the span attributes strata
sets on its SERVER span (`gen_ai.tool.name`, `strata.outcome`, `strata.layer`, status ERROR
exactly for a failed outcome), over the dashboard's time range.
"""

import json
import re
import sys
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "deploy/grafana/strata-dashboard.json"

DS = {"type": "prometheus", "uid": "${datasource}"}
# Traces: the data source the `traces` variable picks, and the `service.name` strata exports
# under (telemetry.resource, OTEL_SERVICE_NAME; default strata), from the `service` variable.
TRACES = {"type": "tempo", "uid": "${traces}"}
SERVICE = 'resource.service.name="${service}"'
# Label filters. `tool` is "" for every method but tools/call; `=~".*"` (All) matches it.
PROC = 'job=~"$job", instance=~"$instance"'
CALLS = PROC + ', method=~"$method", tool=~"$tool"'
OK_OUTCOMES = "SUCCESS|TOOL_SUCCESS|INPUT_REQUIRED"
TOOL_OK_OUTCOMES = "TOOL_SUCCESS|INPUT_REQUIRED"
RI = "$__rate_interval"
INCOMPLETE = '"STREAM_INCOMPLETE"'


def rate(metric: str, labels: str = CALLS, window: str = RI) -> str:
    return f"rate({metric}{{{labels}}}[{window}])"


def target(expr: str, legend: str = "", ref: str = "A", **extra) -> dict:
    t = {"datasource": DS, "expr": expr, "legendFormat": legend or "__auto", "refId": ref}
    t.update(extra)
    return t


def timeseries(title, desc, targets, unit="short", stack=False, overrides=None, **field):
    custom = {
        "drawStyle": "line",
        "lineWidth": 1,
        "fillOpacity": 60 if stack else 10,
        "stacking": {"mode": "normal" if stack else "none", "group": "A"},
        "showPoints": "never",
        "spanNulls": False,
    }
    return {
        "type": "timeseries",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {
            "defaults": {"unit": unit, "custom": custom, **field},
            "overrides": overrides or [],
        },
        "options": {
            "legend": {"displayMode": "table", "placement": "right", "calcs": ["mean", "max"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
    }


def stat(title, desc, expr, unit="short", thresholds=None):
    steps = thresholds or [{"color": "green", "value": None}]
    return {
        "type": "stat",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": [target(expr, " ")],
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                "thresholds": {"mode": "absolute", "steps": steps},
            },
            "overrides": [],
        },
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background",
            "graphMode": "area",
            "textMode": "value",
        },
    }


def bargauge(title, desc, expr, legend):
    return {
        "type": "bargauge",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": [target(expr, legend, instant=True, range=False, format="time_series")],
        "fieldConfig": {
            "defaults": {
                "unit": "short",
                "decimals": 0,
                "thresholds": {"mode": "absolute", "steps": [{"color": "red", "value": None}]},
            },
            "overrides": [],
        },
        "options": {
            "orientation": "horizontal",
            "displayMode": "basic",
            "showUnfilled": True,
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        },
    }


def right_axis(ref_legend: str, unit: str) -> dict:
    return {
        "matcher": {"id": "byName", "options": ref_legend},
        "properties": [
            {"id": "custom.axisPlacement", "value": "right"},
            {"id": "unit", "value": unit},
        ],
    }


def variable(name, label, query, multi=True):
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        # A plain string: every Grafana version since 7 reads it (and migrates it).
        "query": query,
        "refresh": 2,
        "multi": multi,
        "includeAll": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
        "options": [],
    }


def failures(labels: str, ok: str) -> str:
    return labels + f', outcome!~"{ok}"'


def traceql(*conditions: str) -> str:
    return "{ " + " && ".join((SERVICE,) + conditions) + " }"


def explore_link(title: str, query: str) -> dict:
    """A data link opening Explore on the `traces` data source with a TraceQL query, over the
    dashboard's time range.

    Explore's `left` URL parameter (the form Grafana's own internal links still produce; Grafana
    10 and later migrate it to their `panes` form on load) is a JSON pane state, URL-encoded.
    Grafana interpolates a data link's URL with every `${...}` value URL-encoded
    (`__field.labels.*` of the clicked row, `__from`/`__to`, the dashboard's variables), so
    those are left as they are and everything else is encoded here. (The `internal` link form
    would not interpolate the data source uid, nor carry the dashboard's time range.)"""
    pane = {
        "datasource": TRACES["uid"],
        "queries": [{"refId": "A", "datasource": TRACES, "queryType": "traceql",
                     "query": query, "limit": 20, "tableType": "traces"}],
        "range": {"from": "${__from}", "to": "${__to}"},
    }
    text = json.dumps(pane, separators=(",", ":"))
    encoded = "".join(part if re.fullmatch(r"\$\{[^}]+\}", part)
                      else urllib.parse.quote(part, safe="")
                      for part in re.split(r"(\$\{[^}]+\})", text))
    return {"title": title, "url": "/explore?left=" + encoded, "targetBlank": True}


def with_links(panel: dict, *links: dict) -> dict:
    panel["fieldConfig"]["defaults"]["links"] = list(links)
    return panel


def panels() -> list:
    calls_s = f"sum({rate('strata_calls_total')})"
    fail_share = (
        f"sum({rate('strata_calls_total', failures(CALLS, OK_OUTCOMES))})\n  /\n{calls_s}"
    )
    quantile = (
        lambda q: f"histogram_quantile({q}, sum by (le, method) "
        f"({rate('strata_call_duration_seconds_bucket')}))"
    )
    tool_labels = PROC + ', method="tools/call", tool=~"$tool"'
    return [
        # ---- at a glance
        (4, 6, stat("Calls per second", "JSON-RPC requests classified per second "
                    "(strata_calls_total), all outcomes.", calls_s, "reqps")),
        (4, 6, stat("Failure share", "Share of calls whose outcome is a failure: every outcome "
                    "but SUCCESS, TOOL_SUCCESS and INPUT_REQUIRED.", fail_share, "percentunit",
                    [{"color": "green", "value": None}, {"color": "orange", "value": 0.01},
                     {"color": "red", "value": 0.05}])),
        (4, 6, stat("p99 latency", "99th percentile of request arrival to outcome "
                    "(strata_call_duration_seconds), all methods.",
                    f"histogram_quantile(0.99, sum by (le) "
                    f"({rate('strata_call_duration_seconds_bucket')}))", "s")),
        (4, 6, stat("strata targets up", "Scrape targets answering (up == 1) out of all "
                    "selected; fewer than expected means a pod's strata is down.",
                    f'sum(up{{{PROC}}})', "short",
                    [{"color": "red", "value": None}, {"color": "green", "value": 1}])),
        # ---- outcomes and layers
        (9, 12, timeseries(
            "Calls per second by outcome",
            "strata_calls_total by outcome, stacked: the height is all calls per second. "
            "One outcome per JSON-RPC request (README: Outcomes).",
            [target(f"sum by (outcome) ({rate('strata_calls_total')})", "{{outcome}}")],
            "reqps", stack=True)),
        (9, 12, with_links(timeseries(
            "Failure share by layer",
            "Failed calls at each layer (transport, protocol, application) as a share of all "
            "calls. Protocol failures hide behind HTTP 200: a broken server or gateway. "
            "Click a series for its failed calls' traces (the `traces` data source).",
            [target(
                f"sum by (layer) ({rate('strata_calls_total', failures(CALLS, OK_OUTCOMES))})"
                f"\n  / ignoring (layer) group_left\n{calls_s}", "{{layer}}")],
            "percentunit", min=0),
            explore_link("Traces: failed calls at the ${__field.labels.layer} layer",
                         traceql('span.strata.layer="${__field.labels.layer}"',
                                 "status=error")))),
        # ---- tools and latency
        (9, 12, with_links(bargauge(
            "Top failing tools",
            "The ten (tool, outcome) pairs with the most failed tools/call over the dashboard's "
            "time range: every outcome but TOOL_SUCCESS and INPUT_REQUIRED. Click a bar for "
            "the traces of those calls, or of every failed call of the tool (the `traces` "
            "data source).",
            f"topk(10, sum by (tool, outcome) (increase(strata_calls_total"
            f"{{{failures(tool_labels, TOOL_OK_OUTCOMES)}}}[$__range])))",
            "{{tool}} {{outcome}}"),
            explore_link("Traces: ${__field.labels.tool} ${__field.labels.outcome}",
                         traceql('span.gen_ai.tool.name="${__field.labels.tool}"',
                                 'span.strata.outcome="${__field.labels.outcome}"')),
            explore_link("Traces: every failed ${__field.labels.tool} call",
                         traceql("kind=server", 'span.gen_ai.tool.name="${__field.labels.tool}"',
                                 "status=error")))),
        (9, 12, timeseries(
            "Latency p50 / p90 / p99 by method",
            "Request arrival to outcome, from the strata_call_duration_seconds histogram "
            "(buckets 0.01 to 300 s, so quantiles are interpolated within a bucket).",
            [target(quantile(0.5), "{{method}} p50", "A"),
             target(quantile(0.9), "{{method}} p90", "B"),
             target(quantile(0.99), "{{method}} p99", "C")],
            "s")),
        # ---- retries
        (8, 8, timeseries(
            "Retries by reason",
            "Calls re-sent upstream by strata (strata_retries_total), by the failure retried.",
            [target(f"sum by (reason) ({rate('strata_retries_total')})", "{{reason}}")],
            "reqps", stack=True)),
        (8, 8, timeseries(
            "Suppressed retries by reason",
            "Retryable failures strata did not retry (strata_retries_suppressed_total): "
            "not_idempotent, budget_exhausted, attempts_exhausted, committed, deadline, ...",
            [target(f"sum by (reason) ({rate('strata_retries_suppressed_total')})",
                    "{{reason}}")],
            "reqps", stack=True)),
        (8, 8, timeseries(
            "Retry ratio",
            "Re-sends per call; compare with retry.budget.ratio (default 0.2).",
            [target(f"sum({rate('strata_retries_total')})\n  /\n{calls_s}", "retries per call")],
            "percentunit", min=0)),
        # ---- streams and load
        (8, 8, timeseries(
            "SSE streams open and incomplete",
            "SSE response streams being forwarded (strata_sse_streams_open, left axis) and calls "
            "per second that ended STREAM_INCOMPLETE (right axis).",
            [target(f"sum(strata_sse_streams_open{{{PROC}}})", "open", "A"),
             target(
                 f"sum({rate('strata_calls_total', CALLS + ', outcome=' + INCOMPLETE)})",
                 "incomplete/s", "B")],
            "short", overrides=[right_axis("incomplete/s", "reqps")])),
        (8, 8, timeseries(
            "In-flight calls",
            "Requests received and not yet classified (strata_inflight_calls), per strata "
            "instance, and calls waiting for a resumed SSE stream "
            "(strata_pending_resumable_calls).",
            [target(f"sum by (instance) (strata_inflight_calls{{{PROC}}})",
                    "{{instance}} in flight", "A"),
             target(f"sum by (instance) (strata_pending_resumable_calls{{{PROC}}})",
                    "{{instance}} awaiting resume", "B")])),
        (8, 8, timeseries(
            "Upstream connect errors and limit hits",
            "Failed connects to the upstream per second, and named limits reached "
            "(strata_limit_hits_total by limit).",
            [target(f"sum(rate(strata_upstream_connect_errors_total{{{PROC}}}[{RI}]))",
                    "connect errors", "A"),
             target(f"sum by (limit) (rate(strata_limit_hits_total{{{PROC}}}[{RI}]))",
                    "{{limit}}", "B")],
            "reqps")),
        # ---- traffic
        (8, 6, timeseries(
            "HTTP requests by method",
            "HTTP requests from agents (strata_http_requests_total): POST carries calls, GET "
            "opens standalone SSE streams, DELETE ends sessions.",
            [target(f"sum by (method) (rate(strata_http_requests_total{{{PROC}}}[{RI}]))",
                    "{{method}}")],
            "reqps")),
        (8, 6, timeseries(
            "Response bytes forwarded",
            "Response body bytes strata forwarded from the upstream to agents.",
            [target(f"sum(rate(strata_response_bytes_total{{{PROC}}}[{RI}]))", "bytes/s")],
            "Bps")),
        (8, 6, timeseries(
            "Config reloads",
            "Config reloads (SIGHUP) per instance and result over the dashboard's interval: "
            "error means the new file was refused and the old config stays in force.",
            [target(f"sum by (instance, result) (increase(strata_config_reloads_total"
                    f"{{{PROC}}}[{RI}]))", "{{instance}} {{result}}")],
            "short", min=0)),
        (8, 6, timeseries(
            "Telemetry export dropped",
            "Spans (traces) and metric points (metrics) strata's OpenTelemetry export lost per "
            "second (strata_telemetry_dropped_total): the span queue was full, or the collector "
            "refused or did not take a batch. Above zero, the trace links miss calls: look at "
            "the collector. Always zero when export is off.",
            [target(f"sum by (signal) (rate(strata_telemetry_dropped_total{{{PROC}}}[{RI}]))",
                    "{{signal}}")],
            "cps", min=0)),
        # ---- protecting the upstream
        (8, 12, timeseries(
            "Upstream circuit and refused calls",
            "The upstream's circuit per instance (strata_circuit_state: 0 closed, 1 open, "
            "2 half-open), its moves over the dashboard's interval by state "
            "(strata_circuit_transitions_total), and calls strata refused per second "
            "(strata_limit_hits_total, limit rate, concurrency or circuit). Flat at zero "
            "without limits.calls or circuit.",
            [target(f"max by (instance) (strata_circuit_state{{{PROC}}})",
                    "{{instance}} state", "A"),
             target(f"sum by (to) (increase(strata_circuit_transitions_total{{{PROC}}}[{RI}]))",
                    "to {{to}}", "B"),
             target(f'sum by (limit) (rate(strata_limit_hits_total{{{PROC}, '
                    f'limit=~"rate|concurrency|circuit"}}[{RI}]))',
                    "refused: {{limit}}", "C")],
            "short", min=0)),
    ]


def dashboard() -> dict:
    laid, x, y, row_h = [], 0, 0, 0
    for pid, (h, w, panel) in enumerate(panels(), start=1):
        if x + w > 24:
            x, y, row_h = 0, y + row_h, 0
        panel = {"id": pid, "gridPos": {"h": h, "w": w, "x": x, "y": y}, **panel}
        laid.append(panel)
        x, row_h = x + w, max(row_h, h)
    return {
        "uid": "strata-mcp",
        "title": "strata: MCP calls by layer",
        "description": "strata sidecar: JSON-RPC outcomes by layer, tools, latency, retries, "
        "SSE streams, OpenTelemetry export. Failing tools and layers link to their traces in "
        "the `traces` data source (Tempo, TraceQL): a data link, because the Prometheus text "
        "format 0.0.4 strata serves cannot carry exemplars (only OpenMetrics can). "
        "Source: tests/deploy/dashboard.py in the strata repository.",
        "tags": ["strata", "mcp", "prometheus", "opentelemetry"],
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "annotations": {"list": []},
        "links": [],
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "refresh": 1,
                    "current": {},
                    "options": [],
                },
                variable("job", "Job (MCP server)", "label_values(strata_build_info, job)"),
                variable("instance", "Instance",
                         'label_values(strata_build_info{job=~"$job"}, instance)'),
                variable("method", "Method",
                         f"label_values(strata_calls_total{{{PROC}}}, method)"),
                variable("tool", "Tool",
                         f'label_values(strata_calls_total{{{PROC}, method="tools/call"}}, tool)'),
                # The trace links' target: a Tempo data source (TraceQL).
                {
                    "name": "traces",
                    "label": "Traces",
                    "type": "datasource",
                    "query": "tempo",
                    "refresh": 1,
                    "current": {},
                    "options": [],
                },
                # The service.name strata's spans carry (telemetry.resource).
                {
                    "name": "service",
                    "label": "Trace service.name",
                    "type": "textbox",
                    "query": "strata",
                    "current": {"selected": False, "text": "strata", "value": "strata"},
                    "options": [{"selected": True, "text": "strata", "value": "strata"}],
                },
            ]
        },
        "panels": laid,
    }


def link_queries(link: dict) -> tuple:
    """A trace link's Explore pane (JSON, its `${...}` left in) and its TraceQL query."""
    prefix = "/explore?left="
    if not link["url"].startswith(prefix):
        raise ValueError(f"not an Explore link: {link['url'][:40]!r}")
    pane = json.loads(urllib.parse.unquote(link["url"][len(prefix):]))
    return pane, pane["queries"][0]["query"]


def link_problems(p: dict, names: set) -> list:
    """Each data link: an Explore pane on the `traces` data source, over the dashboard's time
    range, naming only known variables and labels the panel's queries keep."""
    out = []
    links = p["fieldConfig"]["defaults"].get("links", [])
    kept = set()
    for t in p["targets"]:
        for by in re.findall(r"\bby \(([^)]*)\)", t["expr"]):
            kept |= {label.strip() for label in by.split(",")}
    for link in links:
        where = f"panel {p['title']!r} link {link['title']!r}"
        try:
            pane, query = link_queries(link)
        except (ValueError, KeyError, IndexError, json.JSONDecodeError) as e:
            out.append(f"{where}: {e}")
            continue
        q = pane["queries"][0]
        if (pane["datasource"] != TRACES["uid"] or q.get("datasource") != TRACES
                or q.get("queryType") != "traceql" or len(pane["queries"]) != 1):
            out.append(f"{where}: not one TraceQL query on the traces data source")
        if pane.get("range") != {"from": "${__from}", "to": "${__to}"}:
            out.append(f"{where}: not over the dashboard's time range")
        if not re.fullmatch(r"\{ .+ \}", query) or SERVICE not in query:
            out.append(f"{where}: TraceQL {query!r} is not one spanset on strata's service")
        for var in re.findall(r"\$\{([^}]+)\}", link["url"] + link["title"]):
            name, _, path = var.partition(".")
            if name == "__field":
                label = path.removeprefix("labels.")
                if not path.startswith("labels.") or label not in kept:
                    out.append(f"{where}: ${{{var}}}: the panel's queries keep no such label")
            elif name not in names and name not in ("__from", "__to"):
                out.append(f"{where}: unknown variable ${{{var}}}")
    return out


def problems(d: dict) -> list:
    """Structural rules Grafana would not tell us about until someone opens the dashboard."""
    out = []
    names = {v["name"] for v in d["templating"]["list"]}
    variables = {v["name"]: v for v in d["templating"]["list"]}
    if variables.get("traces", {}).get("type") != "datasource" or \
            variables["traces"].get("query") != TRACES["type"]:
        out.append("no `traces` data source variable of type tempo")
    builtin = {"__rate_interval", "__range", "__interval", "__all"}
    ids = [p["id"] for p in d["panels"]]
    if len(ids) != len(set(ids)):
        out.append("duplicate panel ids")
    for p in d["panels"]:
        g = p["gridPos"]
        if g["x"] + g["w"] > 24:
            out.append(f"panel {p['title']!r} is wider than the grid")
        if p["datasource"] != DS:
            out.append(f"panel {p['title']!r} does not use the datasource variable")
        refs = [t["refId"] for t in p["targets"]]
        if len(refs) != len(set(refs)):
            out.append(f"panel {p['title']!r}: duplicate refId")
        for t in p["targets"]:
            for var in re.findall(r"\$(\w+)", t["expr"]):
                if var not in names and var not in builtin:
                    out.append(f"panel {p['title']!r}: unknown variable ${var}")
        out += link_problems(p, names)
    linked = {p["title"] for p in d["panels"] if p["fieldConfig"]["defaults"].get("links")}
    if "Top failing tools" not in linked:
        out.append("panel 'Top failing tools' has no trace link")
    return out


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def main() -> int:
    d = dashboard()
    bad = problems(d)
    for p in bad:
        print(f"dashboard: {p}")
    if bad:
        return 1
    if sys.argv[1:] == ["--write"]:
        OUT.write_text(render())
        return 0
    if sys.argv[1:] == ["--check"]:
        if OUT.read_text() != render():
            print(f"{OUT.relative_to(ROOT)} is stale: run tests/deploy/dashboard.py --write")
            return 1
        links = sum(len(p["fieldConfig"]["defaults"].get("links", [])) for p in d["panels"])
        print(f"{OUT.relative_to(ROOT)}: in sync, {len(d['panels'])} panels, {links} trace "
              "links, structure ok")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())

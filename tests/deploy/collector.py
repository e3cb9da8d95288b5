"""Checks deploy/otel-collector/collector.yaml, the example OpenTelemetry Collector config for
strata's OTLP export, and builds the Kubernetes ConfigMap that carries it
(deploy/kubernetes/otel-collector/configmap.yaml), so the two never drift.

    collector.py --write    regenerate the ConfigMap
    collector.py --check    exit 1 if the ConfigMap is stale or the config breaks a rule

No collector binary here (otelcol is not in Debian or on PyPI), so the rules are the ones the
collector applies when it loads a config, plus the sidecar pattern's own:
- the file parses; only the collector's top-level sections;
- a traces and a metrics pipeline, each with receivers and exporters;
- every component a pipeline names is defined in its section, and every component defined is
  used (an extension by service.extensions), of a type a collector distribution has;
- memory_limiter first and batch last among a pipeline's processors (the collector's advice);
- receivers listen on loopback only (the sidecar pattern: only strata's pod sends);
- environment references in the `${env:NAME}` form (bare `$NAME` is no longer expanded).
"""

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "deploy/otel-collector/collector.yaml"
CONFIGMAP = ROOT / "deploy/kubernetes/otel-collector/configmap.yaml"
CONFIGMAP_NAME = "otel-collector-config"
FILE_NAME = "collector.yaml"

SECTIONS = ("receivers", "processors", "exporters", "extensions", "connectors")
SIGNALS = ("traces", "metrics", "logs")
# Component types of the core and contrib distributions this kit may use; a typo is not one.
# Old names kept: a collector older than the rename knows only those.
KNOWN = {
    "receivers": {"otlp", "prometheus", "hostmetrics"},
    "processors": {"memory_limiter", "batch", "resource", "resourcedetection", "attributes",
                   "filter", "transform", "k8sattributes", "tail_sampling",
                   "probabilistic_sampler"},
    "exporters": {"otlp_http", "otlphttp", "otlp_grpc", "otlp", "prometheus_remote_write",
                  "prometheusremotewrite", "prometheus", "debug"},
    "extensions": {"health_check", "pprof", "zpages"},
    "connectors": {"spanmetrics", "forward"},
}
LOOPBACK = re.compile(r"(127\.0\.0\.1|localhost|\[::1\]):\d+")

HEADER = """\
# GENERATED from deploy/otel-collector/collector.yaml by tests/deploy/collector.py --write;
# deploy/check.sh fails when it is stale. Edit that file, not this.
#
# The collector sidecar's config (sidecar.yaml mounts it at /etc/otelcol/collector.yaml).
"""


def component_type(component_id: str) -> str:
    return component_id.split("/", 1)[0]


def problems(cfg: object) -> list:
    """What the collector would refuse, or the sidecar pattern would not want, in `cfg`."""
    if not isinstance(cfg, dict):
        return ["not a YAML mapping"]
    out = []
    unknown = set(cfg) - set(SECTIONS) - {"service"}
    if unknown:
        out.append(f"unknown top-level keys: {sorted(unknown)}")
    defined = {s: set((cfg.get(s) or {}).keys()) for s in SECTIONS}
    for section, ids in defined.items():
        for cid in sorted(ids):
            if component_type(cid) not in KNOWN[section]:
                out.append(f"{section}: {cid!r} is no component type this kit knows")
    service = cfg.get("service") or {}
    pipelines = service.get("pipelines") or {}
    used = {s: set() for s in SECTIONS}
    for signal in ("traces", "metrics"):
        if not any(component_type(p) == signal for p in pipelines):
            out.append(f"no {signal} pipeline")
    for pid, pipeline in pipelines.items():
        if component_type(pid) not in SIGNALS:
            out.append(f"pipeline {pid!r}: not a signal ({', '.join(SIGNALS)})")
        pipeline = pipeline or {}
        for key in ("receivers", "exporters"):
            if not pipeline.get(key):
                out.append(f"pipeline {pid!r}: no {key}")
        for key in ("receivers", "processors", "exporters"):
            for cid in pipeline.get(key) or []:
                used[key].add(cid)
                if cid not in defined[key] and not (
                        key != "processors" and cid in defined["connectors"]):
                    out.append(f"pipeline {pid!r}: {key[:-1]} {cid!r} is not defined")
        procs = [component_type(p) for p in pipeline.get("processors") or []]
        if "memory_limiter" in procs and procs[0] != "memory_limiter":
            out.append(f"pipeline {pid!r}: memory_limiter is not the first processor")
        if "batch" in procs and procs[-1] != "batch":
            out.append(f"pipeline {pid!r}: batch is not the last processor")
        if "memory_limiter" not in procs:
            out.append(f"pipeline {pid!r}: no memory_limiter")
    for cid in service.get("extensions") or []:
        used["extensions"].add(cid)
        if cid not in defined["extensions"]:
            out.append(f"service.extensions: {cid!r} is not defined")
    for section in ("receivers", "processors", "exporters", "extensions"):
        for cid in sorted(defined[section] - used[section]):
            out.append(f"{section}: {cid!r} is defined but no pipeline uses it")
    for cid, receiver in (cfg.get("receivers") or {}).items():
        for where, endpoint in endpoints(receiver or {}, f"receivers.{cid}"):
            if not LOOPBACK.fullmatch(str(endpoint)):
                out.append(f"{where}: {endpoint!r} is not on loopback")
    for ref in re.findall(r"\$\{?([^}\s]*)\}?", yaml.safe_dump(cfg)):
        if not re.fullmatch(r"env:[A-Z_][A-Z0-9_]*", ref):
            out.append(f"${ref}: write environment references as ${{env:NAME}}")
    return out


def endpoints(node: object, path: str):
    """Every `endpoint` under `node`, with its path."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "endpoint":
                yield f"{path}.{k}", v
            else:
                yield from endpoints(v, f"{path}.{k}")


def env_references(cfg: object) -> set:
    """The environment variables a (parsed) config expands; comments do not count."""
    return set(re.findall(r"\$\{env:([A-Z_][A-Z0-9_]*)", yaml.safe_dump(cfg)))


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(
    str, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", v,
                                         style="|" if "\n" in v else None))


def render() -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIGMAP_NAME,
            "labels": {"app.kubernetes.io/name": "mcp-server",
                       "app.kubernetes.io/component": "otel-collector"},
        },
        "data": {FILE_NAME: CONFIG.read_text()},
    }
    return HEADER + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=100)


def main() -> int:
    rel = CONFIG.relative_to(ROOT)
    try:
        cfg = yaml.safe_load(CONFIG.read_text())
    except yaml.YAMLError as e:
        print(f"{rel}: does not parse: {e}")
        return 1
    bad = problems(cfg)
    for p in bad:
        print(f"{rel}: {p}")
    if bad:
        return 1
    text = render()
    if yaml.safe_load(text)["data"][FILE_NAME] != CONFIG.read_text():
        print("the ConfigMap does not carry the file byte for byte")
        return 1
    if sys.argv[1:] == ["--write"]:
        CONFIGMAP.write_text(text)
        return 0
    if sys.argv[1:] == ["--check"]:
        if not CONFIGMAP.is_file() or CONFIGMAP.read_text() != text:
            print(f"{CONFIGMAP.relative_to(ROOT)} is stale: run tests/deploy/collector.py --write")
            return 1
        chain = lambda p: p["receivers"] + p.get("processors", []) + p["exporters"]  # noqa: E731
        pipes = ", ".join(f"{pid}: {' -> '.join(chain(p))}"
                          for pid, p in cfg["service"]["pipelines"].items())
        print(f"{rel}: ok ({pipes}); {CONFIGMAP.relative_to(ROOT)} in sync")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())

"""Checks deploy/kubernetes against the real schemas and against strata's own config.

    k8s.py --strata target/debug/strata

- Core kinds: kubernetes-validate, strict (unknown fields are errors), for the oldest
  Kubernetes the manifests claim (1.30: the preStop `sleep` action) and the newest it bundles.
- PodMonitor, PrometheusRule (Prometheus Operator CRDs, no schema in kubernetes-validate):
  the Operator's CRD models (PyPI cloudcoil-models-prometheus-operator, generated from the CRDs)
  must accept each document and give it back unchanged, so an unknown field fails too.
- Each ConfigMap's strata.yaml passes `strata check-config`.
- The Deployments agree with that config: ports, probes, scrape annotations, config mount,
  and a termination grace longer than preStop + timeouts.drain.
- Each kustomization renders (`kubectl kustomize`, when kubectl is installed) and its output
  passes the same checks.
- Each optional kustomize Component (otel-collector: the OpenTelemetry Collector sidecar) is
  applied to its base here, in Python (the part of a strategic merge its patches use, so no
  kubectl is needed), and the result passes the same checks, plus the collector's wiring:
  strata's OTLP endpoint is the collector's receiver, the collector config in the ConfigMap
  passes tests/deploy/collector.py's rules and sets every variable it expands, the collector
  is a native sidecar that outlives strata's drain. With kubectl, the base rendered with the
  Component switched on must equal the Python merge.
"""

import argparse
import copy
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import kubernetes_validate
import yaml

import collector

ROOT = Path(__file__).resolve().parents[2]
DIRS = [ROOT / "deploy/kubernetes", ROOT / "deploy/kubernetes/agent-side"]
# (base, Component switched on in it by `components: [NAME]`)
COMPONENTS = [(ROOT / "deploy/kubernetes", ROOT / "deploy/kubernetes/otel-collector")]
VERSIONS = ["1.30.0", kubernetes_validate.utils.latest_version()]
CRD_KINDS = {"PodMonitor", "PrometheusRule"}

failures: list[str] = []
passes = 0


def ok(name: str, passed: bool, detail: str = "") -> None:
    global passes
    print(f"  {'ok  ' if passed else 'FAIL'} {name}{(': ' + detail) if detail else ''}")
    if passed:
        passes += 1
    else:
        failures.append(name)


def docs_of(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def duration_s(text: str) -> float:
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", str(text).strip())
    if not m:
        raise ValueError(f"not a duration: {text!r}")
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def validate_core(where: str, doc: dict) -> None:
    for version in VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
            ok(f"{where}: {doc['kind']}/{doc['metadata']['name']} valid for Kubernetes {version}",
               True)
        except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as e:
            ok(f"{where}: {doc['kind']} for Kubernetes {version}", False, str(e)[:300])


_crd_models = None


def validate_crd(where: str, doc: dict) -> None:
    global _crd_models
    if _crd_models is None:
        from cloudcoil.models.prometheus_operator import v1  # slow import: once, on demand

        _crd_models = v1
    cls = getattr(_crd_models, doc["kind"])
    try:
        back = cls.model_validate(doc).model_dump(by_alias=True, exclude_unset=True, mode="json")
        ok(f"{where}: {doc['kind']}/{doc['metadata']['name']} matches the Operator's CRD",
           back == doc, "" if back == doc else "fields dropped or changed by the CRD model")
    except Exception as e:  # pydantic.ValidationError
        ok(f"{where}: {doc['kind']}", False, str(e)[:300])


def check_config(strata: str, where: str, text: str) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(text)
        f.flush()
        r = subprocess.run([strata, "check-config", f.name], capture_output=True, text=True,
                           timeout=30)
    ok(f"{where}: strata check-config", r.returncode == 0,
       (r.stdout + r.stderr).strip().replace(f.name, "strata.yaml"))
    return yaml.safe_load(text)


def port_of(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


def containers(pod: dict) -> dict:
    return {c["name"]: c for c in pod.get("initContainers", []) + pod["containers"]}


def check_wiring(where: str, docs: list[dict], configs: dict) -> None:
    by_kind: dict[str, list] = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    for dep in by_kind.get("Deployment", []):
        pod_meta, pod = dep["spec"]["template"]["metadata"], dep["spec"]["template"]["spec"]
        strata = containers(pod)["strata"]
        mounts = {m["name"]: m for m in strata["volumeMounts"]}
        args = strata["args"]
        config_path = Path(args[args.index("--config") + 1])
        vols = {v["name"]: v for v in pod["volumes"]}
        # The ConfigMap volume strata mounts where --config points (a pod may mount others).
        cm_vol = next((v for v in vols.values() if v.get("configMap") and v["name"] in mounts
                       and Path(mounts[v["name"]]["mountPath"]) == config_path.parent),
                      next(v for v in vols.values() if v.get("configMap")))
        mount = mounts.get(cm_vol["name"], {"mountPath": ""})
        cm = configs.get(cm_vol["configMap"]["name"])
        ok(f"{where}: strata's --config is in the mounted ConfigMap",
           cm is not None and config_path.parent == Path(mount["mountPath"])
           and config_path.name == "strata.yaml", str(config_path))
        if cm is None:
            continue
        ports = {p["name"]: p["containerPort"] for p in strata.get("ports", [])}
        admin = port_of(cm["admin"])
        ok(f"{where}: port strata-admin is the config's admin port",
           ports.get("strata-admin") == admin, f"{ports.get('strata-admin')} vs {admin}")
        ok(f"{where}: admin binds all interfaces (kubelet and Prometheus reach it)",
           cm["admin"].startswith("0.0.0.0:"), cm["admin"])
        if "mcp" in ports:
            ok(f"{where}: port mcp is the config's listen port",
               ports["mcp"] == port_of(cm["listen"]))
        ann = pod_meta.get("annotations", {})
        ok(f"{where}: prometheus.io/port is the admin port",
           ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == str(admin))
        probes = {k: strata.get(k, {}).get("httpGet", {}) for k in
                  ("readinessProbe", "livenessProbe")}
        ok(f"{where}: readiness /readyz and liveness /healthz on strata-admin",
           probes["readinessProbe"].get("path") == "/readyz"
           and probes["livenessProbe"].get("path") == "/healthz"
           and all(p.get("port") == "strata-admin" for p in probes.values()))
        drain = duration_s(cm.get("timeouts", {}).get("drain", "30s"))
        grace = pod["terminationGracePeriodSeconds"]
        pre = strata.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        ok(f"{where}: terminationGracePeriodSeconds > strata preStop + timeouts.drain",
           grace > pre + drain, f"{grace} > {pre} + {drain:g}")
        for name, c in containers(pod).items():
            if name == "strata" or c.get("restartPolicy") == "Always":
                continue
            other = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds")
            if other is not None:
                ok(f"{where}: {name} outlives strata's drain (preStop >= strata preStop + drain)"
                   f" and ends within the grace", pre + drain <= other < grace,
                   f"{pre} + {drain:g} <= {other} < {grace}")
        upstream_host = re.sub(r"^https?://", "", cm["upstream"]).rsplit(":", 1)[0]
        if strata.get("restartPolicy") == "Always":
            ok(f"{where}: agent-side strata is a native sidecar listening on loopback only",
               cm["listen"].startswith("127.0.0.1:"), cm["listen"])
        else:
            ok(f"{where}: server-side upstream is the pod's loopback",
               upstream_host == "127.0.0.1", cm["upstream"])
        labels = pod_meta["labels"]
        for svc in by_kind.get("Service", []):
            sel = svc["spec"]["selector"]
            ok(f"{where}: Service {svc['metadata']['name']} selects the pods and targets strata",
               all(labels.get(k) == v for k, v in sel.items())
               and all(p["targetPort"] in ports for p in svc["spec"]["ports"]))
        for pm in by_kind.get("PodMonitor", []):
            sel = pm["spec"]["selector"]["matchLabels"]
            ok(f"{where}: PodMonitor {pm['metadata']['name']} selects the pods, scrapes "
               "strata-admin, and names a job containing 'strata'",
               all(labels.get(k) == v for k, v in sel.items())
               and all(e["port"] == "strata-admin" for e in pm["spec"]["podMetricsEndpoints"])
               and "strata" in pm["metadata"]["name"])


def check_dir(strata: str, d: Path) -> None:
    rel = d.relative_to(ROOT)
    print(f"== {rel}")
    kust = yaml.safe_load((d / "kustomization.yaml").read_text())
    files = kust["resources"]
    ok(f"{rel}: kustomization lists only files that exist",
       all((d / f).is_file() for f in files), ", ".join(files))
    docs = []
    for f in sorted(d.glob("*.yaml")):
        if f.name == "kustomization.yaml":
            continue
        ok(f"{rel}/{f.name} is listed in kustomization.yaml", f.name in files)
        for doc in docs_of(f.read_text()):
            docs.append(doc)
            (validate_crd if doc["kind"] in CRD_KINDS else validate_core)(f"{rel}/{f.name}", doc)
    configs = {}
    for doc in docs:
        if doc["kind"] == "ConfigMap" and "strata.yaml" in doc.get("data", {}):
            configs[doc["metadata"]["name"]] = check_config(
                strata, f"{rel}: ConfigMap {doc['metadata']['name']}", doc["data"]["strata.yaml"])
    check_wiring(str(rel), docs, configs)

    kubectl = shutil.which("kubectl")
    if not kubectl:
        print(f"  skip kubectl kustomize {rel}: kubectl not installed")
        return
    r = subprocess.run([kubectl, "kustomize", str(d)], capture_output=True, text=True,
                       timeout=60)
    ok(f"kubectl kustomize {rel}", r.returncode == 0, r.stderr.strip()[:300])
    if r.returncode == 0:
        rendered = docs_of(r.stdout)
        ok(f"kustomize {rel}: renders every document",
           sorted(x["kind"] for x in rendered) == sorted(x["kind"] for x in docs))
        for doc in rendered:
            if doc["kind"] not in CRD_KINDS:
                validate_core(f"kustomize {rel}", doc)

def merge(base: object, patch: object) -> object:
    """The part of a strategic merge patch the Components use: maps merge key by key; lists of
    named maps (containers, env, volumes, volumeMounts) merge item by item on `name`; any other
    value is replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    named = lambda x: isinstance(x, list) and all(  # noqa: E731
        isinstance(i, dict) and "name" in i for i in x)
    if named(base) and named(patch):
        by_name = {i["name"]: i for i in base}
        patched = [merge(by_name[i["name"]], i) if i["name"] in by_name else copy.deepcopy(i)
                   for i in patch]
        names = {i["name"] for i in patch}
        return patched + [i for i in base if i["name"] not in names]
    return copy.deepcopy(patch)


def normalized(doc: object) -> object:
    """`doc` with lists of named maps in name order (kustomize puts patched items first)."""
    if isinstance(doc, dict):
        return {k: normalized(v) for k, v in doc.items()}
    if isinstance(doc, list):
        items = [normalized(i) for i in doc]
        if all(isinstance(i, dict) and "name" in i for i in items):
            items.sort(key=lambda i: i["name"])
        return items
    return doc


def resources_of(d: Path) -> list[dict]:
    """The documents of a kustomization's resource files."""
    kust = yaml.safe_load((d / "kustomization.yaml").read_text())
    return [doc for f in kust["resources"] for doc in docs_of((d / f).read_text())]


def env_of(c: dict) -> dict:
    return {e["name"]: e.get("value") for e in c.get("env", [])}


def check_collector(where: str, docs: list[dict]) -> None:
    """strata exports to the collector on the pod's loopback; the collector's config is sound,
    mounted where its --config points, and has every variable it expands."""
    configs = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    for dep in (d for d in docs if d["kind"] == "Deployment"):
        pod = dep["spec"]["template"]["spec"]
        cs = containers(pod)
        col = cs.get("otel-collector")
        if col is None:
            ok(f"{where}: Deployment {dep['metadata']['name']} has an otel-collector", False)
            continue
        ok(f"{where}: otel-collector is a native sidecar (starts before strata, stops after)",
           col.get("restartPolicy") == "Always"
           and col in pod.get("initContainers", []) and cs["strata"] in pod["containers"])
        config_arg = next((a.split("=", 1)[1] for a in col.get("args", [])
                           if a.startswith("--config=")), "")
        mounts = {m["mountPath"]: m["name"] for m in col.get("volumeMounts", [])}
        vols = {v["name"]: v for v in pod["volumes"]}
        vol = vols.get(mounts.get(str(Path(config_arg).parent)), {})
        data = configs.get(vol.get("configMap", {}).get("name"), {})
        text = data.get(Path(config_arg).name)
        ok(f"{where}: the collector's --config is a file of a mounted ConfigMap",
           text is not None, config_arg)
        if text is None:
            continue
        cfg = yaml.safe_load(text)
        bad = collector.problems(cfg)
        ok(f"{where}: the collector config passes collector.py's rules", not bad, "; ".join(bad))
        missing = sorted(collector.env_references(cfg) - set(env_of(col)))
        ok(f"{where}: the collector's env sets every ${{env:...}} its config expands",
           not missing, ", ".join(missing))
        http = (cfg.get("receivers", {}).get("otlp", {}).get("protocols", {})
                .get("http", {}).get("endpoint"))
        endpoint = env_of(cs["strata"]).get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
        ok(f"{where}: strata's OTEL_EXPORTER_OTLP_ENDPOINT is the collector's OTLP/HTTP "
           "receiver", bool(http) and endpoint.startswith("http://")
           and endpoint.removeprefix("http://").rstrip("/") == http, f"{endpoint} vs {http}")
        health = {p["name"]: p["containerPort"] for p in col.get("ports", [])}
        probes = [col.get(k, {}).get("httpGet", {}) for k in ("startupProbe", "livenessProbe")]
        ext = str(cfg.get("extensions", {}).get("health_check", {}).get("endpoint", ""))
        ok(f"{where}: the collector's probes reach its health_check extension",
           all(p.get("port") in health for p in probes)
           and all(ext.endswith(f":{health[p['port']]}") for p in probes))
        grace = pod["terminationGracePeriodSeconds"]
        pre = lambda c: c.get("lifecycle", {}).get("preStop", {}).get(  # noqa: E731
            "sleep", {}).get("seconds", 0)
        strata_cm = next((configs[v["configMap"]["name"]].get("strata.yaml")
                          for v in pod["volumes"] if v.get("configMap")
                          and "strata.yaml" in configs.get(v["configMap"]["name"], {})), "")
        drain = duration_s((yaml.safe_load(strata_cm) or {}).get("timeouts", {})
                           .get("drain", "30s"))
        last = max([pre(cs["strata"]) + drain] + [pre(c) for c in pod["containers"]])
        ok(f"{where}: the collector gets >= 10 s to flush after the last main container's "
           "deadline", grace - last >= 10, f"{grace} - {last:g}")


def check_component(strata: str, base: Path, comp: Path) -> None:
    rel = comp.relative_to(ROOT)
    print(f"== {rel} (a Component, switched on in {base.relative_to(ROOT)})")
    kust = yaml.safe_load((comp / "kustomization.yaml").read_text())
    ok(f"{rel}: a kustomize Component", kust.get("kind") == "Component"
       and kust.get("apiVersion") == "kustomize.config.k8s.io/v1alpha1")
    files = kust.get("resources", [])
    patches = [p["path"] for p in kust.get("patches", [])]
    for f in sorted(comp.glob("*.yaml")):
        if f.name != "kustomization.yaml":
            ok(f"{rel}/{f.name} is listed as a resource or a patch",
               f.name in files or f.name in patches)
    docs = resources_of(base)
    for f in files:
        for doc in docs_of((comp / f).read_text()):
            (validate_crd if doc["kind"] in CRD_KINDS else validate_core)(f"{rel}/{f}", doc)
            docs.append(doc)
    for f in patches:
        for patch in docs_of((comp / f).read_text()):
            key = (patch["kind"], patch["metadata"]["name"])
            hits = [i for i, d in enumerate(docs) if (d["kind"], d["metadata"]["name"]) == key]
            ok(f"{rel}/{f}: patches {key[0]}/{key[1]} of the base", len(hits) == 1)
            for i in hits:
                docs[i] = merge(docs[i], patch)
                validate_core(f"{rel} on the base", docs[i])
    configs = {}
    for doc in docs:
        if doc["kind"] == "ConfigMap" and "strata.yaml" in doc.get("data", {}):
            configs[doc["metadata"]["name"]] = check_config(
                strata, f"{rel}: ConfigMap {doc['metadata']['name']}", doc["data"]["strata.yaml"])
    check_wiring(f"{rel} on the base", docs, configs)
    check_collector(f"{rel} on the base", docs)

    kubectl = shutil.which("kubectl")
    if not kubectl:
        print(f"  skip kubectl kustomize with {rel}: kubectl not installed")
        return
    with tempfile.TemporaryDirectory() as tmp:
        # The base as a user switches the Component on: a copy, `components` uncommented.
        copy_of = Path(tmp) / base.name
        shutil.copytree(base, copy_of)
        k = yaml.safe_load((copy_of / "kustomization.yaml").read_text())
        k["components"] = [str(comp.relative_to(base))]
        (copy_of / "kustomization.yaml").write_text(yaml.safe_dump(k))
        r = subprocess.run([kubectl, "kustomize", str(copy_of)], capture_output=True,
                           text=True, timeout=60)
    ok(f"kubectl kustomize {base.relative_to(ROOT)} with components: [{comp.name}]",
       r.returncode == 0, r.stderr.strip()[:300])
    if r.returncode == 0:
        key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
        rendered = sorted((normalized(d) for d in docs_of(r.stdout)), key=key)
        ok(f"kustomize with {rel}: renders what the Python merge does",
           rendered == sorted((normalized(d) for d in docs), key=key))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", required=True)
    a = ap.parse_args()
    for d in DIRS:
        check_dir(a.strata, d)
    for base, comp in COMPONENTS:
        check_component(a.strata, base, comp)
    print(f"kubernetes: {passes} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

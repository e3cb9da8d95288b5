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
"""

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
DIRS = [ROOT / "deploy/kubernetes", ROOT / "deploy/kubernetes/agent-side"]
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
        cm_vol = next(v for v in vols.values() if v.get("configMap"))
        mount = mounts[cm_vol["name"]]
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", required=True)
    a = ap.parse_args()
    for d in DIRS:
        check_dir(a.strata, d)
    print(f"kubernetes: {passes} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

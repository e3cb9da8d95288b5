"""Checks deploy/kubernetes against the real schemas and against strata's own config.

    k8s.py --strata target/debug/strata

- Core kinds: kubernetes-validate, strict (unknown fields are errors), for the oldest
  Kubernetes the manifests claim (1.30: the preStop `sleep` action) and the newest it bundles.
- PodMonitor, PrometheusRule (Prometheus Operator CRDs, no schema in kubernetes-validate):
  the Operator's CRD models (PyPI cloudcoil-models-prometheus-operator, generated from the CRDs)
  must accept each document and give it back unchanged, so an unknown field fails too.
- Each kustomization's secretGenerator and configMapGenerator read files the user puts next
  to it (the Redis password and CA): git ignores them, and the checks use stand-ins, never
  those files.
- Each ConfigMap's strata.yaml passes `strata check-config`, run on a copy of the pod's view:
  the config at its --config path and every ConfigMap and Secret key strata's container
  mounts at its path, under a temporary root (so `password_file: /var/run/secrets/...` is
  checked as the pod would read it).
- The Deployments agree with that config: ports, probes, scrape annotations, config mount,
  and a termination grace longer than preStop + timeouts.drain. Every file the config names
  is a key of a ConfigMap or Secret mounted in strata's container; those mounts are whole
  directories, read-only, never a subPath (which the kubelet never updates); nothing restarts
  pods on a config change (no reloader annotations or containers: strata reloads by itself,
  watch_config on); a Redis password comes from a mounted Secret, not the ConfigMap, and goes
  over TLS (rediss://).
- Each kustomization renders (`kubectl kustomize`, when kubectl is installed, on a copy with
  the generators' stand-in files) to exactly its documents, the generated ones under names
  with kustomize's content hash, and its output passes the same checks.
- Each optional kustomize Component (otel-collector: the OpenTelemetry Collector sidecar) is
  applied to its base here, in Python (the part of a strategic merge its patches use, so no
  kubectl is needed), and the result passes the same checks, plus the collector's wiring:
  strata's OTLP endpoint is the collector's receiver, the collector config in the ConfigMap
  passes tests/deploy/collector.py's rules and sets every variable it expands, the collector
  is a native sidecar that outlives strata's drain. With kubectl, the base rendered with the
  Component switched on must equal the Python merge.
"""

import argparse
import base64
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
GENERATORS = {"secretGenerator": "Secret", "configMapGenerator": "ConfigMap"}
# Pod annotations and container names of the tools that restart pods on a config change.
RELOADER = re.compile(r"reloader|checksum/|configmap-reload|config-reload")

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


def files_named(cfg: object, config_dir: Path) -> dict[str, Path]:
    """Every file a strata config names (the `*_file` keys: TLS certificates and keys, CAs,
    token and password files), as written -> the path strata reads (relative to the config's
    directory)."""
    out = {}
    if isinstance(cfg, dict):
        for k, v in cfg.items():
            if isinstance(v, str) and str(k).endswith("_file"):
                out[v] = config_dir / v
            else:
                out.update(files_named(v, config_dir))
    elif isinstance(cfg, list):
        for v in cfg:
            out.update(files_named(v, config_dir))
    return out


def check_config(strata: str, where: str, text: str,
                 view: tuple[Path, dict[Path, bytes]] | None = None) -> dict:
    """`strata check-config` on `text`. With `view` (the --config path and the files strata's
    container mounts), the config and those files are laid out under a temporary root as the
    pod sees them, and the config's absolute file paths point under that root."""
    cfg = yaml.safe_load(text)
    with tempfile.TemporaryDirectory() as root:
        config_path, files = view or (Path("/strata.yaml"), {})
        for path, content in files.items():
            dest = Path(root + str(path))
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(content)
        absolute = sorted((w for w in files_named(cfg, config_path.parent) if w.startswith("/")),
                          key=len, reverse=True)
        if absolute:  # one pass, so a path that begins another is not prefixed twice
            text = re.sub("|".join(map(re.escape, absolute)), lambda m: root + m.group(0), text)
        dest = Path(root + str(config_path))
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
        r = subprocess.run([strata, "check-config", str(dest)], capture_output=True, text=True,
                           timeout=30)
    ok(f"{where}: strata check-config", r.returncode == 0,
       (r.stdout + r.stderr).strip().replace(root, ""))
    return cfg


def port_of(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


def containers(pod: dict) -> dict:
    return {c["name"]: c for c in pod.get("initContainers", []) + pod["containers"]}


def volume_keys(vol: dict, objects: dict) -> dict[str, bytes] | None:
    """A ConfigMap or Secret volume's files (path in the volume -> contents); None for another
    kind of volume or an object not among the documents."""
    if vol.get("configMap"):
        src, obj = vol["configMap"], objects.get(("ConfigMap", vol["configMap"]["name"]))
    elif vol.get("secret"):
        src, obj = vol["secret"], objects.get(("Secret", vol["secret"]["secretName"]))
    else:
        return None
    if obj is None:
        return None
    data = {k: v.encode() for k, v in obj.get("data", {}).items()}
    if obj["kind"] == "Secret":
        data = {k: base64.b64decode(v) for k, v in obj.get("data", {}).items()}
        data.update({k: v.encode() for k, v in obj.get("stringData", {}).items()})
    data.update({k: base64.b64decode(v) for k, v in obj.get("binaryData", {}).items()})
    if "items" in src:
        return {i["path"]: data[i["key"]] for i in src["items"] if i["key"] in data}
    return data


def strata_view(dep: dict, objects: dict) -> tuple[Path, dict[Path, bytes]]:
    """strata's --config path in `dep`, and every file of the ConfigMaps and Secrets its
    container mounts (absolute path -> contents)."""
    pod = dep["spec"]["template"]["spec"]
    strata = containers(pod)["strata"]
    args = strata["args"]
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    files = {}
    for m in strata.get("volumeMounts", []):
        keys = volume_keys(vols.get(m["name"], {}), objects)
        if keys is None or m.get("subPath") or m.get("subPathExpr"):
            continue
        files.update({Path(m["mountPath"]) / k: v for k, v in keys.items()})
    return Path(args[args.index("--config") + 1]), files


def objects_of(docs: list[dict]) -> dict:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs
            if d["kind"] in ("ConfigMap", "Secret")}


def view_of(docs: list[dict], cm_name: str) -> tuple[Path, dict[Path, bytes]] | None:
    """The pod's view (strata_view) from the Deployment whose strata reads ConfigMap `cm_name`
    as its config (mounted at --config's directory); None when no Deployment does."""
    objects = objects_of(docs)
    for dep in (d for d in docs if d["kind"] == "Deployment"):
        pod = dep["spec"]["template"]["spec"]
        vols = {v["name"]: v for v in pod.get("volumes", [])}
        config_path, files = strata_view(dep, objects)
        if any(Path(m["mountPath"]) == config_path.parent
               and vols.get(m["name"], {}).get("configMap", {}).get("name") == cm_name
               for m in containers(pod)["strata"].get("volumeMounts", [])):
            return config_path, files
    return None


def check_mounts(where: str, docs: list[dict], dep: dict, cm: dict) -> None:
    """strata's files come from whole mounted ConfigMaps and Secrets, so their updates reach it;
    nothing restarts the pods for a config change; a Redis password is a Secret's, over TLS."""
    pod_meta, pod = dep["spec"]["template"]["metadata"], dep["spec"]["template"]["spec"]
    strata = containers(pod)["strata"]
    mounts = strata.get("volumeMounts", [])
    sub = [m["name"] for m in mounts if m.get("subPath") or m.get("subPathExpr")]
    ok(f"{where}: strata's mounts are whole directories (no subPath: the kubelet never "
       "updates one), read-only", not sub and all(m.get("readOnly") for m in mounts),
       ", ".join(sub))
    objects = objects_of(docs)
    config_path, files = strata_view(dep, objects)
    named = files_named(cm, config_path.parent)
    missing = sorted(w for w, p in named.items() if p not in files)
    ok(f"{where}: every file strata's config names is a key of a ConfigMap or Secret mounted "
       "in strata's container", not missing, ", ".join(missing))
    annotations = {**dep["metadata"].get("annotations", {}), **pod_meta.get("annotations", {})}
    reloaders = [k for k in annotations if RELOADER.search(k)] + [
        name for name, c in containers(pod).items()
        if RELOADER.search(name) or RELOADER.search(c.get("image", ""))]
    ok(f"{where}: a config change reaches strata without a restart (watch_config on; no "
       "reloader annotation or container)",
       cm.get("watch_config", True) is True and not reloaders, ", ".join(reloaders))
    store = str(cm.get("idempotency", {}).get("store", "memory"))
    if not store.startswith(("redis://", "rediss://")):
        return
    userinfo = re.match(r"rediss?://([^@/]*)@", store)
    password_file = cm.get("idempotency", {}).get("redis", {}).get("password_file")
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    secret_dirs = [Path(m["mountPath"]) for m in mounts if vols.get(m["name"], {}).get("secret")]
    ok(f"{where}: the Redis password is in a mounted Secret (password_file), not in the "
       "ConfigMap's URL",
       not (userinfo and ":" in userinfo.group(1)) and password_file is not None
       and any((config_path.parent / password_file).parent == d for d in secret_dirs),
       str(password_file))
    ok(f"{where}: the Redis password goes over TLS (rediss://)", store.startswith("rediss://"),
       re.sub(r":[^@/]*@", ":***@", store))


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
        check_mounts(where, docs, dep, cm)
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


def generator_files(d: Path) -> dict[str, str]:
    """The files the kustomization in `d` has its generators read: path (relative to `d`) ->
    the key it becomes (`key=path`, or the file's name)."""
    kust = yaml.safe_load((d / "kustomization.yaml").read_text())
    out = {}
    for field in GENERATORS:
        for gen in kust.get(field, []):
            for item in gen.get("files", []):
                key, _, path = item.rpartition("=")
                out[path] = key or Path(path).name
    return out


_certificate = None


def stand_in(path: str) -> str:
    """What the checks put where a generator's file goes (never the user's own file): for a
    .crt or .pem, a self-signed certificate made for the check (check-config reads a CA file's
    certificates); else a line of text."""
    global _certificate
    if not path.endswith((".crt", ".pem")):
        return f"stand-in for {path}, written by tests/deploy/k8s.py\n"
    if _certificate is None:
        r = subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-keyout", "/dev/null", "-subj", "/CN=stand-in CA of deploy-check",
             "-days", "2"], capture_output=True, text=True, timeout=30)
        if r.returncode != 0 or "BEGIN CERTIFICATE" not in r.stdout:
            sys.exit(f"k8s.py: openssl cannot make a stand-in certificate: {r.stderr.strip()}")
        _certificate = r.stdout
    return _certificate


def generated(d: Path) -> list[dict]:
    """The Secrets and ConfigMaps the kustomization in `d` generates, with stand-in contents
    and without kustomize's hash suffix."""
    kust = yaml.safe_load((d / "kustomization.yaml").read_text())
    docs = []
    for field, kind in GENERATORS.items():
        for gen in kust.get(field, []):
            data = {}
            for item in gen.get("files", []):
                key, _, path = item.rpartition("=")
                data[key or Path(path).name] = stand_in(path)
            for item in gen.get("literals", []):
                key, value = item.split("=", 1)
                data[key] = value
            doc = {"apiVersion": "v1", "kind": kind, "metadata": {"name": gen["name"]}}
            if kind == "Secret":
                doc["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
                doc["type"] = gen.get("type", "Opaque")
            else:
                doc["data"] = data
            docs.append(doc)
    return docs


def render(kubectl: str, base: Path, components: list[str] | None = None):
    """`kubectl kustomize` of a copy of `base` with the generators' stand-in files in place
    (and `components` switched on): the documents, with kustomize's hash suffix taken off the
    generated names, and an error (documents None) when it fails."""
    with tempfile.TemporaryDirectory() as tmp:
        copy_of = Path(tmp) / base.name
        shutil.copytree(base, copy_of)
        for path in generator_files(base):
            (copy_of / path).write_text(stand_in(path))
        if components is not None:
            k = yaml.safe_load((copy_of / "kustomization.yaml").read_text())
            k["components"] = components
            (copy_of / "kustomization.yaml").write_text(yaml.safe_dump(k))
        r = subprocess.run([kubectl, "kustomize", str(copy_of)], capture_output=True,
                           text=True, timeout=60)
    if r.returncode != 0:
        return None, r.stderr.strip()[:300]
    names = [g["metadata"]["name"] for g in generated(base)]
    hashed = re.compile(r"^(" + "|".join(map(re.escape, names)) + r")-[a-z0-9]{10}$")

    def unhashed(x: object) -> object:
        if isinstance(x, dict):
            return {k: unhashed(v) for k, v in x.items()}
        if isinstance(x, list):
            return [unhashed(v) for v in x]
        if isinstance(x, str) and names:
            return hashed.sub(r"\1", x)
        return x

    docs = [unhashed(doc) for doc in docs_of(r.stdout)]
    for doc in docs:
        if doc["kind"] == "Secret":  # kustomize folds long base64 lines
            doc["data"] = {k: base64.b64encode(base64.b64decode(v)).decode()
                           for k, v in doc.get("data", {}).items()}
    return docs, ""


def check_generator_files(rel: Path, d: Path) -> None:
    """The files the generators read (a password, a CA) are the user's: git ignores them."""
    for path in generator_files(d):
        f = (d / path).relative_to(ROOT)
        r = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "--no-index", str(f)],
                           capture_output=True, timeout=30)
        if r.returncode == 128:
            print(f"  skip {f} is git-ignored: not a git checkout")
            continue
        tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--error-unmatch", str(f)],
                                 capture_output=True, timeout=30).returncode == 0
        ok(f"{rel}: {path} (read by a generator) is git-ignored and not committed",
           r.returncode == 0 and not tracked)


def strata_configs(strata: str, where: str, docs: list[dict]) -> dict:
    """`strata check-config` on each ConfigMap's strata.yaml, in its pod's view."""
    configs = {}
    for doc in docs:
        if doc["kind"] == "ConfigMap" and "strata.yaml" in doc.get("data", {}):
            name = doc["metadata"]["name"]
            configs[name] = check_config(strata, f"{where}: ConfigMap {name}",
                                         doc["data"]["strata.yaml"], view_of(docs, name))
    return configs


def key_of(doc: dict) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


def same_documents(a: list[dict], b: list[dict]) -> tuple[bool, str]:
    """Whether two sets of documents are equal (named lists in any order), and which differ."""
    na = {key_of(d): normalized(d) for d in a}
    nb = {key_of(d): normalized(d) for d in b}
    differ = sorted(k for k in na.keys() | nb.keys() if na.get(k) != nb.get(k))
    return not differ and len(a) == len(b), ", ".join("/".join(k) for k in differ)


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
    check_generator_files(rel, d)
    for doc in generated(d):
        docs.append(doc)
        validate_core(f"{rel}: generated", doc)
    configs = strata_configs(strata, str(rel), docs)
    check_wiring(str(rel), docs, configs)

    kubectl = shutil.which("kubectl")
    if not kubectl:
        print(f"  skip kubectl kustomize {rel}: kubectl not installed")
        return
    rendered, err = render(kubectl, d)
    ok(f"kubectl kustomize {rel}", rendered is not None, err)
    if rendered is not None:
        ok(f"kustomize {rel}: renders every document as it is (generated names hashed)",
           *same_documents(rendered, docs))
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
    docs = resources_of(base) + generated(base)
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
    configs = strata_configs(strata, str(rel), docs)
    check_wiring(f"{rel} on the base", docs, configs)
    check_collector(f"{rel} on the base", docs)

    kubectl = shutil.which("kubectl")
    if not kubectl:
        print(f"  skip kubectl kustomize with {rel}: kubectl not installed")
        return
    # The base as a user switches the Component on: `components` uncommented.
    rendered, err = render(kubectl, base, [str(comp.relative_to(base))])
    ok(f"kubectl kustomize {base.relative_to(ROOT)} with components: [{comp.name}]",
       rendered is not None, err)
    if rendered is not None:
        ok(f"kustomize with {rel}: renders what the Python merge does",
           *same_documents(rendered, docs))


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

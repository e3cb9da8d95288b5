#!/usr/bin/env bash
# Checks the deployment and observability kit under deploy/ with the real tools:
#   hadolint on the Dockerfile; the HEALTHCHECK probe built, formatted, linted and run;
#   promtool check config / check rules / test rules; the PrometheusRule and the Grafana
#   dashboard in sync with their sources; the OpenTelemetry Collector example's pipelines and
#   its ConfigMap (tests/deploy/collector.py: no otelcol binary in Debian or on PyPI); the
#   Kubernetes manifests, with the collector sidecar Component, against the Kubernetes
#   schemas and strata's config (tests/deploy/k8s.py: `strata check-config` with the Redis
#   password Secret and CA ConfigMap laid out where the pod mounts them, stand-ins for the
#   files the generators read; whole-directory mounts, no reloader; kustomize's render); a
#   live Prometheus scraping a live strata in front of the testbed, answering every dashboard
#   and recording-rule query, and strata's OTLP spans answering every trace link of the
#   dashboard (tests/deploy/live.py).
#
# Needs on PATH: promtool and prometheus (Debian package `prometheus`), python3 (with venv),
# rustc and cargo, openssl (the stand-in CA); kubectl is used when present. The Python tools
# go into a venv under target/ (tests/deploy/requirements.txt). Environment:
#   STRATA_BIN           strata binary to use (default: `cargo build`, target/debug/strata)
#   STRATA_DEPLOY_VENV   the venv (default target/deploy-venv)
# Docker cannot run here (no engine), so the image is linted, not built.
set -uo pipefail
cd "$(dirname "$0")/.."

VENV=${STRATA_DEPLOY_VENV:-target/deploy-venv}
TMP=$(mktemp -d)
PIDS=()
PASSED=0
FAILED=()

cleanup() {
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# step NAME CMD...: runs CMD in the background (so the traps can reach it by PID), reports.
step() {
  local name=$1
  shift
  echo "== $name"
  "$@" &
  local pid=$!
  PIDS+=("$pid")
  if wait "$pid"; then
    PASSED=$((PASSED + 1))
  else
    FAILED+=("$name")
    echo "!! FAILED: $name"
  fi
}

need() {
  command -v "$1" >/dev/null || {
    echo "deploy/check.sh: $1 not found; $2" >&2
    exit 2
  }
}
need promtool "install Debian's prometheus: apt-get install -y --no-install-recommends prometheus"
need prometheus "install Debian's prometheus: apt-get install -y --no-install-recommends prometheus"
need python3 "install python3"
need rustc "install the Rust toolchain"
need openssl "install Debian's openssl"

echo "== setup"
start=$(date +%s)
stamp="$VENV/.requirements"
if ! cmp -s tests/deploy/requirements.txt "$stamp" 2>/dev/null; then
  python3 -m venv "$VENV" &&
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r tests/deploy/requirements.txt &&
    cp tests/deploy/requirements.txt "$stamp" || {
    echo "deploy/check.sh: cannot install tests/deploy/requirements.txt into $VENV" >&2
    exit 2
  }
fi
PY="$VENV/bin/python"
if [ -n "${STRATA_BIN:-}" ]; then
  STRATA=$STRATA_BIN
else
  cargo build --quiet --bin strata || exit 2
  STRATA=target/debug/strata
fi
echo "   strata: $STRATA; promtool: $(promtool --version 2>&1 | head -1)"

# --- container image
step "hadolint deploy/Dockerfile" "$VENV/bin/hadolint" deploy/Dockerfile
HC="$TMP/strata-healthcheck"
step "healthcheck probe: rustfmt, clippy, build" bash -c '
  set -e
  rustfmt --check --edition 2021 deploy/container/healthcheck.rs
  if command -v clippy-driver >/dev/null; then
    clippy-driver --edition 2021 -D warnings -W clippy::pedantic -o "$2.clippy" "$1"
  fi
  rustc --edition 2021 -C opt-level=s -C strip=symbols -o "$2" "$1"
' _ deploy/container/healthcheck.rs "$HC"
step "strata check-config deploy/container/strata.yaml (the image's default)" \
  "$STRATA" check-config deploy/container/strata.yaml

# --- Prometheus
step "promtool check config deploy/prometheus/prometheus.yml" \
  promtool check config deploy/prometheus/prometheus.yml
# Debian's promtool has no Kubernetes service discovery: check the job with a static target.
step "promtool check config deploy/prometheus/kubernetes-pods.yml (SD swapped for static)" bash -c '
  "$1" - "$2" "$3/kubernetes-pods.yml" <<PYEOF || exit 1
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
for job in doc["scrape_configs"]:
    assert job.pop("kubernetes_sd_configs") == [{"role": "pod"}]
    job["static_configs"] = [{"targets": ["127.0.0.1:9464"]}]
yaml.safe_dump(doc, open(sys.argv[2], "w"))
PYEOF
  promtool check config "$3/kubernetes-pods.yml"
' _ "$PY" deploy/prometheus/kubernetes-pods.yml "$TMP"
step "promtool check rules" promtool check rules deploy/prometheus/rules/*.yml
step "promtool test rules" promtool test rules deploy/prometheus/tests/*.test.yml
step "PrometheusRule in sync with the rule files" "$PY" tests/deploy/prometheusrule.py --check

# --- Grafana
step "Grafana dashboard in sync and well-formed" "$PY" tests/deploy/dashboard.py --check

# --- OpenTelemetry Collector
step "collector config: pipelines name only defined components; ConfigMap in sync" \
  "$PY" tests/deploy/collector.py --check

# --- Kubernetes
step "Kubernetes manifests (schemas, CRDs, check-config, wiring, kustomize)" \
  "$PY" tests/deploy/k8s.py --strata "$STRATA"

# --- live
step "live: every dashboard and rule query returns data; every trace link finds spans" \
  timeout --signal=TERM 150 "$PY" tests/deploy/live.py --strata "$STRATA" --healthcheck "$HC"

echo "== deploy/check.sh: $(($(date +%s) - start))s"
for f in "${FAILED[@]}"; do echo "   failed: $f"; done
echo "deploy: $PASSED passed, ${#FAILED[@]} failed"
[ ${#FAILED[@]} -eq 0 ]
